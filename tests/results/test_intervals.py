"""One statement of what an interval is (results.intervals), read alike by compare, the gate's
evidence and the published band: its half-width and the degrees of freedom of its t, a pooled
row's spread between processes in it (no prior on top), a searched rate's from its bracket."""

from __future__ import annotations

import math

import pytest

from dlbench.analysis.compare import evidence_of
from dlbench.results.intervals import Interval, interval_of
from dlbench.results.stats import MAX_BATCHES, Z_975, Noise, t_975, window_dof


def test_an_interval_is_a_standard_deviation_by_its_own_t():
    assert Interval(2.0, 3).sd_pct == pytest.approx(2.0 / t_975(3))  # not 2.0 / 1.96
    assert Interval(2.0).sd_pct == pytest.approx(2.0 / Z_975)


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ({"throughput_interval_pct": 1.0, "throughput_interval_dof": 4}, Interval(1.0, 4)),
        ({"throughput_interval_pct": 1.0, "processes": 3}, Interval(1.0, 2)),  # pooled, older
        ({"throughput_interval_pct": 1.0, "steps": 50}, Interval(1.0, window_dof(50))),
        ({"throughput_interval_pct": 1.0}, Interval(1.0)),
        ({"throughput_interval_pct": "inf"}, None),
        ({"throughput_interval_pct": -1.0}, None),
        ({}, None),
    ],
)
def test_a_rows_interval_and_its_degrees_of_freedom(row, expected):
    assert interval_of(row) == expected


def test_a_window_records_the_degrees_of_freedom_of_its_batch_means():
    noise = Noise.of([1.0, 1.1, 0.9, 1.05] * 10)
    assert noise.columns()["throughput_interval_dof"] == MAX_BATCHES - 1
    assert window_dof(8) == 3  # four batches of two steps


def test_a_searched_rate_knows_its_bracket_and_a_floor_knows_nothing():
    row = {
        "serve_qps_found": 100.0,
        "serve_points": "90.0:5.000:ok 100.0:6.000:ok 104.0:30.000:over",
    }
    interval = interval_of(row)
    assert interval.sd_pct == pytest.approx(100 * 0.04 / math.sqrt(12))  # uniform on the bracket
    floor = {"serve_qps_found": 100.0, "serve_points": "90.0:5.000:ok 100.0:6.000:ok"}
    assert math.isinf(interval_of(floor).half_pct)


def test_a_pooled_row_is_judged_by_its_processes_spread_with_no_prior_on_top():
    """Three processes that agree to 0.3 % measured how far a process strays: a launch-bound
    row's prior between runs (4 %) added on top would hide a 6 % slowdown."""
    import pandas as pd

    from dlbench.analysis.change import SLOWER, judge

    def pooled(figure: float) -> pd.DataFrame:
        return pd.DataFrame([{"samples_per_s": figure, "throughput_interval_pct": 0.8,
                              "processes": 3, "host_bound": True}])  # fmt: skip

    change = judge(evidence_of(pooled(2500.0)), evidence_of(pooled(2350.0)), 5.0)
    assert change.verdict == SLOWER
    one = pd.DataFrame([{"samples_per_s": 2500.0, "throughput_interval_pct": 0.8,
                         "host_bound": True, "steps": 1000}])  # fmt: skip
    assert evidence_of(one).variance > (0.04**2)  # one process: the prior stays
