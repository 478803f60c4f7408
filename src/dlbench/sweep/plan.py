"""Sweep plans: YAML files (or packaged names) that expand into a list of isolated points.

A plan has `fixed` flags and one or more `runs`, each a block of axes crossed with each other:
models, modes, batch_sizes (a number or "auto"), precisions, resolutions ([w, h]), devices,
power_limits (watts). A block may carry its own `fixed` flags that override the plan's, and
`tags` that label its rows (e.g. `purpose: latency`). `repeats: N` runs every point N times
(rows tagged `repeat=0..N-1`), so that comparisons see the between-run spread."""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import yaml

from dlbench.errors import UserError, unknown_choice

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

    def cli_args(self) -> list[str]:
        """`MODE --flag value ...`, booleans as --flag/--no-flag."""
        args = [self.mode]
        for key, value in self.flags.items():
            flag = "--" + key.replace("_", "-")
            if isinstance(value, bool):
                args.append(flag if value else "--no-" + key.replace("_", "-"))
            elif isinstance(value, (list, tuple)):
                for item in value:
                    args += [flag, str(item)]
            elif value is not None:
                args += [flag, str(value)]
        for key, value in self.all_tags.items():
            args += ["--tag", f"{key}={value}"]
        return args


@dataclass
class SweepPlan:
    """A named grid; `points()` expands it in a stable order."""

    name: str
    runs: list[dict]
    fixed: dict[str, object] = field(default_factory=dict)
    timeout_s: float = 900.0
    repeats: int = 1

    def points(self) -> list[SweepPoint]:
        """Every point in a stable order (repeats of a point one after another)."""
        points = []
        for block in self.runs:
            fixed = {**self.fixed, **block.get("fixed", {})}
            tags = {str(k): str(v) for k, v in block.get("tags", {}).items()}
            axes = [block.get(a) or _DEFAULTS[a] for a in AXES]
            for model, mode, batch, precision, res, devices, limit in itertools.product(*axes):
                flags = {"model": model, "batch_size": batch, "precision": str(precision)}
                if res:
                    flags["width"], flags["height"] = res
                flags["devices"] = str(devices)
                for k in range(self.repeats):
                    repeat = {"repeat": str(k)} if self.repeats > 1 else {}
                    points.append(SweepPoint(mode, {**fixed, **flags}, limit, {**tags, **repeat}))
        return points


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


def load_plan(name_or_path: str) -> SweepPlan:
    """A packaged plan by name, or a YAML file by path; a UserError if neither or malformed."""
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or path.exists():
        try:
            text = path.read_text()
        except OSError as exc:
            raise UserError(f"PLAN: cannot read {path}: {exc.strerror}") from exc
    elif name_or_path in packaged_plans():
        text = (resources.files("dlbench.sweep") / "plans" / f"{name_or_path}.yaml").read_text()
    else:
        raise unknown_choice("PLAN", name_or_path, [*packaged_plans(), "<file.yaml>"])
    return parse_plan(text, default_name=path.stem)


def parse_plan(text: str, default_name: str = "plan") -> SweepPlan:
    """Validate the YAML structure; unknown axes are named in the error."""
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise UserError(f"PLAN: not valid YAML: {exc}") from exc
    runs = data.get("runs") or [{k: data[k] for k in AXES if k in data}]
    for block in runs:
        unknown = set(block) - {*AXES, "fixed", "tags"}
        if unknown:
            raise UserError(f"PLAN: unknown axis {sorted(unknown)}; allowed: {', '.join(AXES)}")
        if not block.get("models"):
            raise UserError("PLAN: every run block needs a non-empty `models` list")
    return SweepPlan(
        name=data.get("name", default_name),
        runs=runs,
        fixed=data.get("fixed", {}),
        timeout_s=float(data.get("timeout_s", 900)),
        repeats=int(data.get("repeats", 1)),
    )
