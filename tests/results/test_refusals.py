"""Bad input to where rows go: outputs that are no regular file, a disk that fills, text a
spreadsheet would run, a window too short to say its spread: one `error:` line and exit 2 (1 for
a sweep with failed points), no traceback, and the CSV it names keeps every earlier byte."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from dlbench.cli import run_command
from tests.analysis.rows import benchmark_row, write_rows
from tests.conftest import read_rows, refused, tiny_run

S = ["--accelerator", "cpu", "--model", "mobilenet_v3", "--batch-size", "2", "--width", "32"]
S += ["--height", "32", "--n-iters", "2", "--warmup-steps", "1"]


def test_an_output_that_is_a_folder_is_refused(dlbench, tmp_path):
    refused(dlbench("train", *S, "--output", tmp_path), "--output")


def test_an_output_through_a_symlink_writes_the_file_it_names(capsys, tmp_path):
    """A rewrite (a row with new columns) replaced the link with a new file, and the rows
    after it never reached the file the link named."""
    real = write_rows(tmp_path / "real.csv", [benchmark_row()])
    link = tmp_path / "link.csv"
    link.symlink_to(real.name)
    for _ in range(2):  # the first rewrites with the union of the columns, the second appends
        assert run_command(["train", *S, "--output", str(link)]) == 0
    capsys.readouterr()
    assert link.is_symlink() and len(read_rows(real)) == 3


def _special_files(folder: Path) -> list[Path]:
    """A named pipe (reading it waits for a writer forever), and as root a copy of /dev/null's
    node: never the machine's own, which an unfixed run would replace."""
    made = [folder / "pipe.csv"]
    os.mkfifo(made[0])
    if os.geteuid() == 0:
        made.append(folder / "null.csv")
        os.mknod(made[1], 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    return made


def test_an_output_that_is_not_a_regular_file_is_refused_and_left_as_it_was(tmp_path):
    """Root in a container once replaced /dev/null with the CSV (written beside, renamed over),
    and read /dev/full for a header until memory ran out; a pipe would hang the run."""
    for special in _special_files(tmp_path):
        before = os.stat(special)
        result = tiny_run(output=special, timeout=120)
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
        assert result.stderr.strip().splitlines() == [
            f"error: --output: {special} is not a regular file; name a .csv file"
        ]
        after = os.stat(special)
        assert (after.st_mode, after.st_rdev) == (before.st_mode, before.st_rdev)


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="Linux /proc")
@pytest.mark.parametrize("command", ["train", "sweep"])
def test_an_output_on_a_filesystem_that_takes_no_files_is_refused_at_once(dlbench, command):
    """os.access says yes to root on /proc and /sys; the lock file then retried for two minutes,
    and a sweep blamed another sweep. A real file in the folder is the test."""
    import time

    first = [*S] if command == "train" else ["quick"]
    began = time.monotonic()
    line = refused(dlbench(command, *first, "--output", "/proc/dlbench.csv"), "not writable")
    assert time.monotonic() - began < 30 and "another sweep" not in line


@pytest.mark.e2e
@pytest.mark.parametrize("earlier", ["same_columns", "fewer_columns"])
def test_a_disk_that_fills_during_the_append_leaves_no_half_row(tmp_path, earlier):
    """A full disk writes part of the row and then refuses: the run once exited 0 with half a
    row after the earlier ones. A file-size limit (RLIMIT_FSIZE, Python ignores SIGXFSZ) is
    the same refusal from the kernel, without a full disk."""
    import resource
    import subprocess
    import sys

    from tests.conftest import TINY, cli_env

    output = tmp_path / "rows.csv"
    args = ["train", "--model", "timm:test_resnet", *TINY, "--n-iters", "2", "--warmup-steps", "0"]
    if earlier == "same_columns":  # the row is appended in place
        assert tiny_run(output=output).returncode == 0
    else:  # the file is rewritten with the union of the columns
        write_rows(output, [benchmark_row()] * 3)
    before = output.read_bytes()

    def little_room() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (len(before) + 100, resource.RLIM_INFINITY))

    result = subprocess.run(
        [sys.executable, "-m", "dlbench", *args, "--output", str(output)],
        capture_output=True, text=True, timeout=240, env=cli_env(), preexec_fn=little_room,
    )  # fmt: skip
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: --output: cannot write") and "row was not written" in line
    assert output.read_bytes() == before


FORMULAS = {
    "note": '=HYPERLINK("http://x","y")',
    "branch": "+cmd|' /C calc'!A0",
    "title": "-2+3",
    "who": "@SUM(1+1)",
    "quoted": "'=already quoted",
}


def test_text_a_spreadsheet_would_run_is_written_as_text_and_read_back_as_given(dlbench, tmp_path):
    """CSV injection (OWASP): a cell that starts with = + - @ (or tab, CR) is a live formula
    when the CSV is opened in a spreadsheet; tags come from branch names and commit titles."""
    tags = [w for k, v in FORMULAS.items() for w in ("--tag", f"{k}={v}")]
    run = ["--run-id", "=1+1", "--tag", "number=-1.5", *tags]
    kept = write_rows(tmp_path / "shared.csv", [benchmark_row()])
    assert dlbench("train", *S, *run, "--output", kept)[0] == 0
    with kept.open(newline="") as f:
        import csv

        [*_, raw] = list(csv.DictReader(f))
    assert raw["note"] == "'" + FORMULAS["note"] and raw["run_id"] == "'=1+1"
    assert raw["quoted"] == "''=already quoted" and raw["number"] == "-1.5"
    for cell in raw.values():
        assert not cell.startswith(("=", "+", "@", "\t", "\r")), cell
        assert not cell.startswith("-") or cell.replace(".", "").lstrip("-").isdigit(), cell

    from dlbench.analysis.load import load_rows
    from dlbench.results.store import CsvStore

    [*_, stored] = CsvStore(kept).rows()
    loaded = load_rows([kept]).iloc[-1]
    for key, value in {**FORMULAS, "run_id": "=1+1"}.items():
        assert stored[key] == value and loaded[key] == value, key

    assert dlbench("report", kept, "-o", tmp_path / "report")[0] == 0
    assert dlbench("compare", kept, kept)[0] == 0


def test_a_window_too_short_for_a_spread_is_invalid_and_says_what_to_raise(dlbench, tmp_path):
    kept = tmp_path / "short.csv"
    code, out, _ = dlbench("train", *S, "--output", kept)  # S: 2 measured steps
    assert code == 0 and out.startswith("INVALID: 2 measured steps, under the 10")
    assert "--n-iters" in out.splitlines()[0]
    from dlbench.results.store import CsvStore

    row = CsvStore(kept).rows()[-1]
    assert row["verdict"] == "invalid" and "few_steps" in row["verdict_reasons"].split(";")
