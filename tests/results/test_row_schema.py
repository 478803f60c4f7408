"""Every run kind builds its rows through RowBuilder: each column it writes is declared in the
schema, in the schema's order (issue 65). Each kind runs for real on the CPU; the rows are
caught on their way to the CSV."""

from __future__ import annotations

import pytest

from dlbench.results.schema import COLUMNS
from dlbench.results.store import CsvStore

TINY = ["--accelerator", "cpu", "--model", "timm:test_resnet", "--batch-size", "2",
        "--width", "32", "--height", "32", "--warmup-steps", "1", "--n-iters", "3"]  # fmt: skip


@pytest.fixture
def written(monkeypatch) -> list[dict[str, object]]:
    """The rows every CsvStore is handed in this process, as handed."""
    rows: list[dict[str, object]] = []
    append_many = CsvStore.append_many

    def catch(self, new):
        rows.extend(dict(row) for row in new)
        return append_many(self, new)

    monkeypatch.setattr(CsvStore, "append_many", catch)
    return rows


def _declared_in_order(row: dict[str, object]) -> None:
    unknown = [c for c in row if c not in COLUMNS]
    assert not unknown, f"{row.get('run_kind')} writes undeclared columns {unknown}"
    assert list(row) == [c for c in COLUMNS if c in row], f"{row.get('run_kind')}: not in order"


@pytest.mark.parametrize("kind", ["benchmark", "validate", "peak", "loader", "serve"])
def test_each_run_kinds_rows_are_declared_in_the_schemas_order(kind, dlbench, written, tmp_path):
    out = tmp_path / "rows.csv"
    if kind == "serve":
        args = ["serve", *TINY[:4], "--width", "32", "--height", "32", "--precision", "32",
                "--no-compile", "--max-batch", "2", "--scenario", "offline",
                "--queries", "8"]  # fmt: skip
    elif kind == "loader":
        images = tmp_path / "set"
        assert dlbench("make-data", images, "--images", "8", "--size", "40x32")[0] == 0
        args = ["data", images / "images", "--model", "timm:test_resnet", "--batch-size", "2",
                "--workers", "0", "--min-time", "0.2"]  # fmt: skip
    else:
        args = {
            "benchmark": ["train", *TINY],
            "validate": ["validate", *TINY, "--repeats", "2"],
            "peak": ["peak", "--accelerator", "cpu", "--max-time", "0.5"],
        }[kind] + ["--cache-dir", tmp_path / "cache"]  # figures kept here, not in the user's
    code, _, err = dlbench(*args, "--output", out)
    assert code == 0, err
    assert {str(row.get("run_kind")) for row in written} == {kind}
    for row in written:
        _declared_in_order(row)


def test_scaling_and_per_rank_rows_are_declared_in_the_schemas_order(dlbench, written, tmp_path):
    """A real one-device row, and beside it the same configuration as a 2-rank DDP row (a
    second process's row, planted): the scaling rows computed from them; and the side file's
    row of each rank of a real measurement."""
    from dlbench.analysis.scaling import record_scaling
    from dlbench.config import RunConfig
    from dlbench.engine.benchmark import run_benchmark
    from dlbench.engine.plan import make_plan
    from dlbench.engine.rows import per_rank_rows

    out = tmp_path / "rows.csv"
    assert dlbench("train", *TINY, "--cache-dir", tmp_path / "cache", "--output", out)[0] == 0
    store = CsvStore(out)
    [one] = store.rows()
    two = {**one, "run_id": "two", "world_size": "2", "devices": "2", "strategy": "ddp",
           "samples_per_s": str(1.8 * float(one["samples_per_s"]))}  # fmt: skip
    store.append(two)
    written.clear()
    assert len(record_scaling(store, "timm:test_resnet", "train")) == 2
    assert [row["run_kind"] for row in written] == ["scaling"]
    config = RunConfig.of(model="timm:test_resnet", accelerator="cpu", batch_size=2, width=32,
                          height=32, n_iters=3, warmup_steps=1, telemetry=False,
                          cache_dir=tmp_path / "cache")  # fmt: skip
    [rank] = per_rank_rows(run_benchmark(make_plan(config)), "some-run")
    for row in [*written, rank]:
        _declared_in_order(row)
