"""A point measured in several fresh processes is one row: the median process's, with how many
ran and their spread; a published row's process spread widens the band it is held to, and a
shift beyond it is still caught."""

from __future__ import annotations

import pytest

from dlbench.results.processes import combined_row
from dlbench.results.published import published_columns
from dlbench.results.stats import spread_pct
from dlbench.results.verdict import verdict_columns
from tests.results.test_published import _published, _row


def _as_read(row: dict[str, object]) -> dict[str, str]:
    """A row as a CSV gives it back: text."""
    return {k: "" if v is None else str(v) for k, v in row.items()}


def test_the_row_is_the_median_process_with_the_spread_of_all(tmp_path):
    rows = [
        _as_read(_row(run_id=f"r-{k}", samples_per_s=rate, step_time_median_ms=1000 / rate))
        for k, rate in enumerate((2400.0, 2650.0, 2500.0), 1)
    ]
    row = combined_row(rows, "r")
    assert row["run_id"] == "r" and row["processes"] == 3
    assert row["samples_per_s"] == 2500.0  # the middle one, a number again
    assert row["batch_size"] == 64 and isinstance(row["batch_size"], int)
    assert row["process_spread_pct"] == pytest.approx(100 * 250 / 2500)
    assert spread_pct([1.0, 1.0]) == 0.0


def test_a_published_rows_process_spread_widens_its_band(tmp_path):
    folder = _published(
        tmp_path / "published",
        _row(samples_per_s=2500.0, throughput_interval_pct=0.5, process_spread_pct=7.0),
    )
    inside = {**_row(samples_per_s=2300.0, throughput_interval_pct=0.5)}  # 0.92x
    judged = {**inside, **published_columns(inside, folder)}
    assert judged["published_band_pct"] == pytest.approx(0.5 + 0.5 + 7.0)
    assert verdict_columns(judged)["verdict"] == "valid"


def test_a_shift_beyond_the_published_process_spread_is_still_caught(tmp_path):
    folder = _published(
        tmp_path / "published",
        _row(samples_per_s=2500.0, throughput_interval_pct=0.3, process_spread_pct=1.2),
    )
    slower = _row(samples_per_s=2250.0, throughput_interval_pct=0.3)  # 10 % slower
    judged = {**slower, **published_columns(slower, folder)}
    assert judged["published_band_pct"] == 5.0  # 1.8 % of intervals and spread: the gate's floor
    reasons = verdict_columns(judged)["verdict_reasons"]
    assert reasons == "below_published"


def test_the_combined_row_is_judged_again_against_the_published_rows(tmp_path, monkeypatch):
    folder = _published(tmp_path / "published", _row(samples_per_s=2500.0))
    monkeypatch.setenv("DLBENCH_PUBLISHED_DIR", str(folder))
    stale = {"published_ratio": "9.0", "verdict": "invalid", "verdict_reasons": "above_published"}
    rows = [_as_read({**_row(samples_per_s=r), **stale}) for r in (2490.0, 2510.0, 2500.0)]
    row = combined_row(rows, "r")
    assert row["published_ratio"] == pytest.approx(1.0)
    assert row["verdict"] == "valid" and row["verdict_reasons"] == ""
