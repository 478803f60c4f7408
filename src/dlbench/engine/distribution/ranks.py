"""What ranks tell each other: one agreed decision during the window, every rank's figures after."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import torch

from dlbench.engine.distribution.devices import gpu_uuid
from dlbench.engine.timing.loop import LoopResult
from dlbench.engine.timing.settings import Agreement
from dlbench.results.environment import gpu_facts
from dlbench.results.job import HIGHEST, SUMMED
from dlbench.telemetry.isolation import own_process_ids

# What each rank's telemetry says of its own GPU, gathered once after the window: the job's row
# sums or bounds them (results.job), the side file shows them by rank.
RANK_TELEMETRY = (
    *SUMMED,
    "power_limit_w",
    *HIGHEST,
    "other_gpu_process_list",
    "gpu_processes_hidden",
    "cpu_energy_j",
)


def agree_max(fabric) -> Agreement:
    """Elementwise maximum over all ranks (one small all-reduce between chunks, never inside
    one); a single process keeps its own numbers."""
    if fabric.world_size == 1:
        return lambda values: values

    def agree(values: list[float]) -> list[float]:
        local = torch.tensor(values, dtype=torch.float64, device=fabric.device)
        return fabric.all_reduce(local, reduce_op="max").cpu().tolist()

    return agree


def job_process_ids(fabric) -> set[int]:
    """The job's own processes: every rank and the process that started it (Lightning's rank
    0, torchrun's agent, a sweep), gathered once before the window. They hold contexts on the
    job's GPUs and are no neighbour for the isolation check."""
    if fabric.world_size == 1:
        return own_process_ids()
    local = torch.tensor([os.getpid(), os.getppid()], dtype=torch.int64, device=fabric.device)
    return {int(pid) for pid in fabric.all_gather(local).flatten().tolist()}


def rank_facts(
    loop: LoopResult, telemetry: dict, device: torch.device, device_index: int
) -> dict[str, object]:
    """One rank's own figures: its window, its GPU (which one, what it is) and its telemetry."""
    cuda = device.type == "cuda"
    facts: dict[str, object] = {
        "window_s": loop.window_s,
        "median_step_s": loop.stats.median_s,
        "steps": loop.steps,
        "device_index": device_index,
        "hostname": socket.gethostname(),
        "gpu_uuid": gpu_uuid(device),
        **gpu_facts(device if cuda else None),
    }
    facts.update(
        peak_memory_allocated_mb=torch.cuda.max_memory_allocated(device) / 2**20 if cuda else None,
        peak_memory_reserved_mb=torch.cuda.max_memory_reserved(device) / 2**20 if cuda else None,
    )
    facts.update({key: telemetry.get(key) for key in RANK_TELEMETRY})
    return facts


def gather_ranks(fabric, mine: dict[str, object]) -> list[dict[str, object]]:
    """Every rank's facts on every rank, in rank order (one gather after the window, so it
    costs the measurement nothing)."""
    if fabric.world_size == 1:
        return [mine]
    import torch.distributed as dist

    everyone: list[dict[str, object] | None] = [None] * fabric.world_size
    dist.all_gather_object(everyone, mine)
    return [dict(r or {}) for r in everyone]


def rank_log_path(path: Path | None, rank: int, world_size: int) -> Path | None:
    """Each rank samples its own GPU into its own file: `log.csv` -> `log.rank1.csv`."""
    if path is None or world_size == 1:
        return path
    return path.with_name(f"{path.stem}.rank{rank}{path.suffix}")


def largest_of_ranks(per_rank: list[dict[str, object]], key: str) -> float | None:
    """The largest of the ranks' figures (the GPU that came closest to its memory), or None."""
    figures = [float(r[key]) for r in per_rank if r.get(key) is not None]
    return max(figures) if figures else None
