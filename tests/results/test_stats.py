from __future__ import annotations

import pytest

from dlbench.results.stats import Noise, StepStats, batch_means_interval_pct, percentile


def test_percentiles_interpolate():
    ordered = [float(v) for v in range(1, 101)]
    assert percentile(ordered, 50) == pytest.approx(50.5)
    assert percentile(ordered, 99) == pytest.approx(99.01)


def test_stats_columns_are_milliseconds_with_spread():
    stats = StepStats.from_values([0.010, 0.012, 0.011, 0.013])
    row = stats.as_row()
    assert row["step_time_median_ms"] == pytest.approx(11.5)
    assert row["step_time_stdev_pct"] == pytest.approx(100 * stats.stdev_s / stats.mean_s)


def test_empty_values_are_refused():
    with pytest.raises(ValueError):
        StepStats.from_values([])


# Planted step times: what the noise statistics say of each, and the verdict they give.
def _verdict(times: list[float], max_noise: float | None = None) -> list[str]:
    from dlbench.results.verdict import noise_reasons

    row = {**Noise.of(times).columns(), "steps": len(times), "max_noise_pct": max_noise}
    return noise_reasons(row)


def test_one_slow_step_among_a_thousand_is_a_counted_outlier_in_a_valid_row():
    times = [1.0] * 1000
    times[500] = 10.0
    noise = Noise.of(times)
    assert noise.outliers == 1 and noise.robust_spread_pct == 0.0
    assert noise.outlier_time_pct == pytest.approx(100 * 9 / 1009)
    assert _verdict(times) == []


def test_one_step_half_again_slower_among_a_hundred_is_counted_and_valid():
    times = [1.0] * 100
    times[40] = 1.5
    assert Noise.of(times).outliers == 1 and _verdict(times) == []


def test_one_step_ten_times_slower_among_a_hundred_moved_the_number_and_is_noise():
    """It took 8.3 % of the window: the throughput is 8 % under what the other 99 steps ran
    at, and a second window would differ by that much. On a GPU the loop measures on until
    its share is under 1 % (engine.timing.loop); a window that cannot is noisy, and says why."""
    times = [1.0] * 100
    times[50] = 10.0
    noise = Noise.of(times)
    assert noise.outliers == 1 and noise.outlier_time_pct == pytest.approx(100 * 9 / 109)
    assert noise.outliers_moved_it and not noise.settled()
    assert _verdict(times) == ["noisy"]


def test_alternating_steps_are_noisy_though_their_mean_is_well_known():
    times = [1.0, 2.0] * 50
    noise = Noise.of(times)
    assert noise.robust_spread_pct == pytest.approx(100 * 1.4826 * 0.5 / 1.5)
    assert noise.interval_pct < 1.0 and noise.settled()  # measuring longer would not help
    assert _verdict(times) == ["noisy"]


def test_a_five_percent_drift_is_drift_and_not_noise():
    times = [1.0] * 50 + [1.05] * 50
    assert Noise.of(times).drift_pct == pytest.approx(5.0)
    assert _verdict(times) == ["drift"]


def test_steps_that_only_scatter_rarely_read_as_drift():
    """The halves' medians of a short noisy window differ by chance: their difference has twice
    the width of the whole window's interval, so only a drift beyond that is one (a two-core
    host's quick start read `drift` in two runs of five from scatter alone)."""
    import random

    flagged = 0
    for seed in range(300):
        draw = random.Random(seed)
        times = [draw.gauss(1.0, 0.07) for _ in range(20)]
        flagged += "drift" in Noise.of(times).reasons(max_noise_pct=100.0)
    assert flagged / 300 < 0.10


def test_two_modes_are_no_outliers_and_their_narrow_interval_is_valid():
    """A sampler thread sharing two cores slowed a fifth of the steps: they are a mode, not
    outliers, and the throughput over the window is still well known."""
    times = [22.0 if i % 5 else 35.0 for i in range(500)]
    noise = Noise.of(times)
    assert noise.outliers == 100 and not noise.outliers_moved_it
    assert _verdict(times) == []


def test_max_noise_is_the_interval_the_verdict_allows():
    import random

    draw = random.Random(1)
    times = [draw.uniform(0.9, 1.1) for _ in range(40)]
    interval = Noise.of(times).interval_pct
    assert 1.0 < interval < 5.0
    assert _verdict(times) == [] and _verdict(times, max_noise=1.0) == ["noisy"]


def test_too_few_steps_give_no_interval_and_the_columns_say_none():
    columns = Noise.of([1.0, 1.1, 1.0]).columns()
    assert columns["throughput_interval_pct"] is None and columns["step_outliers"] == 0


def test_the_interval_of_batch_means_widens_when_steps_wander():
    """Steps that wander slowly (clocks, heat) are not independent: batches of consecutive
    steps carry that, where treating each step as independent would claim a narrow interval."""
    import math
    import statistics

    times = [1.0 + 0.1 * math.sin(i / 8) for i in range(100)]
    independent = 196 * statistics.stdev(times) / math.sqrt(100) / statistics.fmean(times)
    assert batch_means_interval_pct(times) > 2 * independent
