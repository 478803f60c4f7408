"""Each row names the code that measured it: release, commit and whether the tree had changes,
from a checkout (git), a wheel (baked in by setup.py) and a copy without `.git` alike."""

from __future__ import annotations

import subprocess
import sys
import zipfile

import pytest

import dlbench
from dlbench.provenance import CodeIdentity, from_build_info, from_git, write_build_info
from tests.conftest import ROOT, read_rows, run_cli, tiny_run


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True).stdout


@pytest.mark.e2e
def test_a_cpu_run_row_names_the_commit_and_whether_the_tree_had_changes(csv_path):
    assert tiny_run(output=csv_path).returncode == 0
    [row] = read_rows(csv_path)
    assert row["dlbench"] == dlbench.__version__ == "0.2.0"
    assert row["dlbench_commit"] == _git("rev-parse", "HEAD").strip()
    assert row["dlbench_dirty"] == str(bool(_git("status", "--porcelain").strip()))


def test_version_names_the_release_and_the_commit():
    out = run_cli("--version")
    assert out.returncode == 0
    short = from_git(ROOT / "src" / "dlbench").short
    assert out.stdout.strip() == f"dlbench {dlbench.__version__} (commit {short})"


def test_a_wheel_carries_the_commit_it_was_built_from(tmp_path):
    """pip builds the wheel from the checkout; setup.py writes BUILD_INFO.json into it."""
    out = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp_path), str(ROOT)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    [wheel] = tmp_path.glob("dlbench-0.2.0-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        info = archive.read("dlbench/BUILD_INFO.json")
    (tmp_path / "BUILD_INFO.json").write_bytes(info)
    baked = from_build_info(tmp_path / "BUILD_INFO.json")
    assert baked == from_git(ROOT / "src" / "dlbench")


def test_a_tree_without_git_reads_the_build_record_and_says_unknown_without_one(tmp_path):
    written = CodeIdentity("a" * 40, True)
    write_build_info(tmp_path / "BUILD_INFO.json", written)
    assert from_build_info(tmp_path / "BUILD_INFO.json") == written
    assert written.short == "aaaaaaa+dirty"
    (tmp_path / "bad.json").write_text("{not json")
    assert from_build_info(tmp_path / "bad.json") is None
    assert from_build_info(tmp_path / "missing.json") is None
    assert from_git(tmp_path) is None  # no checkout here
    assert CodeIdentity().short == "unknown"


@pytest.mark.parametrize(
    ("identity", "needle"),
    [
        (CodeIdentity(), "unknown"),
        (CodeIdentity("07318f0" * 6, True), "differs from its commit 07318f0"),
        (CodeIdentity("07318f0" * 6, None), "may differ from its commit 07318f0"),
    ],
)
def test_a_reference_part_is_refused_from_code_that_names_no_single_commit(identity, needle):
    """The H200 part of issue 87 was first measured from a lent machine's copy that held the
    session's first .git: its rows named that commit, dirty. benchmarks/reference.sh refuses."""
    from dlbench.provenance import one_commit_problem

    assert needle in one_commit_problem(identity)
    assert one_commit_problem(CodeIdentity("b01362b" * 6, False)) == ""
