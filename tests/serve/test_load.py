"""The load generator, the batcher and the rate search of `dlbench serve` (issue 66), on a
clock of the test's own: a server's time is whatever its planted service takes, so what each
query is charged can be worked out by hand."""

from __future__ import annotations

import itertools
import statistics

import pytest

from dlbench.serve.load import (
    Batcher,
    HostClock,
    ServeResult,
    offline_arrivals,
    offline_reference,
    poisson_arrivals,
    serve_load,
    serve_single_stream,
)
from dlbench.serve.search import find_qps


class FakeClock:
    """Time moves when a wait or a planted server says so; `late` is how far past each
    wait's moment the loop wakes (the generator's own lag)."""

    def __init__(self, late: float = 0.0) -> None:
        self.t, self.late = 100.0, late

    def now(self) -> float:
        return self.t

    def wait_until(self, moment: float) -> float:
        self.t = max(self.t, moment + self.late)
        return self.t


def server(clock: FakeClock, fixed_s: float, per_query_s: float = 0.0):
    """A planted server: a batch of n takes fixed + n x per-query seconds."""
    sizes: list[int] = []

    def run_batch(n: int) -> None:
        sizes.append(n)
        clock.t += fixed_s + n * per_query_s

    return run_batch, sizes


def test_arrivals_follow_the_seeded_poisson_process():
    first = poisson_arrivals(200.0, 20_000, seed=7)
    assert first == poisson_arrivals(200.0, 20_000, seed=7)
    assert first != poisson_arrivals(200.0, 20_000, seed=8)
    gaps = [b - a for a, b in zip([0.0, *first], first)]
    assert all(g > 0 for g in gaps)
    assert statistics.fmean(gaps) == pytest.approx(1 / 200.0, rel=0.03)
    assert statistics.pstdev(gaps) == pytest.approx(1 / 200.0, rel=0.05)  # exponential: sd = mean


def test_a_slow_server_is_charged_for_the_queue_it_builds():
    """Coordinated omission: queries every 1 ms into a server that takes 2 ms each, one at a
    time. Measured from their scheduled arrivals the latencies grow with the queue (query k
    waits about k ms); measured from when the loop took them up they would stay at 2 ms."""
    clock = FakeClock()
    run, _ = server(clock, fixed_s=0.002)
    arrivals = [k * 0.001 for k in range(1, 101)]
    result = serve_load(arrivals, run, Batcher(max_batch=1, timeout_s=0.0), clock)
    lat = result.latencies_s
    assert lat[0] == pytest.approx(0.002)
    assert lat[-1] == pytest.approx(0.002 * 100 - 0.001 * 99, abs=1e-9)  # 101 ms
    assert all(b > a for a, b in itertools.pairwise(lat))
    assert result.achieved_qps == pytest.approx(100 / 0.2, rel=0.01)  # the server's 500/s


def test_a_fast_server_charges_each_query_its_own_service_time():
    clock = FakeClock()
    run, _ = server(clock, fixed_s=0.0005)
    arrivals = [k * 0.01 for k in range(1, 51)]
    result = serve_load(arrivals, run, Batcher(max_batch=8, timeout_s=0.0), clock)
    assert max(result.latencies_s) == pytest.approx(0.0005)
    assert result.batch_sizes == [1] * 50 and result.generator_lags_s == [0.0] * 50


def test_offline_batches_hold_max_batch_and_the_rest_goes_last():
    clock = FakeClock()
    run, sizes = server(clock, fixed_s=0.001, per_query_s=0.0001)
    result = serve_load(offline_arrivals(10), run, Batcher(max_batch=4, timeout_s=1.0), clock)
    assert sizes == [4, 4, 2] and result.queries == 10


def test_a_batch_leaves_when_its_oldest_query_has_waited_the_timeout():
    """Queries 3 ms apart, a 5 ms timeout and room for 8: the first batch leaves 5 ms after
    query 1 holding queries 1 and 2 (query 3 comes at 6 ms), and no query waits past the
    timeout before its batch starts."""
    clock = FakeClock()
    run, sizes = server(clock, fixed_s=0.0001)
    arrivals = [0.003 * k for k in range(12)]
    result = serve_load(arrivals, run, Batcher(max_batch=8, timeout_s=0.005), clock)
    assert sizes[0] == 2 and sum(sizes) == 12
    assert max(result.latencies_s) <= 0.005 + 0.0001 + 1e-9


