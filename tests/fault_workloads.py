"""Workloads that fail on purpose, registered through dlbench's plugin hook (tests/plugins)
in the tests' processes.

fault_oom raises torch's real OutOfMemoryError above DLBENCH_FAULT_MAX_BATCH (default 16), as a
GPU would; fault_crash kills its process; fault_hang never finishes a step; steady takes 20 ms a
step, so its throughput is known whichever process runs it."""

from __future__ import annotations

import os
import signal
import time

import torch
from torch import nn

from dlbench.workloads import Batch, InputShape, Workload, register_workload
from dlbench.workloads.base import cross_entropy


class FaultModel(nn.Module):
    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind
        self.fc = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        limit = int(os.environ.get("DLBENCH_FAULT_MAX_BATCH", "16"))
        if self.kind == "oom" and x.shape[0] > limit:
            raise torch.OutOfMemoryError(f"CUDA out of memory. Tried to allocate {x.shape[0]} GiB")
        if self.kind == "crash":
            os.kill(os.getpid(), signal.SIGKILL)
        if self.kind == "hang":
            time.sleep(3600)
        if self.kind == "steady":
            time.sleep(0.02)
        return self.fc(x)


def _batch(batch_size: int, shape: InputShape, gen: torch.Generator) -> Batch:
    return Batch(torch.randn(batch_size, 8, generator=gen), torch.zeros(batch_size).long())


for _kind in ("oom", "crash", "hang", "steady"):
    register_workload(
        Workload(
            name=_kind if _kind == "steady" else f"fault_{_kind}",
            summary=f"test workload that fails by {_kind}",
            family="text",
            sample_unit="sequence",
            build=lambda shape, kind=_kind: FaultModel(kind),
            make_batch=_batch,
            loss=cross_entropy,
            analytic_flops=lambda shape, mode: None,
        )
    )


class HostSyncModel(nn.Module):
    """Reads a value back to the host in its forward, as some models do: a CUDA graph cannot
    capture that (the host would wait on a stream that is only being recorded)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = float(x.abs().max().item()) or 1.0
        return self.fc(x / scale)


register_workload(
    Workload(
        name="host_sync",
        summary="test workload whose forward syncs with the host (cannot be graph-captured)",
        family="text",
        sample_unit="sequence",
        build=lambda shape: HostSyncModel(),
        make_batch=_batch,
        loss=cross_entropy,
        analytic_flops=lambda shape, mode: None,
    )
)
