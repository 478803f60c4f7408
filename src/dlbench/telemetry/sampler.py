"""The sampler thread of a window: every interval a reading of each GPU, and in between the
energy counters' steps with the time each was seen (where the counters step slower than
COUNTER_POLL_S); and the per-sample log (`--telemetry-log`)."""

from __future__ import annotations

import csv
import threading
import time
from dataclasses import asdict
from pathlib import Path

from dlbench.telemetry.base import GpuBackend, Reading

# The sampler reads the energy counters this often in a window to time their steps: a step seen
# this late at each end of the window is a small share of a window of TIMED_PERIODS periods.
COUNTER_POLL_S = 0.002


class Sampler:
    """Readings of `devices` every `interval_s` from `start` to `stop`, with a reading at each
    edge; the counters' timed steps per device where `counter_period_s` is slower than the
    poll."""

    def __init__(
        self,
        gpu: GpuBackend,
        devices: list[int],
        interval_s: float,
        counter_period_s: float | None,
    ) -> None:
        self.gpu, self.devices, self.interval_s = gpu, devices, interval_s
        self.timing = counter_period_s is not None and counter_period_s > COUNTER_POLL_S
        self.readings: list[Reading] = []
        self.steps: dict[int, list[tuple[float, float]]] = {}  # per device: (time, value)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dlbench-telemetry", daemon=True)

    def start(self) -> None:
        """A reading now, then the thread."""
        self._sample_all()
        self._thread.start()

    def stop(self) -> tuple[list[Reading], dict[int, list[tuple[float, float]]]]:
        """Stop the thread, take a last reading; the readings and the counters' steps."""
        self._stop.set()
        self._thread.join()
        self._sample_all()
        return self.readings, self.steps

    def _sample_all(self) -> None:
        now = time.monotonic()
        for d in self.devices:
            self.readings.append(self.gpu.read(d, now))

    def _run(self) -> None:
        last = {d: self.gpu.energy_j(d) for d in self.devices} if self.timing else {}
        self.steps = {d: [] for d in last}
        next_sample = time.monotonic() + self.interval_s
        while not self._stop.wait(COUNTER_POLL_S if self.timing else self.interval_s):
            now = time.monotonic()
            for d in last:
                value = self.gpu.energy_j(d)
                if value is not None and last[d] is not None and value != last[d]:
                    self.steps[d].append((now, value))
                last[d] = value
            if now >= next_sample:
                self._sample_all()
                next_sample += self.interval_s


def write_log(path: Path, readings: list[Reading]) -> None:
    """Append the window's readings to the per-sample CSV log (a header when it is new)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fields = list(asdict(readings[0]))
    new = not path.exists()
    with path.open("a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        if new:
            writer.writeheader()
        writer.writerows(asdict(r) for r in readings)
