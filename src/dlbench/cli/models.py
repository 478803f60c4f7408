"""`dlbench models`: list the workload registry."""

from __future__ import annotations

from typing import Annotated

import typer

from dlbench.cli.app import app


@app.command("models", help="List workloads: parameters, input, what a sample is.")
def models(
    pattern: Annotated[
        str, typer.Argument(help="Wildcard, e.g. '*vit*' (a bare word: names holding it).")
    ] = "*",
    params: Annotated[
        bool, typer.Option(help="Count parameters (each model built on the meta device).")
    ] = True,
) -> None:
    from dlbench.cli.workloads_table import show_workloads

    show_workloads(pattern, count_params=params)
