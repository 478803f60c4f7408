"""sweep, scaling and the hidden sweep worker: many runs, one-device points back to back in one
worker process (replaced after a failure), several-device points in processes of their own."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from dlbench.cli.app import app
from dlbench.cli.options import Output, config_from_flags, run_options
from dlbench.config import DEFAULT_OUTPUT, SETTINGS, check_count
from dlbench.config.limits import DEFAULT_POINT_TIMEOUT_S, MAX_PROCESSES, MAX_REPEATS
from dlbench.errors import check_seconds

Isolation = Annotated[
    str,
    typer.Option(
        help="worker: each point in a fresh process forked from one worker that imported once; "
        "process: each point a dlbench command of its own (DDP points always are)."
    ),
]
Resume = Annotated[
    bool,
    typer.Option(
        help="Skip points that already have an ok row in --output (a rerun completes an "
        "interrupted sweep); --no-resume runs every point again."
    ),
]
Processes = Annotated[
    int | None,
    typer.Option(
        help="Measure the plan's launch-bound points (its runs that set processes) in N fresh "
        "processes each, pooled (the reference: 3)."
    ),
]
RecheckOption = Annotated[
    bool,
    typer.Option(
        "--recheck/--no-recheck",
        help="Measure once more, in another worker than the first row's, each point whose row "
        "lies outside the band around the published rows of its GPU and configuration (both "
        "rows stay).",
    ),
]


InvalidOk = Annotated[
    bool,
    typer.Option("--invalid-ok", help="Exit 0 where every point measured is INVALID (default: 4)."),
]


@app.command(
    "sweep",
    help="Run a grid of points (packaged plan name or YAML file), each in a fresh process forked "
    "from one worker.",
)
def sweep(
    plan: Annotated[
        str, typer.Argument(help="quick, default, fp8, serve, serve-llm, or a path to a YAML plan.")
    ],
    output: Output = DEFAULT_OUTPUT,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List the points only.")] = False,
    allow_power_changes: Annotated[
        bool, typer.Option("--allow-power-changes", help="Let the sweep set GPU power limits.")
    ] = False,
    settle_s: Annotated[float, typer.Option(help="Wait after a power-limit change.")] = 10.0,
    timeout: Annotated[float | None, typer.Option(help="Seconds per point (plan's).")] = None,
    shard: Annotated[
        str, typer.Option(help="K/N: every N-th point from the K-th (one sweep per GPU).")
    ] = "0/1",
    repeats: Annotated[
        int | None, typer.Option(help="Run every point N times (the plan's repeats).")
    ] = None,
    only: Annotated[
        str | None,
        typer.Option(help="KEY=VALUE: only the plan's runs with this tag, e.g. purpose=latency."),
    ] = None,
    processes: Processes = None,
    isolation: Isolation = "worker",
    resume: Resume = True,
    recheck: RecheckOption = True,
    invalid_ok: InvalidOk = False,
) -> None:
    from dlbench.sweep.launcher import Worker
    from dlbench.sweep.plan import parse_shard, shard_points
    from dlbench.sweep.runner import SweepRunner

    # the worker's imports overlap this process's reading of the plan
    early = Worker().start() if isolation == "worker" and not dry_run else None
    try:
        sweep_plan = plan_as_asked(plan, timeout, repeats, only, processes)
        check_seconds("--settle-s", settle_s, zero=True)
        shards = parse_shard(shard)
        if dry_run:
            for i, point in enumerate(shard_points(sweep_plan.points(), *shards), 1):
                print(f"{i:3d}  dlbench {' '.join(point.cli_args())}")
            raise typer.Exit(0)
        runner = SweepRunner(
            sweep_plan,
            output,
            allow_power_changes=allow_power_changes,
            settle_s=settle_s,
            shard=shards,
            isolation=isolation,
            resume=resume,
            worker=early,
            recheck=recheck,
        )
        _warn_of_an_unusable_cache_variable()
        outcome = runner.run()
    finally:  # a refusal before the first point leaves no worker behind
        if early is not None:
            early.close()
    _show_outcome(outcome, output, invalid_ok)


def plan_as_asked(
    plan: str, timeout: float | None, repeats: int | None, only: str | None, processes: int | None
):
    """The plan, read and checked, with the command line's timeout, repeats, tag filter and
    processes."""
    from dlbench.sweep.plan_file import load_plan

    sweep_plan = load_plan(plan)
    if timeout is not None:
        check_seconds("--timeout", timeout)
        sweep_plan.timeout_s = timeout
    if repeats is not None:
        check_count("--repeats", repeats, MAX_REPEATS)
        sweep_plan.repeats = repeats
        sweep_plan.check_size()
    if only is not None:
        sweep_plan.keep_tagged(only)
    if processes is not None:
        check_count("--processes", processes, MAX_PROCESSES)
        sweep_plan.set_processes(processes)
    return sweep_plan


def _show_outcome(outcome, output: Path, invalid_ok: bool = False) -> None:
    """The summary table, the rows against the published ones, where the time went, where
    each point's output is kept; the exit."""
    from rich.console import Console

    from dlbench.sweep.launcher import logs_folder
    from dlbench.sweep.outcome import advice_lines, finish, summary_table, time_lines
    from dlbench.sweep.recheck import summary_lines

    console = Console(width=max(Console().width, 120), highlight=False)
    console.print(summary_table(outcome))
    lines = [*advice_lines(outcome), *summary_lines(outcome.held, outcome.rechecks)]
    for line in [*lines, *time_lines(outcome)]:
        console.print(line, markup=False, soft_wrap=True)
    if logs_folder(output).is_dir():
        console.print(f"each point's output: {logs_folder(output)}/RUN_ID.log", markup=False)
    raise typer.Exit(finish(outcome, invalid_ok))


