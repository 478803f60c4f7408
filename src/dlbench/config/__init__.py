"""The one validated configuration of a run; CLI flags map onto its fields one to one."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from dlbench.config.fields import (
    ACCELERATORS,
    ATTENTION_KERNELS,
    CHECKPOINTING,
    CONFIG_KEY,
    CUDNN_SEARCH_CHOICES,
    DATA_LOCATIONS,
    DEFAULT_OUTPUT,
    DEFAULT_SAMPLE_INTERVAL_S,
    LLM_IMPLS,
    MODES,
    OPTIMIZERS,
    PANELS,
    PRECISIONS,
    option,
)
from dlbench.config.limits import (
    COUNTER_LEAD_S,
    DEFAULT_COLLECTIVE_TIMEOUT_S,
    DEFAULT_MIN_TIME_S,
    DEFAULT_WARMUP_STEPS,
    MAX_COUNT,
    MAX_PRICE,
    MAX_STEPS,
    MAX_WORKERS,
    MIN_SPREAD_STEPS,
    POWER_AVERAGING_S,
)
from dlbench.config.sources import (
    DATA_KINDS,
    DECODERS,
    STRATEGIES,
    DataSource,
    DdpSettings,
    resolved_strategy,
)
from dlbench.config.tags import RowTags
from dlbench.errors import check_finite, check_seconds, invalid

__all__ = [
    "ACCELERATORS",
    "ATTENTION_KERNELS",
    "CHECKPOINTING",
    "CONFIG_KEY",
    "CUDNN_SEARCH_CHOICES",
    "DATA_KINDS",
    "DATA_LOCATIONS",
    "DECODERS",
    "DEFAULT_OUTPUT",
    "DEFAULT_SAMPLE_INTERVAL_S",
    "LLM_IMPLS",
    "MODES",
    "OPTIMIZERS",
    "PANELS",
    "PRECISIONS",
    "STRATEGIES",
    "DataSource",
    "DdpSettings",
    "option",
    "resolved_strategy",
]


@dataclass(frozen=True)
class RunConfig:
    """Everything that moves the number; every field lands in the result row."""

    model: str = option(
        "resnet50", "Workload name (see `dlbench models`) or timm:NAME.", panel="Workload"
    )
    mode: str = option("train", "train or infer.", panel="Workload")
    batch_size: int = option(32, "Samples per step per device.", panel="Workload")
    n_iters: int = option(
        MIN_SPREAD_STEPS,
        "Measured steps (at least; see --min-time).",
        panel="Measurement",
    )
    warmup_steps: int = option(
        DEFAULT_WARMUP_STEPS,
        "Untimed steps first (a GPU adds more until steady).",
        panel="Measurement",
    )
    precision: str = option(
        "32",
        "32, tf32, 16-mixed, bf16-mixed, 16-true or bf16-true.",
        panel="Precision and compilation",
    )
    width: int | None = option(None, "Image width (default: the model's, 224).", panel="Workload")
    height: int | None = option(None, "Image height (default: the model's, 224).", panel="Workload")
    seq_len: int = option(128, "Tokens per sequence for text workloads.", panel="Workload")
    prompt_len: int = option(128, "LLM generation: prompt tokens per sequence.", panel="Workload")
    new_tokens: int = option(128, "LLM generation: new tokens, no early stop.", panel="Workload")
    accelerator: str = option("auto", "auto, gpu or cpu.", panel="Devices")
    devices: str = option("1", "Devices per node: a number or 'all'.", panel="Devices")
    num_nodes: int = option(1, "Nodes (torchrun or SLURM set the ranks).", panel="Devices")
    strategy: str = option(
        "auto",
        "auto (DDP for several processes), ddp (even for one) or fsdp (FSDP2, sharded).",
        panel="Devices",
    )
    activation_checkpointing: str | None = option(
        None,
        "FSDP: none, selective or full recompute in backward.",
        panel="Devices",
    )
    ddp: tuple[str, ...] = option(
        (),
        "KEY=VALUE for DistributedDataParallel: bucket_cap_mb, gradient_as_bucket_view, "
        "static_graph, broadcast_buffers.",
        panel="Devices",
    )
    collective_timeout: float = option(
        DEFAULT_COLLECTIVE_TIMEOUT_S,
        "Seconds a rank waits in a collective before the run fails, naming the lost rank.",
        panel="Devices",
    )
    channels_last: bool = option(
        True, "channels_last layout for image models.", panel="Precision and compilation"
    )
    compile: bool | None = option(
        None,
        "torch.compile model and loss (GPU default: generation, batch 1).",
        panel="Precision and compilation",
    )
    cache_dir: Path | None = option(
        None,
        "Compiled kernels kept between runs (default $DLBENCH_CACHE_DIR, ~/.cache/dlbench).",
        panel="Precision and compilation",
    )
    cache: bool = option(
        True,
        "--no-cache: compile and tune anew (a cold run).",
        panel="Precision and compilation",
    )
    cudnn_search: str = option(
        "auto",
        "cuDNN's algorithm search: auto (where the cache says it pays), on or off.",
        panel="Precision and compilation",
    )
    cuda_graphs: bool | None = option(
        None,
        "Replay steps as CUDA graphs (default: inference on a GPU).",
        panel="Precision and compilation",
    )
    llm_impl: str | None = option(
        None,
        "LLMs: native (written for the GPU; default) or hf (transformers' own model).",
        panel="Workload",
    )
    attention: str | None = option(
        None,
        "SDPA kernel: flash, efficient, cudnn or math (default: torch's).",
        panel="Precision and compilation",
    )
    optimizer: str | None = option(
        None,
        "sgd, adamw or adam (default: adamw for transformers, sgd for CNNs).",
        panel="Workload",
    )
    data_on: str = option(
        "device", "device (resident) or host (pinned, copied per step).", panel="Data"
    )
    data: str = option(
        "synthetic",
        "synthetic (batches in memory), folder:PATH (JPEG/PNG in class folders) or text:PATH "
        "(.txt, a sample per line, or .jsonl with a text field).",
        panel="Data",
    )
    data_workers: int | None = option(
        None,
        "--data loader processes (default: CPUs, at most 8).",
        "--workers",
        "--data-workers",
        panel="Data",
    )
    data_decode: str = option(
        "cpu", "Images: cpu (workers) or gpu (nvJPEG).", "--decode", "--data-decode", panel="Data"
    )
    output: Path = option(DEFAULT_OUTPUT, "CSV to append the row to.", panel="Output")
    json: bool = option(
        False, "Print the row as JSON instead of a table.", switch=True, panel="Output"
    )
    seed: int = option(0, "Random seed for weights and synthetic data.", panel="Measurement")
    max_noise: float | None = option(
        None, "Keep measuring until the step-time spread is under PCT %.", panel="Measurement"
    )
    max_time: float = option(60.0, "Cap in seconds for --max-noise measuring.", panel="Measurement")
    min_time: float | None = option(
        None,
        f"Measure at least this many seconds (default: {DEFAULT_MIN_TIME_S:g} with GPU "
        "telemetry, else 0).",
        panel="Measurement",
    )
    run_id: str | None = option(None, "Run id for the row (sweeps set it).", panel="Output")
    telemetry: bool = option(
        True, "Sample GPU power, clocks, heat; window energy.", panel="Telemetry"
    )
    sample_interval: float = option(
        DEFAULT_SAMPLE_INTERVAL_S, "Telemetry sampling period in seconds.", panel="Telemetry"
    )
    telemetry_log: Path | None = option(
        None, "Write every telemetry sample here.", panel="Telemetry"
    )
    strict: bool = option(
        False,
        "Exit 4 when the row's verdict is invalid (for CI); the row is kept.",
        switch=True,
        panel="Measurement",
    )
    usd_per_hour: float | None = option(
        None,
        "Price of the machine or GPU per hour (yours): the row gets the cost per million "
        "samples (tokens for LLMs).",
        panel="Output",
    )
    nvtx: bool = option(False, "NVTX ranges for Nsight Systems.", switch=True, panel="Telemetry")
    breakdown: bool = option(
        False,
        "After the window: time copy/fwd/bwd/optimizer apart.",
        switch=True,
        panel="Telemetry",
    )
    tags: RowTags = field(
        default_factory=RowTags,
        metadata={
            "help": "KEY=VALUE recorded as a column.",
            "flags": ("--tag",),
            "switch": False,
            "panel": "Output",
        },
    )

    def __post_init__(self) -> None:
        _check_choice("--mode", self.mode, MODES)
        _check_choice("--precision", self.precision, PRECISIONS)
        _check_choice("--accelerator", self.accelerator, ACCELERATORS)
        if self.attention is not None:
            _check_choice("--attention", self.attention, ATTENTION_KERNELS)
        if self.optimizer is not None:
            _check_choice("--optimizer", self.optimizer, OPTIMIZERS)
        if self.llm_impl is not None:
            _check_choice("--llm-impl", self.llm_impl, LLM_IMPLS)
        _check_choice("--data-on", self.data_on, DATA_LOCATIONS)
        _check_choice("--cudnn-search", self.cudnn_search, CUDNN_SEARCH_CHOICES)
        self.data_source()  # a UserError for a bad --data
        _check_choice("--decode", self.data_decode, DECODERS)
        if self.data_workers is not None and self.data_workers < 0:
            raise invalid("--workers", self.data_workers, "must be 0 or more")
        _check_choice("--strategy", self.strategy, (*STRATEGIES, "single"))
        if self.activation_checkpointing is not None:
            _check_choice(
                "--activation-checkpointing", self.activation_checkpointing, CHECKPOINTING
            )
        DdpSettings.parse(self.ddp)
        check_count("--batch-size", self.batch_size)
        check_count("--n-iters", self.n_iters, MAX_STEPS)
        check_count("--seq-len", self.seq_len)
        check_count("--prompt-len", self.prompt_len)
        check_count("--new-tokens", self.new_tokens)
        check_count("--num-nodes", self.num_nodes)
        if not 0 <= self.warmup_steps <= MAX_STEPS:
            raise invalid("--warmup-steps", self.warmup_steps, f"must be 0 to {MAX_STEPS:,}")
        for flag, value in (("--width", self.width), ("--height", self.height)):
            if value is not None and not 0 < value <= MAX_COUNT:
                raise invalid(
                    flag, value, f"must be a positive number of pixels, at most {MAX_COUNT:,}"
                )
        if self.data_workers is not None and self.data_workers > MAX_WORKERS:
            raise invalid("--workers", self.data_workers, f"must be at most {MAX_WORKERS}")
        if not -(2**63) <= self.seed < 2**63:
            raise invalid("--seed", self.seed, "must fit in 64 bits")
        if self.devices != "all" and not (self.devices.isdigit() and int(self.devices) > 0):
            raise invalid("--devices", self.devices, "must be a positive integer or 'all'")
        if self.max_noise is not None and not 0 < self.max_noise < 100:
            raise invalid("--max-noise", self.max_noise, "must be a percentage between 0 and 100")
        from dlbench.config.flags import flag_name  # it reads this class's fields

        for name in ("max_noise", "usd_per_hour"):
            check_finite(flag_name(name), getattr(self, name))
        for name in ("max_time", "collective_timeout", "sample_interval"):
            check_seconds(flag_name(name), getattr(self, name))
        check_seconds("--min-time", self.min_time, zero=True)
        if self.usd_per_hour is not None and not 0 < self.usd_per_hour <= MAX_PRICE:
            raise invalid("--usd-per-hour", self.usd_per_hour, f"a price from 0 to {MAX_PRICE:,}")

    def min_time_s(self, device_type: str) -> float:
        """The window's minimum length: as given, else DEFAULT_MIN_TIME_S where GPU telemetry
        reads energy, else none."""
        if self.min_time is not None:
            return self.min_time
        return DEFAULT_MIN_TIME_S if self.telemetry and device_type == "cuda" else 0.0

    def min_warmup_s(self, device_type: str, energy_counter: bool = False) -> float:
        """Busy time before the window where GPU telemetry reads energy: COUNTER_LEAD_S from
        an energy counter, POWER_AVERAGING_S from sampled power."""
        if not (self.telemetry and device_type == "cuda"):
            return 0.0
        return COUNTER_LEAD_S if energy_counter else POWER_AVERAGING_S

    def data_source(self) -> DataSource:
        """Where the batches come from (--data), parsed and checked."""
        return DataSource.parse(self.data)

    def replace(self, **changes: object) -> RunConfig:
        """A copy with some fields changed, validated again."""
        return dataclasses.replace(self, **changes)


def _check_choice(flag: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise invalid(flag, value, f"allowed: {', '.join(allowed)}")


def check_count(flag: str, value: int, most: int = MAX_COUNT) -> None:
    """A positive integer no larger than `most`: a UserError naming `flag` otherwise."""
    if value <= 0:
        raise invalid(flag, value, "must be a positive integer")
    if value > most:  # larger ones overflow a C integer below with a traceback
        raise invalid(flag, value, f"must be at most {most:,}")
