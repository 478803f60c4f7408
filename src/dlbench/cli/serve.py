"""`dlbench serve`: a model under load through a dynamic batcher, MLPerf's scenarios."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dlbench.cli.app import app
from dlbench.cli.options import Output
from dlbench.serve.settings import ServeSettings

DEFAULTS = ServeSettings()  # each default stated once, in ServeSettings


@app.command(
    "serve",
    help="A model served under load (vision models, DistilBERT): single-stream, server (Poisson "
    "arrivals at --qps, or --find-qps: the highest rate whose p99 meets --slo-p99-ms) or "
    "offline, through a dynamic batcher; latency from each query's scheduled arrival.",
)
def serve(
    ctx: typer.Context,
    model: Annotated[str, typer.Option(help="Workload name (dlbench models).")] = DEFAULTS.model,
    scenario: Annotated[
        str, typer.Option(help="single-stream, server or offline.")
    ] = DEFAULTS.scenario,
    qps: Annotated[float | None, typer.Option(help="Server: queries a second.")] = None,
    find_qps: Annotated[
        bool, typer.Option("--find-qps", help="Server: search the highest rate within the bound.")
    ] = DEFAULTS.find_qps,
    max_batch: Annotated[int, typer.Option(help="The batcher's largest batch.")] = (
        DEFAULTS.max_batch
    ),
    batch_timeout_ms: Annotated[
        float, typer.Option(help="How long the batcher holds its oldest query.")
    ] = DEFAULTS.batch_timeout_ms,
    slo_p99_ms: Annotated[
        float | None, typer.Option(help="p99 bound (default MLPerf's: 15 vision, 130 text).")
    ] = None,
    queries: Annotated[int, typer.Option(help="Least queries a load answers.")] = (
        DEFAULTS.queries
    ),
    min_duration: Annotated[
        float, typer.Option(help="Least seconds a server load lasts.")
    ] = DEFAULTS.min_duration,
    search_budget: Annotated[
        float, typer.Option(help="Seconds --find-qps may spend.")
    ] = DEFAULTS.search_budget,
    precision: Annotated[str, typer.Option(help="32, bf16-true, 16-true, bf16-mixed ...")] = (
        DEFAULTS.precision
    ),
    accelerator: Annotated[str, typer.Option(help="auto, gpu or cpu.")] = DEFAULTS.accelerator,
    compile: Annotated[
        bool, typer.Option(help="torch.compile the model (each bucket).")
    ] = DEFAULTS.compile,
    cuda_graphs: Annotated[
        bool, typer.Option(help="Replay each bucket as a CUDA graph (on a GPU).")
    ] = DEFAULTS.cuda_graphs,
    channels_last: Annotated[
        bool, typer.Option(help="Image models in channels_last, as their inference rows run.")
    ] = DEFAULTS.channels_last,
    width: Annotated[int | None, typer.Option(help="Image width.")] = None,
    height: Annotated[int | None, typer.Option(help="Image height.")] = None,
    seq_len: Annotated[int, typer.Option(help="Text: tokens a query.")] = DEFAULTS.seq_len,
    seed: Annotated[int, typer.Option(help="Arrivals' and inputs' seed.")] = DEFAULTS.seed,
    tag: Annotated[list[str] | None, typer.Option(help="KEY=VALUE recorded as a column.")] = None,
    run_id: Annotated[str | None, typer.Option(hidden=True)] = None,  # a sweep's
    output: Output = str(DEFAULTS.output),
) -> None:
    from dlbench.serve.run import execute_serve, show_serve

    given = dict(ctx.params)  # every option above, by ServeSettings' field names
    given["tags"] = tuple(given.pop("tag") or ())
    given["output"] = Path(given["output"])
    settings = ServeSettings(**given)
    show_serve(execute_serve(settings))  # which checks every setting before it builds anything
