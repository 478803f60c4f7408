"""Resolve `--accelerator` and `--devices` against what this machine has."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from dlbench.errors import invalid
from dlbench.host import available_cpus


@dataclass(frozen=True)
class DevicePlan:
    """Where the run goes: Lightning's accelerator name, device count and torch device type."""

    accelerator: str  # "cuda" or "cpu"
    count: int
    num_nodes: int

    @property
    def device_type(self) -> str:
        """The torch device type of each rank."""
        return self.accelerator

    @property
    def world_size(self) -> int:
        """Processes across all nodes."""
        return self.count * self.num_nodes


def plan_devices(accelerator: str, devices: str, num_nodes: int = 1) -> DevicePlan:
    """Pick the accelerator and check the device count, or raise a UserError."""
    has_gpu = torch.cuda.is_available()
    if accelerator == "gpu" and not has_gpu:
        raise invalid("--accelerator", accelerator, "no CUDA or ROCm GPU is visible; use cpu")
    kind = "cuda" if accelerator == "gpu" or (accelerator == "auto" and has_gpu) else "cpu"
    available = torch.cuda.device_count() if kind == "cuda" else _cpu_ranks_allowed()
    count = available if devices == "all" else int(devices)
    if count > available:
        where = f"{available} GPU(s) visible" if kind == "cuda" else "CPU ranks are capped"
        raise invalid("--devices", devices, f"at most {available} ({where})")
    return DevicePlan(accelerator=kind, count=count, num_nodes=num_nodes)


# CPU ranks (gloo) per core at most: a few share a core well enough to test a multi-GPU job's
# logic on a small machine (CI's 2 cores run 4 ranks); thousands are a typo.
CPU_RANKS_PER_CORE = 4


def _cpu_ranks_allowed() -> int:
    """CPU DDP ranks (gloo): up to CPU_RANKS_PER_CORE for each core."""
    return available_cpus() * CPU_RANKS_PER_CORE


def gpu_uuid(device: torch.device) -> str:
    """The GPU's UUID as torch reports it (NVML's without the `GPU-` prefix); `cpu` for the
    host. Attained peaks are kept by it (results.peaks.attained)."""
    if device.type != "cuda":
        return "cpu"
    return str(torch.cuda.get_device_properties(device).uuid)
