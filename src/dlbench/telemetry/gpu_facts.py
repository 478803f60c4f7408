"""What a process finds out about its GPUs once and keeps for its later runs (a sweep worker's
next points): the energy counter's update period and the idle power baseline
(docs/decisions.md#idle-baseline-reuse)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise

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
