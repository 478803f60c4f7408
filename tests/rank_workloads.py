"""A workload whose ranks differ, registered through dlbench's plugin hook (tests/plugins)
in real DDP processes.

uneven_ranks: rank 0 steps a steady 10 ms; every other rank's steps grow by 2 ms each, so the
interval of its throughput never narrows to a noise target while rank 0's does at once."""

from __future__ import annotations

import time

import torch
import torch.distributed as dist
from torch import nn

from dlbench.workloads import Batch, InputShape, Workload, register_workload
from dlbench.workloads.base import cross_entropy


class UnevenModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 4)
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        rank = dist.get_rank() if dist.is_initialized() else 0
        time.sleep(0.01 if rank == 0 else 0.005 + 0.002 * self.calls)
        return self.fc(x)


def _batch(batch_size: int, shape: InputShape, gen: torch.Generator) -> Batch:
    return Batch(torch.randn(batch_size, 8, generator=gen), torch.zeros(batch_size).long())


register_workload(
    Workload(
        name="uneven_ranks",
        summary="test workload: rank 0 steady, other ranks noisy",
        family="text",
        sample_unit="sequence",
        build=lambda shape: UnevenModel(),
        make_batch=_batch,
        loss=cross_entropy,
        analytic_flops=lambda shape, mode: None,
    )
)
