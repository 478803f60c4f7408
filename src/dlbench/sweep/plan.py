"""Sweep plans: YAML files (or packaged names) that expand into a list of isolated points.

A plan has `fixed` flags and one or more `runs`, each a block of axes crossed with each other:
models, modes, batch_sizes (a number or "auto"), precisions, resolutions ([w, h]), devices,
power_limits (watts). A block may carry its own `fixed` flags that override the plan's, and
`tags` that label its rows (e.g. `purpose: latency`). `repeats: N` runs every point N times
(rows tagged `repeat=0..N-1`), so that comparisons see the between-run spread."""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import yaml

from dlbench.config import MAX_REPEATS, MODES, RunConfig, config_args, typed_value
from dlbench.errors import UserError, one_line, unknown_choice
from dlbench.results.schema import check_tag
from dlbench.workloads import get_workload

MAX_POINTS = 10_000  # a grid larger than this runs for weeks: a typo, or several plans
AXES = ("models", "modes", "batch_sizes", "precisions", "resolutions", "devices", "power_limits")


# Tags that tell points apart: a point without one only matches rows without it.
DISTINGUISHING_TAGS = ("power_limit_request_w", "repeat")


@dataclass(frozen=True)
class SweepPoint:
    """One run of the grid: the CLI flags of a `dlbench train|infer` call, a power limit, and
    tags recorded as extra columns."""

    mode: str
    flags: dict[str, object]
    power_limit_w: float | None = None
    tags: dict[str, str] = field(default_factory=dict)

    @property
    def all_tags(self) -> dict[str, str]:
        """The point's tags, with the power limit it asks for."""
        if self.power_limit_w is None:
            return dict(self.tags)
        return {**self.tags, "power_limit_request_w": f"{self.power_limit_w:g}"}

    @property
    def label(self) -> str:
        """Short human name for progress output."""
        parts = [self.flags["model"], self.mode, f"bs{self.flags['batch_size']}"]
        parts.append(str(self.flags.get("precision", "32")))
        if self.power_limit_w:
            parts.append(f"{self.power_limit_w:g}W")
        if "repeat" in self.tags:
            parts.append(f"#{self.tags['repeat']}")
        return " ".join(str(p) for p in parts)

    @property
    def auto_batch(self) -> bool:
        """Whether the point asks `--batch-size auto`."""
        return self.flags.get("batch_size") == "auto"

    def config(self, **fields: object) -> RunConfig:
        """The RunConfig the point runs (an auto batch size as 1 until the search sets it),
        its tags as extra columns; `fields` set more (output, run_id, extra)."""
        flags = {**self.flags, "batch_size": 1} if self.auto_batch else dict(self.flags)
        values = {"mode": self.mode, **flags, "extra": self.all_tags, **fields}
        return RunConfig(**values)  # type: ignore[arg-type]

    def cli_args(self, **fields: object) -> list[str]:
        """The `dlbench` command line of the point (for --dry-run and its own process)."""
        return config_args(self.config(**fields), self.auto_batch)


@dataclass
class SweepPlan:
    """A named grid; `points()` expands it in a stable order."""

    name: str
    runs: list[dict]
    fixed: dict[str, object] = field(default_factory=dict)
    timeout_s: float = 900.0
    repeats: int = 1

    def size(self) -> int:
        """How many points the grid expands to, counted without expanding it."""
        return self.repeats * sum(math.prod(len(a) for a in _axes(block)) for block in self.runs)

    def check_size(self) -> None:
        """A UserError for a grid of more than MAX_POINTS points, before it is expanded."""
        if self.size() > MAX_POINTS:
            raise UserError(
                f"PLAN: {self.size():,} points, over {MAX_POINTS:,}; split the grid into plans "
                "(or shards) that can end"
            )

    def keep_tagged(self, only: str) -> None:
        """Keep the runs tagged `KEY=VALUE` (`--only purpose=latency`: part of a plan again,
        without a second plan that repeats its settings); a UserError when none is."""
        key, sep, value = only.partition("=")
        kept = [b for b in self.runs if str(b.get("tags", {}).get(key, "")) == value]
        if not sep or not key or not kept:
            tags = sorted({f"{k}={v}" for b in self.runs for k, v in b.get("tags", {}).items()})
            raise UserError(
                f"--only: no run of plan {self.name!r} is tagged {only!r}; "
                f"its tags: {', '.join(tags) or 'none'}"
            )
        self.runs = kept

    def points(self) -> list[SweepPoint]:
        """Every point in a stable order (repeats of a point one after another)."""
        points = []
        for block in self.runs:
            fixed = {**self.fixed, **block.get("fixed", {})}
            tags = {str(k): str(v) for k, v in block.get("tags", {}).items()}
            axes = _axes(block)
            for model, mode, batch, precision, res, devices, limit in itertools.product(*axes):
                flags = {"model": model, "batch_size": batch, "precision": str(precision)}
                if res:
                    flags["width"], flags["height"] = res
                flags["devices"] = str(devices)
                for k in range(self.repeats):
                    repeat = {"repeat": str(k)} if self.repeats > 1 else {}
                    points.append(SweepPoint(mode, {**fixed, **flags}, limit, {**tags, **repeat}))
        return points


