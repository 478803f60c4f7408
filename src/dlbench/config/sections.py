"""The sections of a run's configuration, each a typed, validated dataclass of the flags of one
job (what runs, how it is compiled, how it is measured, on which devices, from which data,
where the row goes, what the hardware reports, what it costs). A section's TITLE is its group
in `--help`; a field's flag and column keep the name a run has always had (`option(key=...)`
where the field's own name is shorter: `data.workers` is `--workers`, column `data_workers`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from dlbench.config.fields import (
    ACCELERATORS,
    ATTENTION_KERNELS,
    CHECKPOINTING,
    CUDNN_SEARCH_CHOICES,
    DATA_LOCATIONS,
    DEFAULT_OUTPUT,
    DEFAULT_SAMPLE_INTERVAL_S,
    LLM_IMPLS,
    MODES,
    OPTIMIZERS,
    PRECISIONS,
    option,
)
from dlbench.config.fp8_recipes import recipe_help, recipe_named
from dlbench.config.limits import (
    DEFAULT_COLLECTIVE_TIMEOUT_S,
    DEFAULT_MIN_TIME_S,
    DEFAULT_WARMUP_STEPS,
    HOST_OTHER_CPU_PCT,
    MAX_COUNT,
    MAX_PRICE,
    MAX_PROCESSES,
    MAX_STEPS,
    MAX_WORKERS,
    MIN_SPREAD_STEPS,
)
from dlbench.config.row_tags import RowTags
from dlbench.config.sources import DECODERS, STRATEGIES, DataSource, DdpSettings
from dlbench.errors import check_finite, check_seconds, invalid


@dataclass(frozen=True)
class WorkloadConfig:
    """What runs: the model, train or infer, and the shape of one step's input."""

    TITLE: ClassVar[str] = "Workload"

    model: str = option("resnet50", "Workload name (see `dlbench models`) or timm:NAME.")
    mode: str = option("train", "train or infer.")
    batch_size: int = option(32, "Samples per step per device.")
    width: int | None = option(None, "Image width (default: the model's, 224).")
    height: int | None = option(None, "Image height (default: the model's, 224).")
    seq_len: int = option(128, "Tokens per sequence for text workloads.")
    prompt_len: int = option(128, "LLM generation: prompt tokens per sequence.")
    new_tokens: int = option(128, "LLM generation: new tokens, no early stop.")
    llm_impl: str | None = option(
        None, "LLMs: native (written for the GPU; default) or hf (transformers' own model)."
    )
    optimizer: str | None = option(
        None, "sgd, adamw or adam (default: adamw for transformers, sgd for CNNs)."
    )

    def __post_init__(self) -> None:
        check_choice("--mode", self.mode, MODES)
        if self.llm_impl is not None:
            check_choice("--llm-impl", self.llm_impl, LLM_IMPLS)
        if self.optimizer is not None:
            check_choice("--optimizer", self.optimizer, OPTIMIZERS)
        check_count("--batch-size", self.batch_size)
        check_count("--seq-len", self.seq_len)
        check_count("--prompt-len", self.prompt_len)
        check_count("--new-tokens", self.new_tokens)
        for flag, value in (("--width", self.width), ("--height", self.height)):
            if value is not None and not 0 < value <= MAX_COUNT:
                raise invalid(
                    flag, value, f"must be a positive number of pixels, at most {MAX_COUNT:,}"
                )


@dataclass(frozen=True)
class AccelerationConfig:
    """How the step is computed: number formats, layout, compilation, graphs and kernels."""

    TITLE: ClassVar[str] = "Precision and compilation"

    precision: str = option("32", "32, tf32, 16-mixed, bf16-mixed, 16-true, bf16-true, fp8.")
    fp8_recipe: str | None = option(None, recipe_help())
    channels_last: bool = option(True, "channels_last layout for image models.")
    compile: bool | None = option(
        None, "torch.compile model and loss (GPU default: generation, batch 1)."
    )
    cache_dir: Path | None = option(
        None, "Kernels kept between runs (default $DLBENCH_CACHE_DIR, ~/.cache/dlbench)."
    )
    cache: bool = option(True, "--no-cache: compile and tune anew (a cold run).")
    cudnn_search: str = option(
        "auto", "cuDNN's algorithm search: auto (where the cache says it pays), on or off."
    )
    cuda_graphs: bool | None = option(None, "Replay steps as CUDA graphs (default: GPU inference).")
    attention: str | None = option(None, "SDPA kernel: flash, efficient, cudnn, math.")

    def __post_init__(self) -> None:
        check_choice("--precision", self.precision, PRECISIONS)
        if self.fp8_recipe is not None:
            recipe_named(self.fp8_recipe)  # one of them, else a UserError naming the flag
            if self.precision != "fp8":
                raise invalid("--fp8-recipe", self.fp8_recipe, "only with --precision fp8")
        check_choice("--cudnn-search", self.cudnn_search, CUDNN_SEARCH_CHOICES)
        if self.attention is not None:
            check_choice("--attention", self.attention, ATTENTION_KERNELS)


