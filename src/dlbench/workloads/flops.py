"""FLOPs per sample: torch's flop counter on the real model at the real shape (on the meta
device, so it costs no memory), or the standard analytic count for decoder LLMs."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import asdict, dataclass
from math import prod
from pathlib import Path

import torch

from dlbench.caches import keep_record, positive_figure, read_record
from dlbench.errors import warn
from dlbench.workloads.base import Batch, InputShape, Workload

COUNT_BATCH = 2
# Counts kept in the cache folder (dlbench.caches, whose key names the dlbench commit that
# counted): the counter walks the model on the meta device, up to seconds of host time a point.
FLOPS_FILE = "flops.json"


@dataclass(frozen=True)
class FlopCount:
    """FLOPs for one sample in one mode, and how they were obtained."""

    per_sample: float
    method: str  # "flop_counter" or "analytic_palm"


def conv_backward_flops(
    grad_out_shape: list[int],
    x_shape: list[int],
    w_shape: list[int],
    _bias: object,
    _stride: object,
    _padding: object,
    _dilation: object,
    transposed: bool,
    _output_padding: object,
    groups: int,
    output_mask: list[bool],
    out_shape: list[list[int]] | None = None,
    **_: object,
) -> int:
    """Backward of a (grouped) convolution: each gradient costs what the forward costs.

    torch's own formula counts grad-weight as if every input channel met every output channel,
    which overstates a grouped conv by `groups` (depthwise layers by their channel count). Here:
    grad-input is a convolution of grad-out with the weight over the input's positions, and
    grad-weight a reduction over batch and output positions, both with C_in / groups channels
    per output channel, i.e. exactly the forward's multiply-adds."""
    weight_taps = prod(w_shape)  # C_out x C_in/groups x kernel: already per group
    out_positions = prod((x_shape if transposed else grad_out_shape)[2:])
    per_gradient = 2 * x_shape[0] * weight_taps * out_positions
    return per_gradient * (int(bool(output_mask[0])) + int(bool(output_mask[1])))


def count_module_flops(run: Callable[[], object]) -> int:
    """FLOPs of the matmuls, convolutions and attention that `run()` executes (torch's counter,
    with grouped-convolution backward counted right)."""
    from torch.utils.flop_counter import FlopCounterMode

    aten = torch.ops.aten
    with FlopCounterMode(
        display=False, custom_mapping={aten.convolution_backward: conv_backward_flops}
    ) as counter:
        run()
    return counter.get_total_flops()


def counted_flops(workload: Workload, shape: InputShape, mode: str) -> FlopCount:
    """Count matmul/conv FLOPs of forward (+ backward for train) on the meta device."""
    with torch.device("meta"):
        model = workload.build(shape)
    batch = workload.make_batch(COUNT_BATCH, shape, torch.Generator().manual_seed(0))
    batch = Batch(batch.inputs.to("meta"), batch.targets.to("meta"))

    def step() -> None:
        loss = workload.loss(model(batch.inputs), batch.targets)
        if mode == "train":
            loss.backward()

    return FlopCount(count_module_flops(step) / COUNT_BATCH, "flop_counter")


def linear_flops_per_sample(
    model: torch.nn.Module, inputs: torch.Tensor, names: Collection[str]
) -> float:
    """Forward FLOPs per sample of the Linear layers of `model` named in `names`: twice in times
    out for each row through each, the rows counted in one forward of `inputs` (a batch on the meta
    device, so it costs no memory and no arithmetic)."""
    total = 0

    def count(module: torch.nn.Module, args: tuple) -> None:
        nonlocal total
        rows = args[0].numel() // module.in_features
        total += 2 * rows * module.in_features * module.out_features

    wanted = set(names)
    hooks = [
        module.register_forward_pre_hook(count)
        for name, module in model.named_modules()
        if name in wanted
    ]
    try:
        with torch.no_grad():
            model(inputs)
    finally:
        for hook in hooks:
            hook.remove()
    return total / inputs.shape[0]


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


def recorded_flops_per_sample(
    workload: Workload, shape: InputShape, mode: str, folder: Path | None
) -> FlopCount | None:
    """`flops_per_sample`, counted once per workload, shape and mode and kept in `folder` (the
    run's cache folder; None for a cold run, which counts and keeps nothing)."""
    key = f"{workload.name}|{shape.width}x{shape.height}x{shape.seq_len}|{mode}"
    record = read_record(folder, FLOPS_FILE)
    kept = record.get(key)
    if isinstance(kept, dict):
        per_sample = positive_figure(kept.get("per_sample"))
        if per_sample is not None and isinstance(kept.get("method"), str):
            return FlopCount(per_sample, kept["method"])
        warn(f"the cache folder's {FLOPS_FILE} holds no possible count for {key}: counted again")
    count = flops_per_sample(workload, shape, mode)
    if count is not None and folder is not None:  # a folder that refuses it costs a recount
        keep_record(folder, FLOPS_FILE, {**record, key: asdict(count)})
    return count
