"""Bad input to the run itself: a batch-size search on the CPU, a batch that cannot be allocated, a
cache folder the environment points nowhere: one `error:` line and exit 2 (1 for a sweep with
failed points), no traceback, and the CSV it names keeps every earlier byte."""

from __future__ import annotations

import pytest

from dlbench.cli import run_command
from tests.analysis.rows import benchmark_row, write_rows
from tests.conftest import read_rows, refused, tiny_run

S = ["--accelerator", "cpu", "--model", "mobilenet_v3", "--batch-size", "2", "--width", "32"]
S += ["--height", "32", "--n-iters", "2", "--warmup-steps", "1"]


def test_batch_size_auto_on_a_cpu_is_refused_at_once(dlbench, kept):
    line = refused(dlbench("train", *S, "--batch-size", "auto", "--output", kept), "auto")
    assert "GPU" in line


def test_a_batch_the_host_cannot_allocate_is_an_oom_row_not_a_traceback(capsys, tmp_path):
    """The CPU allocator refuses with a plain RuntimeError, not OutOfMemoryError."""
    output = write_rows(tmp_path / "rows.csv", [benchmark_row()])
    [before] = read_rows(output)
    big = [*S, "--batch-size", "1000000000"]  # 600 TB of images: refused at once
    assert run_command(["infer", *big, "--output", str(output)]) == 3
    err = capsys.readouterr().err
    assert "Traceback" not in err and "does not fit; recorded as status=oom" in err
    earlier, oom = read_rows(output)  # the new row's columns join the header, values kept
    assert {k: earlier[k] for k in before} == before and oom["status"] == "oom"


@pytest.mark.e2e
def test_a_cache_path_the_environment_points_nowhere_is_one_line(tmp_path):
    """Torch creates its compile cache while Lightning imports; a path that cannot be made
    raised FileNotFoundError through every layer."""
    from tests.conftest import cli_env, run_cli

    env = {**cli_env(), "TORCHINDUCTOR_CACHE_DIR": "/proc/dlbench-cache"}
    result = tiny_run(output=tmp_path / "rows.csv", env=env)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip().splitlines() == [
        "error: FileNotFoundError: [Errno 2] No such file or directory: '/proc/dlbench-cache'"
    ]
    ascii_only = run_cli("train", "--help", env={**cli_env(), "PYTHONIOENCODING": "ascii"})
    assert ascii_only.returncode == 0 and "Traceback" not in ascii_only.stderr