@dataclass(frozen=True)
class MeasurementConfig:
    """How the window is measured: its steps and length, the warm-up, the spread wanted."""

    TITLE: ClassVar[str] = "Measurement"

    n_iters: int = option(MIN_SPREAD_STEPS, "Measured steps (at least; see --min-time).")
    warmup_steps: int = option(
        DEFAULT_WARMUP_STEPS, "Untimed steps first (a GPU adds more until steady)."
    )
    seed: int = option(0, "Random seed for weights and synthetic data.")
    max_noise: float | None = option(None, "Measure until the spread is under PCT %.")
    max_time: float = option(60.0, "Cap in seconds for --max-noise measuring.")
    max_host_busy: float | None = option(
        None, f"Others' CPU % a CPU row allows (default {HOST_OTHER_CPU_PCT:g})."
    )
    min_time: float | None = option(
        None,
        f"Measure at least this many seconds (default: {DEFAULT_MIN_TIME_S:g} with GPU "
        "telemetry, else 0).",
    )
    processes: int = option(1, "Measure in N fresh processes (median row).")
    strict: bool = option(False, "Exit 4 on an invalid verdict; row kept (CI).", switch=True)

    def __post_init__(self) -> None:
        check_count("--n-iters", self.n_iters, MAX_STEPS)
        if not 0 <= self.warmup_steps <= MAX_STEPS:
            raise invalid("--warmup-steps", self.warmup_steps, f"must be 0 to {MAX_STEPS:,}")
        if not -(2**63) <= self.seed < 2**63:
            raise invalid("--seed", self.seed, "must fit in 64 bits")
        check_finite("--max-noise", self.max_noise)
        if self.max_noise is not None and not 0 < self.max_noise < 100:
            raise invalid("--max-noise", self.max_noise, "must be a percentage between 0 and 100")
        check_finite("--max-host-busy", self.max_host_busy)
        if self.max_host_busy is not None and not 0 <= self.max_host_busy <= 100:
            raise invalid("--max-host-busy", self.max_host_busy, "must be a percentage, 0 to 100")
        check_seconds("--max-time", self.max_time)
        check_seconds("--min-time", self.min_time, zero=True)
        check_count("--processes", self.processes, MAX_PROCESSES)


@dataclass(frozen=True)
class DeviceConfig:
    """Where it runs: the accelerator, how many devices and nodes, and how they share work."""

    TITLE: ClassVar[str] = "Devices"

    accelerator: str = option("auto", "auto, gpu or cpu.")
    per_node: str = option("1", "Devices per node: a number or 'all'.", key="devices")
    num_nodes: int = option(1, "Nodes (torchrun or SLURM set the ranks).")
    strategy: str = option(
        "auto", "auto (DDP for several processes), ddp (even for one) or fsdp (FSDP2, sharded)."
    )
    activation_checkpointing: str | None = option(
        None, "FSDP: none, selective or full recompute in backward."
    )
    ddp: tuple[str, ...] = option(
        (),
        "KEY=VALUE for DistributedDataParallel: bucket_cap_mb, gradient_as_bucket_view, "
        "static_graph, broadcast_buffers.",
    )
    collective_timeout: float = option(
        DEFAULT_COLLECTIVE_TIMEOUT_S,
        "Seconds a rank waits in a collective before the run fails, naming the lost rank.",
    )

    def __post_init__(self) -> None:
        check_choice("--accelerator", self.accelerator, ACCELERATORS)
        if self.per_node != "all" and not (self.per_node.isdigit() and int(self.per_node) > 0):
            raise invalid("--devices", self.per_node, "must be a positive integer or 'all'")
        check_count("--num-nodes", self.num_nodes)
        check_choice("--strategy", self.strategy, (*STRATEGIES, "single"))
        if self.activation_checkpointing is not None:
            check_choice("--activation-checkpointing", self.activation_checkpointing, CHECKPOINTING)
        DdpSettings.parse(self.ddp)
        check_seconds("--collective-timeout", self.collective_timeout)


