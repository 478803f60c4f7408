"""`dlbench serve`: a model under MLPerf's LoadGen through a dynamic batcher, MLPerf's scenarios;
every option is a serve setting as declared in ServeSettings (its default, help and names)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dlbench.cli.app import app
from dlbench.cli.options import options_of
from dlbench.serve.settings import SERVE_SETTINGS, ServeSettings


@app.command(
    "serve",
    help="A model served under MLPerf's LoadGen: single-stream, server (Poisson arrivals at "
    "--qps, or --find-qps: the highest rate LoadGen calls VALID under its bounds) or offline; "
    "vision models and DistilBERT through a dynamic batcher (a p99 bound), decoder LLMs token "
    "by token, continuously batched (time to first token and per output token); the row says "
    "what LoadGen says.",
)
@options_of(SERVE_SETTINGS)
def serve(flags: dict[str, Any]) -> None:
    from dlbench.serve.run import execute_serve
    from dlbench.serve.summary import show_frontier, show_serve

    settings = ServeSettings(
        **{**flags, "tags": tuple(flags["tags"] or ()), "output": Path(flags["output"])}
    )
    rows = execute_serve(settings, lambda row: show_serve(row, settings.output))
    if len(rows) > 1:
        show_frontier(rows)
