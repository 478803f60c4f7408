"""Sweep plans: YAML files (or packaged names) that expand into a list of points.

A plan has `fixed` flags and one or more `runs`, each a block of axes crossed with each other:
models, modes, batch_sizes (a number or "auto"), precisions, resolutions ([w, h]), devices,
power_limits (watts). A block may carry its own `fixed` flags that override the plan's, and
`tags` that label its rows (e.g. `purpose: latency`). `repeats: N` runs every point N times
(rows tagged `repeat=0..N-1`), so that comparisons see the between-run spread. A plan's `serve`
list holds `dlbench serve` runs, one mapping of its flags each (the plan's `fixed` flags are a
training or inference run's and do not apply to them); each runs in a process of its own."""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dlbench.config import CONFIG_KEY, RunConfig, resolved_strategy
from dlbench.config.flags import config_args
from dlbench.config.fp8_recipes import resolve_recipe
from dlbench.config.limits import DEFAULT_POINT_TIMEOUT_S
from dlbench.config.row_tags import RowTags
from dlbench.errors import UserError
from dlbench.results.pairing import key_text, kind_of
from dlbench.serve.settings import ServeSettings

if TYPE_CHECKING:
    from pathlib import Path

    from dlbench.subprocesses import ChildResult
    from dlbench.sweep.launcher import Launcher

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

    def launch(
        self, launcher: Launcher, timeout_s: float, output: Path, run_id: str, tags: dict[str, str]
    ) -> ChildResult:
        """Run the point in a process of its own (DDP ranks, a batch-size search, `--isolation
        process`; the sweep's workers run the others: sweep.pipeline), its row in `output`
        under `run_id` with `tags` as columns."""
        config = self.config(output=output, run_id=run_id, tags=RowTags.of(tags))
        return launcher.run_alone(config_args(config, self.auto_batch), timeout_s)

    def matches(self, row: dict[str, str]) -> bool:
        """Whether a stored row measured this point: a benchmark row, on the fields the point
        sets and its distinguishing tags."""
        if kind_of(row) != "benchmark":
            return False
        wanted = {"mode": self.mode, **self.flags}
        if wanted.get("batch_size") == "auto":
            wanted.pop("batch_size")
            if row.get("batch_size_mode") != "auto":
                return False
        if not _same_tags(row, self.all_tags):
            return False
        processes = int(wanted.get("devices", 1)) * int(wanted.get("num_nodes", 1))
        wanted["strategy"] = resolved_strategy(str(wanted.get("strategy", "auto")), processes)
        if wanted.get("precision") == "fp8":  # no recipe named: the mode's default ran
            wanted["fp8_recipe"] = resolve_recipe(wanted.get("fp8_recipe"), self.mode).name
        applies = [k for k in CONFIG_KEY if k in wanted and key_text(row.get(k), k) != ""]
        # an empty value: the key does not apply (seq_len of an image model)
        return all(_measured(key, wanted[key], row) for key in applies)


# Settings a row records as they ran, not as asked: `cuda_graphs` is False after a failed
# capture, on a CPU, or where the timed replays lost to the eager step. A point that asked for
# graphs is measured by such a row (a rerun would end eager again); one that asked for none
# is never a graphed row's.
AS_RUN_WHEN_ASKED = ("cuda_graphs",)
# Settings a point leaves to the device where it does not set them (a server compiles on a GPU,
# not on the CPU): any row's value is what the point runs there.
RESOLVED_WHEN_UNSET = ("compile",)


def _measured(key: str, asked: object, row: dict[str, str]) -> bool:
    """Whether the row's value of `key` is what a point asking `asked` runs."""
    if key in AS_RUN_WHEN_ASKED and asked is True:
        return True
    if key in RESOLVED_WHEN_UNSET and asked is None:
        return True
    return key_text(row.get(key), key) == key_text(asked, key)


def _same_tags(row: dict[str, str], tags: dict[str, str]) -> bool:
    """Whether a row carries a point's tags and distinguishing tags, as one key text."""
    return all(
        key_text(row.get(k), k) == key_text(tags.get(k), k) for k in (*DISTINGUISHING_TAGS, *tags)
    )