def _axes(block: dict) -> list[list]:
    """A block's axes in AXES order, each as given or its default."""
    return [block.get(a) or _DEFAULTS[a] for a in AXES]


def shard_points(points: list[SweepPoint], index: int, count: int) -> list[SweepPoint]:
    """Every `count`-th point from the `index`-th; with more than one shard each point is tagged
    `shard=K/N`, since shards that share a host also share its CPUs and PCIe."""
    if count == 1:
        return points
    tag = {"shard": f"{index}/{count}"}
    return [dataclasses.replace(p, tags={**p.tags, **tag}) for p in points[index::count]]


_DEFAULTS = {
    "models": [],
    "modes": ["train"],
    "batch_sizes": [32],
    "precisions": ["32"],
    "resolutions": [None],
    "devices": ["1"],
    "power_limits": [None],
}


def parse_shard(text: str) -> tuple[int, int]:
    """`K/N` -> (K, N) with 0 <= K < N; a UserError otherwise."""
    index, sep, count = text.partition("/")
    if sep and index.isdigit() and count.isdigit() and 0 <= int(index) < int(count):
        return int(index), int(count)
    raise UserError(f"--shard: invalid value {text!r}; K/N with 0 <= K < N, e.g. 1/4")


def packaged_plans() -> list[str]:
    """Names of the plans shipped inside the package."""
    folder = resources.files("dlbench.sweep") / "plans"
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".yaml"))


PLAN_MAX_BYTES = 2**20  # a plan is a page of YAML; anything larger is the wrong file


def _check_plan_file(path: Path) -> None:
    """A UserError for a plan path that is no regular file (/dev/zero would be read until
    memory ends) or is too large to be a plan; a missing one is left to the read."""
    if not path.exists():
        return
    if not path.is_file():
        raise UserError(f"PLAN: {path} is not a regular file")
    if path.stat().st_size > PLAN_MAX_BYTES:
        raise UserError(
            f"PLAN: {path} is over {PLAN_MAX_BYTES // 2**20} MiB; a plan is a short YAML file"
        )


