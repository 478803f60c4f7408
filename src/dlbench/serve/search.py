"""The server scenario's search: the highest rate the server holds, found over LoadGen loads. A
rate holds where LoadGen calls the load VALID (its bound met, early stopping and the minimums)
and the server kept up with it (`behind_schedule`): a load of seconds with a bound of seconds
passes a rate past the server's capacity, its queue growing all the while, so LoadGen's verdict
alone cannot say where the edge is.

The search starts at FIRST_SHARE of a reference (the server's own steady-state throughput: a
guess, never a ceiling); while the top of the bracket holds it grows by GROWTH, while it fails
it halves, until a rate that holds lies under one that fails; then it bisects between the two
until the bracket is narrower than RESOLUTION of its top, or the time budget or MAX_POINTS is
spent. The row reports the best rate that held, whether a failing rate above it was seen (an
edge is reported only where both sides of it were), and each rate tried."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from dlbench.results.search_points import point_text
from dlbench.serve.loadgen import LoadGenResult

FIRST_SHARE = 0.9  # the first rate tried, as a share of the reference
GROWTH = 1.25  # the bracket's top grows by this while it holds
RESOLUTION = 0.02  # stop when the bracket is narrower than this share of its top
MAX_POINTS = 14
# Kept up (docs/decisions.md#serve-keep-up), whole queries: the load completed at least this
# share of the rate LoadGen scheduled
KEEP_UP_SHARE = 0.97
# Kept up, an LLM's requests: the last third's median time to first token is not over this many
# times the first third's and over it by TTFT_GROWTH_FLOOR_S (a queue that grows through the load)
TTFT_GROWTH = 2.0
TTFT_GROWTH_FLOOR_S = 0.05


def ttft_growth(arrivals: Sequence[float], ttfts: Sequence[float]) -> tuple[float, float] | None:
    """(the first third's median TTFT, the last third's), by arrival; None for fewer than
    three requests."""
    ordered = [t for _, t in sorted(zip(arrivals, ttfts))]
    third = len(ordered) // 3
    if third < 1:
        return None
    return statistics.median(ordered[:third]), statistics.median(ordered[-third:])


def behind_schedule(result: LoadGenResult, growth: tuple[float, float] | None) -> str:
    """Why the server did not keep up with the load's rate ("" where it did). Where the load
    has first tokens (`growth`: an LLM's), a queue shows as its time to first token growing
    through the load; LoadGen's completed rate cannot tell there, as it counts each request's
    own generation after the last is issued, a share of a short load as large as a request's
    whole latency is of it. Whole queries take milliseconds each: a completed rate under
    KEEP_UP_SHARE of the scheduled one is a queue."""
    if growth is not None:
        early, late = growth
        if late > TTFT_GROWTH * early and late - early > TTFT_GROWTH_FLOOR_S:
            return f"TTFT grew from {1e3 * early:,.0f} to {1e3 * late:,.0f} ms through the load"
        return ""
    scheduled = result.scheduled_qps
    if scheduled and result.completed_qps < KEEP_UP_SHARE * scheduled:
        return f"completed {result.completed_qps:,.1f}/s of {scheduled:,.1f}/s scheduled"
    return ""


@dataclass(frozen=True)
class Point:
    """One rate tried, what LoadGen said of it, and why the server fell behind it ("": it
    kept up)."""

    qps: float
    result: LoadGenResult
    behind: str = ""

    @property
    def passed(self) -> bool:
        return self.result.valid and not self.behind

    @property
    def outcome(self) -> str:
        """ok (held), over (LoadGen: INVALID) or behind (VALID, but the server fell behind)."""
        return "ok" if self.passed else "over" if not self.result.valid else "behind"


@dataclass
class Search:
    """The rates tried, in order, and the best that held (None: none did)."""

    points: list[Point] = field(default_factory=list)

    @property
    def best(self) -> Point | None:
        held = [p for p in self.points if p.passed]
        return max(held, key=lambda p: p.qps) if held else None

    @property
    def edge_seen(self) -> bool:
        """Whether a rate above the best failed: the best is an edge, not a floor."""
        best = self.best
        return best is not None and any(not p.passed and p.qps > best.qps for p in self.points)

    @property
    def reported(self) -> Point:
        """The load the row reports: the best that held, else the last tried."""
        return self.best or self.points[-1]

    def columns(self) -> dict[str, object]:
        """The row's search columns."""
        best = self.best
        return {
            "serve_qps_found": best.qps if best else None,
            "serve_qps_edge_seen": self.edge_seen,
            "serve_points_tried": len(self.points),
            "serve_points": " ".join(
                point_text(p.qps, p.result.bound_figures(), p.outcome) for p in self.points
            ),
        }


def find_qps(
    load: Callable[[float], Point],
    reference: float,
    budget_s: float,
    now: Callable[[], float] = time.monotonic,
) -> Search:
    """The highest rate that holds (`load` tries one), from FIRST_SHARE of `reference`, within
    `budget_s`: the bracket grown or halved until it holds an edge, then bisected."""
    search = Search()
    began = now()
    qps = FIRST_SHARE * reference
    while len(search.points) < MAX_POINTS and now() - began < budget_s:
        search.points.append(load(qps))
        held = max((p.qps for p in search.points if p.passed), default=0.0)
        failed = min((p.qps for p in search.points if not p.passed and p.qps > held), default=0)
        if not failed:
            qps = held * GROWTH  # every rate so far held: the edge lies higher
        elif not held:
            qps = failed / 2  # none held yet: the edge lies lower
        elif failed - held < RESOLUTION * failed:
            break
        else:
            qps = (held + failed) / 2
    return search