@dataclass(frozen=True)
class ServePoint:
    """One `dlbench serve` run of a plan: its settings and tags (a repeat, a shard, the block's)."""

    settings: ServeSettings
    tags: dict[str, str] = field(default_factory=dict)
    mode = "infer"
    power_limit_w = None
    auto_batch = False

    @property
    def all_tags(self) -> dict[str, str]:
        return dict(self.tags)

    @property
    def flags(self) -> dict[str, object]:
        """What a failed point's row says it was: every setting that decides what is served."""
        return {**self.settings.columns(), "run_kind": "serve"}

    @property
    def label(self) -> str:
        parts = [self.settings.model, "serve", self.settings.scenario]
        if "repeat" in self.tags:
            parts.append(f"#{self.tags['repeat']}")
        return " ".join(parts)

    def with_run(self, **fields: object) -> ServeSettings:
        """The settings the point runs: `fields` set its CSV, run id and tags (a mapping)."""
        tags = fields.pop("tags", self.all_tags)
        pairs = tuple(f"{k}={v}" for k, v in dict(tags).items())  # type: ignore[call-overload]
        return dataclasses.replace(self.settings, tags=pairs, **fields)  # type: ignore[arg-type]

    def cli_args(self, **fields: object) -> list[str]:
        """The `dlbench serve` command line of the point."""
        return self.with_run(**fields).cli_args()

    def launch(
        self, launcher: Launcher, timeout_s: float, output: Path, run_id: str, tags: dict[str, str]
    ) -> ChildResult:
        """Run the point as `dlbench serve` in a process of its own (a serve run builds its
        own model server; the worker runs benchmark points)."""
        args = self.cli_args(output=output, run_id=run_id, tags=tags)
        return launcher.run_alone(args, timeout_s)

    def matches(self, row: dict[str, str]) -> bool:
        """Whether a stored row served this point: a serve row measured with every setting the
        point's (ServeSettings.columns: model, batcher, bound, rate, minimums, compile ...),
        with its tags."""
        if kind_of(row) != "serve":
            return False
        for key, value in self.settings.columns().items():
            if not _measured(key, value, row):
                return False
        return _same_tags(row, self.all_tags)


@dataclass
class SweepPlan:
    """A named grid; `points()` expands it in a stable order."""

    name: str
    runs: list[dict]
    fixed: dict[str, object] = field(default_factory=dict)
    timeout_s: float = DEFAULT_POINT_TIMEOUT_S
    repeats: int = 1
    serve: list[ServePoint] = field(default_factory=list)

    def size(self) -> int:
        """How many points the grid expands to, counted without expanding it."""
        grid = sum(math.prod(len(a) for a in _axes(block)) for block in self.runs)
        return self.repeats * (grid + len(self.serve))

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
        served = [p for p in self.serve if p.tags.get(key) == value]
        if not sep or not key or not (kept or served):
            tags = {f"{k}={v}" for b in self.runs for k, v in b.get("tags", {}).items()}
            tags |= {f"{k}={v}" for p in self.serve for k, v in p.tags.items()}
            raise UserError(
                f"--only: no run of plan {self.name!r} is tagged {only!r}; "
                f"its tags: {', '.join(sorted(tags)) or 'none'}"
            )
        self.runs, self.serve = kept, served

    def set_processes(self, count: int) -> None:
        """The runs that set `processes` (launch-bound points, whose figure moves with a
        process's state) measured in `count` each; a UserError where no run sets it."""
        blocks = [b for b in self.runs if "processes" in b.get("fixed", {})]
        if not blocks:
            raise UserError(
                f"--processes: no run of plan {self.name!r} sets processes (its launch-bound "
                "points); give the plan's runs processes: 1 to make them so"
            )
        for block in blocks:
            block["fixed"] = {**block["fixed"], "processes": count}

    def points(self) -> list[SweepPoint | ServePoint]:
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
        for served in self.serve:
            for k in range(self.repeats):
                repeat = {"repeat": str(k)} if self.repeats > 1 else {}
                points.append(dataclasses.replace(served, tags={**served.tags, **repeat}))
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


def shard_points(points: list, index: int, count: int) -> list:
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
