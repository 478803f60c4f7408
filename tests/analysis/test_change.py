"""The change verdict on seeded synthetic samples, hundreds of trials each: equal sides seldom read
slower, a 10 % slowdown through 3 % noise reads slower with five runs a side, a 2 % shift through
5 % noise (a real change under the threshold) seldom reads slower however many runs there are;
one run a side is judged with its kind's spread between runs (a CPU row's as measured on a
shared host: two runs of one command seldom read slower)."""

from __future__ import annotations

import math
import random

import pytest

from dlbench.analysis.change import (
    FASTER,
    INCONCLUSIVE,
    RUN_SPREAD_PCT,
    SAME,
    SLOWER,
    Evidence,
    judge,
    run_spread_pct,
)

TRIALS = 400


def _share(shift_pct: float, noise_pct: float, runs: int, verdict: str, seed: int) -> float:
    """The share of trials that read `verdict`: each side `runs` figures of 100 (the head's
    shifted) with a relative noise of `noise_pct` (a standard deviation)."""
    draw = random.Random(seed)
    hits = 0
    for _ in range(TRIALS):
        base = [100 * (1 + draw.gauss(0, noise_pct / 100)) for _ in range(runs)]
        head = [
            100 * (1 + shift_pct / 100) * (1 + draw.gauss(0, noise_pct / 100)) for _ in range(runs)
        ]
        change = judge(Evidence.of_runs(base), Evidence.of_runs(head), threshold_pct=5.0)
        hits += change.verdict == verdict
    return hits / TRIALS


@pytest.mark.parametrize("runs", [3, 5, 10, 20])
def test_equal_distributions_read_slower_in_at_most_5_pct_of_trials(runs):
    assert _share(0.0, 3.0, runs, SLOWER, seed=runs) <= 0.05


def test_a_10_pct_slowdown_through_3_pct_noise_reads_slower_with_five_runs_a_side():
    assert _share(-10.0, 3.0, 5, SLOWER, seed=11) >= 0.95
    # and its mirror, a speed-up to 1 / 0.9 (the log scale is symmetric), faster
    assert _share(100 / 0.9 - 100, 3.0, 5, FASTER, seed=12) >= 0.95


@pytest.mark.parametrize("runs", [3, 5, 8, 10, 20, 40])
def test_a_2_pct_shift_through_5_pct_noise_reads_slower_in_at_most_5_pct(runs):
    assert _share(-2.0, 5.0, runs, SLOWER, seed=100 + runs) <= 0.05


def test_many_runs_of_equal_sides_read_same_and_of_a_2_pct_shift_never_slower():
    assert _share(0.0, 1.0, 10, SAME, seed=7) >= 0.95
    assert _share(-2.0, 1.0, 40, SLOWER, seed=8) == 0.0


def test_a_launch_bound_row_of_one_run_a_side_9_pct_apart_is_inconclusive():
    spread = run_spread_pct(launch_bound=True)
    base = Evidence.of_one(2700.0, 0.02, spread)  # a tight window: one run cannot see the next
    head = Evidence.of_one(2700.0 * 0.91, 0.02, spread)
    change = judge(base, head, 5.0)
    assert change.verdict == INCONCLUSIVE
    assert change.ratio == pytest.approx(0.91) and change.low < 0.95 < change.high
    assert 2 <= change.runs_to_settle <= 100  # the advice: this many runs a side


def test_a_gpu_bound_row_of_a_tight_window_20_pct_slower_is_slower():
    spread = run_spread_pct(launch_bound=False)
    change = judge(Evidence.of_one(4700.0, 0.1, spread), Evidence.of_one(3760.0, 0.1, spread), 5.0)
    assert change.verdict == SLOWER and change.change_pct == pytest.approx(-20.0)
    assert change.runs_to_settle is None


def test_a_latency_that_rises_is_slower():
    spread = run_spread_pct(launch_bound=False, serve="rate")
    base, head = Evidence.of_one(10.0, 0.0, spread), Evidence.of_one(13.0, 0.0, spread)
    assert judge(base, head, 5.0, lower_is_better=True).verdict == SLOWER
    assert judge(head, base, 5.0, lower_is_better=True).verdict == FASTER


def test_one_run_is_not_runs():
    with pytest.raises(ValueError):
        Evidence.of_runs([100.0])


def _one_run_shares(shift_pct: float, seed: int) -> dict[str, float]:
    """One CPU run a side, each figure off the command's own by the spread between runs that a
    shared host gives (RUN_SPREAD_PCT["cpu"], a standard deviation) and its window's interval
    a few %: the share of trials that read each verdict."""
    draw, spread = random.Random(seed), RUN_SPREAD_PCT["cpu"] / 100
    prior = run_spread_pct(launch_bound=False, cpu=True)
    counts = dict.fromkeys((SAME, FASTER, SLOWER, INCONCLUSIVE), 0)
    for _ in range(TRIALS):
        base = Evidence.of_one(280 * math.exp(draw.gauss(0, spread)), draw.uniform(1, 5), prior)
        shifted = 280 * (1 + shift_pct / 100) * math.exp(draw.gauss(0, spread))
        head = Evidence.of_one(shifted, draw.uniform(1, 5), prior)
        counts[judge(base, head, threshold_pct=5.0).verdict] += 1
    return {verdict: n / TRIALS for verdict, n in counts.items()}


@pytest.mark.parametrize("seed", range(5))
def test_two_cpu_runs_of_one_command_seldom_read_slower(seed):
    assert _one_run_shares(0.0, seed)[SLOWER] <= 0.05  # 2 % expected; 400 trials
    assert run_spread_pct(launch_bound=True, cpu=True) == RUN_SPREAD_PCT["cpu"]  # not a GPU's


def test_a_cpu_run_at_half_the_rate_reads_slower_most_of_the_time():
    shares = _one_run_shares(-50.0, seed=9)
    assert shares[SLOWER] >= 0.7 and shares[FASTER] == 0.0


@pytest.mark.parametrize("seed", range(20))
def test_the_advice_of_an_inconclusive_line_asks_for_more_runs_than_it_has_and_settles_it(seed):
    rng = random.Random(seed)
    spread = rng.uniform(0.5, 3.0)  # % between runs: two a side cannot settle 5 % at Student's t
    base = Evidence.of_runs([rng.gauss(100.0, spread) for _ in range(2)])
    head = Evidence.of_runs([rng.gauss(100.0, spread) for _ in range(2)])
    change = judge(base, head, 5.0)
    if change.verdict != INCONCLUSIVE:
        return
    runs = change.runs_to_settle
    assert runs > 2  # never the runs it already has
    per_run = (base.variance * base.runs + head.variance * head.runs) / 2
    d = head.mean_log - base.mean_log
    base_then = Evidence(0.0, per_run / runs, runs - 1, runs)
    settled = judge(base_then, Evidence(d, per_run / runs, runs - 1, runs), 5.0)
    assert settled.verdict != INCONCLUSIVE  # as many runs at the same spread and change settle it
