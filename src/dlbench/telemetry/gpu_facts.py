"""What a process finds out about its GPUs once and keeps for its later runs: the energy
counter's update period and the idle power baseline (docs/decisions.md#idle-baseline-reuse).
A process forked for each run (a sweep's points, --processes) hands what it found back to the
one that forks the next (`as_record`, `adopt`), which never touches the GPU itself; and the
cache folder keeps them for the next process (`KeptGpuFacts`), by the GPU's UUID and driver (the
idle power by its power limit too), the idle power with the time it was sampled."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

from dlbench.caches import keep_record, positive_figure, read_record

PERIOD_PROBE_S = 0.5  # longest time spent finding the counter's update period (before the window)
PERIOD_POLL_S = 0.001
IDLE_REUSE_S = 600.0  # a process's idle sample of a GPU serves its later runs this long


@dataclass
class GpuFacts:
    """What one process found out about its GPUs once, by GPU (backend, identity, names), so
    that a sweep worker's later points need not measure it again
    (docs/decisions.md#idle-baseline-reuse): the energy counter's update period, and the idle
    baseline with the monotonic time it was sampled (served for IDLE_REUSE_S)."""

    counter_periods: dict[tuple, float | None] = field(default_factory=dict)
    idle_baselines: dict[tuple, tuple[float, float]] = field(default_factory=dict)

    def counter_period(self, gpus: tuple, measure: Callable[[], float | None]) -> float | None:
        if gpus not in self.counter_periods:
            self.counter_periods[gpus] = measure()
        return self.counter_periods[gpus]

    def idle_baseline(self, gpus: tuple, now: float) -> tuple[float, float] | None:
        """(watts, age in seconds) of a baseline young enough to serve, else None."""
        kept = self.idle_baselines.get(gpus)
        if kept and now - kept[0] < IDLE_REUSE_S:
            return kept[1], now - kept[0]
        return None

    def as_record(self) -> dict[str, list]:
        """The facts as JSON: lists of [GPUs, value] (a monotonic time is the host's, whichever
        process reads it)."""
        return {
            "counter_periods": [[list(k), v] for k, v in self.counter_periods.items()],
            "idle_baselines": [[list(k), list(v)] for k, v in self.idle_baselines.items()],
        }

    def adopt(self, record: object) -> None:
        """Take what another process found (`as_record`); anything malformed is ignored (a
        fact is a saving, never a reason to fail)."""
        if not isinstance(record, dict):
            return
        try:
            for gpus, period in record.get("counter_periods", []):
                self.counter_periods.setdefault(_key(gpus), period)
            for gpus, (sampled, watts) in record.get("idle_baselines", []):
                kept = self.idle_baselines.get(_key(gpus))
                if kept is None or kept[0] < sampled:
                    self.idle_baselines[_key(gpus)] = (float(sampled), float(watts))
        except (TypeError, ValueError):
            return


def _key(value: object) -> object:
    """A key as JSON gave it back (lists) as it was made (tuples)."""
    return tuple(map(_key, value)) if isinstance(value, list) else value


# This process's facts: every monitor shares them unless given its own.
PROCESS_GPU_FACTS = GpuFacts()


def counter_update_period(read: Callable[[], float | None], budget_s: float = PERIOD_PROBE_S):
    """Seconds between changes of a cumulative counter, by polling it (median of the gaps
    between changes); `budget_s` as a lower bound if it did not change twice; None if unreadable."""
    first = read()
    if first is None:
        return None
    changes: list[float] = []
    last, started = first, time.monotonic()
    while time.monotonic() - started < budget_s and len(changes) < 5:
        time.sleep(PERIOD_POLL_S)
        value = read()
        if value is not None and value != last:
            changes.append(time.monotonic())
            last = value
    if len(changes) < 2:
        return budget_s
    return statistics.median(b - a for a, b in pairwise(changes))


KEPT_FACTS_FILE = "gpu_facts.json"


@dataclass(frozen=True)
class KeptGpuFacts:
    """GPU facts kept in the cache folder for later processes (`folder` None: a run that keeps
    nothing; docs/decisions.md#kept-gpu-facts). A key names the GPUs and what the fact depends
    on (telemetry.nvml's `facts_key`); a fact read back is held to a finite positive number and
    an idle baseline to its age, in wall-clock seconds (another process, container or boot reads
    it), served while younger than IDLE_REUSE_S and not from the future."""

    folder: Path | None = None

    def counter_period(self, key: str | None) -> float | None:
        if key is None:
            return None
        return positive_figure(read_record(self.folder, KEPT_FACTS_FILE).get(f"period {key}"))

    def keep_counter_period(self, key: str | None, period: float | None) -> None:
        if key is not None and positive_figure(period) is not None:
            self._keep(f"period {key}", period)

    def idle_baseline(self, key: str | None, now: float) -> tuple[float, float] | None:
        """(watts, age in seconds) of a baseline young enough to serve, else None."""
        if key is None:
            return None
        kept = read_record(self.folder, KEPT_FACTS_FILE).get(f"idle {key}")
        if not isinstance(kept, dict):
            return None
        watts, sampled = positive_figure(kept.get("watts")), kept.get("sampled")
        if watts is None or isinstance(sampled, bool) or not isinstance(sampled, int | float):
            return None
        age = now - sampled
        return (watts, age) if math.isfinite(age) and 0 <= age < IDLE_REUSE_S else None

    def keep_idle_baseline(self, key: str | None, now: float, watts: float) -> None:
        if key is not None and positive_figure(watts) is not None:
            self._keep(f"idle {key}", {"watts": watts, "sampled": now})

    def _keep(self, name: str, value: object) -> None:
        if self.folder is None:
            return
        record = read_record(self.folder, KEPT_FACTS_FILE)
        record[name] = value
        keep_record(self.folder, KEPT_FACTS_FILE, record)
