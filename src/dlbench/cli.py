"""The command line: flags map one to one onto RunConfig; user mistakes exit 2, no traceback."""

from __future__ import annotations

import sys
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated

import typer

from dlbench import cli_analysis
from dlbench.config import DEFAULT_OUTPUT, RunConfig
from dlbench.console import stderr
from dlbench.errors import UserError
from dlbench.signals import Interrupted, interruptible

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="True, comparable deep-learning benchmarks: one row per run in a CSV.",
    pretty_exceptions_enable=False,
)

TRAIN_NAMES = ("train", "src.train")
# The command line being run (a sweep worker runs many in one process, so not sys.argv).
COMMAND_LINE: ContextVar[tuple[str, ...]] = ContextVar("command_line", default=())
INFER_NAMES = ("infer", "inference", "src.inference", "src.infer")

Model = Annotated[str, typer.Option(help="Workload name (see `dlbench models`) or timm:NAME.")]
BatchSize = Annotated[int, typer.Option(help="Samples per step per device.")]
AutoBatchSize = Annotated[
    str, typer.Option(help="Samples per step per device, or 'auto' (largest that fits).")
]
Tags = Annotated[
    list[str] | None, typer.Option("--tag", help="KEY=VALUE recorded as an extra column.")
]
NIters = Annotated[int, typer.Option(help="Measured steps (at least; see --max-noise).")]
Warmup = Annotated[int, typer.Option(help="Untimed steps first (autotune, compile, allocator).")]
Precision = Annotated[
    str, typer.Option(help="32, tf32, 16-mixed, bf16-mixed, 16-true or bf16-true.")
]
Width = Annotated[int | None, typer.Option(help="Image width (default: the model's, 224).")]
Height = Annotated[int | None, typer.Option(help="Image height (default: the model's, 224).")]
SeqLen = Annotated[int, typer.Option(help="Tokens per sequence for text workloads.")]
PromptLen = Annotated[int, typer.Option(help="LLM generation: prompt tokens per sequence.")]
NewTokens = Annotated[int, typer.Option(help="LLM generation: new tokens, no early stop.")]
Accelerator = Annotated[str, typer.Option(help="auto, gpu or cpu.")]
Devices = Annotated[str, typer.Option(help="Devices per node: a number or 'all'.")]
NumNodes = Annotated[int, typer.Option(help="Nodes (torchrun or SLURM set the ranks).")]
Strategy = Annotated[
    str, typer.Option(help="auto (DDP for several processes) or ddp (DDP even for one).")
]
Ddp = Annotated[
    list[str] | None,
    typer.Option(
        "--ddp",
        help="KEY=VALUE for DistributedDataParallel: bucket_cap_mb, gradient_as_bucket_view, "
        "static_graph, broadcast_buffers.",
    ),
]
ChannelsLast = Annotated[bool, typer.Option(help="channels_last layout for image models.")]
Compile = Annotated[
    bool | None,
    typer.Option(
        "--compile/--no-compile",
        help="torch.compile the model (default: on for LLM generation on a GPU, else off).",
    ),
]
CudaGraphs = Annotated[
    bool | None,
    typer.Option(
        "--cuda-graphs/--no-cuda-graphs",
        help="LLM generation: replay prefill and decode steps as CUDA graphs (GPU default).",
    ),
]
Optimizer = Annotated[
    str | None,
    typer.Option(help="sgd, adamw or adam (default: adamw for transformers, sgd for CNNs)."),
]
DataOn = Annotated[str, typer.Option(help="device (resident) or host (pinned, copied per step).")]
Output = Annotated[Path, typer.Option(help="CSV to append the row to.")]
Json = Annotated[bool, typer.Option("--json", help="Print the row as JSON instead of a table.")]
Seed = Annotated[int, typer.Option(help="Random seed for weights and synthetic data.")]
MaxNoise = Annotated[
    float | None, typer.Option(help="Keep measuring until the step-time spread is under PCT %.")
]
MaxTime = Annotated[float, typer.Option(help="Cap in seconds for --max-noise measuring.")]
MinTime = Annotated[
    float | None,
    typer.Option(
        help="Measure at least this many seconds (default: 5 with GPU telemetry, else 0)."
    ),
]
RunId = Annotated[str | None, typer.Option(help="Run id for the row (sweeps set it).")]
Telemetry = Annotated[bool, typer.Option(help="Sample GPU power, clocks, heat; window energy.")]
SampleInterval = Annotated[float, typer.Option(help="Telemetry sampling period in seconds.")]
TelemetryLog = Annotated[Path | None, typer.Option(help="Write every telemetry sample here.")]
Nvtx = Annotated[bool, typer.Option("--nvtx", help="NVTX ranges for Nsight Systems.")]
Breakdown = Annotated[
    bool, typer.Option("--breakdown", help="After the window: time copy/fwd/bwd/optimizer apart.")
]


