"""The measured loop every workload shares: warm-up outside, device-timed window, no host sync."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Protocol

import torch

from dlbench.analysis.stats import StepStats
from dlbench.engine.timer import StepTimer, synchronize


class WindowObserver(Protocol):
    """Something that watches the measured window (telemetry); both calls happen after a sync."""

    def begin_window(self) -> None: ...

    def end_window(self) -> None: ...


@dataclass(frozen=True)
class LoopSettings:
    """How long to measure: fixed steps, or until the spread is under a target (nvbench-style)."""

    warmup_steps: int
    n_iters: int
    max_noise_pct: float | None = None
    max_time_s: float = 60.0
    nvtx: bool = False


@dataclass(frozen=True)
class LoopResult:
    """What the window measured, in seconds; warm-up is reported beside it, never inside."""

    step_times_s: list[float]
    window_s: float
    wall_window_s: float
    warmup_s: float
    first_step_s: float | None
    noise_met: bool | None

    @property
    def steps(self) -> int:
        """Measured steps."""
        return len(self.step_times_s)

    @property
    def stats(self) -> StepStats:
        """Statistics over the measured steps."""
        return StepStats.from_values(self.step_times_s)


def _nvtx(name: str, enabled: bool):
    return torch.cuda.nvtx.range(name) if enabled else nullcontext()


def run_measured_loop(
    step: Callable[[int], None],
    device: torch.device,
    settings: LoopSettings,
    observer: WindowObserver | None = None,
) -> LoopResult:
    """Warm up, then time `n_iters` steps (repeated while `max_noise_pct` is unmet)."""
    nvtx = settings.nvtx and device.type == "cuda"
    started = time.perf_counter()
    first_step_s = None
    with _nvtx("dlbench.warmup", nvtx):
        for i in range(settings.warmup_steps):
            step(i)
            if i == 0:
                synchronize(device)
                first_step_s = time.perf_counter() - started
        synchronize(device)
    warmup_s = time.perf_counter() - started

    times: list[float] = []
    window_s = wall_s = 0.0
    next_step = settings.warmup_steps
    noise_met = None
    if observer:
        observer.begin_window()
    window_started = time.perf_counter()
    with _nvtx("dlbench.measured_window", nvtx):
        while True:
            timer = StepTimer(device, settings.n_iters)
            chunk_started = time.perf_counter()
            timer.mark()
            for i in range(next_step, next_step + settings.n_iters):
                with _nvtx(f"step {i}", nvtx):
                    step(i)
                timer.mark()
            synchronize(device)
            wall_s += time.perf_counter() - chunk_started
            next_step += settings.n_iters
            times += timer.step_times_s()
            window_s += timer.window_s()
            if settings.max_noise_pct is None:
                break
            noise_met = StepStats.from_values(times).stdev_pct <= settings.max_noise_pct
            if noise_met or time.perf_counter() - window_started >= settings.max_time_s:
                break
    if observer:
        observer.end_window()
    return LoopResult(times, window_s, wall_s, warmup_s, first_step_s, noise_met)
