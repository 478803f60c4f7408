"""When a sweep prepares its points ahead (sweep.pipeline), which points a compiler worker takes,
and how much GPU memory a point needs beside the others.

On an NVIDIA GPU that lets several processes hold contexts (compute mode Default), or wherever
`--prepare-ahead` asks for it, a sweep runs AHEAD_WORKERS workers and a compiler; otherwise (the
CPU's default, an exclusive GPU, a plan that sets power limits, `--no-prepare-ahead`) one worker
runs the points one after another and asks no one for turns.
A point's memory is the largest peak its configuration reached in the published rows (its GPU
model's where there are any): a point never published runs with nothing beside it."""

from __future__ import annotations

from dataclasses import dataclass

from dlbench.config import RunConfig
from dlbench.engine.distribution.devices import plan_devices
from dlbench.engine.plan import is_latency_point, scenario_of
from dlbench.errors import UserError, number_or_none
from dlbench.results.published import published_folder, published_rows
from dlbench.telemetry.nvml import NvmlBackend
from dlbench.workloads import get_workload

AHEAD_WORKERS = 2  # measured in turn; each prepares while the other measures
NVML_COMPUTE_DEFAULT = 0  # nvmlComputeMode: several processes may hold contexts


@dataclass(frozen=True)
class GpuRoom:
    """The GPU a sweep's one-device points run on, as far as prepared points care."""

    name: str
    total_mb: float | None
    shared: bool  # several processes may hold a context on it


def gpu_room() -> GpuRoom | None:
    """The first visible GPU through NVML (never a CUDA context in the sweep's own process);
    None without one."""
    try:
        backend = NvmlBackend([0])
    except Exception:  # no NVML, no driver, no GPU: the CPU's sweep
        return None
    nvml, handle = backend.nvml, backend.handles[0]
    try:
        total = float(nvml.nvmlDeviceGetMemoryInfo(handle).total) / 2**20
    except Exception:
        total = None
    try:
        shared = nvml.nvmlDeviceGetComputeMode(handle) == NVML_COMPUTE_DEFAULT
    except Exception:
        shared = True
    name = backend.device_names[0]
    backend.close()
    return GpuRoom(name, total, shared)


def ahead_by_default() -> bool:
    """Whether a sweep prepares its points ahead when not told: on a GPU that takes several
    processes, where it was measured to keep every row (docs/time-to-result.md); not on the
    CPU, whose cores the measured points need."""
    room = gpu_room()
    return room is not None and room.shared


def workers_for(ahead: bool, room: GpuRoom | None, power_limits: bool) -> tuple[int, bool]:
    """How many workers measure, and whether a compiler runs beside them: prepared ahead
    where asked or by default (ahead_by_default), never where the sweep sets power limits
    (one GPU-wide setting per point) or on a GPU that takes one process at a time."""
    if not ahead or power_limits or (room is not None and not room.shared):
        return 1, False
    return AHEAD_WORKERS, True


def compiles(config: RunConfig) -> bool:
    """Whether the point's run compiles (as engine.plan resolves it): asked for, or left to
    dlbench where a GPU compiles by default (generation, batch-1 latency, fp8). A config that
    does not resolve compiles nothing here; its own run says why."""
    compile = config.acceleration.compile
    if compile is not None:
        return compile
    try:
        workload = get_workload(config.workload.model)
        where = config.devices
        devices = plan_devices(where.accelerator, where.per_node, where.num_nodes)
    except UserError:
        return False
    if devices.device_type != "cuda":
        return False
    scenario = scenario_of(workload, config.workload.mode)
    latency = is_latency_point(scenario, config.workload.batch_size, devices)
    return scenario == "generate" or latency or config.acceleration.precision == "fp8"


def memory_estimate(matches, gpu_name: str) -> float | None:
    """The largest peak GPU memory (MB) of the published rows `matches` accepts, its GPU
    model's where there are any; None where none was published."""
    rows = [r for r in published_rows(published_folder()) if matches(r)]
    own = [r for r in rows if r.get("gpu_name") == gpu_name] or rows
    peaks = [number_or_none(r.get("peak_memory_reserved_mb")) for r in own]
    known = [p for p in peaks if p is not None]
    return max(known) if known else None
