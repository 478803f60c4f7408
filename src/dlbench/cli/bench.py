"""train, infer and validate: one benchmark run, or the bare loop beside it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dlbench.cli.app import COMMAND_LINE, app
from dlbench.cli.options import (
    Accelerator,
    AutoBatchSize,
    BatchSize,
    Breakdown,
    ChannelsLast,
    Compile,
    CudaGraphs,
    Data,
    DataDecode,
    DataOn,
    DataWorkers,
    Ddp,
    Devices,
    Height,
    Json,
    LlmImpl,
    MaxNoise,
    MaxTime,
    MinTime,
    Model,
    NewTokens,
    NIters,
    NumNodes,
    Nvtx,
    Optimizer,
    Output,
    Precision,
    PromptLen,
    RunId,
    SampleInterval,
    Seed,
    SeqLen,
    Strategy,
    Tags,
    Telemetry,
    TelemetryLog,
    Warmup,
    Width,
)
from dlbench.config import DEFAULT_OUTPUT, RunConfig
from dlbench.console import stderr
from dlbench.errors import UserError

TRAIN_NAMES = ("train", "src.train")


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
    llm_impl: LlmImpl = None,
    optimizer: Optimizer = None,
    data_on: DataOn = "device",
    data: Data = "synthetic",
    data_workers: DataWorkers = None,
    data_decode: DataDecode = "cpu",
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
        config = config_from_flags({**flags, "batch_size": 1}, mode=mode, extra=extra)
        if auto_batch_in_process(config):
            raise typer.Exit(execute(config, auto_batch=True))
        batch_size = str(_auto_batch_size(ctx.info_name, output))
    if not batch_size.lstrip("-").isdigit():
        raise UserError(f"--batch-size: invalid value {batch_size!r}; a positive integer or auto")
    config = config_from_flags({**flags, "batch_size": int(batch_size)}, mode=mode, extra=extra)
    raise typer.Exit(execute(config))


def _tags(tags: list[str] | None) -> dict[str, str]:
    """--tag KEY=VALUE pairs as extra row columns."""
    from dlbench.results.schema import check_tag

    pairs = {}
    for item in tags or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise UserError(f"--tag: invalid value {item!r}; expected KEY=VALUE")
        check_tag(key)
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


def config_from_flags(flags: dict, **fixed: object) -> RunConfig:
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
    cuda_graphs: CudaGraphs = None,
    llm_impl: LlmImpl = None,
    optimizer: Optimizer = None,
    output: Output = DEFAULT_OUTPUT,
    json: Json = False,
    seed: Seed = 0,
    repeats: Annotated[int, typer.Option(help="Alternating bare/dlbench pairs.")] = 3,
) -> None:
    from dlbench.engine.validate import execute_validate

    config = config_from_flags({**locals(), "ddp": tuple(ddp or ())})
    if repeats <= 0:
        raise UserError(f"--repeats: invalid value {repeats}; must be a positive integer")
    raise typer.Exit(execute_validate(config, repeats))
