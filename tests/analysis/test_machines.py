"""How machines compare (issue 44): the report answers first, per workload family, from rows of
one code; a pair of rows from different code is marked wherever it is shown, and a
configuration that moved between two versions of the code on one GPU is shown together."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from dlbench.analysis.machines import code_labels, workload_family, workload_name
from dlbench.analysis.pipeline import saturation_notes
from dlbench.analysis.report_rows import environment_notes
from dlbench.results.published import PACKAGED_DIR
from tests.analysis.rows import benchmark_row, write_rows
from tests.conftest import run_cli

OLD, NEW = "a" * 40, "b" * 40


def _report(tmp_path: Path, *csvs: Path, extra: tuple[str, ...] = ()) -> str:
    out = run_cli("report", *csvs, "-o", tmp_path / "report", "--baseline", "H100", *extra)
    assert out.returncode == 0, out.stderr
    assert "Warning" not in out.stderr, out.stderr  # pandas' (a frame of many blocks) included
    return (tmp_path / "report" / "report.md").read_text()


def _section(markdown: str, title: str) -> str:
    return markdown.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_the_report_on_the_reference_opens_with_the_h200_against_the_h100_per_family(tmp_path):
    """Per family, whether one commit measured both GPUs' references or two did (the H100's
    regenerated, the H200's not): then every family's line says the code differs."""
    import pandas as pd

    csvs = sorted(PACKAGED_DIR.glob("default-*.csv"))
    markdown = _report(tmp_path, *csvs)
    assert markdown.split("\n## ")[1].startswith("How these machines compare")
    summary = _section(markdown, "How these machines compare")
    runs = markdown.rstrip().split("\n## ")[-1]
    assert runs.startswith("Runs")  # the raw rows last
    # the spread the console and the verdict read: the robust one, not the standard deviation
    assert "step spread % (robust)" in runs and "| spread %" not in runs
    commits = {c for csv in csvs for c in pd.read_csv(csv, dtype=str)["dlbench_commit"]}
    lines = [x.split("|") for x in summary.splitlines() if x.startswith("| NVIDIA H200")]
    expected = ["CNN training", "CNN inference", "transformers", "LLM training", "LLM decode",
                "batch-1 latency"]  # fmt: skip
    assert [line[2].strip() for line in lines] == expected
    assert "Left out" not in summary  # every pair is shown, of one code or of two
    # where two commits measured the two GPUs' references, the comparison says the code differs
    code = "differs" if len(commits) > 1 else "same"
    assert {line[-2].strip() for line in lines} == {code}
    assert ("differ in code" in summary) == (len(commits) > 1)


def test_the_example_report_of_every_single_gpu_part_warns_of_nothing(tmp_path):
    """benchmarks/example_report.sh's files: frames read from many CSVs are one block a dtype."""
    csvs = [c for c in sorted(PACKAGED_DIR.glob("*.csv")) if not c.name.startswith("multi-")]
    assert "## " in _report(tmp_path, *csvs)


def _row(code: str, rate: float, gpu: str = "NVIDIA H100 80GB HBM3", **more) -> dict:
    return benchmark_row(dlbench="0.2.0", dlbench_commit=code, dlbench_dirty=False,
                         samples_per_s=rate, gpu_name=gpu, verdict="valid", **more)  # fmt: skip


@pytest.mark.e2e
def test_a_pair_of_rows_from_different_code_is_marked_and_a_move_by_the_code_shown(tmp_path):
    before = write_rows(tmp_path / "before.csv", [_row(OLD, 1000.0), _row(OLD, 1300.0, "B")])
    after = write_rows(tmp_path / "after.csv", [_row(NEW, 1400.0), _row(NEW, 1820.0, "B")])
    h200 = write_rows(tmp_path / "h200.csv", [_row(NEW, 1500.0, "NVIDIA H200")])
    markdown = _report(tmp_path, before, h200)
    pair = _section(markdown, "Speed-up against the baseline, pair by pair")
    line = next(row for row in pair.splitlines() if "NVIDIA H200" in row)
    assert "0.2.0 bbbbbbb vs 0.2.0 aaaaaaa" in line
    assert "different code" in _section(markdown, "How these machines compare")

    markdown = _report(tmp_path, before, after)
    moved = _section(markdown, "Moved by the code, not the GPU")
    assert "aaaaaaa" in moved and "bbbbbbb" in moved and "40.0" in moved

    markdown = _report(tmp_path, before, h200, extra=("--same-code",))
    assert "NVIDIA H200" not in _section(markdown, "Speed-up against the baseline, pair by pair")


