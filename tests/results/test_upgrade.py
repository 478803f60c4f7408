"""Rows from before a column existed are read as today's in one step (results.upgrade), by
every reader: analysis frames and the published rows alike."""

from __future__ import annotations

import csv
import math

import pytest

from dlbench.analysis.load import load_rows
from dlbench.results.published import forget_published, published_rows
from dlbench.results.stats import t_975
from dlbench.results.upgrade import IMPLIED, upgraded
from tests.analysis.rows import benchmark_row


def _old_file(path, rows, drop):
    """A CSV as an older dlbench wrote it: without the columns in `drop`."""
    columns = [c for c in dict.fromkeys(k for r in rows for k in r) if c not in drop]
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return path


def test_a_file_without_the_columns_reads_as_what_its_rows_meant(tmp_path):
    rows = [
        benchmark_row(world_size=1, steps=100, step_time_stdev_pct=2.0),
        benchmark_row(world_size=4, steps=100, step_time_stdev_pct=2.0),
        benchmark_row(model="llm_1b", mode="infer", decode_tokens_per_s=500.0, world_size=1),
    ]
    path = _old_file(tmp_path / "old.csv", rows, drop=tuple(IMPLIED))
    frame = load_rows([path])
    assert list(frame["run_kind"]) == ["benchmark"] * 3
    assert list(frame["data"]) == ["synthetic"] * 3
    assert list(frame["strategy"]) == ["single", "ddp", "single"]
    assert list(frame["llm_impl"]) == ["", "", "hf"]
    assert frame["throughput_interval_pct"].iloc[0] == pytest.approx(t_975(99) * 2.0 / 10)


def test_an_empty_cell_of_a_column_the_file_has_stays_empty(tmp_path):
    rows = [benchmark_row(strategy="", llm_impl="", throughput_interval_pct="")]
    path = _old_file(tmp_path / "new.csv", rows, drop=())
    frame = load_rows([path])
    assert frame["strategy"].isna().iloc[0]  # as pandas reads an empty cell
    assert math.isnan(frame["throughput_interval_pct"].iloc[0])
    assert upgraded({"strategy": ""})["strategy"] == ""  # a row that has the key keeps it


def test_the_published_rows_are_upgraded_as_analysis_reads_them(tmp_path, monkeypatch):
    folder = tmp_path / "published"
    folder.mkdir()
    row = benchmark_row(verdict="valid", throughput_interval_pct=0.5, dlbench_commit="a" * 40)
    _old_file(folder / "default-pt2.11-cu13.0-h100-80gb-hbm3.csv", [row], ("run_kind", "data"))
    monkeypatch.setenv("DLBENCH_PUBLISHED_DIR", str(folder))
    forget_published()
    [published] = published_rows(folder)
    assert published["run_kind"] == "benchmark" and published["data"] == "synthetic"
    forget_published()
