"""The README says what the code does: same test command as CI, every column, real numbers,
and its quick-start benchmark runs."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from dlbench.results.published import PACKAGED_DIR
from dlbench.results.schema import COLUMNS, columns_markdown
from tests.conftest import ROOT, read_rows, run_cli

README = (ROOT / "README.md").read_text()


def _code_after(heading: str) -> str:
    """The first fenced bash block after a line containing `heading`."""
    start = README.index(heading)
    return re.search(r"```bash\n(.*?)\n```", README[start:], re.S).group(1).strip()


def test_ci_runs_exactly_the_readme_test_command():
    ci_lines = [
        line for line in (ROOT / ".ci" / "run").read_text().splitlines() if "pytest" in line
    ]
    assert ci_lines == [_code_after("Run the tests")]


@pytest.mark.e2e
def test_quick_start_installs_with_the_pinned_torch_and_runs_a_real_cpu_benchmark(tmp_path):
    command = _code_after("Try it on a CPU")
    assert "-c constraints.txt" in command and "--accelerator cpu" in command
    dlbench = shlex.split(command.split("&&")[-1])
    assert dlbench[0].endswith("/dlbench")
    out = run_cli(*dlbench[1:], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    [row] = read_rows(tmp_path / "results" / "benchmark.csv")
    assert row["model"] == "mobilenet_v3" and float(row["images_per_s"]) > 0
    # only the host may make the row invalid (the suite's other workers share it): its load
    # (host_busy), or noise beyond a CPU's limit
    reasons = set(row["verdict_reasons"].split(";"))
    assert reasons <= {"", "noisy", "host_busy"}, row["verdict_reasons"]


def test_the_column_reference_is_generated_from_the_schema_and_current():
    reference = (ROOT / "docs" / "columns.md").read_text()
    assert reference == columns_markdown(), (
        "run: python -m dlbench.results.schema > docs/columns.md"
    )
    assert all(f"`{c}`" in reference for c in COLUMNS)
    assert "docs/columns.md" in README


def test_reference_table_numbers_come_from_the_committed_csvs():
    """The front page's table is the generator's output for the committed CSVs, verbatim: a
    stale table (a CSV regenerated, the README not) fails here."""
    out = subprocess.run(
        [sys.executable, "benchmarks/readme_table.py"],
        capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": "src"},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    single, rest = out.stdout.strip().split("\n\n**", 1)  # "Several GPUs" and FP8 follow
    multi, fp8 = rest.split("\n\n| model | mode | batch | unit |", 1)
    block = re.search(r"<!-- generated: [^>]*-->\n(.*?)\n<!-- end generated -->", README, re.S)
    assert block and block.group(1) == single
    assert single.count("\n| ") == 27  # the plan's 27 points under the header
    several = re.search(
        r"<!-- generated multi: [^>]*-->\n(.*?)\n<!-- end generated multi -->", README, re.S
    )
    assert several and several.group(1) == "**" + multi
    eight = re.search(
        r"<!-- generated fp8: [^>]*-->\n(.*?)\n<!-- end generated fp8 -->", README, re.S
    )
    assert eight and eight.group(1) == "| model | mode | batch | unit |" + fp8
    assert "| llm_1b | train | 4 | token |" in fp8


def test_the_front_page_shows_each_points_own_row_not_a_recheck_of_it(tmp_path):
    """A sweep that measured a point again keeps both rows; the table shows the plan's row,
    where the plan put it."""
    import pandas as pd

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from readme_table import table

    from tests.analysis.rows import write_rows

    rows = pd.read_csv(PACKAGED_DIR / "default-pt2.11-cu13.0-h200.csv", dtype=str)
    first, second = rows.head(2).to_dict("records")
    again = {**first, "run_id": "again", "samples_per_s": "1.0", "recheck_of": first["run_id"]}
    write_rows(tmp_path / "part.csv", [first, second, again])
    lines = [line for line in table([tmp_path / "part.csv"]).splitlines() if line.startswith("| ")]
    assert len(lines) == 3  # the header and the two points
    assert f"{float(first['samples_per_s']):,.1f}" in lines[1] and "| 1.0 |" not in lines[1]


def test_the_sharding_table_is_the_generators_output_for_the_committed_csvs():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from multi_table import fsdp_table

    text = (ROOT / "docs" / "sharding.md").read_text()
    block = re.search(
        r"<!-- generated fsdp: [^>]*-->\n(.*?)\n<!-- end generated fsdp -->", text, re.S
    )
    assert block and block.group(1) == fsdp_table()
    assert "| llm_8b | 8,192 |" in block.group(1)


def test_every_several_gpu_host_is_in_the_reference_and_the_first_on_the_front_page():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from multi_table import every_host_block, hosts

    text = (ROOT / "docs" / "reference.md").read_text()
    block = re.search(
        r"<!-- generated multi: [^>]*-->\n(.*?)\n<!-- end generated multi -->", text, re.S
    )
    assert block and block.group(1) == every_host_block()
    assert all(f"(`{host}`)" in block.group(1) for host in hosts())
    assert f"(`{hosts()[0]}`)" in README and "h100" in hosts()[0]


def test_every_reference_csv_was_measured_by_one_commit_per_command():
    """One reference, one commit: every row of a part's CSV names one clean commit (a GPU's
    single-GPU parts, or each host's several-GPU files together: `reference.sh multi`), and
    docs/reference.md names each such commit."""
    import pandas as pd

    csvs = sorted(PACKAGED_DIR.glob("*.csv"))
    assert {c.name.split("-pt")[0] for c in csvs} >= {"default", "decode", "jpeg", "validate"}

    def command(csv: Path) -> str:  # a host's several-GPU files are one command
        machine = csv.name.split("-pt", 1)[1].removesuffix(".csv").removesuffix(".per_rank")
        return machine if csv.name.startswith("multi-") else csv.name.split("-pt")[0] + machine

    for name in sorted({command(c) for c in csvs}):
        part = [c for c in csvs if command(c) == name]
        rows = [r for c in part for r in pd.read_csv(c, dtype=str).to_dict("records")]
        rows = [r for r in rows if r.get("run_kind") not in (None, "scaling", "per_rank")]
        commits = {(r["dlbench"], r["dlbench_commit"], str(r["dlbench_dirty"])) for r in rows}
        assert len(commits) == 1 and len(next(iter(commits))[1]) == 40, (name, commits)
        assert next(iter(commits))[2] == "False"
        assert next(iter(commits))[1][:7] in (ROOT / "docs" / "reference.md").read_text()
    gpus = {r for c in csvs for r in pd.read_csv(c)["gpu_name"].dropna()}
    assert gpus == {"NVIDIA H100 80GB HBM3", "NVIDIA H200"}


def test_the_readme_is_a_front_page_whose_links_resolve():
    assert len(README.encode()) <= 12_000
    # a reference a reader finishes: the README's table and the CHANGELOG hold the figures
    assert len((ROOT / "docs" / "reference.md").read_bytes()) <= 16 * 1024
    links = re.findall(r"\]\(((?:docs|benchmarks)/[^)#]+)\)", README)
    assert links and all((ROOT / link).exists() for link in links), links


def test_the_fp8_table_shows_each_recipes_row_beside_the_bf16_one(tmp_path):
    """Generation with the output head in float8 too is a row of its own, named so, paired
    with the same bf16 row as the default recipe's."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from fp8_table import fp8_table

    from tests.analysis.rows import benchmark_row, write_rows

    point = {"model": "llm_1b", "mode": "infer", "batch_size": 1}
    rows = [
        benchmark_row(**point, precision="bf16-true", decode_tokens_per_s=1000.0),
        benchmark_row(**point, precision="fp8", fp8_recipe="rowwise_dynamic",
                      decode_tokens_per_s=1480.0),
        benchmark_row(**point, precision="fp8", fp8_recipe="rowwise_dynamic_with_head",
                      decode_tokens_per_s=1700.0),
    ]  # fmt: skip
    table = fp8_table(write_rows(tmp_path / "fp8-x.csv", rows))
    lines = [line for line in table.splitlines() if line.startswith("| llm_1b")]
    assert [line.split(" | ")[:1] + line.split(" | ")[4:7] for line in lines] == [
        ["| llm_1b", "1,000.0", "1,480.0", "1.48"],
        ["| llm_1b (head fp8)", "1,000.0", "1,700.0", "1.70"],
    ]