def _warn_of_an_unusable_cache_variable() -> None:
    """Each point says it into its log: a sweep says it here once, before its points."""
    from dlbench.console import stderr
    from dlbench.engine.acceleration.compile_cache import cache_variable_warning

    unusable = cache_variable_warning()
    if unusable:
        stderr.print(f"[yellow]warning:[/yellow] {unusable}")


SCALED = (
    "model",
    "mode",
    "batch_size",
    "precision",
    "devices",
    "accelerator",
    "n_iters",
    "warmup_steps",
    "width",
    "height",
    "seq_len",
    "channels_last",
    "ddp",
    "output",
    "optimizer",
    "compile",
    "cuda_graphs",
    "attention",
    "llm_impl",
    "min_time",
    "max_noise",
    "max_time",
    "max_host_busy",
    "telemetry",
    "collective_timeout",
    "strategy",
    "activation_checkpointing",
)
DEVICE_COUNTS = (str, "all", "Device counts, e.g. 1,2,4, or 'all'.")


@app.command(
    "scaling",
    help="One run at 1, 2, 4 ... devices and a DDP-wrapped one-device run, then "
    "scaling efficiency against each (--strategy fsdp: the one-device run plain, the others "
    "sharded).",
)
@run_options(
    exclude=[key for key in SETTINGS if key not in SCALED],
    replace={"devices": DEVICE_COUNTS},
)
def scaling(
    flags: dict[str, Any],
    timeout: Annotated[float, typer.Option(help="Seconds per point.")] = DEFAULT_POINT_TIMEOUT_S,
    invalid_ok: InvalidOk = False,
) -> None:
    from rich.console import Console

    from dlbench.analysis.scaling import record_scaling
    from dlbench.console import show_scaling
    from dlbench.sweep.outcome import finish, summary_table
    from dlbench.sweep.runner import SweepRunner
    from dlbench.sweep.scaling import device_counts, scaling_plan

    counts_text, output, mode = flags.pop("devices"), flags.pop("output"), flags.pop("mode")
    config_from_flags(flags, mode=mode, output=output)  # the same checks as a single run
    check_seconds("--timeout", timeout)
    counts = device_counts(counts_text, flags["accelerator"])
    fixed = {k: tuple(v) if k == "ddp" else v for k, v in flags.items() if v not in (None, [])}
    runner = SweepRunner(scaling_plan(fixed, mode, counts, timeout), output)
    console = Console(width=max(Console().width, 120))
    outcome = runner.run()
    console.print(summary_table(outcome))
    show_scaling(record_scaling(runner.store, flags["model"], mode))
    raise typer.Exit(finish(outcome, invalid_ok))


@app.command("sweep-worker", hidden=True)
def sweep_worker() -> None:
    """Run sweep points and a gate's command lines given on stdin, each in a child forked from
    this process (`sweep --isolation worker`, `gate`)."""
    from dlbench.cli.app import run_command
    from dlbench.sweep.worker import serve

    serve(run_command)
