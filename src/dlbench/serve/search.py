"""The server scenario's search: the highest rate at which LoadGen calls the server VALID (its p99
within the bound, early stopping and the minimums met), found by bisection over LoadGen runs.

The search starts where a server is expected to pass, FIRST_SHARE of its upper end (the model
server's own offline throughput), then halves the bracket (a rate known to pass or nothing, and
one known not to) until it is narrower than RESOLUTION of the upper end, or the time budget or
MAX_POINTS is spent; the row says how many points it tried."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from dlbench.serve.loadgen import LoadGenResult

FIRST_SHARE = 0.9  # the first rate tried, as a share of the upper end
RESOLUTION = 0.02  # stop when the bracket is narrower than this share of its upper end
MAX_POINTS = 14


@dataclass(frozen=True)
class Point:
    """One rate tried and what LoadGen said of it."""

    qps: float
    result: LoadGenResult

    @property
    def passed(self) -> bool:
        return self.result.valid


@dataclass
class Search:
    """The rates tried, in order, and the best that passed (None: none did)."""

    points: list[Point] = field(default_factory=list)

    @property
    def best(self) -> Point | None:
        passed = [p for p in self.points if p.passed]
        return max(passed, key=lambda p: p.qps) if passed else None

    @property
    def reported(self) -> Point:
        """The load the row reports: the best that passed, else the last tried."""
        return self.best or self.points[-1]

    def columns(self) -> dict[str, object]:
        """The row's search columns."""
        best = self.best
        return {
            "serve_qps_found": best.qps if best else None,
            "serve_points_tried": len(self.points),
            "serve_points": " ".join(
                f"{p.qps:.1f}:{p.result.bound_text()}:{'ok' if p.passed else 'over'}"
                for p in self.points
            ),
        }


def find_qps(
    load: Callable[[float], LoadGenResult],
    high_qps: float,
    budget_s: float,
    now: Callable[[], float] = time.monotonic,
) -> Search:
    """Bisect (0, high_qps] for the highest rate LoadGen calls VALID, within `budget_s`."""
    search = Search()
    began = now()
    low, high = 0.0, high_qps
    qps = FIRST_SHARE * high_qps
    while len(search.points) < MAX_POINTS and now() - began < budget_s:
        point = Point(qps, load(qps))
        search.points.append(point)
        if point.passed:
            low = qps
        else:
            high = qps
        if low > 0 and (high - low) < RESOLUTION * high_qps:
            break
        qps = (low + high) / 2 if low > 0 else high / 2
    return search
