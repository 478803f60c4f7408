"""Rows from before a column existed, read as today's: the one place that says what such a row
meant. The readers of rows from other code (analysis.load, the published rows) upgrade each
file's rows here, so the code after them asks a column, never whether the column is there; a
sweep resumes only from rows of its own code, which have every column.

A column is filled only where a file has none (its rows were written before it existed); an
empty cell of a file that has the column is what its run wrote, and stays empty."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

from dlbench.errors import number_or_none
from dlbench.results.stats import t_975


def _strategy(row: Mapping[str, object]) -> str:
    """Before `strategy`: several processes ran DDP, one ran alone."""
    world = number_or_none(row.get("world_size"))
    return "ddp" if world is not None and world > 1 else "single"


def _llm_impl(row: Mapping[str, object]) -> str:
    """Before `llm_impl`: a generation row (one with a decode rate) ran transformers' model."""
    return "hf" if number_or_none(row.get("decode_tokens_per_s")) is not None else ""


def _throughput_interval_pct(row: Mapping[str, object]) -> object:
    """Before the window's own interval: the step spread over sqrt(steps), times Student's t
    (results.stats.t_975); none where the row has no spread."""
    spread, steps = number_or_none(row.get("step_time_stdev_pct")), number_or_none(row.get("steps"))
    if spread is None or steps is None or steps <= 1:
        return ""
    return t_975(int(steps) - 1) * spread / math.sqrt(steps)


# Each column added after rows were first written, and what a row from before it meant.
IMPLIED: dict[str, Callable[[Mapping[str, object]], object]] = {
    "run_kind": lambda row: "benchmark",  # only benchmarks were run
    "data": lambda row: "synthetic",  # only batches in memory were read
    "strategy": _strategy,
    "llm_impl": _llm_impl,
    "throughput_interval_pct": _throughput_interval_pct,
}


def missing_columns(columns: object) -> list[str]:
    """The IMPLIED columns a file of these columns lacks."""
    return [c for c in IMPLIED if c not in columns]  # type: ignore[operator]


def upgraded(row: Mapping[str, object], missing: list[str] | None = None) -> dict[str, object]:
    """The row with each column its file lacks (`missing`; default: those the row lacks) filled
    as IMPLIED says."""
    filled = dict(row)
    for column in missing_columns(row) if missing is None else missing:
        filled[column] = IMPLIED[column](row)
    return filled
