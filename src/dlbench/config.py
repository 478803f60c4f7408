"""The one validated configuration of a run; CLI flags map onto its fields one to one."""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path

from dlbench.data.source import DECODERS, DataSource
from dlbench.engine.ddp import STRATEGIES, DdpSettings
from dlbench.errors import UserError, check_finite, invalid

MODES = ("train", "infer")
PRECISIONS = ("32", "tf32", "16-mixed", "bf16-mixed", "16-true", "bf16-true")
ACCELERATORS = ("auto", "gpu", "cpu")
OPTIMIZERS = ("sgd", "adamw", "adam")
DATA_LOCATIONS = ("device", "host")
LLM_IMPLS = ("native", "hf")  # native: fused projections, written for the GPU; hf: transformers
DEFAULT_OUTPUT = Path("benchmarks/benchmark.csv")
# With GPU telemetry on, the window lasts at least this long: NVML's energy counter moves in
# steps (tens of ms), and a 0.3 s window read 0.3-0.67x or 1.4x of the true energy.
DEFAULT_MIN_TIME_S = 5.0
# ... and the warm-up keeps the GPU busy this long first: NVML's power reading is a trailing
# ~1 s average, so a window opening on an idle GPU integrates 5 % too little over 5 s.
POWER_AVERAGING_S = 1.0

# The fields that decide what was measured: two rows with equal keys are the same experiment.
CONFIG_KEY = (
    "model",
    "mode",
    "precision",
    "batch_size",
    "width",
    "height",
    "seq_len",
    "devices",
    "num_nodes",
    "strategy",
    "channels_last",
    "compile",
    "cuda_graphs",
    "llm_impl",
    "optimizer",
    "data_on",
    "data",
    "data_workers",
    "data_decode",
)


@dataclass(frozen=True)
class RunConfig:
    """Everything that moves the number; every field lands in the result row."""

    model: str = "resnet50"
    mode: str = "train"
    batch_size: int = 32
    n_iters: int = 50
    warmup_steps: int = 10
    precision: str = "32"
    width: int | None = None
    height: int | None = None
    seq_len: int = 128
    prompt_len: int = 128
    new_tokens: int = 128
    accelerator: str = "auto"
    devices: str = "1"
    num_nodes: int = 1
    strategy: str = "auto"  # auto: DDP for several processes; ddp: also for one (a baseline)
    ddp: tuple[str, ...] = ()  # --ddp KEY=VALUE: DistributedDataParallel settings
    channels_last: bool = True
    compile: bool | None = None  # None: on for LLM generation on a GPU, else off
    cuda_graphs: bool | None = None  # None: on for LLM generation on a GPU (the only user)
    llm_impl: str | None = None  # None: native for LLM workloads (--llm-impl hf: transformers)
    optimizer: str | None = None  # None: the workload's own (adamw for transformers, else sgd)
    data_on: str = "device"
    data: str = "synthetic"  # --data: synthetic, folder:PATH or text:PATH
    data_workers: int | None = None  # --workers: loader processes (default: CPUs, at most 8)
    data_decode: str = "cpu"  # --decode: cpu (in the workers) or gpu (nvJPEG)
    output: Path = DEFAULT_OUTPUT
    json: bool = False
    seed: int = 0
    max_noise: float | None = None
    max_time: float = 60.0
    min_time: float | None = None
    run_id: str | None = None
    telemetry: bool = True
    sample_interval: float = 0.1
    telemetry_log: Path | None = None
    nvtx: bool = False
    breakdown: bool = False
    extra: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_choice("--mode", self.mode, MODES)
        _check_choice("--precision", self.precision, PRECISIONS)
        _check_choice("--accelerator", self.accelerator, ACCELERATORS)
        if self.optimizer is not None:
            _check_choice("--optimizer", self.optimizer, OPTIMIZERS)
        if self.llm_impl is not None:
            _check_choice("--llm-impl", self.llm_impl, LLM_IMPLS)
        _check_choice("--data-on", self.data_on, DATA_LOCATIONS)
        self.data_source()  # a UserError for a bad --data
        _check_choice("--decode", self.data_decode, DECODERS)
        if self.data_workers is not None and self.data_workers < 0:
            raise invalid("--workers", self.data_workers, "must be 0 or more")
        _check_choice("--strategy", self.strategy, (*STRATEGIES, "single"))
        DdpSettings.parse(self.ddp)
        _check_positive("--batch-size", self.batch_size)
        _check_positive("--n-iters", self.n_iters)
        _check_positive("--seq-len", self.seq_len)
        _check_positive("--prompt-len", self.prompt_len)
        _check_positive("--new-tokens", self.new_tokens)
        _check_positive("--num-nodes", self.num_nodes)
        if self.warmup_steps < 0:
            raise invalid("--warmup-steps", self.warmup_steps, "must be 0 or more")
        for flag, value in (("--width", self.width), ("--height", self.height)):
            if value is not None and value <= 0:
                raise invalid(flag, value, "must be a positive number of pixels")
        if self.devices != "all" and not (self.devices.isdigit() and int(self.devices) > 0):
            raise invalid("--devices", self.devices, "must be a positive integer or 'all'")
        if self.max_noise is not None and not 0 < self.max_noise < 100:
            raise invalid("--max-noise", self.max_noise, "must be a percentage between 0 and 100")
        if self.max_time <= 0:
            raise invalid("--max-time", self.max_time, "must be a positive number of seconds")
        if self.min_time is not None and self.min_time < 0:
            raise invalid("--min-time", self.min_time, "must be 0 or more seconds")
        if self.sample_interval <= 0:
            raise invalid("--sample-interval", self.sample_interval, "must be positive seconds")
        for name in ("max_noise", "max_time", "min_time", "sample_interval"):
            check_finite(flag_name(name), getattr(self, name))

    def min_time_s(self, device_type: str) -> float:
        """The window's minimum length: as given, else DEFAULT_MIN_TIME_S where GPU telemetry
        reads energy, else none."""
        if self.min_time is not None:
            return self.min_time
        return DEFAULT_MIN_TIME_S if self.telemetry and device_type == "cuda" else 0.0

    def min_warmup_s(self, device_type: str) -> float:
        """Busy time before the window: POWER_AVERAGING_S where GPU telemetry reads power."""
        return POWER_AVERAGING_S if self.telemetry and device_type == "cuda" else 0.0

    def data_source(self) -> DataSource:
        """Where the batches come from (--data), parsed and checked."""
        return DataSource.parse(self.data)

    def replace(self, **changes: object) -> RunConfig:
        """A copy with some fields changed, validated again."""
        return dataclasses.replace(self, **changes)