@app.command("train", help="Benchmark a training loop (forward, loss, backward, optimizer).")
@app.command("infer", help="Benchmark inference (eval mode, inference_mode, no host copy).")
@app.command("src.train", help="Same as train: the image's documented form.", hidden=True)
@app.command("src.inference", help="Same as infer: the image's documented form.", hidden=True)
def bench(
    ctx: typer.Context,
    model: Model = "resnet50",
    batch_size: AutoBatchSize = "32",
    n_iters: NIters = 50,
    warmup_steps: Warmup = 10,
    precision: Precision = "32",
    width: Width = None,
    height: Height = None,
    seq_len: SeqLen = 128,
    prompt_len: PromptLen = 128,
    new_tokens: NewTokens = 128,
    accelerator: Accelerator = "auto",
    devices: Devices = "1",
    num_nodes: NumNodes = 1,
    strategy: Strategy = "auto",
    ddp: Ddp = None,
    channels_last: ChannelsLast = True,
    compile: Compile = None,
    cuda_graphs: CudaGraphs = None,
    optimizer: Optimizer = None,
    data_on: DataOn = "device",
    output: Output = DEFAULT_OUTPUT,
    json: Json = False,
    seed: Seed = 0,
    max_noise: MaxNoise = None,
    max_time: MaxTime = 60.0,
    min_time: MinTime = None,
    run_id: RunId = None,
    telemetry: Telemetry = True,
    sample_interval: SampleInterval = 0.1,
    telemetry_log: TelemetryLog = None,
    nvtx: Nvtx = False,
    breakdown: Breakdown = False,
    tag: Tags = None,
) -> None:
    from dlbench.run import auto_batch_in_process, execute

    mode = "train" if ctx.info_name in TRAIN_NAMES else "infer"
    extra = _tags(tag)
    flags = {**locals(), "ddp": tuple(ddp or ())}
    if batch_size == "auto":
        extra["batch_size_mode"] = "auto"
        config = _config({**flags, "batch_size": 1}, mode=mode, extra=extra)
        if auto_batch_in_process(config):
            raise typer.Exit(execute(config, auto_batch=True))
        batch_size = str(_auto_batch_size(ctx.info_name, output))
    if not batch_size.lstrip("-").isdigit():
        raise UserError(f"--batch-size: invalid value {batch_size!r}; a positive integer or auto")
    config = _config({**flags, "batch_size": int(batch_size)}, mode=mode, extra=extra)
    raise typer.Exit(execute(config))


def _tags(tags: list[str] | None) -> dict[str, str]:
    """--tag KEY=VALUE pairs as extra row columns."""
    pairs = {}
    for item in tags or []:
        key, sep, value = item.partition("=")
        if not sep or not key.isidentifier():
            raise UserError(f"--tag: invalid value {item!r}; expected KEY=VALUE")
        pairs[key] = value
    return pairs


def _auto_batch_size(command: str, output: Path) -> int:
    """Probe in subprocesses with this same command line, batch size replaced (the isolated
    fallback for generation and several processes)."""
    import tempfile

    from dlbench.sweep.autobatch import find_batch_size

    given = COMMAND_LINE.get()
    args, skip = [], False
    for arg in given[list(given).index(command) + 1 :]:
        if skip or arg.startswith("--batch-size"):
            skip = arg == "--batch-size"
            continue
        args.append(arg)
    with tempfile.TemporaryDirectory() as tmp:
        found = find_batch_size([command, *args], str(Path(tmp) / "probe.csv"), 900, 8192)
    stderr.print(f"--batch-size auto: {found} is the largest batch that fits")
    return found


def _config(flags: dict, **fixed: object) -> RunConfig:
    """RunConfig from a command's local variables (its flags), minus the Typer context."""
    fields = {k: v for k, v in flags.items() if k in RunConfig.__dataclass_fields__}
    return RunConfig(**{**fields, **fixed})


@app.command(
    "validate",
    help="Bare PyTorch loop vs the dlbench loop, back to back; the ratio (DDP with --devices N).",
)
def validate(
    model: Model = "resnet50",
    mode: Annotated[str, typer.Option(help="train or infer.")] = "train",
    batch_size: BatchSize = 32,
    n_iters: NIters = 50,
    warmup_steps: Warmup = 10,
    precision: Precision = "32",
    width: Width = None,
    height: Height = None,
    seq_len: SeqLen = 128,
    accelerator: Accelerator = "auto",
    devices: Devices = "1",
    num_nodes: NumNodes = 1,
    strategy: Strategy = "auto",
    ddp: Ddp = None,
    channels_last: ChannelsLast = True,
    compile: Compile = None,
    optimizer: Optimizer = None,
    output: Output = DEFAULT_OUTPUT,
    json: Json = False,
    seed: Seed = 0,
    repeats: Annotated[int, typer.Option(help="Alternating bare/dlbench pairs.")] = 3,
) -> None:
    from dlbench.engine.validate import execute_validate

    config = _config({**locals(), "ddp": tuple(ddp or ())})
    if repeats <= 0:
        raise UserError(f"--repeats: invalid value {repeats}; must be a positive integer")
    raise typer.Exit(execute_validate(config, repeats))


