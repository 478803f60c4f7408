"""`dlbench serve`: a model under load through a dynamic batcher, MLPerf's scenarios."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dlbench.cli.app import app
from dlbench.cli.options import Output
from dlbench.config.fields import ACCELERATORS, DEFAULT_OUTPUT
from dlbench.config.sections import check_count
from dlbench.errors import check_finite, check_seconds, invalid

# what a load may ask for: more is a typo, and a rate times a duration is a list of arrivals
MAX_QPS = 1e6
MAX_QUERIES = 10**7
MAX_SERVE_BATCH = 4096
MAX_SLO_MS = 60_000.0
DEFAULT_QUERIES = 1024
DEFAULT_MIN_DURATION_S = 10.0
DEFAULT_SEARCH_BUDGET_S = 240.0


@app.command(
    "serve",
    help="A model served under load (vision models, DistilBERT): single-stream, server (Poisson "
    "arrivals at --qps, or --find-qps: the highest rate whose p99 meets --slo-p99-ms) or "
    "offline, through a dynamic batcher; latency from each query's scheduled arrival.",
)
def serve(
    model: Annotated[str, typer.Option(help="Workload name (dlbench models).")] = "resnet50",
    scenario: Annotated[str, typer.Option(help="single-stream, server or offline.")] = "server",
    qps: Annotated[float | None, typer.Option(help="Server: queries a second.")] = None,
    find_qps: Annotated[
        bool, typer.Option("--find-qps", help="Server: search the highest rate within the bound.")
    ] = False,
    max_batch: Annotated[int, typer.Option(help="The batcher's largest batch.")] = 64,
    batch_timeout_ms: Annotated[
        float, typer.Option(help="How long the batcher holds its oldest query.")
    ] = 2.0,
    slo_p99_ms: Annotated[
        float | None, typer.Option(help="p99 bound (default MLPerf's: 15 vision, 130 text).")
    ] = None,
    queries: Annotated[int, typer.Option(help="Least queries a load answers.")] = DEFAULT_QUERIES,
    min_duration: Annotated[
        float, typer.Option(help="Least seconds a server load lasts.")
    ] = DEFAULT_MIN_DURATION_S,
    search_budget: Annotated[
        float, typer.Option(help="Seconds --find-qps may spend.")
    ] = DEFAULT_SEARCH_BUDGET_S,
    precision: Annotated[str, typer.Option(help="32, bf16-true, 16-true, bf16-mixed ...")] = (
        "bf16-true"
    ),
    accelerator: Annotated[str, typer.Option(help="auto, gpu or cpu.")] = "auto",
    compile: Annotated[bool, typer.Option(help="torch.compile the model (each bucket).")] = True,
    cuda_graphs: Annotated[
        bool, typer.Option(help="Replay each bucket as a CUDA graph (on a GPU).")
    ] = True,
    channels_last: Annotated[
        bool, typer.Option(help="Image models in channels_last, as their inference rows run.")
    ] = True,
    width: Annotated[int | None, typer.Option(help="Image width.")] = None,
    height: Annotated[int | None, typer.Option(help="Image height.")] = None,
    seq_len: Annotated[int, typer.Option(help="Text: tokens a query.")] = 128,
    seed: Annotated[int, typer.Option(help="Arrivals' and inputs' seed.")] = 0,
    output: Output = DEFAULT_OUTPUT,
) -> None:
    from dlbench.config.fields import PRECISIONS
    from dlbench.serve.run import ServeSettings, execute_serve, show_serve

    if accelerator not in ACCELERATORS:
        raise invalid("--accelerator", accelerator, f"allowed: {', '.join(ACCELERATORS)}")
    if precision not in PRECISIONS:
        raise invalid("--precision", precision, f"allowed: {', '.join(PRECISIONS)}")
    check_count("--max-batch", max_batch, MAX_SERVE_BATCH)
    check_count("--queries", queries, MAX_QUERIES)
    check_count("--seq-len", seq_len)
    _in_range("--qps", qps, 0.0, MAX_QPS)
    _in_range("--slo-p99-ms", slo_p99_ms, 0.0, MAX_SLO_MS)
    _in_range("--batch-timeout-ms", batch_timeout_ms, -1.0, MAX_SLO_MS)
    check_seconds("--min-duration", min_duration)
    check_seconds("--search-budget", search_budget)
    settings = ServeSettings(
        model=model,
        scenario=scenario,
        qps=qps,
        find=find_qps,
        max_batch=max_batch,
        timeout_ms=batch_timeout_ms,
        slo_p99_ms=slo_p99_ms,
        queries=queries,
        min_duration_s=min_duration,
        search_budget_s=search_budget,
        precision=precision,
        accelerator=accelerator,
        compile=compile,
        cuda_graphs=cuda_graphs,
        channels_last=channels_last,
        width=width,
        height=height,
        seq_len=seq_len,
        seed=seed,
        output=Path(output),
    )
    show_serve(execute_serve(settings))


def _in_range(flag: str, value: float | None, above: float, most: float) -> None:
    """A finite number over `above` and at most `most` (None: not given)."""
    if value is None:
        return
    check_finite(flag, value)
    if not above < value <= most:
        floor = "0 or more" if above < 0 else "over 0"
        raise invalid(flag, value, f"must be {floor} and at most {most:,g}")
