"""FLOPs per sample: torch's flop counter on the real model at the real shape (on the meta
device, so it costs no memory), or the standard analytic count for decoder LLMs."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from dlbench.workloads.base import Batch, InputShape, Workload

COUNT_BATCH = 2


@dataclass(frozen=True)
class FlopCount:
    """FLOPs for one sample in one mode, and how they were obtained."""

    per_sample: float
    method: str  # "flop_counter" or "analytic_palm"


def counted_flops(workload: Workload, shape: InputShape, mode: str) -> FlopCount:
    """Count matmul/conv FLOPs of forward (+ backward for train) with FlopCounterMode."""
    from torch.utils.flop_counter import FlopCounterMode

    with torch.device("meta"):
        model = workload.build(shape)
    batch = workload.make_batch(COUNT_BATCH, shape, torch.Generator().manual_seed(0))
    batch = Batch(batch.inputs.to("meta"), batch.targets.to("meta"))
    with FlopCounterMode(display=False) as counter:
        loss = workload.loss(model(batch.inputs), batch.targets)
        if mode == "train":
            loss.backward()
    return FlopCount(counter.get_total_flops() / COUNT_BATCH, "flop_counter")


def palm_flops(
    params: int, embedding_params: int, layers: int, hidden: int, seq_len: int, mode: str
) -> FlopCount:
    """PaLM appendix B: 6N + 12*L*H*T per trained token (N without the input embedding);
    a forward pass is a third of that."""
    per_token = 6 * (params - embedding_params) + 12 * layers * hidden * seq_len
    if mode != "train":
        per_token /= 3
    return FlopCount(per_token * seq_len, "analytic_palm")


def flops_per_sample(workload: Workload, shape: InputShape, mode: str) -> FlopCount | None:
    """The workload's own analytic count if it has one, else the counter; None if it fails."""
    try:
        if workload.analytic_flops is not None:
            return workload.analytic_flops(shape, mode)
        return counted_flops(workload, shape, mode)
    except Exception:
        return None
