"""The gate's statistic on searched serve rows, tried on seeded samples: a server's search
(serve.search.find_qps) against a server of known capacity whose loads pass or fail with
LoadGen's chance near the edge, its reference a guess that strays either way; each row's
interval from what its search resolved (results.intervals). Identical capacity reads `slower`
in at most 5 % of pairs, at one run a side and at five, whether the search ran to its resolution
or its budget cut it at four loads (where a prior of 1 % alone read `slower` in about a quarter
of pairs at one run); a 10 % drop reads `slower` in at least 90 % at five runs of searches
that resolve."""

from __future__ import annotations

import math
import random

from dlbench.analysis.change import RUN_SPREAD_PCT, SLOWER, Evidence, judge
from dlbench.results.intervals import search_interval
from dlbench.serve.loadgen import LoadGenResult
from dlbench.serve.search import Point, find_qps

PAIRS = 400
EDGE_NOISE = 0.01  # a load near the edge passes or fails by chance: the edge a load sees, in log
THRESHOLD = 5.0


def _searched_row(
    capacity: float, draw: random.Random, loads: int | None = None
) -> dict[str, object]:
    """One run's row: the search over loads of a server of `capacity` (each load's edge drawn
    about it), from a reference 0.6 to 1.6 times the capacity; `loads`: a budget that cuts
    the search after so many (None: none)."""

    def load(qps: float) -> Point:
        edge = capacity * math.exp(draw.gauss(0.0, EDGE_NOISE))
        valid = qps <= edge
        result = LoadGenResult(valid, () if valid else ("latency_bound",), 100, qps, qps,
                               {50: 1.0, 90: 2.0, 99: 3.0}, "", None)  # fmt: skip
        return Point(qps, result)

    clock = iter(range(10**6))  # one second a load
    budget = 1e9 if loads is None else loads - 0.5
    search = find_qps(load, capacity * draw.uniform(0.6, 1.6), budget, now=lambda: next(clock))
    return search.columns()


def _evidence(rows: list[dict[str, object]]) -> Evidence:
    rows = [r for r in rows if r["serve_qps_found"]] or rows[:1]  # a search that found none
    if not rows[0]["serve_qps_found"]:
        return Evidence.of_one(1.0, math.inf, 0.0)  # knows nothing
    figures = [float(r["serve_qps_found"]) for r in rows]
    sds = [search_interval(r).sd_pct for r in rows]
    if len(rows) == 1:
        return Evidence.of_one(figures[0], sds[0], RUN_SPREAD_PCT["serve"])
    return Evidence.of_runs(figures, sds)


def _slower_share(head_capacity: float, runs: int, seed: int, loads: int | None = None) -> float:
    draw = random.Random(seed)
    slower = 0
    for _ in range(PAIRS):
        base = [_searched_row(1000.0, draw, loads) for _ in range(runs)]
        head = [_searched_row(head_capacity, draw, loads) for _ in range(runs)]
        slower += judge(_evidence(base), _evidence(head), THRESHOLD).verdict == SLOWER
    return slower / PAIRS


def test_identical_serve_capacity_reads_slower_rarely_at_one_run_a_side_and_at_five():
    for seed in (1, 2):
        for loads in (None, 4):
            assert _slower_share(1000.0, 1, seed, loads) <= 0.05, loads
            assert _slower_share(1000.0, 5, seed, loads) <= 0.05, loads


def test_a_tenth_less_capacity_reads_slower_nearly_always_at_five_runs():
    for seed in (3, 4):
        assert _slower_share(900.0, 5, seed) >= 0.90
