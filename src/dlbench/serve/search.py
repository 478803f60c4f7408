"""The server scenario's search: the highest rate a server answers while its 99th percentile
stays within a bound (MLPerf's server scenario, vLLM's goodput), found by bisection.

A rate passes when the load's p99 latency meets the bound and the rate achieved is within
ACHIEVED_MARGIN of the one asked for (a server that falls behind answers fewer queries a
second than arrive: its queue, and its latencies, grow without end). The search starts from
a bracket (a rate known to pass or nothing, and one not expected to: the offline throughput)
and halves it until it is narrower than RESOLUTION of the upper end, or the time budget or
MAX_POINTS is spent; the row says how many points it tried."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from dlbench.serve.load import ServeResult

ACHIEVED_MARGIN = 0.01  # share of the target rate a passing load may fall short by
RESOLUTION = 0.02  # stop when the bracket is narrower than this share of its upper end
MAX_POINTS = 14


@dataclass(frozen=True)
class Point:
    """One rate tried: its load's p99 and achieved rate, and whether it passed."""

    qps: float
    p99_ms: float
    achieved_qps: float
    passed: bool


@dataclass
class Search:
    """The rates tried, in order, and the best that passed (None: none did)."""

    points: list[Point] = field(default_factory=list)

    @property
    def best(self) -> Point | None:
        passed = [p for p in self.points if p.passed]
        return max(passed, key=lambda p: p.qps) if passed else None

    def columns(self) -> dict[str, object]:
        """The row's search columns."""
        best = self.best
        return {
            "serve_qps_found": best.qps if best else None,
            "serve_points_tried": len(self.points),
            "serve_points": " ".join(
                f"{p.qps:.1f}:{p.p99_ms:.3f}:{'ok' if p.passed else 'over'}" for p in self.points
            ),
        }


def passes(result: ServeResult, qps: float, slo_p99_ms: float) -> bool:
    """The bound met at the rate asked for."""
    kept_up = result.achieved_qps >= (1 - ACHIEVED_MARGIN) * qps
    return kept_up and result.percentile_ms(99) <= slo_p99_ms


def find_qps(
    load: Callable[[float], ServeResult],
    slo_p99_ms: float,
    high_qps: float,
    budget_s: float,
    now: Callable[[], float] = time.monotonic,
) -> Search:
    """Bisect (0, high_qps] for the highest rate whose load passes, within `budget_s`."""
    search = Search()
    began = now()
    low, high = 0.0, high_qps
    qps = high_qps
    while len(search.points) < MAX_POINTS and now() - began < budget_s:
        result = load(qps)
        passed = passes(result, qps, slo_p99_ms)
        point = Point(qps, result.percentile_ms(99), result.achieved_qps, passed)
        search.points.append(point)
        if point.passed:
            low = qps
        else:
            high = qps
        if low > 0 and (high - low) < RESOLUTION * high:
            break
        qps = (low + high) / 2 if low > 0 else high / 2
    return search
