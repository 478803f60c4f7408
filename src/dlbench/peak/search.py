"""The best rate over candidate shapes within a time budget, as the maximum-achievable-matmul
finders search (stas00/ml-engineering's mamf-finder): a datasheet rate is for no shape in
particular, the attainable one for the best shape found. Shapes are tried in order (the likely
best first), each on the device's own clock for a fraction of a second as the finders time them,
until the budget is spent; the best is measured once more, longer (`sustained`: at the clocks a
long GEMM settles to under the power cap). The figure is the best rate measured."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

Shape = tuple[int, ...]


@dataclass(frozen=True)
class Best:
    """The best rate found, its shape, how many shapes were tried, and the best shape's rate
    over the longer measurement."""

    rate: float
    shape: Shape
    tried: int
    sustained: float

    @property
    def shape_text(self) -> str:
        """`8192x8192x8192`."""
        return "x".join(str(n) for n in self.shape)


def search_best(
    candidates: Sequence[Shape],
    rate: Callable[[Shape, float], float],
    budget_s: float,
    probe_s: float,
    sustain_s: float,
    clock: Callable[[], float] = time.perf_counter,
) -> Best | None:
    """`rate(shape, seconds)` for each candidate in order (for about `probe_s` each) until
    `budget_s` is spent, at least one; then the best once more for `sustain_s`. None when no
    candidate could run (each one raised RuntimeError: too large, an unsupported dtype)."""
    began = clock()
    best_shape, best_rate, tried = None, 0.0, 0
    for shape in candidates:
        if tried and clock() - began + probe_s + sustain_s > budget_s:
            break
        try:
            measured = rate(shape, probe_s)
        except RuntimeError:
            continue
        tried += 1
        if measured > best_rate:
            best_shape, best_rate = shape, measured
    if best_shape is None:
        return None
    sustained = rate(best_shape, sustain_s)
    return Best(max(best_rate, sustained), best_shape, tried, sustained)


def matmul_shapes(largest: int) -> list[Shape]:
    """(m, n, k) candidates, the likely best first: large squares of multiples of 1024 (every
    tile divides them), then the rectangles around them; none with a side over `largest`."""
    sides = [8192, 6144, 12288, 16384, 4096, 10240, 14336, 2048, 1024, 512, 256, 128, 64]
    sides = [s for s in sides if s <= largest] or [largest]
    shapes: list[Shape] = [(s, s, s) for s in sides]
    for s in sides[:4]:
        shapes += [(s, s, s // 2), (s, s // 2, s), (s // 2, s, s), (s, s, 2 * s)]
    return list(dict.fromkeys(sh for sh in shapes if max(sh) <= largest))
