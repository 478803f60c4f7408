"""Rows are assembled here: the columns every row starts with, a run's settings as columns, a
failed run's row, and the builder that makes one row from named parts."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime, timezone

from dlbench.config import CONFIG_KEY, RunConfig
from dlbench.results.schema import COLUMNS, SCHEMA_VERSION
from dlbench.results.verdict import verdict_columns


class ColumnClash(RuntimeError):
    """Two parts of one row gave the same column, or a part amended one no part gave: which
    figure the row holds would be an accident of the order of a merge."""


class RowBuilder:
    """One row from named parts. A column comes from one part; a part that knows better (the
    measured width over the one asked for, the job's GPUs over rank 0's) says so with `amend`."""

    def __init__(self) -> None:
        self._columns: dict[str, object] = {}
        self._source: dict[str, str] = {}

    def add(self, source: str, part: Mapping[str, object]) -> RowBuilder:
        """New columns from `source`; one another part gave is a ColumnClash."""
        for key, value in part.items():
            if key in self._columns:
                raise ColumnClash(f"column {key!r} given by {self._source[key]} and {source}")
            self._columns[key], self._source[key] = value, source
        return self

    def amend(self, source: str, part: Mapping[str, object]) -> RowBuilder:
        """Columns another part gave, replaced by `source`'s; one no part gave is a ColumnClash."""
        for key, value in part.items():
            if key not in self._columns:
                raise ColumnClash(f"{source} amends column {key!r}, which no part gave")
            self._columns[key], self._source[key] = value, source
        return self

    def decide(self, source: str, part: Mapping[str, object]) -> RowBuilder:
        """Columns whose value `source` decides from what it read of them (added, or amended
        where a part gave them): a verdict drawn from several parts, such as `host_bound`."""
        for key, value in part.items():
            (self.amend if key in self._columns else self.add)(source, {key: value})
        return self

    def include(self, other: RowBuilder) -> RowBuilder:
        """Every column `other` holds, each under the part that gave it there."""
        for key, value in other._columns.items():
            self.add(other._source[key], {key: value})
        return self

    def get(self, key: str) -> object:
        """A column given so far (None where none was)."""
        return self._columns.get(key)

    def has(self, key: str) -> bool:
        """Whether a part gave the column (its value may be None)."""
        return key in self._columns

    def columns(self) -> dict[str, object]:
        """The columns so far: known ones in the schema's order, then the rest (tags)."""
        known = [c for c in COLUMNS if c in self._columns]
        rest = [c for c in self._columns if c not in COLUMNS]
        return {c: self._columns[c] for c in (*known, *rest)}

    def row(self) -> dict[str, object]:
        """The finished row, with its verdict."""
        self.add("verdict", verdict_columns(self._columns))
        return self.columns()


def new_run_id() -> str:
    """A short unique id for a run."""
    return uuid.uuid4().hex[:12]


def config_columns(config: RunConfig) -> dict[str, object]:
    """The settings that move the number (CONFIG_KEY), as given, with the seed, the warm-up
    and the spread target; a loader's settings only where a loader ran."""
    columns: dict[str, object] = {key: config.setting(key) for key in CONFIG_KEY}
    if config.data.source == "synthetic":
        columns.update(data_workers=None, data_decode=None)
    return {
        **columns,
        "seed": config.measurement.seed,
        "warmup_steps": config.measurement.warmup_steps,
        "max_noise_pct": config.measurement.max_noise,
        "max_host_busy_pct": config.measurement.max_host_busy,
        **config.output.tags.columns(),
    }


def identity(run_id: str | None, status: str) -> dict[str, object]:
    """The columns every row starts with (a new run id when none is given)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id or new_run_id(),
        "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "status": status,
    }


def failure_row(
    columns: dict[str, object], status: str, error: str, env: dict[str, object]
) -> dict[str, object]:
    """A row for a run that did not finish (oom, error, timeout, interrupted): its settings
    (`config_columns`, or a sweep point's flags, with `run_id`) and the last error line."""
    settings = {k: v for k, v in columns.items() if k not in ("run_id", "run_kind")}
    first = identity(columns.get("run_id"), status)  # type: ignore[arg-type]
    kind = columns.get("run_kind", "benchmark")  # a sweep's serve point says serve
    return (
        RowBuilder()
        .add("identity", {**first, "error": error, "run_kind": kind})
        .add("settings", settings)
        .add("environment", env)
        .row()
    )
