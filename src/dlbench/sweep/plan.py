"""Sweep plans: YAML files (or packaged names) that expand into a list of points.

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

from dlbench.config import RunConfig
from dlbench.config.flags import config_args
from dlbench.config.tags import RowTags
from dlbench.errors import UserError

MAX_POINTS = 10_000  # a grid larger than this runs for weeks: a typo, or several plans
AXES = ("models", "modes", "batch_sizes", "precisions", "resolutions", "devices", "power_limits")


# Tags that tell points apart: a point without one only matches rows without it.
DISTINGUISHING_TAGS = ("power_limit_request_w", "repeat")


@dataclass(frozen=True)
class SweepPoint:
    """One run of the grid: the CLI flags of a `dlbench train|infer` call, a power limit, and
    tags recorded as columns of their own."""

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
        its tags as columns; `fields` set more (output, run_id, tags)."""
        flags = {**self.flags, "batch_size": 1} if self.auto_batch else dict(self.flags)
        values = {"mode": self.mode, **flags, "tags": RowTags(self.all_tags), **fields}
        return RunConfig.of(**values)

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
                flags = {k: v for k, v in flags.items() if _from_axis(k, block, fixed)}
                for k in range(self.repeats):
                    repeat = {"repeat": str(k)} if self.repeats > 1 else {}
                    points.append(SweepPoint(mode, {**fixed, **flags}, limit, {**tags, **repeat}))
        return points


# The flag each axis sets; a flag the plan fixes wins over an axis the block leaves out.
_AXIS_OF = {
    "model": "models",
    "batch_size": "batch_sizes",
    "precision": "precisions",
    "width": "resolutions",
    "height": "resolutions",
    "devices": "devices",
}


def _from_axis(flag: str, block: dict, fixed: dict) -> bool:
    """Whether the axis sets `flag`: the block gives the axis, or nothing fixes the flag (the
    axis's default then), so `fixed: {devices: 2}` is not undone by the default of 1."""
    return _AXIS_OF[flag] in block or flag not in fixed


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