@app.command("sweep", help="Run a grid of isolated points (packaged plan name or YAML file).")
def sweep(
    plan: Annotated[str, typer.Argument(help="quick, default, or a path to a YAML plan.")],
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
    isolation: Annotated[
        str,
        typer.Option(
            help="worker: points run back to back in a process replaced after any failure; "
            "process: each point in a process of its own (DDP points always are)."
        ),
    ] = "worker",
) -> None:
    from rich.console import Console

    from dlbench.sweep.plan import load_plan, parse_shard, shard_points
    from dlbench.sweep.runner import SweepRunner, summary_table

    sweep_plan = load_plan(plan)
    if timeout is not None:
        sweep_plan.timeout_s = timeout
    if repeats is not None:
        if repeats <= 0:
            raise UserError(f"--repeats: invalid value {repeats}; must be a positive integer")
        sweep_plan.repeats = repeats
    index, count = parse_shard(shard)
    if dry_run:
        for i, point in enumerate(shard_points(sweep_plan.points(), index, count), 1):
            print(f"{i:3d}  dlbench {' '.join(point.cli_args())}")
        raise typer.Exit(0)
    runner = SweepRunner(
        sweep_plan, output, allow_power_changes, settle_s, (index, count), isolation
    )
    outcome = runner.run()
    Console(width=max(Console().width, 120)).print(summary_table(outcome))
    raise typer.Exit(0)


RUN_FLAGS = set(RunConfig.__dataclass_fields__) - {"mode", "devices", "output"}


@app.command(
    "scaling",
    help="One run at 1, 2, 4 ... devices (isolated) and a DDP-wrapped one-device run, then "
    "scaling efficiency against each.",
)
def scaling(
    model: Model = "resnet50",
    mode: Annotated[str, typer.Option(help="train or infer.")] = "train",
    batch_size: BatchSize = 32,
    precision: Precision = "32",
    devices: Annotated[str, typer.Option(help="Device counts, e.g. 1,2,4, or 'all'.")] = "all",
    accelerator: Accelerator = "auto",
    n_iters: NIters = 50,
    warmup_steps: Warmup = 10,
    width: Width = None,
    height: Height = None,
    seq_len: SeqLen = 128,
    channels_last: ChannelsLast = True,
    ddp: Ddp = None,
    output: Output = DEFAULT_OUTPUT,
    timeout: Annotated[float, typer.Option(help="Seconds per point.")] = 900.0,
) -> None:
    ddp = tuple(ddp or ())
    flags = {k: v for k, v in locals().items() if k in RUN_FLAGS and v not in (None, ())}
    from rich.console import Console

    from dlbench.console import show_scaling
    from dlbench.sweep.runner import SweepRunner, summary_table
    from dlbench.sweep.scaling import device_counts, record_scaling, scaling_plan

    _config({**flags, "mode": mode, "output": output})  # the same checks as a single run
    counts = device_counts(devices, accelerator)
    runner = SweepRunner(scaling_plan(flags, mode, counts, timeout), output)
    console = Console(width=max(Console().width, 120))
    console.print(summary_table(runner.run()))
    show_scaling(record_scaling(runner.store, model, mode))
    raise typer.Exit(0)


@app.command("models", help="List workloads: parameters, input, what a sample is.")
def models(
    pattern: Annotated[str, typer.Argument(help="Wildcard, e.g. '*vit*'.")] = "*",
    params: Annotated[bool, typer.Option(help="Build each model to count parameters.")] = False,
) -> None:
    from dlbench.workloads_table import show_workloads

    show_workloads(pattern, count_params=params)


cli_analysis.register(app)


@app.command("sweep-worker", hidden=True)
def sweep_worker() -> None:
    """Run sweep points given on stdin in this process (`sweep --isolation worker`)."""
    from dlbench.sweep.worker import serve

    serve()


def run_command(args: list[str] | None = None) -> int:
    """One command line (default: this process's) to its exit code: user errors 2 with one
    line and no traceback, signals 128 + the signal. A sweep worker runs points through here."""
    from dlbench.startup import mark_command_start

    mark_command_start(fresh_process=args is None)
    COMMAND_LINE.set(tuple(sys.argv[1:] if args is None else args))
    try:
        with interruptible():
            code = app(args=args, standalone_mode=False)
        return code if isinstance(code, int) else 0
    except UserError as exc:
        return _report(str(exc), 2)
    except Interrupted as exc:
        return _report(f"{exc}; no row was written for the run in flight", exc.exit_code)
    except typer.Exit as exc:
        return exc.exit_code
    except Exception as exc:  # click usage errors and the like
        import click

        if isinstance(exc, click.exceptions.ClickException):
            exc.show()
            return 2
        if isinstance(exc, click.exceptions.Abort):
            return 130
        raise


def main() -> None:
    """Console entry point."""
    sys.exit(run_command())


def _report(message: str, code: int) -> int:
    stderr.print(f"[red]error:[/red] {message}")
    return code
