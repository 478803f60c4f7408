"""Warm-up before the window: the fixed steps (cuDNN's first plans, lazy state, the first step
timed), then more until the device has stepped long enough for its power reading and, on a GPU,
until the steps settle: chunks of about STEADY_CHUNK_S until two in a row run their steps within
STEADY_PCT of each other, for at most MAX_STEADY_WARMUP_S after the fixed warm-up."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import torch

from dlbench.engine.timing.settings import Agreement, LoopSettings
from dlbench.engine.timing.timer import synchronize
from dlbench.signals import raise_if_interrupted

MIN_TIME_OVERSHOOT = 1.05  # size the last chunk a little past --min-time rather than short of it
STEADY_PCT = 2.0
STEADY_CHUNK_S = 0.15
MAX_STEADY_WARMUP_S = 10.0


def fixed_warmup(
    step: Callable[[int], None], device: torch.device, steps: int, clock: Callable[[], float]
) -> float | None:
    """The fixed warm-up steps (cuDNN's first plans, lazy state): the first one timed.
    Returns the first step's time."""
    began, first = clock(), None
    for i in range(steps):
        raise_if_interrupted()
        step(i)
        if i == 0:
            synchronize(device)
            first = clock() - began
    return first


def warm_until_steady(
    step: Callable[[int], None],
    device: torch.device,
    settings: LoopSettings,
    done: int,
    busy_since: float,
    agree: Agreement,
    clock: Callable[[], float] = time.perf_counter,
) -> tuple[int, bool | None]:
    """More warm-up until the device has stepped for `min_warmup_s` since `busy_since` and,
    with `steady_pct`, until two chunks in a row agree per step (for at most
    MAX_STEADY_WARMUP_S). The first chunk is sized by the steps since `busy_since`, later ones
    by the chunk before. Every rank takes the same decision from agreed numbers, in whole units.
    Returns the warm-up steps run in all, and whether the steps settled."""
    unit = settings.steps_per_unit
    checking = settings.steady_pct is not None
    if not checking and settings.min_warmup_s <= 0:
        return done, None
    began, previous, steady = clock(), None, not checking
    while True:
        now = clock()
        elapsed, unsettled, checked = agree([now - busy_since, float(not steady), now - began])
        steady = not unsettled
        if elapsed >= settings.min_warmup_s and steady:
            break
        if checking and checked >= MAX_STEADY_WARMUP_S:
            break
        so_far = max(done - 1, 1) / elapsed if elapsed > 0 else 0.0
        rate = 1.0 / previous if previous else so_far  # steps a second
        wanted = (settings.min_warmup_s - elapsed) * MIN_TIME_OVERSHOOT
        if checking:
            wanted = STEADY_CHUNK_S
        extra = math.ceil(max(wanted * rate, 1) / unit) * unit
        chunk_began = clock()
        for i in range(done, done + extra):
            raise_if_interrupted()
            step(i)
        synchronize(device)
        per_step = (clock() - chunk_began) / extra
        done += extra
        if checking:
            limit = settings.steady_pct or 0.0
            steady = previous is not None and abs(per_step / previous - 1) * 100 <= limit
            previous = per_step
    return done, (steady if checking else None)
