"""The columns every row starts with, a run's settings as columns, and a failed run's row."""

from __future__ import annotations

import uuid
from datetime import datetime, timezone

from dlbench.config import CONFIG_KEY, RunConfig
from dlbench.results.schema import SCHEMA_VERSION
from dlbench.results.verdict import verdict_columns


def new_run_id() -> str:
    """A short unique id for a run."""
    return uuid.uuid4().hex[:12]


def config_columns(config: RunConfig) -> dict[str, object]:
    """The settings that move the number (CONFIG_KEY), as given, with the seed, the warm-up
    and the spread target; a loader's settings only where a loader ran."""
    columns: dict[str, object] = {key: getattr(config, key) for key in CONFIG_KEY}
    if config.data == "synthetic":
        columns.update(data_workers=None, data_decode=None)
    return {
        **columns,
        "seed": config.seed,
        "warmup_steps": config.warmup_steps,
        "max_noise_pct": config.max_noise,
        **config.extra,
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
    settings = {k: v for k, v in columns.items() if k != "run_id"}
    first = identity(columns.get("run_id"), status)  # type: ignore[arg-type]
    row = {**first, "error": error, "run_kind": "benchmark", **settings, **env}
    return {**row, **verdict_columns(row)}
