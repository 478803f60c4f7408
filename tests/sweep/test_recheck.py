"""A sweep holds its rows against the published rows of their GPU (here: this CPU's) and
configuration, measures a point outside its band once more in a fresh worker, and says in its
summary what the second measurement agreed with."""

from __future__ import annotations

import csv

import pytest

from dlbench.results.published import FOLDER_VARIABLE
from dlbench.sweep.recheck import FIRST, NEITHER, PUBLISHED, HeldRow, Recheck, summary_lines
from tests.analysis.rows import write_rows
from tests.conftest import read_rows

PLAN = (
    "name: held\nfixed: {accelerator: cpu, n_iters: 3, warmup_steps: 0, width: 32, height: 32}\n"
    "runs:\n  - models: [timm:test_resnet]\n    modes: [infer]\n    batch_sizes: [2]\n"
)


# A rate no CPU reaches: a row held against it reads far below, however busy the host was when
# the published row was measured
UNREACHABLE = 1e9


def _published_from(rows: list[dict[str, str]], folder) -> None:
    """The rows as a published part whose figures are UNREACHABLE."""
    folder.mkdir()
    planted = [
        {**r, "samples_per_s": UNREACHABLE, "verdict": "valid",
         "verdict_reasons": ""}  # a published row valid by its own window (a GPU's would be)
        for r in rows
    ]  # fmt: skip
    write_rows(folder / "default-cpu.csv", planted)


@pytest.mark.e2e
def test_a_point_far_below_its_published_row_is_measured_again_and_named(
    tmp_path, monkeypatch, capsys
):
    from dlbench.cli import run_command

    plan = tmp_path / "plan.yaml"
    plan.write_text(PLAN)
    (tmp_path / "none").mkdir()  # a folder of no published rows: nothing published yet
    monkeypatch.setenv(FOLDER_VARIABLE, str(tmp_path / "none"))
    first = tmp_path / "first.csv"
    # 3 steps a point (few_steps): the recheck is what is tried
    assert run_command(["sweep", str(plan), "--output", str(first), "--invalid-ok"]) == 0
    [measured] = read_rows(first)
    assert not measured.get("published_ratio")  # nothing published: empty, never an error
    assert "nothing published for its 1 row(s)" in capsys.readouterr().out

    # published: a rate no CPU reaches, so the next row reads far below it
    _published_from([measured], tmp_path / "published")
    monkeypatch.setenv(FOLDER_VARIABLE, str(tmp_path / "published"))
    rows_csv = tmp_path / "rows.csv"
    assert run_command(["sweep", str(plan), "--output", str(rows_csv)]) == 4  # all invalid
    out, err = capsys.readouterr()
    low, again = read_rows(rows_csv)
    assert float(low["published_ratio"]) < 0.5
    assert low["published_source"] == f"default-cpu.csv@{measured['dlbench_commit'][:7]}"
    assert low["verdict"] == "invalid" and "below_published" in low["verdict_reasons"]
    assert again["recheck_of"] == low["run_id"] and again["sweep"] == "held"
    assert "held against the published rows: 0 of 1 row(s) within their band, 1 below" in out
    ratio = f"{float(low['published_ratio']):.3f}"
    assert f"{ratio}x published" in err  # its point's own line, as it finishes
    assert f" {ratio} │\n" in out  # and the summary's table, its last column
    # the second is as far below, or lies elsewhere on this CPU's noise: it says which
    assert "measured again in a fresh worker" in out and "agrees with " in out

    # a rerun resumes: the point has its rows, and its recheck is not measured a second time
    assert run_command(["sweep", str(plan), "--output", str(rows_csv)]) == 0
    assert len(read_rows(rows_csv)) == 2
    assert "measured again in a fresh worker" in capsys.readouterr().out

    # --no-recheck: named, not measured again
    quiet = tmp_path / "quiet.csv"
    assert run_command(["sweep", str(plan), "--output", str(quiet), "--no-recheck"]) == 4
    assert len(read_rows(quiet)) == 1
    assert "not rechecked (--no-recheck)" in capsys.readouterr().out
    with open(quiet, newline="") as handle:
        [row] = csv.DictReader(handle)
    assert not row.get("recheck_of")


def _held(run_id: str, ratio: float | None, outside: str = "") -> HeldRow:
    return HeldRow(f"point {run_id}", run_id, ratio, 5.0, outside)


def test_a_recheck_agrees_with_the_published_rows_the_first_row_or_neither():
    first = _held("a", 0.77, "below_published")
    assert Recheck(first, _held("b", 1.01)).agreed_with() == PUBLISHED
    assert Recheck(first, _held("b", 0.79, "below_published")).agreed_with() == FIRST
    assert Recheck(first, _held("b", 0.90, "below_published")).agreed_with() == NEITHER
    assert Recheck(first, None).agreed_with() == ""
    lines = summary_lines(
        [first, _held("c", 1.0), _held("d", None), _held("e", 1.2, "above_published")],
        [Recheck(first, _held("b", 1.01)), Recheck(_held("e", 1.2, "above_published"), None)],
    )
    assert lines[0] == (
        "held against the published rows: 1 of 3 row(s) within their band, 1 below, 1 above; "
        "1 with nothing published"
    )
    assert lines[1] == (
        "  below: point a: 0.770x (band +/-5.0 %); measured again in a fresh worker: 1.010x, "
        "agrees with the published rows"
    )
    assert "the second run did not finish" in lines[2]
    assert summary_lines([], []) == []
    assert summary_lines([_held("f", None)], []) == [
        "held against the published rows: nothing published for its 1 row(s)"
    ]
