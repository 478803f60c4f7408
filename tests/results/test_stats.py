from __future__ import annotations

import pytest

from dlbench.results.stats import StepStats, percentile


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
