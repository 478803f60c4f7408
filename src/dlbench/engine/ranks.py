"""What ranks tell each other: one agreed decision during the window, every rank's figures after."""

from __future__ import annotations

import math

import torch

from dlbench.engine.loop import Agreement, LoopResult

# Each rank's own figures, gathered once after the window (the side file shows them by rank).
RANK_FIELDS = (
    "window_s",
    "median_step_s",
    "steps",
    "energy_j",
    "avg_power_w",
    "peak_power_w",
    "temp_max_c",
    "throttle_pct",
    "device_index",
)
_TELEMETRY_FIELDS = RANK_FIELDS[3:8]


def agree_max(fabric) -> Agreement:
    """Elementwise maximum over all ranks (one small all-reduce between chunks, never inside
    one); a single process keeps its own numbers."""
    if fabric.world_size == 1:
        return lambda values: values

    def agree(values: list[float]) -> list[float]:
        local = torch.tensor(values, dtype=torch.float64, device=fabric.device)
        return fabric.all_reduce(local, reduce_op="max").cpu().tolist()

    return agree


def rank_values(loop: LoopResult, telemetry: dict, device_index: int) -> list[float]:
    """One rank's RANK_FIELDS as numbers; missing telemetry is NaN."""

    def number(key: str) -> float:
        value = telemetry.get(key)
        return math.nan if value is None else float(value)

    measured = [loop.window_s, loop.stats.median_s, float(loop.steps)]
    return [*measured, *(number(key) for key in _TELEMETRY_FIELDS), float(device_index)]


def gather_ranks(fabric, mine: list[float]) -> list[dict[str, float]]:
    """Every rank's figures on every rank (one all_gather after the window, so it costs the
    measurement nothing)."""
    local = torch.tensor(mine, dtype=torch.float64, device=fabric.device)
    everyone = fabric.all_gather(local).reshape(-1, len(RANK_FIELDS)).cpu().tolist()
    return [dict(zip(RANK_FIELDS, values)) for values in everyone]
