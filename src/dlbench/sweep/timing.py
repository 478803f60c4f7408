"""Where a sweep's wall time went, in one line at the end of its summary: the measured windows
(the rows' own `wall_window_s`; only one is ever open, the GPU's turn sees to it), warm-up and
compilation (points in flight outside their windows, with what ran beside them), the workers'
start (before the first could take a point), rechecks (the time they added after the points),
and everything else (reading the plan, holding rows against the published ones, the summary).
docs/timing.md keeps the measured splits."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from dlbench.engine.timing.profiled_pass import covered_us as covered


def _minus(intervals: list[tuple[float, float]], taken: list[tuple[float, float]]) -> float:
    """Length of the union of `intervals` outside the union of `taken`."""
    return covered([*intervals, *taken]) - covered(taken)


@dataclass
class TimeSplit:
    """A sweep's tasks on its clock, and the windows its rows measured."""

    started: float
    clock: Callable[[], float] = time.monotonic
    first_ready: float | None = None  # the first worker's imports were done
    windows: float = 0.0  # the rows' windows, rechecks' included
    recheck_windows: float = 0.0
    tasks: list[tuple[float, float, str]] = field(default_factory=list)  # start, end, kind
    prepared: int = 0  # points the compiler compiled ahead

    def parts(self, total_s: float) -> dict[str, float]:
        """The wall time by what it went to, in seconds (they add up to `total_s`), and what
        ran beside the points (`beside`, not part of the sum)."""
        points = [(a, b) for a, b, kind in self.tasks if kind in ("measure", "alone")]
        rechecks = [(a, b) for a, b, kind in self.tasks if kind == "recheck"]
        starts = max(0.0, (self.first_ready or self.started) - self.started) if points else 0.0
        added = max(0.0, _minus(rechecks, points) - self.recheck_windows)
        windows = self.windows
        warmup = max(0.0, covered(points) - (windows - self.recheck_windows) - starts)
        spans = [(a, b) for a, b, _ in self.tasks]
        beside = sum(b - a for a, b in spans) - covered(spans)
        rest = max(0.0, total_s - windows - warmup - starts - added)
        return {
            "windows": windows,
            "warm-up and compile": warmup,
            "worker starts": starts,
            "rechecks": added,
            "everything else": rest,
            "beside": beside,
        }

    def line(self, total_s: float) -> str:
        """`wall T s: windows W s, warm-up and compile C s (B s more beside them, N point(s)
        compiled ahead), worker starts S s, rechecks R s, everything else E s`."""
        parts = self.parts(total_s)
        beside = parts.pop("beside")
        shown = [f"{name} {seconds:.1f} s" for name, seconds in parts.items()]
        extra = f"{beside:.1f} s more beside them"
        if self.prepared:
            extra += f", {self.prepared} point(s) compiled ahead"
        shown[1] += f" ({extra})"
        return f"wall {total_s:.1f} s: " + ", ".join(shown)
