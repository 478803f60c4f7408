"""Where a sweep's wall time went, in one line at the end of its summary: the measured windows
(the rows' own `wall_window_s`), warm-up and compilation (points in flight outside their
windows), the worker's start (before it could take a point), rechecks (the time they added after
the points), and everything else (reading the plan, holding rows against the published ones, the
summary); and what the points took from earlier runs instead of deciding again. docs/timing.md
keeps the measured splits."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from dlbench.engine.timing.profiled_pass import covered_length


def _minus(intervals: list[tuple[float, float]], taken: list[tuple[float, float]]) -> float:
    """Length of the union of `intervals` outside the union of `taken`."""
    return covered_length([*intervals, *taken]) - covered_length(taken)


@dataclass
class TimeSplit:
    """A sweep's tasks on its clock, the windows its rows measured and what they reused."""

    started: float
    clock: Callable[[], float] = time.monotonic
    first_ready: float | None = None  # the first worker's imports were done
    windows: float = 0.0  # the rows' windows, rechecks' included
    recheck_windows: float = 0.0
    tasks: list[tuple[float, float, str]] = field(default_factory=list)  # start, end, kind
    reused: Counter = field(default_factory=Counter)  # what points took from earlier runs

    def count_reused(self, row: dict[str, str]) -> None:
        """What a point's row says it took from earlier runs (the cache folder)."""
        if row.get("compile_cache") == "hit":
            self.reused["compiled graphs"] += 1
        if row.get("graph_choice") == "recorded":
            self.reused["graph choices"] += 1

    def parts(self, total_s: float) -> dict[str, float]:
        """The wall time by what it went to, in seconds (they add up to `total_s`)."""
        points = [(a, b) for a, b, kind in self.tasks if kind in ("measure", "alone")]
        rechecks = [(a, b) for a, b, kind in self.tasks if kind == "recheck"]
        starts = max(0.0, (self.first_ready or self.started) - self.started) if points else 0.0
        added = max(0.0, _minus(rechecks, points) - self.recheck_windows)
        windows = self.windows
        warmup = max(0.0, covered_length(points) - (windows - self.recheck_windows) - starts)
        rest = max(0.0, total_s - windows - warmup - starts - added)
        return {
            "windows": windows,
            "warm-up and compile": warmup,
            "worker starts": starts,
            "rechecks": added,
            "everything else": rest,
        }

    def line(self, total_s: float) -> str:
        """`wall T s: windows W s, warm-up and compile C s, worker starts S s, rechecks R s,
        everything else E s; reused: ...`."""
        shown = [f"{name} {seconds:.1f} s" for name, seconds in self.parts(total_s).items()]
        line = f"wall {total_s:.1f} s: " + ", ".join(shown)
        if self.reused:
            line += "; reused from earlier runs: " + ", ".join(
                f"{what} {count}" for what, count in sorted(self.reused.items())
            )
        return line
