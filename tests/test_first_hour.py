"""A new user's first hour (issue 96): every console that prints a figure says first whether to
trust it, naming the check that failed and what to do; the report takes the published folder as
it ships; small things a first run meets."""

from __future__ import annotations

import pytest

from dlbench.results.published import PACKAGED_DIR
from tests.conftest import TINY, read_rows, run_cli

FEW_STEPS = """name: few
runs:
  - models: [steady]
    modes: [infer]
    batch_sizes: [2]
    fixed: {accelerator: cpu, n_iters: 2, warmup_steps: 0}
"""


@pytest.mark.e2e
def test_a_sweep_prints_each_points_verdict_beside_its_figure_and_what_to_do(tmp_path):
    plan = tmp_path / "plan.yaml"
    plan.write_text(FEW_STEPS)
    out = tmp_path / "rows.csv"
    done = run_cli("sweep", plan, "--output", out, "--no-recheck", timeout=300)
    assert done.returncode == 4, done.stderr  # its only point invalid: said last, exit 4
    assert "every point measured (1) is INVALID" in done.stderr.strip().splitlines()[-1]
    [row] = read_rows(out)
    assert row["verdict"] == "invalid" and "few_steps" in row["verdict_reasons"]
    said = " ".join((done.stdout + done.stderr).split())
    assert "INVALID (few_steps" in said  # the point's line and the summary's verdict column
    assert "1 invalid" in said
    assert "2 measured steps, under the" in said and "raise --n-iters or --min-time" in said


@pytest.mark.e2e
def test_validate_prints_its_verdict_first(tmp_path):
    out = tmp_path / "rows.csv"
    done = run_cli("validate", "--model", "timm:test_resnet", *TINY, "--n-iters", "2",
                   "--warmup-steps", "0", "--repeats", "1", "--output", out)  # fmt: skip
    assert done.returncode == 0, done.stderr
    first = done.stdout.strip().splitlines()[0]
    assert first.startswith(("VALID", "INVALID: ")), done.stdout
    assert read_rows(out)[0]["verdict"] in ("valid", "invalid")


@pytest.mark.e2e
def test_the_report_takes_the_published_folder_as_it_ships(tmp_path):
    files = sorted(PACKAGED_DIR.glob("*.csv"))
    done = run_cli("report", *files, "--out", tmp_path / "report", timeout=300)
    assert done.returncode == 0, done.stderr
    notes = [line for line in done.stderr.splitlines() if line.startswith("note: skipped")]
    assert len(notes) == 1 and notes[0].count("multi-bare-ddp") == 2  # each named once
    assert (tmp_path / "report" / "report.html").is_file()


def test_models_takes_a_bare_word_and_says_when_nothing_matches(dlbench):
    code, found, _ = dlbench("models", "llm", "--no-params")
    assert code == 0 and "llm_1b" in found
    code, none, _ = dlbench("models", "*nothing*", "--no-params")
    assert code == 0 and "no workload matches '*nothing*'" in none


def test_the_console_header_says_which_figure_is_the_precision():
    from dlbench.console import result_table
    from tests.analysis.rows import benchmark_row

    table = result_table({**benchmark_row(precision="32"), "warmup_steps": 1, "accelerator": "cpu"})
    assert "precision 32 · batch 64" in str(table.title)


def test_the_loader_alone_prints_each_rows_verdict_beside_its_figure(dlbench, tmp_path):
    """`dlbench data` printed its rates and no verdict (issue 96: every console that prints a
    figure says whether to trust it): each worker count's line, and the table."""
    images = tmp_path / "set"
    assert dlbench("make-data", images, "--images", "8", "--size", "40x32")[0] == 0
    out = tmp_path / "loader.csv"
    code, printed, err = dlbench("data", images / "images", "--model", "timm:test_resnet",
                                 "--batch-size", "2", "--workers", "0", "--min-time", "0.2",
                                 "--output", out)  # fmt: skip
    assert code == 0, err
    [row] = read_rows(out)
    reasons = [r for r in row["verdict_reasons"].split(";") if r]
    said = f"INVALID ({', '.join(reasons)})" if reasons else "valid"
    [line] = [x for x in printed.splitlines() if x.startswith("workers")]
    assert line.rstrip().endswith(f", {said}"), line
    table = printed.split("loader alone", 1)[1]
    assert "verdict" in table and said.split(" ")[0] in table
