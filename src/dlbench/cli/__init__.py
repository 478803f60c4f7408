"""The command line: one module per group of typer commands, all on one app (the order of the
imports is the order of `dlbench --help`)."""

from __future__ import annotations

# isort: off
from dlbench.cli import bench, sweeps, peak, serve, data, models, analysis, gate  # noqa: F401  (they register)

# isort: on
from dlbench.cli.app import app, main, run_command

__all__ = ["app", "main", "run_command"]
