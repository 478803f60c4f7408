"""`--processes N`: a run measured in N fresh processes forked one after another, one row for
them all; a process that dies or does not fit ends the run with one row and one line (real
processes, the CPU)."""

from __future__ import annotations

import pytest

from tests.conftest import read_rows, run_cli

TINY = ("--accelerator", "cpu", "--n-iters", "20", "--warmup-steps", "1")


@pytest.mark.e2e
def test_a_run_in_three_processes_writes_one_row_of_the_median_process(tmp_path):
    out = tmp_path / "rows.csv"
    done = run_cli(
        "infer",
        "--model",
        "steady",
        "--batch-size",
        "2",
        *TINY,
        "--processes",
        "3",
        "--output",
        out,
    )
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stderr.splitlines() if line.startswith("process ")]
    assert [line.split(":")[0] for line in said] == [f"process {k} of 3" for k in (1, 2, 3)]
    [row] = read_rows(out)
    assert row["status"] == "ok" and row["processes"] == "3"
    assert 0 <= float(row["process_spread_pct"]) < 50  # 20 ms sleeps in each process
    assert float(row["step_time_median_ms"]) == pytest.approx(20, rel=0.5)
    # its own start: from its fork, not the command's (imports) nor the processes before it
    assert float(row["startup_s"]) < 2.0
    alone = run_cli("infer", "--model", "steady", "--batch-size", "2", *TINY, "--output", out)
    assert alone.returncode == 0, alone.stderr
    assert read_rows(out)[1]["processes"] == "1"  # every row says how many


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("model", "status", "code"), [("fault_crash", "error", 1), ("fault_oom", "oom", 3)]
)
def test_a_process_that_fails_ends_the_run_with_one_row_and_one_line(tmp_path, model, status, code):
    out = tmp_path / "rows.csv"
    failed = run_cli(
        "train",
        "--model",
        model,
        "--batch-size",
        "32",
        *TINY,
        "--processes",
        "3",
        "--output",
        out,
        env=None,
    )
    assert failed.returncode == code, failed.stderr
    assert "Traceback" not in failed.stderr
    [row] = read_rows(out)
    assert row["status"] == status and row["run_id"]
    if status == "error":
        assert "killed by SIGKILL" in row["error"]
        assert failed.stderr.strip().splitlines()[-1].startswith("error: process 1 of 3")