@dataclass(frozen=True)
class DataConfig:
    """Where the batches come from and how they reach the device."""

    TITLE: ClassVar[str] = "Data"

    location: str = option(
        "device", "device (resident) or host (pinned, copied per step).", key="data_on"
    )
    source: str = option(
        "synthetic",
        "synthetic (batches in memory), folder:PATH (JPEG/PNG in class folders) or text:PATH "
        "(.txt, a sample per line, or .jsonl with a text field).",
        key="data",
    )
    workers: int | None = option(
        None,
        "--data loader processes (default: CPUs, at most 8).",
        "--workers",
        "--data-workers",
        key="data_workers",
    )
    decode: str = option(
        "cpu",
        "Images: cpu (workers) or gpu (nvJPEG).",
        "--decode",
        "--data-decode",
        key="data_decode",
    )

    def __post_init__(self) -> None:
        check_choice("--data-on", self.location, DATA_LOCATIONS)
        self.parsed()  # a UserError for a bad --data
        check_choice("--decode", self.decode, DECODERS)
        if self.workers is not None and self.workers < 0:
            raise invalid("--workers", self.workers, "must be 0 or more")
        if self.workers is not None and self.workers > MAX_WORKERS:
            raise invalid("--workers", self.workers, f"must be at most {MAX_WORKERS}")

    def parsed(self) -> DataSource:
        """Where the batches come from (--data), parsed and checked."""
        return DataSource.parse(self.source)


@dataclass(frozen=True)
class OutputConfig:
    """Where the row goes, what it is called and what labels it carries."""

    TITLE: ClassVar[str] = "Output"

    path: Path = option(DEFAULT_OUTPUT, "CSV to append the row to.", key="output")
    json: bool = option(False, "Print the row as JSON instead of a table.", switch=True)
    run_id: str | None = option(None, "Run id for the row (sweeps set it).")
    tags: RowTags = field(
        default_factory=RowTags,
        metadata={"help": "KEY=VALUE recorded as a column.", "flags": ("--tag",), "key": "tags"},
    )


@dataclass(frozen=True)
class TelemetryConfig:
    """What the hardware is asked to report beside the timing, and the traces kept."""

    TITLE: ClassVar[str] = "Telemetry"

    enabled: bool = option(True, "Sample GPU power, clocks, heat; window energy.", key="telemetry")
    sample_interval: float = option(DEFAULT_SAMPLE_INTERVAL_S, "Seconds between samples.")
    log: Path | None = option(None, "Every sample, to this CSV.", key="telemetry_log")
    nvtx: bool = option(False, "NVTX ranges (for Nsight).", switch=True)
    breakdown: bool = option(
        False, "After the window: time copy/fwd/bwd/optimizer apart.", switch=True
    )

    def __post_init__(self) -> None:
        check_seconds("--sample-interval", self.sample_interval)


@dataclass(frozen=True)
class CostConfig:
    """What an hour of the machine costs (the user's price), to price the samples."""

    TITLE: ClassVar[str] = "Cost"

    usd_per_hour: float | None = option(
        None,
        "Price of the machine or GPU per hour (yours): the row gets the cost per million "
        "samples (tokens for LLMs).",
    )

    def __post_init__(self) -> None:
        check_finite("--usd-per-hour", self.usd_per_hour)
        if self.usd_per_hour is not None and not 0 < self.usd_per_hour <= MAX_PRICE:
            raise invalid("--usd-per-hour", self.usd_per_hour, f"a price from 0 to {MAX_PRICE:,}")


def check_choice(flag: str, value: str, allowed: tuple[str, ...]) -> None:
    """`value` is one of `allowed`: a UserError naming `flag` otherwise."""
    if value not in allowed:
        raise invalid(flag, value, f"allowed: {', '.join(allowed)}")


def check_count(flag: str, value: int, most: int = MAX_COUNT) -> None:
    """A positive integer no larger than `most`: a UserError naming `flag` otherwise."""
    if value <= 0:
        raise invalid(flag, value, "must be a positive integer")
    if value > most:  # larger ones overflow a C integer below with a traceback
        raise invalid(flag, value, f"must be at most {most:,}")