def load_plan(name_or_path: str) -> SweepPlan:
    """A packaged plan by name, or a YAML file by path; a UserError if neither or malformed."""
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or path.exists():
        _check_plan_file(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise UserError(f"PLAN: cannot read {path}: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise UserError(f"PLAN: {path} is not a UTF-8 text (YAML) file") from None
    elif name_or_path in packaged_plans():
        text = (resources.files("dlbench.sweep") / "plans" / f"{name_or_path}.yaml").read_text()
    else:
        raise unknown_choice("PLAN", name_or_path, [*packaged_plans(), "<file.yaml>"])
    return parse_plan(text, default_name=path.stem)


def parse_plan(text: str, default_name: str = "plan") -> SweepPlan:
    """The plan's YAML checked against the schema (types, known axes and flags), each point
    against RunConfig and the workload registry: a UserError naming the place, before any
    point runs."""
    try:
        data = yaml.load(text, Loader=_PlanLoader)  # a SafeLoader
    except yaml.YAMLError as exc:
        raise UserError(f"PLAN: not valid YAML: {one_line(str(exc))}") from None
    except RecursionError:
        raise UserError("PLAN: nested too deeply to be a plan") from None
    data = {} if data is None else data
    if not isinstance(data, dict):
        raise UserError(f"PLAN: must be a mapping of {', '.join(_TOP_LEVEL)}; got a {_kind(data)}")
    unknown = sorted(set(map(str, data)) - set(_TOP_LEVEL) - set(AXES))
    if unknown:
        raise UserError(f"PLAN: unknown key {unknown}; allowed: {', '.join(_TOP_LEVEL + AXES)}")
    runs = data.get("runs", [{k: data[k] for k in AXES if k in data}])
    if not isinstance(runs, list) or not runs:
        raise UserError("PLAN: runs: must be a non-empty list of blocks (models: [...], ...)")
    plan = SweepPlan(
        name=str(data.get("name", default_name)),
        runs=[_check_block(block, f"PLAN: runs[{i}]") for i, block in enumerate(runs)],
        fixed=_check_fixed(data.get("fixed", {}), "PLAN: fixed"),
        timeout_s=_positive(data.get("timeout_s", 900), "PLAN: timeout_s", float),
        repeats=_positive(data.get("repeats", 1), "PLAN: repeats", int, MAX_REPEATS),
    )
    plan.check_size()
    check_points(plan.points())
    return plan


class _PlanLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a key given twice in one mapping (it keeps the last
    and drops the first without a word, so half a plan would never run)."""

    def construct_mapping(self, node, deep=False):
        seen: set[object] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, (str, int, float, bool)) and key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} given twice", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


_TOP_LEVEL = ("name", "timeout_s", "repeats", "fixed", "runs")
_BLOCK_KEYS = (*AXES, "fixed", "tags")


def _kind(value: object) -> str:
    return {list: "list", dict: "mapping", str: "string"}.get(type(value), type(value).__name__)


def _positive(value: object, where: str, kind: type, most: float = math.inf) -> float | int:
    """A positive int (or finite number, for `kind` float), at most `most`."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not number or (kind is int and not isinstance(value, int)):
        raise UserError(f"{where}: invalid value {value!r}; a positive {kind.__name__}")
    if not math.isfinite(value) or value <= 0:
        raise UserError(f"{where}: invalid value {value!r}; a positive {kind.__name__}")
    if value > most:
        raise UserError(f"{where}: invalid value {value!r}; at most {most:,}")
    return kind(value)


def _check_fixed(fixed: object, where: str) -> dict[str, object]:
    """Flags every point of the plan (or block) gets, typed as RunConfig's fields."""
    if not isinstance(fixed, dict):
        raise UserError(f"{where}: must be a mapping of flag: value; got a {_kind(fixed)}")
    return {str(k): typed_value(str(k), v, where) for k, v in fixed.items()}


def _check_block(block: object, where: str) -> dict:
    """One run block: known keys, every axis a non-empty list of valid values."""
    if not isinstance(block, dict):
        raise UserError(f"{where}: must be a mapping of axes; got a {_kind(block)}")
    unknown = sorted(set(map(str, block)) - set(_BLOCK_KEYS))
    if unknown:
        raise UserError(f"{where}: unknown axis {unknown}; allowed: {', '.join(_BLOCK_KEYS)}")
    checked: dict = {}
    for axis in AXES:
        if axis not in block:
            continue
        values = block[axis]
        if not isinstance(values, list) or not values:
            raise UserError(
                f"{where}.{axis}: must be a non-empty list, e.g. {axis}: [{_EXAMPLES[axis]}]; "
                f"got {values!r}"
            )
        checked[axis] = [_AXIS_CHECKS[axis](v, f"{where}.{axis}") for v in values]
    if not checked.get("models"):
        raise UserError(f"{where}: every run block needs a non-empty `models` list")
    checked["fixed"] = _check_fixed(block.get("fixed", {}), f"{where}.fixed")
    tags = block.get("tags", {})
    if not isinstance(tags, dict):
        raise UserError(f"{where}.tags: must be a mapping of name: label; got a {_kind(tags)}")
    for key in tags:
        check_tag(str(key), f"{where}.tags")
    checked["tags"] = tags
    return checked


def _text(value: object, where: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise UserError(f"{where}: invalid value {value!r}; a name")
    return str(value)


def _mode(value: object, where: str) -> str:
    if value not in MODES:
        raise UserError(f"{where}: invalid value {value!r}; allowed: {', '.join(MODES)}")
    return str(value)


def _batch(value: object, where: str) -> int | str:
    return value if value == "auto" else _positive(value, where, int)


def _resolution(value: object, where: str) -> list[int]:
    if not isinstance(value, list) or len(value) != 2:
        raise UserError(f"{where}: invalid value {value!r}; [width, height], e.g. [224, 224]")
    return [_positive(side, where, int) for side in value]


def _devices(value: object, where: str) -> int | str:
    return value if value == "all" else _positive(value, where, int)


_AXIS_CHECKS = {
    "models": _text,
    "modes": _mode,
    "batch_sizes": _batch,
    "precisions": _text,
    "resolutions": _resolution,
    "devices": _devices,
    "power_limits": lambda v, where: _positive(v, where, float),
}
_EXAMPLES = {
    "models": "resnet50, vit",
    "modes": "train, infer",
    "batch_sizes": "32, 64",
    "precisions": "bf16-mixed",
    "resolutions": "[224, 224]",
    "devices": "1, 2",
    "power_limits": "300, 400",
}


def check_points(points: list[SweepPoint]) -> None:
    """Each point as the run would resolve it (RunConfig's checks, the workload and its input
    size), so that a plan whose points cannot run is refused whole, before the first starts."""
    for point in points:
        try:
            config = point.config()
            workload = get_workload(config.model)
            workload.shape(config.width, config.height, config.seq_len)
        except UserError as exc:
            raise UserError(f"PLAN: point `{point.label}`: {exc}") from None
