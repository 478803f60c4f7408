"""The server scenario's search against servers of known capacity: it finds the edge whether its
reference is too low (it grows past it) or too high (it halves under it), it holds a rate only
where the server kept up (a load LoadGen calls VALID past capacity reads `behind`), it reports an
edge only where it saw a failing rate above it, and it stops within its budget."""

from __future__ import annotations

import pytest

from dlbench.results.search_points import parse_point
from dlbench.serve.loadgen import LoadGenResult
from dlbench.serve.model_server import buckets
from dlbench.serve.search import (
    FIRST_SHARE,
    KEEP_UP_SHARE,
    RESOLUTION,
    Point,
    behind_schedule,
    find_qps,
    ttft_growth,
)
from dlbench.serve.services import steady_rate


def _result(valid: bool, scheduled: float, completed: float) -> LoadGenResult:
    return LoadGenResult(valid, () if valid else ("latency_bound",), 100, scheduled, completed,
                         {50: 1.0, 90: 2.0, 99: 3.0 if valid else 30.0}, "", None)  # fmt: skip


def _server(capacity: float, valid_up_to: float | None = None):
    """A load of a server that completes at most `capacity` a second; LoadGen calls it VALID up
    to `valid_up_to` (a short load with a loose bound: past capacity), the capacity by default.
    Past capacity its queue grows: TTFT from 0.1 s to far more."""
    tried: list[float] = []

    def load(qps: float) -> Point:
        tried.append(qps)
        valid = qps <= (valid_up_to or capacity)
        completed = min(qps, capacity)
        growth = (0.1, 0.1) if qps <= capacity else (0.1, 0.1 + 5 * (qps / capacity - 1))
        result = _result(valid, qps, completed)
        return Point(qps, result, behind_schedule(result, growth))

    return load, tried


@pytest.mark.parametrize("reference", [300.0, 1000.0, 700.0, 2500.0, 5000.0])
def test_the_search_finds_the_edge_whatever_its_reference_says(reference):
    capacity = 1000.0
    load, tried = _server(capacity)
    search = find_qps(load, reference, budget_s=600)
    assert tried[0] == FIRST_SHARE * reference
    best = search.best
    # within the bracket's resolution of the capacity (a load a fraction of a per cent past it
    # keeps up within KEEP_UP_SHARE and no queue shows in a few seconds)
    assert best is not None and capacity * (1 - 2 * RESOLUTION) <= best.qps
    assert best.qps <= capacity * (1 + RESOLUTION)
    assert search.edge_seen and any(not p.passed and p.qps > best.qps for p in search.points)
    assert search.reported is best
    if reference < capacity:
        assert max(tried) > reference  # never capped by the reference


def test_a_rate_loadgen_calls_valid_past_capacity_is_held_only_where_the_server_kept_up():
    """A 10 s load with a 2 s TTFT bound passes 40 % past capacity: the queue grows, LoadGen
    sees p99 under its bound; the search must not report it."""
    load, _ = _server(1000.0, valid_up_to=1400.0)
    search = find_qps(load, 1100.0, budget_s=600)
    assert search.best.qps <= 1000.0 * (1 + RESOLUTION)  # not 1,400
    assert any(p.outcome == "behind" for p in search.points)
    outcomes = {parse_point(t).outcome for t in search.columns()["serve_points"].split()}
    assert "behind" in outcomes and "ok" in outcomes


def test_a_search_that_never_saw_a_rate_fail_says_its_rate_is_a_floor():
    clock = iter(range(0, 1000, 10))
    load, _ = _server(10**9)
    search = find_qps(load, 100.0, budget_s=35, now=lambda: next(clock))
    assert len(search.points) == 3 and search.best is search.points[-1]
    assert not search.edge_seen and search.columns()["serve_qps_edge_seen"] is False


def test_the_search_stops_when_its_time_budget_is_spent_and_reports_its_last_point():
    clock = iter(range(0, 1000, 10))
    load, _ = _server(1.0)
    search = find_qps(load, 1000.0, 25, now=lambda: next(clock))
    assert len(search.points) == 2 and search.best is None
    assert search.reported is search.points[-1]


def test_behind_schedule_reads_the_rate_completed_and_a_growing_time_to_first_token():
    whole = None  # whole queries: no first tokens, the completed rate tells
    assert behind_schedule(_result(True, 100.0, 100.0), whole) == ""
    short = behind_schedule(_result(True, 100.0, KEEP_UP_SHARE * 100.0 - 1), whole)
    assert short.startswith("completed 96.0/s of 100.0/s")
    grown = behind_schedule(_result(True, 100.0, 100.0), (0.1, 0.5))
    assert "TTFT grew from 100 to 500 ms" in grown
    assert behind_schedule(_result(True, 100.0, 100.0), (0.001, 0.004)) == ""  # 3 ms: noise


def test_an_llm_loads_own_drain_is_no_queue():
    """A lease's llm_1b search called rates it kept up with (its TTFT flat through the load)
    `behind`: LoadGen's completed rate counts each request's own generation after the last
    issue (docs/serving.md). Where first tokens tell, the completed rate does not."""
    drained = _result(True, 338.6, 0.94 * 338.6)
    assert behind_schedule(drained, (0.006, 0.007)) == ""
    assert behind_schedule(drained, (0.006, 0.9)) != ""  # a queue still shows


def test_ttft_growth_compares_the_first_and_last_third_by_arrival():
    arrivals = [5.0, 1.0, 3.0, 2.0, 6.0, 4.0]
    ttfts = [0.9, 0.1, 0.5, 0.2, 1.0, 0.4]
    assert ttft_growth(arrivals, ttfts) == pytest.approx((0.15, 0.95))
    assert ttft_growth([1.0, 2.0], [0.1, 0.2]) is None


def test_the_offline_reference_leaves_the_ramp_and_the_drain_out():
    """Requests handed over at once: a slow ramp as slots fill, a steady 100 a second, then a
    drain of stragglers; the rate is the steady one, where counting all gives far less."""
    ramp = [0.5 + 0.1 * k for k in range(20)]  # 10 a second while the slots fill
    steady = [2.5 + 0.01 * k for k in range(160)]  # 100 a second
    drain = [4.1 + 0.2 * k for k in range(20)]  # stragglers
    rate, span = steady_rate(ramp + steady + drain)
    assert rate == pytest.approx(100.0, rel=0.02) and span > 0.9
    everything = len(ramp + steady + drain) / drain[-1]
    assert everything < 0.5 * rate


def test_the_report_reads_an_llm_searchs_points_as_it_reads_a_query_servers():
    """`qps:ttft/tpot:outcome` is a point (its first figure the TTFT the report draws), not a
    hand edit to leave out; what is no point still is."""
    assert parse_point("12.5:900.000/3.000:ok").figures == (900.0, 3.0)
    assert parse_point("12.5:9.000:behind").outcome == "behind"
    for text in (
        "12.5:abc:ok",
        "-1:9:ok",
        "12.5:9:maybe",
        "12.5:inf/3:ok",
        "1:2:3:ok",
        "1:2/3/4:ok",
    ):
        assert parse_point(text) is None, text


@pytest.mark.parametrize(
    ("slots", "points"),
    [(1, [1]), (2, [1, 2]), (6, [1, 2, 4, 6]), (64, [1, 2, 4, 8, 16, 32, 64]),
     (2765, [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 2765])],
)  # fmt: skip
def test_the_frontiers_concurrencies_double_from_one_and_end_at_the_slots(slots, points):
    """The frontier's points are the server's decode buckets (LlmService.concurrencies)."""
    assert buckets(slots) == points
