"""What a serve run is given (`ServeSettings`), with its defaults and the checks of every value
and combination, stated once for the two places a serve run comes from: the `dlbench serve`
command line and a sweep plan's `serve` entries."""

from __future__ import annotations

import dataclasses
import math
import typing
from dataclasses import dataclass
from pathlib import Path

from dlbench.config.fields import ACCELERATORS, DEFAULT_OUTPUT, PRECISIONS
from dlbench.config.sections import check_count
from dlbench.errors import UserError, check_finite, check_seconds, invalid
from dlbench.results.tags import parse_tags

SCENARIOS = ("single-stream", "server", "offline")
# what a load may ask for: more is a typo, and a rate times a duration is a list of arrivals
MAX_QPS = 1e6
MAX_QUERIES = 10**7
MAX_SERVE_BATCH = 4096
MAX_SLO_MS = 60_000.0


@dataclass(frozen=True)
class ServeSettings:
    """Everything a serve run is given; `checked()` refuses what cannot run, by flag."""

    model: str = "resnet50"
    scenario: str = "server"
    qps: float | None = None
    find_qps: bool = False
    max_batch: int = 64
    batch_timeout_ms: float = 2.0
    slo_p99_ms: float | None = None
    queries: int = 1024
    min_duration: float = 10.0
    search_budget: float = 240.0
    precision: str = "bf16-true"
    accelerator: str = "auto"
    compile: bool = True
    cuda_graphs: bool = True
    channels_last: bool = True
    width: int | None = None
    height: int | None = None
    seq_len: int = 128
    seed: int = 0
    output: Path = Path(DEFAULT_OUTPUT)
    run_id: str | None = None  # a sweep's, so that it finds the row its point wrote
    tags: tuple[str, ...] = ()  # KEY=VALUE columns (a sweep's name, a repeat)

    def checked(self) -> ServeSettings:
        """These settings, or a UserError naming the first flag that cannot be."""
        if self.accelerator not in ACCELERATORS:
            raise invalid("--accelerator", self.accelerator, f"allowed: {', '.join(ACCELERATORS)}")
        if self.precision not in PRECISIONS:
            raise invalid("--precision", self.precision, f"allowed: {', '.join(PRECISIONS)}")
        check_count("--max-batch", self.max_batch, MAX_SERVE_BATCH)
        check_count("--queries", self.queries, MAX_QUERIES)
        check_count("--seq-len", self.seq_len)
        for flag, side in (("--width", self.width), ("--height", self.height)):
            if side is not None:
                check_count(flag, side)
        _in_range("--qps", self.qps, 0.0, MAX_QPS)
        _in_range("--slo-p99-ms", self.slo_p99_ms, 0.0, MAX_SLO_MS)
        _in_range("--batch-timeout-ms", self.batch_timeout_ms, -1.0, MAX_SLO_MS)
        check_seconds("--min-duration", self.min_duration)
        check_seconds("--search-budget", self.search_budget)
        self.tag_columns()
        self._check_combination()
        return self

    def tag_columns(self) -> dict[str, str]:
        """`tags` as the row's columns; a UserError for one that is no KEY=VALUE, is given twice
        or names a column the row writes."""
        return parse_tags(list(self.tags))

    def _check_combination(self) -> None:
        if self.scenario not in SCENARIOS:
            raise invalid("--scenario", self.scenario, f"allowed: {', '.join(SCENARIOS)}")
        if self.scenario == "server" and (self.qps is None) == (not self.find_qps):
            raise UserError("--qps: the server scenario takes one of --qps RATE and --find-qps")
        if self.scenario != "server" and (self.qps is not None or self.find_qps):
            flag = "--find-qps" if self.find_qps else "--qps"
            raise UserError(
                f"{flag}: only the server scenario has a rate ({self.scenario} has none)"
            )
        from dlbench.workloads import get_workload  # the registry imports torch: not at start-up

        if get_workload(self.model).family == "llm":
            raise invalid(
                "--model", self.model, "LLM serving needs continuous batching; not served"
            )
        if self.precision == "fp8":
            raise invalid("--precision", self.precision, "not served yet; use bf16-true")

    def cli_args(self) -> list[str]:
        """The `dlbench serve` command line of these settings (flags at their default left out)."""
        args = ["serve"]
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            named = field.name in ("model", "scenario")  # what a reader looks for first
            if (value == field.default and not named) or value is None:
                continue
            flag = "--" + field.name.replace("_", "-")
            if isinstance(value, bool):
                args.append(flag if value else "--no-" + flag[2:])
            elif isinstance(value, tuple):
                args += [word for item in value for word in ("--tag", item)]
            else:
                args += [flag, str(value)]
        return args


# what a plan's entry may set: the sweep sets the rest (its CSV, the row's id and tags)
SETTABLE = tuple(
    f.name for f in dataclasses.fields(ServeSettings) if f.name not in ("output", "run_id", "tags")
)


def _in_range(flag: str, value: float | None, above: float, most: float) -> None:
    """A finite number over `above` and at most `most` (None: not given)."""
    if value is None:
        return
    check_finite(flag, value)
    if not above < value <= most:
        floor = "0 or more" if above < 0 else "over 0"
        raise invalid(flag, value, f"must be {floor} and at most {most:,g}")


def settings_from_plan(entry: object, where: str) -> ServeSettings:
    """A plan's `serve` entry (a mapping of `dlbench serve` flags, underscores for dashes) as
    checked settings, or a UserError naming `where` and the flag."""
    if not isinstance(entry, dict):
        raise UserError(f"{where}: must be a mapping of serve flags, e.g. {{model: resnet50}}")
    unknown = sorted(set(map(str, entry)) - set(SETTABLE) - {"tags"})
    if unknown:
        raise UserError(f"{where}: unknown flag {unknown[0]!r}; known: {', '.join(SETTABLE)}")
    kinds = typing.get_type_hints(ServeSettings)
    values = {k: _typed(k, v, _base(kinds[k]), where) for k, v in entry.items() if k != "tags"}
    try:
        return ServeSettings(**values).checked()
    except UserError as exc:
        raise UserError(f"{where}: {exc}") from None


def _base(kind: object) -> type:
    """A setting's type without its None (`float | None` -> float)."""
    options = [k for k in typing.get_args(kind) if k is not type(None)]
    return options[0] if options else kind  # type: ignore[return-value]


_WANTED = {bool: "true or false", int: "an integer", float: "a number", str: "a name"}


def _typed(key: str, value: object, kind: type, where: str) -> object:
    """A YAML value as the setting's type: a whole number for an integer, any number for a
    float, a name as text (YAML reads `precision: 32` as a number); a UserError otherwise."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is bool and isinstance(value, bool):
        return value
    if kind is float and number:
        return float(value)  # type: ignore[arg-type]
    if kind is int and number and math.isfinite(value) and float(value).is_integer():  # type: ignore[arg-type]
        return int(value)  # type: ignore[arg-type]
    if kind is str and (number or isinstance(value, str)):
        return str(value)
    raise UserError(f"{where}: {key}: invalid value {value!r}; expected {_WANTED[kind]}")
