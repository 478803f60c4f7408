"""The one device timer: marks on the clock of the device that does the work, never a host sync
inside the window. On CUDA each mark records an event on *that* device's current stream (a
process that drives several GPUs, `dlbench peak`, must not time GPU 3's work with GPU 0's
events); on the CPU the work is synchronous, so the host's clock is exact. The measured loop,
the bare loop of `validate`, the `--breakdown` pass and `peak` all time with it."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext

import torch


class DeviceTimer:
    """Up to `marks` step edges on `device`'s clock, read after the window."""

    def __init__(
        self, device: torch.device, marks: int, clock: Callable[[], float] = time.perf_counter
    ) -> None:
        self.device = device
        self._cuda = device.type == "cuda"
        self._count = 0
        self._read = clock  # the host's clock on the CPU (a test plants its own)
        if self._cuda:
            with on_device(device):
                self._events = [torch.cuda.Event(enable_timing=True) for _ in range(marks)]
        else:
            self._clock = [0.0] * marks

    def mark(self) -> None:
        """Record one edge on the device's current stream (no host sync)."""
        if self._cuda:
            self._events[self._count].record(torch.cuda.current_stream(self.device))
        else:
            self._clock[self._count] = self._read()
        self._count += 1

    def between_s(self, first: int, last: int) -> float:
        """Seconds from mark `first` to mark `last`; waits for mark `last` (after the window)."""
        if self._cuda:
            self._events[last].synchronize()
        return self._gap_s(first, last)

    def step_times_s(self) -> list[float]:
        """The gaps between consecutive marks, in seconds; waits once, for the last mark."""
        if self._cuda and self._count:
            self._events[self._count - 1].synchronize()
        return [self._gap_s(i, i + 1) for i in range(self._count - 1)]

    def _gap_s(self, first: int, last: int) -> float:
        if self._cuda:
            return self._events[first].elapsed_time(self._events[last]) / 1e3
        return self._clock[last] - self._clock[first]

    def window_s(self) -> float:
        """First mark to last mark, in seconds."""
        return self.between_s(0, self._count - 1)


def seconds_of(calls: int, op: Callable[[int], object], device: torch.device) -> float:
    """Device seconds of `op(0)` ... `op(calls - 1)`, between two marks on `device`'s clock,
    with the device drained before the first."""
    synchronize(device)
    timer = DeviceTimer(device, 2)
    timer.mark()
    for i in range(calls):
        op(i)
    timer.mark()
    return timer.window_s()


def synchronize(device: torch.device) -> None:
    """Wait for all queued work on the device; used only at window edges."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@contextmanager
def on_device(device: torch.device) -> Iterator[None]:
    """Make `device` the current one while work is queued for it (its streams, its context),
    so that nothing a library allocates or launches without naming a device lands on GPU 0."""
    with torch.cuda.device(device) if device.type == "cuda" else nullcontext():
        yield
