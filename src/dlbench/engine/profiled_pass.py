"""A short profiled pass after the measured window: how busy the GPU was, which attention ran.

Small batches on a fast GPU measure the host's kernel launches, not the GPU. The profiler gives
each kernel's device interval; their union over a few steps is the GPU's busy time per step, and
divided by the median step of the (unprofiled) window it is the share of the step in which any
kernel ran. The profiler slows the host, never the kernels, so the pass stays out of the window
and its own wall time is never used. The same pass names the attention kernels that ran."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import torch

from dlbench.engine.timer import synchronize

HOST_BOUND_BUSY_PCT = 90.0  # below this the GPU waits for the host more than 10 % of each step
TARGET_PASS_S = 0.25  # profile about this long (a few steps at least, 200 at most)
MIN_STEPS, MAX_STEPS = 3, 200

# (marker in an op or kernel name, backend); the first marker found for a name wins.
_ATTENTION_MARKERS = (
    ("flash_attention_for_cpu", "flash_cpu"),
    ("cudnn_attention", "cudnn"),
    ("cudnn_generated_fort_native_sdpa", "cudnn"),
    ("efficient_attention", "efficient"),
    ("fmha_cutlass", "efficient"),
    ("flash_attention", "flash"),
    ("pytorch_flash", "flash"),
    ("flash_fwd", "flash"),
    ("attention_math", "math"),
)


def covered_us(intervals: Iterable[tuple[float, float]]) -> float:
    """Length of the union of [start, end) intervals (kernels on several streams overlap)."""
    total, reach = 0.0, -math.inf
    for start, end in sorted(intervals):
        if end <= reach:
            continue
        total += end - max(start, reach)
        reach = end
    return total


def busy_columns(kernel_us: float, steps: int, median_step_s: float) -> dict[str, object]:
    """`gpu_busy_pct` (at most 100) and `host_bound` (busy under HOST_BOUND_BUSY_PCT)."""
    busy = min(100.0, 100.0 * kernel_us / steps / (median_step_s * 1e6))
    return {"gpu_busy_pct": busy, "host_bound": busy < HOST_BOUND_BUSY_PCT}


def attention_backend(names: Iterable[str]) -> str:
    """Which fused attention ran ('flash', 'efficient', 'cudnn', 'flash_cpu', 'math'; several
    joined by '+'), from op and kernel names; empty when no attention ran."""
    found = set()
    for name in names:
        for marker, backend in _ATTENTION_MARKERS:
            if marker in name:
                found.add(backend)
                break
    return "+".join(sorted(found))


def pass_steps(median_step_s: float) -> int:
    """Enough steps for about TARGET_PASS_S, within [MIN_STEPS, MAX_STEPS]."""
    wanted = math.ceil(TARGET_PASS_S / median_step_s) if median_step_s > 0 else MAX_STEPS
    return max(MIN_STEPS, min(MAX_STEPS, wanted))


def run_profiled_pass(
    step: Callable[[int], None], device: torch.device, steps: Iterable[int], median_step_s: float
) -> dict[str, object]:
    """Profile `step(i)` for the given step indices; the row's busy and attention columns.
    On a GPU the profiler records kernels; on the CPU (where the host is the device and there
    is no busy share) the op names of one step are enough, and far cheaper."""
    indices = list(steps)
    if device.type != "cuda":
        return {"attention_backend": attention_backend(_op_names(step, indices[0]))}
    from torch.profiler import ProfilerActivity, profile

    synchronize(device)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for i in indices:
            step(i)
        synchronize(device)
    events = prof.events()
    kernels = [
        (e.time_range.start, e.time_range.end)
        for e in events
        if e.device_type.name == "CUDA" and e.time_range.end > e.time_range.start
    ]
    row: dict[str, object] = {"attention_backend": attention_backend(e.name for e in events)}
    row.update(busy_columns(covered_us(kernels), len(indices), median_step_s))
    return row


def _op_names(step: Callable[[int], None], index: int) -> set[str]:
    """The aten ops one step dispatches (a dispatch mode: no profiler start-up)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    names: set[str] = set()

    class Recorder(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            names.add(str(func.overloadpacket))
            return func(*args, **(kwargs or {}))

    with Recorder():
        step(index)
    return names