def test_the_generators_lag_is_its_own_column_not_a_latency():
    clock = FakeClock(late=0.0003)
    run, _ = server(clock, fixed_s=0.0001)
    result = serve_load([0.01 * k for k in range(1, 21)], run, Batcher(1, 0.0), clock)
    assert result.columns()["serve_generator_lag_p99_ms"] == pytest.approx(0.3)
    assert max(result.latencies_s) == pytest.approx(0.0004)  # woke late: charged, as a server


def test_single_stream_times_one_query_at_a_time():
    clock = FakeClock()
    run, sizes = server(clock, fixed_s=0.0004)
    result = serve_single_stream(30, run, clock)
    assert sizes == [1] * 30 and result.percentile_ms(90) == pytest.approx(0.4)


def test_percentiles_are_nearest_rank_as_mlperf_reports_them():
    result = ServeResult([k / 1000 for k in range(1, 101)], [1] * 100, 1.0)
    assert (result.percentile_ms(50), result.percentile_ms(90), result.percentile_ms(99)) == (
        pytest.approx(50.0),
        pytest.approx(90.0),
        pytest.approx(99.0),
    )


def mm1_load(mu: float):
    """A fake server whose p99 at rate lambda is known: an M/M/1 queue's sojourn time is
    exponential with rate mu - lambda, so p99 = ln(100) / (mu - lambda); above mu it falls
    behind and answers mu a second."""
    import math

    def load(qps: float) -> ServeResult:
        if qps >= mu:
            return ServeResult([10.0] * 100, [1] * 100, 100 / mu)
        p99 = math.log(100) / (mu - qps)
        latencies = [p99 / 2] * 98 + [p99, p99]
        return ServeResult(latencies, [1] * 100, 100 / qps)

    return load


def test_the_search_converges_on_the_rate_that_meets_the_bound():
    mu, slo_ms = 1000.0, 15.0
    expected = mu - __import__("math").log(100) / (slo_ms / 1e3)  # 693 queries/s
    search = find_qps(mm1_load(mu), slo_ms, high_qps=mu, budget_s=60.0)
    best = search.best
    assert best is not None and best.p99_ms <= slo_ms
    assert expected * 0.97 <= best.qps <= expected
    assert search.columns()["serve_points_tried"] == len(search.points) <= 14


def test_the_search_stops_when_its_time_budget_is_spent():
    ticks = iter(range(100))  # a second a look at the clock: the start, then one per point
    search = find_qps(mm1_load(1000.0), 15.0, 1000.0, budget_s=2.5, now=lambda: next(ticks))
    assert len(search.points) == 2


def test_the_host_clock_waits_until_the_moment_not_before():
    clock = HostClock()
    moment = clock.now() + 0.003
    assert clock.wait_until(moment) >= moment


def test_a_generator_that_fell_behind_makes_the_row_invalid_and_says_so():
    from dlbench.config.limits import MAX_GENERATOR_LAG_MS
    from dlbench.results.verdict import verdict_columns

    late = verdict_columns({"status": "ok", "serve_generator_lag_p99_ms": MAX_GENERATOR_LAG_MS * 2})
    assert late["verdict"] == "invalid" and late["verdict_reasons"] == "generator_behind"
    on_time = verdict_columns({"status": "ok", "serve_generator_lag_p99_ms": 0.05})
    assert on_time["verdict"] == "valid"


def test_buckets_are_powers_of_two_up_to_the_largest_batch():
    from dlbench.serve.model_server import buckets

    assert buckets(1) == [1] and buckets(8) == [1, 2, 4, 8] and buckets(12) == [1, 2, 4, 8, 12]


def test_the_offline_reference_lasts_at_least_its_minimum_in_whole_batches():
    """A few batches of a fast model last milliseconds: the reference is sized from them to
    last the minimum (0.1 s here: 4 queries a batch at 1 ms a batch are 4,000 a second), and
    a slow model's first batches, already long enough, are the reference."""
    clock = FakeClock()
    run_batch, sizes = server(clock, fixed_s=0.001)
    fast = offline_reference(run_batch, Batcher(4, 0.002), 8, 0.1, clock)
    assert fast.span_s >= 0.1 and fast.queries == 400 and set(sizes) == {4}
    assert len(sizes) == 8 + 100  # the first estimate, then the reference
    assert fast.achieved_qps == pytest.approx(4000.0)
    slow_run, slow_sizes = server(clock, fixed_s=0.05)
    slow = offline_reference(slow_run, Batcher(4, 0.002), 8, 0.1, clock)
    assert len(slow_sizes) == 8 and slow.span_s == pytest.approx(0.4)
