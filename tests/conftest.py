"""Shared test helpers: run the real CLI in a subprocess, read CSVs back."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--accelerator", "cpu", "--width", "32", "--height", "32", "--batch-size", "4"]


def cli_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
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


def read_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture
def csv_path(tmp_path: Path) -> Path:
    return tmp_path / "results" / "bench.csv"
