"""What every scenario shares: the interface the runner calls (engine.benchmark), what a
scenario reads of a plan, what it hands back, and the moments around its window."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import torch

from dlbench.config import RunConfig
from dlbench.engine.acceleration.precision import PrecisionPlan
from dlbench.engine.timing.loop import LoopResult
from dlbench.results.row import RowBuilder
from dlbench.workloads import InputShape, Workload


class Planned(Protocol):
    """What a scenario reads of a plan (engine.plan.Plan, a floor above the scenarios)."""

    config: RunConfig
    workload: Workload
    shape: InputShape
    precision: PrecisionPlan


@dataclass
class Measured:
    """What a scenario measured: its loop, the model's size, the row's parts it gave (each
    named by what gave it) and the settings as they ran where the run changed them."""

    loop: LoopResult
    param_count: int
    parts: RowBuilder
    as_run: dict[str, object] = field(default_factory=dict)


class Scenario(Protocol):
    """One way to run a workload: train steps, inference steps, or generation."""

    name: str
    # a sample is one input (its FLOPs give MFU, its sequence its tokens); generation counts
    # the tokens it generated and is bound by bandwidth, not FLOPs
    samples_are_inputs: bool

    def measure(self, plan: Planned, fabric, monitor, cache: Path | None) -> Measured:
        """Build, warm up, measure the window, then the passes after it."""
        ...

    def tokens_per_sample(self, plan: Planned, parts: RowBuilder) -> int | None:
        """The tokens a sample counts for energy per token (none for images)."""
        ...


def counted_energy(monitor, agree) -> bool:
    """Whether every rank's GPU has an energy counter (the same answer on every rank)."""
    [missing] = agree([float(monitor is None or monitor.counter_period_s is None)])
    return not missing


def gpu_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else ""


def quiet_baseline(device: torch.device, monitor) -> None:
    """After the build, before warm-up: peak memory counted from here, and the GPU's idle
    power read while nothing runs (the baseline of energy above idle)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
    if monitor:
        monitor.measure_idle()
