"""The measured loop every workload shares: warm-up outside, device-timed window, no host sync.

The window is measured in chunks. Between chunks (never inside one) the loop decides whether to
go on: until the window's noise settles (nvbench's stopping rule: the throughput's interval
narrow enough and outliers' share small enough, results.stats.Noise; `--max-noise`, by default
on a GPU) or `--max-time` is spent, and until the window lasts `--min-time` (so that energy
counters see enough of it). Under DDP every rank takes the same decision from the same agreed
numbers (the noisiest rank's figures and the longest elapsed time), so all ranks run the same
steps and no collective is left unmatched. The loop reads the clock it is given: the host's,
or a test's planted one."""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Protocol

import torch

from dlbench.config import RunConfig
from dlbench.engine.timing.settings import Agreement, LoopSettings
from dlbench.engine.timing.timer import DeviceTimer, synchronize
from dlbench.engine.timing.warmup import (
    MIN_TIME_OVERSHOOT,
    STEADY_PCT,
    fixed_warmup,
    warm_until_steady,
)
from dlbench.results.stats import MAX_NOISE_PCT, Noise, StepStats
from dlbench.signals import raise_if_interrupted


class WindowObserver(Protocol):
    """Something that watches the measured window (telemetry); both calls happen after a sync."""

    def begin_window(self) -> None: ...

    def end_window(self) -> None: ...


@dataclass(frozen=True)
class WindowObservers:
    """Several observers as one: opened in order, closed in reverse (the last opened, the
    telemetry's counter read, sits nearest the window's edges)."""

    members: list[WindowObserver]

    def begin_window(self) -> None:
        for member in self.members:
            member.begin_window()

    def end_window(self) -> None:
        for member in reversed(self.members):
            member.end_window()


@dataclass(frozen=True)
class LoopResult:
    """What the window measured, in seconds; warm-up is reported beside it, never inside.
    `steps` and `stats` count units (a generation round), which are steps everywhere else."""

    step_times_s: list[float]
    window_s: float
    wall_window_s: float
    warmup_s: float
    first_step_s: float | None
    noise_met: bool | None
    steps_per_unit: int = 1
    warmup_steps: int = 0  # units run before the window, the ones added for min_warmup_s too
    warmup_steady: bool | None = None  # the last warm-up chunks agreed (None: not checked)

    @property
    def unit_times_s(self) -> list[float]:
        """The time of each measured unit."""
        return unit_times(self.step_times_s, self.steps_per_unit)

    @property
    def steps(self) -> int:
        """Measured units (steps; rounds for generation)."""
        return len(self.step_times_s) // self.steps_per_unit

    @property
    def stats(self) -> StepStats:
        """Statistics over the measured units."""
        return StepStats.from_values(self.unit_times_s)

    @property
    def noise(self) -> Noise:
        """How far the window's number can be trusted, over the measured units."""
        return Noise.of(self.unit_times_s)


def unit_times(step_times: list[float], steps_per_unit: int) -> list[float]:
    """Step times summed into whole units (rounds), in order."""
    if steps_per_unit == 1:
        return list(step_times)
    n = len(step_times) // steps_per_unit
    return [sum(step_times[k * steps_per_unit : (k + 1) * steps_per_unit]) for k in range(n)]


@contextmanager
def _no_garbage_collection():
    """Collect before the window and not inside it (as timeit does): Python's cyclic collector
    stalls the host at random steps, and the longer a process lives (a sweep worker that ran
    other models) the longer each pass takes. Reference counting still frees every step's
    tensors."""
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _nvtx(name: str, enabled: bool):
    return torch.cuda.nvtx.range(name) if enabled else nullcontext()


def _single(values: list[float]) -> list[float]:
    return values


@dataclass
class _Window:
    """Running totals of the measured chunks."""

    times: list[float]
    device_s: float = 0.0
    wall_s: float = 0.0


def next_chunk_steps(
    settings: LoopSettings, unsettled: bool, elapsed_s: float, steps_done: int
) -> int:
    """Steps of the next chunk (0: stop), from numbers every rank agrees on.

    Goes on while the noise has not settled and `max_time_s` is not spent, and while the
    window is shorter than `min_time_s`; the latter sizes the chunk from the rate so far."""
    unit = settings.steps_per_unit
    steps = settings.n_iters if unsettled and elapsed_s < settings.max_time_s else 0
    if elapsed_s < settings.min_time_s:
        rate = steps_done / elapsed_s if elapsed_s > 0 else 0.0
        missing = (settings.min_time_s - elapsed_s) * MIN_TIME_OVERSHOOT
        steps = max(steps, math.ceil(missing * rate) if rate else settings.n_iters, 1)
    return math.ceil(steps / unit) * unit


