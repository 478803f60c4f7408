"""One row from named parts: a column given by two parts is a bug found by a test, not a
figure chosen by the order of a merge (issue 56: `{**row, **m.extra, **extra, **env}` let a
later key win silently; issue 65: each producer hands the builder its own part)."""

from __future__ import annotations

import pytest

from dlbench.config import RunConfig
from dlbench.engine.benchmark import run_benchmark
from dlbench.engine.plan import make_plan
from dlbench.engine.rows import measurement_row
from dlbench.results.environment import collect_environment
from dlbench.results.row import ColumnClash, RowBuilder
from dlbench.results.schema import COLUMNS


def test_a_column_from_two_parts_is_a_clash_naming_both():
    builder = RowBuilder().add("settings", {"model": "vit", "batch_size": 8})
    with pytest.raises(ColumnClash, match="'batch_size' given by settings and the run"):
        builder.add("the run", {"batch_size": 16})


def test_an_amendment_replaces_only_a_column_a_part_gave():
    builder = RowBuilder().add("settings", {"width": 224}).amend("the shape", {"width": 160})
    assert builder.get("width") == 160
    with pytest.raises(ColumnClash, match="the shape amends column 'height'"):
        builder.amend("the shape", {"height": 160})


def test_the_row_is_in_the_schema_order_with_tags_last_and_a_verdict():
    row = RowBuilder().add("tags", {"purpose": "x"}).add("identity", {"status": "ok"}).row()
    known = [c for c in row if c in COLUMNS]
    assert known == [c for c in COLUMNS if c in row] and "verdict" in row
    assert list(row)[-1] == "purpose"


@pytest.fixture(scope="module")
def measured():
    config = RunConfig.of(model="timm:test_resnet", accelerator="cpu", batch_size=2, width=32,
                       height=32, n_iters=3, warmup_steps=1, telemetry=False)  # fmt: skip
    return run_benchmark(make_plan(config)), collect_environment("cpu")


def test_a_real_runs_row_has_each_column_from_one_part(measured):
    m, env = measured
    row = measurement_row(m, env)
    assert row["run_kind"] == "benchmark" and row["width"] == 32 and row["accelerator"] == "cpu"


@pytest.mark.parametrize("column", ["samples_per_s", "model", "gpu_name", "run_kind"])
def test_a_run_column_that_repeats_another_parts_fails_the_row(measured, column):
    m, env = measured
    parts = m.parts
    m.parts = RowBuilder().include(parts).add("a part that repeats one", {column: "again"})
    try:
        with pytest.raises(ColumnClash, match=column):
            measurement_row(m, env)
    finally:
        m.parts = parts


def test_a_searched_batch_size_is_said_once(tmp_path, monkeypatch):
    """`--batch-size auto` tags the settings and the search adds its own columns: a row with
    both (a GPU's in-process search) must not say `batch_size_mode` twice."""
    from dlbench import run
    from dlbench.engine.autobatch import Probe, Search
    from dlbench.results.store import CsvStore

    found = Search(2, [Probe(2, True, None)], 0.5)
    monkeypatch.setattr(run, "choose_batch_size", lambda plan: (plan, None, found))
    config = RunConfig.of(model="timm:test_resnet", accelerator="cpu", batch_size=2, width=32,
                       height=32, n_iters=3, warmup_steps=1, telemetry=False,
                       output=tmp_path / "rows.csv")  # fmt: skip
    assert run.execute(config, auto_batch=True) == 0
    [row] = CsvStore(tmp_path / "rows.csv").rows()
    assert row["batch_size_mode"] == "auto" and row["auto_batch_probes"] == "2:ok"