def test_a_speedup_inside_the_spread_of_repeated_rows_is_said_to_be_within_noise(tmp_path):
    h100 = [_row(NEW, r, run_id=f"a{i}") for i, r in enumerate((1000.0, 1080.0, 1040.0))]
    h200 = [_row(NEW, r, "NVIDIA H200", run_id=f"b{i}") for i, r in enumerate((1050.0, 1060.0))]
    markdown = _report(tmp_path, write_rows(tmp_path / "rows.csv", h100 + h200))
    pair = _section(markdown, "Speed-up against the baseline, pair by pair")
    assert "(within noise)" in pair
    assert "1 of 1" in _section(markdown, "How these machines compare")


def test_compare_notes_other_code_and_same_code_leaves_the_pair_out(tmp_path):
    base = write_rows(tmp_path / "base.csv", [_row(OLD, 1000.0)])
    cand = write_rows(tmp_path / "cand.csv", [_row(NEW, 700.0)])
    out = run_cli("compare", base, cand, "--markdown")
    assert out.returncode == 1 and "code 0.2.0 aaaaaaa -> 0.2.0 bbbbbbb" in out.stdout
    out = run_cli("compare", base, cand, "--same-code", "--markdown")
    assert out.returncode == 0, out.stdout
    assert "other code" in out.stdout and "left out: measured by other code" in out.stdout


def test_each_row_names_its_code_and_its_workload_family():
    rows = pd.DataFrame([
        {"dlbench": "0.2.0", "dlbench_commit": OLD, "dlbench_dirty": "True"},
        {"dlbench": "0.1.0", "dlbench_commit": "", "dlbench_dirty": ""},
    ])  # fmt: skip
    assert code_labels(rows).tolist() == ["0.2.0 aaaaaaa+dirty", "0.1.0 (commit unknown)"]
    cases = [
        ({"model": "resnet50", "mode": "train", "family": "vision"}, "CNN training"),
        ({"model": "resnet50", "mode": "infer", "family": "vision"}, "CNN inference"),
        ({"model": "vit", "mode": "train", "family": "vision", "attention_backend": "flash"},
         "transformers"),
        ({"model": "distilbert", "mode": "infer", "family": "text"}, "transformers"),
        ({"model": "llm_1b", "mode": "train", "family": "llm"}, "LLM training"),
        ({"model": "llm_1b", "mode": "infer", "family": "llm", "batch_size": 1}, "LLM decode"),
        ({"model": "vit", "mode": "infer", "family": "vision", "batch_size": 1},
         "batch-1 latency"),
    ]  # fmt: skip
    for row, family in cases:
        assert workload_family(pd.Series(row)) == family, row


def test_a_batch_read_back_as_a_float_is_named_as_the_count_it_is():
    """A column with a gap reads back as floats (256.0): a workload's name and the input
    pipeline's note still say bs256."""
    row = pd.Series(benchmark_row(batch_size=256.0, width=224.0, height=224.0))
    assert " bs256 " in f"{workload_name(row)} " and "256.0" not in workload_name(row)
    table = pd.DataFrame(
        {
            "data": ["folder:/d"] * 2, "model": ["resnet50"] * 2, "batch_size": [256.0, 256.0],
            "decode": ["cpu"] * 2, "workers": [4.0, 8.0], "loader": [2500.0, 4800.0],
            "model (synthetic)": [4000.0] * 2, "training": [2400.0, 3900.0],
            "training can get": [2500.0, 4000.0],
        }
    )  # fmt: skip
    note = saturation_notes(table)
    assert "for resnet50 bs256:" in note and "keeps up from 8 workers" in note, note


def test_a_count_the_machines_differ_in_is_written_as_a_count():
    runs = pd.DataFrame(
        {"machine": ["H100", "H100", "H200"], "cpu_count": [16.0, 32.0, 1.0], "torch": ["2.11"] * 3}
    )
    assert environment_notes(runs, "H100") == "H200 vs H100 differ in cpu_count: 16, 32 vs 1"
