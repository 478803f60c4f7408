"""Shared test helpers: run the real CLI in a subprocess, read CSVs back."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.processes import children, command_line, running

ROOT = Path(__file__).resolve().parents[1]
# The tests' fakes reach dlbench through its plugin hook: an entry-point distribution here.
PLUGINS = ROOT / "tests" / "plugins"
sys.path.insert(0, str(PLUGINS))
TINY = ["--accelerator", "cpu", "--width", "32", "--height", "32", "--batch-size", "4"]


def cli_env() -> dict[str, str]:
    env = dict(os.environ)
    paths = [ROOT / "src", ROOT, PLUGINS]
    env["PYTHONPATH"] = os.pathsep.join([*map(str, paths), env.get("PYTHONPATH", "")])
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def run_cli(
    *args: str | Path,
    timeout: float = 240,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess:
    """`python -m dlbench ARGS` in a fresh process, as a user would run it."""
    return subprocess.run(
        [sys.executable, "-m", "dlbench", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env or cli_env(),
        cwd=cwd,
    )


def tiny_run(
    *args: str | Path, mode: str = "train", output: Path | None = None, **kwargs
) -> subprocess.CompletedProcess:
    """The run most CLI tests need: the tiny timm model on the CPU at 32x32, two measured steps,
    no warm-up, into `output`; later flags in `args` win over these."""
    base = [mode, "--model", "timm:test_resnet", *TINY, "--n-iters", "2", "--warmup-steps", "0"]
    return run_cli(*base, *(["--output", output] if output else []), *args, **kwargs)


def read_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture
def csv_path(tmp_path: Path) -> Path:
    return tmp_path / "results" / "bench.csv"


@pytest.fixture(autouse=True)
def _fresh_gpu_baselines(tmp_path_factory, monkeypatch):
    """Each test measures its (fake) GPU's idle power and counter period itself: the process
    keeps them per GPU, and pytest runs many tests in one process; and each test has a cache
    folder of its own (the user's is never touched, and the fake GPUs of one test, which share
    UUIDs with every other's, leave it no facts)."""
    from dlbench.caches import CACHE_VARIABLE
    from dlbench.telemetry.gpu_facts import PROCESS_GPU_FACTS

    PROCESS_GPU_FACTS.counter_periods.clear()
    PROCESS_GPU_FACTS.idle_baselines.clear()
    monkeypatch.setenv(CACHE_VARIABLE, str(tmp_path_factory.mktemp("cache")))


@pytest.fixture
def kept(tmp_path: Path) -> Path:
    """A results CSV with one earlier row that no failed command may touch."""
    from tests.analysis.rows import benchmark_row, write_rows

    return write_rows(tmp_path / "kept.csv", [benchmark_row()])


@pytest.fixture
def dlbench(capsys, kept: Path):
    """Run a command line in this process; check the CSV `kept` afterwards."""
    before = kept.read_bytes()

    from dlbench.cli import run_command

    def call(*args: object) -> tuple[int, str, str]:
        before_children = live_children()
        code = run_command([str(a) for a in args])
        out, err = capsys.readouterr()
        assert kept.read_bytes() == before, "an earlier row was damaged"
        left = {pid: command_line(pid) for pid in live_children() - before_children}
        assert not left, f"the command left processes running: {left}"
        return code, out, err

    return call


def live_children() -> set[int]:
    """This process's children that have not ended."""
    return {child for child in children(os.getpid()) if running(child)}


def refused(result: tuple[int, str, str], *needles: str, code: int = 2) -> str:
    """The command exited `code` with exactly one `error:` line that names each needle."""
    got, _, err = result
    lines = [line for line in err.splitlines() if line.strip()]
    assert got == code, err
    assert "Traceback" not in err
    assert len(lines) == 1 and lines[0].startswith("error:"), err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def pytest_xdist_auto_num_workers(config) -> int | None:
    """`-n auto` over the GPU tests alone (tests/gpu) runs one worker: they share one GPU, and
    a worker per core compiles and captures at once, for minutes, before any test reports."""
    paths = [str(a) for a in config.args]
    if paths and all("tests/gpu" in p for p in paths):
        return 1
    return None