def run_measured_loop(
    step: Callable[[int], None],
    device: torch.device,
    settings: LoopSettings,
    observer: WindowObserver | None = None,
    agree: Agreement = _single,
    clock: Callable[[], float] = time.perf_counter,
) -> LoopResult:
    """Warm up, then time chunks of steps until `next_chunk_steps` says stop."""
    nvtx = settings.nvtx and device.type == "cuda"
    started = clock()
    with _nvtx("dlbench.warmup", nvtx):
        first_step_s = fixed_warmup(step, device, settings.warmup_steps, clock)
        synchronize(device)
        busy_since = started + (first_step_s or 0.0)
        warmed, steady = warm_until_steady(
            step, device, settings, settings.warmup_steps, busy_since, agree, clock
        )

    window = _Window(times=[])
    next_step, chunk, noise_met = warmed, settings.n_iters, None
    with _no_garbage_collection():
        if observer:
            observer.begin_window()
        # Every rank starts the window at once: a rank that got here first (its collection, its
        # telemetry's first reads were quicker) would otherwise count its wait for the others
        # in the first step (docs/decisions.md#ddp-start). Later chunks start after `agree`.
        agree([0.0])
        warmup_s = clock() - started  # everything before the window, its opening included
        with _nvtx("dlbench.measured_window", nvtx):
            while chunk:
                steps = range(next_step, next_step + chunk)
                _time_chunk(step, device, steps, window, nvtx, clock)
                next_step += chunk
                unsettled = _unsettled(window.times, settings)
                # the device's clock, which the row reports; the host's also counts reading each
                # chunk's events (docs/decisions.md#event-chunks)
                unsettled, elapsed = agree([unsettled, window.device_s])
                if settings.max_noise_pct is not None:
                    noise_met = not unsettled
                chunk = next_chunk_steps(settings, bool(unsettled), elapsed, len(window.times))
        if observer:
            observer.end_window()
    return LoopResult(
        window.times,
        window.device_s,
        window.wall_s,
        warmup_s,
        first_step_s,
        noise_met,
        settings.steps_per_unit,
        warmed // settings.steps_per_unit,
        steady,
    )


def _time_chunk(
    step: Callable[[int], None],
    device: torch.device,
    steps: range,
    window: _Window,
    nvtx: bool,
    clock: Callable[[], float],
) -> None:
    """One chunk: an event (or clock) mark before the first step and after each one."""
    timer = DeviceTimer(device, len(steps) + 1, clock)
    chunk_started = clock()
    timer.mark()
    for i in steps:
        raise_if_interrupted()
        with _nvtx(f"step {i}", nvtx):
            step(i)
        timer.mark()
    synchronize(device)
    window.wall_s += clock() - chunk_started
    window.times += timer.step_times_s()
    window.device_s += timer.window_s()


def _unsettled(times: list[float], settings: LoopSettings) -> float:
    """1.0 while the window's noise over whole units is over its target (0.0: settled, or no
    target): a number, so that ranks agree on it by their maximum."""
    if settings.max_noise_pct is None:
        return 0.0
    noise = Noise.of(unit_times(times, settings.steps_per_unit))
    return float(not noise.settled(settings.max_noise_pct))


def loop_settings(
    config: RunConfig, device_type: str, energy_counter: bool = False
) -> LoopSettings:
    """The loop's share of the config; `energy_counter`: every rank's GPU counts its energy
    (the warm-up before the window then need not cover the power reading's average). A GPU
    measures until its noise settles (MAX_NOISE_PCT unless --max-noise) or --max-time is
    spent; the CPU, a shared host, measures longer only when --max-noise asks."""
    target = config.measurement.max_noise
    if target is None and device_type == "cuda":
        target = MAX_NOISE_PCT
    return LoopSettings(
        warmup_steps=config.measurement.warmup_steps,
        n_iters=config.measurement.n_iters,
        max_noise_pct=target,
        max_time_s=config.measurement.max_time,
        min_time_s=config.min_time_s(device_type),
        nvtx=config.telemetry.nvtx,
        min_warmup_s=config.min_warmup_s(device_type, energy_counter),
        steady_pct=STEADY_PCT if device_type == "cuda" else None,
    )
