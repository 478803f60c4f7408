"""Step timing that never syncs inside the window: a pool of CUDA events, read afterwards."""

from __future__ import annotations

import time

import torch


class StepTimer:
    """Marks step edges. On CUDA each mark records a pre-made event (no host sync); on the CPU
    the work is synchronous, so a host clock is exact."""

    def __init__(self, device: torch.device, steps: int) -> None:
        self._cuda = device.type == "cuda"
        self._marks = 0
        if self._cuda:
            self._events = [torch.cuda.Event(enable_timing=True) for _ in range(steps + 1)]
        else:
            self._clock = [0.0] * (steps + 1)

    def mark(self) -> None:
        """Record one step edge; call once before the first step and once after each step."""
        if self._cuda:
            self._events[self._marks].record()
        else:
            self._clock[self._marks] = time.perf_counter()
        self._marks += 1

    def step_times_s(self) -> list[float]:
        """Per-step durations in seconds; waits for the last event (after the window)."""
        if self._cuda:
            last = self._events[self._marks - 1]
            last.synchronize()
            ev = self._events
            return [ev[i].elapsed_time(ev[i + 1]) / 1e3 for i in range(self._marks - 1)]
        c = self._clock
        return [c[i + 1] - c[i] for i in range(self._marks - 1)]

    def window_s(self) -> float:
        """First mark to last mark, in seconds, on the device's own clock."""
        if self._cuda:
            self._events[self._marks - 1].synchronize()
            return self._events[0].elapsed_time(self._events[self._marks - 1]) / 1e3
        return self._clock[self._marks - 1] - self._clock[0]


def synchronize(device: torch.device) -> None:
    """Wait for all queued work on the device; used only at window edges."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
