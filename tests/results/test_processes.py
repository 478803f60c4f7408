"""A point measured in several fresh processes is one row pooled from all of them: the mean of
their figures, Student's t over their spread, the spread a standard deviation; a process that
measured nothing is a failure, never a 0; a row of one process is held to a band that allows for
how far one process strays from the published rows, and a shift beyond it is caught."""

from __future__ import annotations

import math
import statistics

import pytest

from dlbench.results.processes import (
    ProcessWithoutFigure,
    combined_row,
    pooled_interval,
    process_figures,
)
from dlbench.results.published import published_columns
from dlbench.results.stats import t_975, window_dof
from dlbench.results.verdict import verdict_columns
from tests.results.test_published import _published, _row


def _as_read(row: dict[str, object]) -> dict[str, str]:
    """A row as a CSV gives it back: text."""
    return {k: "" if v is None else str(v) for k, v in row.items()}


def _processes(*rates: float, **columns: object) -> list[dict[str, str]]:
    return [
        _as_read(_row(run_id=f"r-{k}", samples_per_s=rate, step_time_median_ms=1000 / rate,
                      achieved_tflops=rate / 100, **columns))
        for k, rate in enumerate(rates, 1)
    ]  # fmt: skip


def test_the_row_pools_every_process_figure_and_spread():
    row = combined_row(_processes(2400.0, 2650.0, 2500.0), "r")
    assert row["run_id"] == "r" and row["processes"] == 3
    mean = (2400.0 + 2650.0 + 2500.0) / 3
    assert row["samples_per_s"] == pytest.approx(mean)  # the mean, not the middle process
    assert row["achieved_tflops"] == pytest.approx(mean / 100)  # its rates agree with it
    assert row["step_time_median_ms"] == pytest.approx(1000 / 2500)  # the window nearest it
    assert row["batch_size"] == 64 and isinstance(row["batch_size"], int)
    sd = statistics.stdev([2400.0, 2650.0, 2500.0])
    assert row["process_spread_pct"] == pytest.approx(100 * sd / mean)  # a deviation, no range
    assert row["process_figures"] == "2400 2650 2500"
    between = t_975(2) * 100 * sd / mean / math.sqrt(3)
    assert row["throughput_interval_pct"] == pytest.approx(between)  # wider than the windows'
    assert row["throughput_interval_dof"] == 2  # t over three processes


def test_the_interval_is_the_windows_where_the_processes_agree_by_luck():
    half, dof = pooled_interval([100.0, 100.0, 100.0], [0.6, 0.8, 0.0], 9)
    assert half == pytest.approx(1.0 / 3) and dof == 9  # the windows': their own t
    assert pooled_interval([100.0], [0.6], 9) == (pytest.approx(0.6), 9)
    assert pooled_interval([100.0], [None]) == (None, None)
    half, dof = pooled_interval([99.0, 101.0], [None, 0.1])
    assert half == pytest.approx(t_975(1) * 100 * statistics.stdev([99.0, 101.0]) / 100 / 2**0.5)
    assert dof == 1


@pytest.mark.parametrize("figure", ["", "0", "-5", "inf", "nan", "abc"])
def test_a_process_that_measured_nothing_is_a_failure_and_never_a_zero(figure):
    rows = _processes(2400.0, 2500.0, 2600.0)
    rows[1]["samples_per_s"] = figure
    with pytest.raises(ProcessWithoutFigure, match="process 2 of 3 measured no figure"):
        combined_row(rows, "r")
    with pytest.raises(ProcessWithoutFigure):
        process_figures(rows)


def test_a_row_8_pct_slower_than_published_rows_of_tight_spread_is_slower(tmp_path):
    folder = _published(
        tmp_path / "published",
        _row(samples_per_s=2500.0, throughput_interval_pct=0.5, processes=3,
             process_spread_pct=0.3),
    )  # fmt: skip
    slower = {**_row(samples_per_s=2300.0, throughput_interval_pct=0.5)}  # 0.92x
    judged = {**slower, **published_columns(slower, folder)}
    assert judged["published_band_pct"] == 5.0  # sqrt(0.5^2 + 0.5^2 + (1.96 x 0.3)^2) < 5
    assert verdict_columns(judged)["verdict_reasons"] == "below_published"


def test_one_process_may_stray_as_far_as_the_published_processes_did(tmp_path):
    folder = _published(
        tmp_path / "published",
        _row(samples_per_s=2500.0, throughput_interval_pct=0.5, processes=3,
             process_spread_pct=3.0),
    )  # fmt: skip
    one = _row(samples_per_s=2360.0, throughput_interval_pct=0.5)  # 0.944x, one process
    judged = {**one, **published_columns(one, folder)}
    window = 0.5 * 1.959964 / t_975(window_dof(50))  # its window's, at the normal's 97.5 %
    pooled_one = 0.5 * 1.959964 / t_975(2)  # the published row's, t over 3 processes
    expected = math.sqrt(window**2 + pooled_one**2 + (1.959964 * 3.0) ** 2)
    assert judged["published_band_pct"] == pytest.approx(expected)
    assert verdict_columns(judged)["verdict"] == "valid"
    # a row pooled from its own processes carries that spread in its interval instead
    pooled = {**one, "processes": 3}
    assert published_columns(pooled, folder)["published_band_pct"] == 5.0


def test_the_combined_row_is_judged_again_against_the_published_rows(tmp_path, monkeypatch):
    folder = _published(tmp_path / "published", _row(samples_per_s=2500.0))
    monkeypatch.setenv("DLBENCH_PUBLISHED_DIR", str(folder))
    stale = {"published_ratio": "9.0", "verdict": "invalid", "verdict_reasons": "above_published"}
    rows = [_as_read({**_row(samples_per_s=r), **stale}) for r in (2490.0, 2510.0, 2500.0)]
    row = combined_row(rows, "r")
    assert row["published_ratio"] == pytest.approx(1.0)
    assert row["verdict"] == "valid" and row["verdict_reasons"] == ""
