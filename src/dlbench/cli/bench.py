"""train, infer and validate: one benchmark run, or the bare loop beside it. Their options are
RunConfig's fields (cli/options.py)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from dlbench.cli.app import app
from dlbench.cli.options import config_from_flags, run_options
from dlbench.config import check_count
from dlbench.config.limits import MAX_REPEATS
from dlbench.errors import UserError

AUTO_BATCH = (str, "32", "Samples per step per device, or 'auto' (largest that fits).")
# What validate does not take: it times windows of --n-iters steps, synthetic data, no telemetry.
NOT_VALIDATED = (
    "prompt_len",
    "new_tokens",
    "data_on",
    "data",
    "data_workers",
    "data_decode",
    "max_noise",
    "max_host_busy",
    "max_time",
    "min_time",
    "run_id",
    "telemetry",
    "sample_interval",
    "telemetry_log",
    "nvtx",
    "breakdown",
    "tags",
)


# LLM generation's flags: inference only.
GENERATION_ONLY = ("prompt_len", "new_tokens")


@app.command("train", help="Benchmark a training loop (forward, loss, backward, optimizer).")
@app.command("src.train", help="Same as train: the image's documented form.", hidden=True)
@run_options(exclude=("mode", *GENERATION_ONLY), replace={"batch_size": AUTO_BATCH}, mode="train")
def train(flags: dict[str, Any]) -> None:
    _bench("train", flags)


@app.command("infer", help="Benchmark inference (eval mode, inference_mode, no host copy).")
@app.command("src.inference", help="Same as infer: the image's documented form.", hidden=True)
@run_options(exclude=("mode",), replace={"batch_size": AUTO_BATCH}, mode="infer")
def infer(flags: dict[str, Any]) -> None:
    _bench("infer", flags)


def _bench(mode: str, flags: dict[str, Any]) -> None:
    from dlbench.run import execute

    batch = str(flags.pop("batch_size"))
    if batch == "auto":
        raise typer.Exit(execute(config_from_flags(flags, mode=mode, batch_size=1), True))
    if not batch.lstrip("-").isdigit():
        raise UserError(f"--batch-size: invalid value {batch!r}; a positive integer or auto")
    raise typer.Exit(execute(config_from_flags(flags, mode=mode, batch_size=int(batch))))


@app.command(
    "validate",
    help="Bare PyTorch loop vs the dlbench loop, back to back; the ratio (DDP with --devices N).",
)
@run_options(exclude=NOT_VALIDATED)
def validate(
    flags: dict[str, Any],
    repeats: Annotated[int, typer.Option(help="Alternating bare/dlbench pairs.")] = 3,
) -> None:
    from dlbench.engine.validate import execute_validate

    config = config_from_flags(flags)
    check_count("--repeats", repeats, MAX_REPEATS)
    raise typer.Exit(execute_validate(config, repeats))
