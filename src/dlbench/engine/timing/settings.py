"""What the measured loop is told (its settings) and how its ranks agree, apart from the loop
itself, so that the warm-up (engine.timing.warmup) and the loop (engine.timing.loop) both take
them from here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

# Elementwise maximum over all ranks of a few numbers; identity for a single process.
Agreement = Callable[[list[float]], list[float]]


@dataclass(frozen=True)
class LoopSettings:
    """How long to measure: `n_iters` steps at least, then more while the noise is over its
    target `max_noise_pct` (None: no target), up to `max_time_s`, or while the window is
    shorter than `min_time_s`.

    `steps_per_unit` groups steps into units that belong together (a generation round is one
    prefill and its decode steps): chunks hold whole units and the spread is over unit times."""

    warmup_steps: int
    n_iters: int
    max_noise_pct: float | None = None
    max_time_s: float = 60.0
    min_time_s: float = 0.0
    steps_per_unit: int = 1
    nvtx: bool = False
    min_warmup_s: float = 0.0  # busy time before the window (docs/decisions.md#power-warmup)
    steady_pct: float | None = None  # warm up until steps settle this close (None: no check)
