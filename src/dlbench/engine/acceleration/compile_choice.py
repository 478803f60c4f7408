"""Batch-1 inference compiled or eager, chosen by measurement (docs/decisions.md#batch1-compile).

A latency point (one GPU answering one query at a time; generation has its own default) runs
compiled unless `--compile`/`--no-compile` says otherwise: compiled was the faster way at every such
point measured. The choice stays the GPU's own (engine.acceleration.measured_choice): each run
records its median step by the way it ran, and where the cache's record says eager beat compiled
here, a later run without the flag runs eager. The row's compile_speedup says what the record
says."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dlbench.config import RunConfig
from dlbench.engine.acceleration.measured_choice import MeasuredChoice, point_key

COMPILED, EAGER = "compiled", "eager"
COMPILE_CHOICE = MeasuredChoice("compile_choice.json", default=COMPILED, other=EAGER)


@dataclass(frozen=True)
class CompileChoice:
    """The settings a latency point runs with, and what its row says of the choice."""

    config: RunConfig
    key: str = ""
    recorded: dict[str, float] | None = None  # None: not a latency point

    def finish(self, window_median_s: float, folder: Path | None) -> dict[str, object]:
        """Record this run's median step in `folder` (None: a cold run); the row's column."""
        if self.recorded is None:
            return {}
        ran = COMPILED if self.config.acceleration.compile else EAGER
        steps = COMPILE_CHOICE.record(folder, self.key, ran, window_median_s, self.recorded)
        return {"compile_speedup": speedup(steps)}


def speedup(steps: dict[str, float]) -> float | None:
    """Eager's median step over compiled's at the point; None until both were measured."""
    if COMPILED not in steps or EAGER not in steps:
        return None
    return steps[EAGER] / steps[COMPILED]


def choose_compile(
    config: RunConfig, latency_point: bool, left_to_record: bool, folder: Path | None
) -> CompileChoice:
    """At a latency point whose compilation the user left to dlbench (`left_to_record`), eager
    where this folder's record says it won by more than MIN_GAIN_PCT; any other run as it is."""
    if not latency_point:
        return CompileChoice(config)
    key = point_key(config, "compile")
    recorded = COMPILE_CHOICE.recorded(folder).get(key, {})
    if left_to_record and COMPILE_CHOICE.other_wins(recorded):
        config = config.replace(compile=False)
    return CompileChoice(config, key, recorded)