# Flags whose name is not the field's (`--workers` sets data_workers).
_FLAG_NAMES = {"data_workers": "--workers", "data_decode": "--decode"}
# Fields a sweep sets for each point itself; a plan that sets them is refused.
SWEEP_OWNED = ("mode", "output", "run_id", "extra")


def flag_name(field_name: str) -> str:
    """The command-line flag of a RunConfig field: `--batch-size` for batch_size."""
    return _FLAG_NAMES.get(field_name, "--" + field_name.replace("_", "-"))


def typed_value(name: str, value: object, where: str) -> object:
    """A plan's value for field `name` in the field's type (YAML gives ints, strings, lists),
    or a UserError naming where it came from, the field and what is allowed."""
    fields = {f.name: f for f in dataclasses.fields(RunConfig)}
    if name not in fields or name in SWEEP_OWNED:
        known = sorted(set(fields) - set(SWEEP_OWNED))
        raise UserError(f"{where}: unknown flag {name!r}; known: {', '.join(known)}")
    kind = typing.get_type_hints(RunConfig)[name]
    union = typing.get_origin(kind) in (typing.Union, types.UnionType)
    options = [k for k in typing.get_args(kind) if k is not type(None)] if union else [kind]
    if value is None and union and type(None) in typing.get_args(kind):
        return None
    for option in options:
        converted = _convert(option, value)
        if converted is not _NO:
            return converted
    wanted = " or ".join(getattr(o, "__name__", str(o)) for o in options)
    raise UserError(f"{where}: {name}: invalid value {value!r}; expected {wanted}")


_NO = object()


def _convert(kind: object, value: object) -> object:
    """value as `kind` when it plainly is one (no bool for a number, no text for a number)."""
    if kind is bool:
        return value if isinstance(value, bool) else _NO
    if kind is int:
        return value if isinstance(value, int) and not isinstance(value, bool) else _NO
    if kind is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return float(value) if ok else _NO
    if kind is str:
        ok = isinstance(value, (str, int, float)) and not isinstance(value, bool)
        return str(value) if ok else _NO
    if kind is Path:
        return Path(value) if isinstance(value, str) else _NO
    if typing.get_origin(kind) is tuple:
        items = value if isinstance(value, list) else [value]
        return tuple(str(v) for v in items) if all(isinstance(v, str) for v in items) else _NO
    return _NO


def _check_choice(flag: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise invalid(flag, value, f"allowed: {', '.join(allowed)}")


def _check_positive(flag: str, value: int) -> None:
    if value <= 0:
        raise invalid(flag, value, "must be a positive integer")
