"""A short profiled pass after the measured window: how busy the GPU was, which attention ran.

Small batches on a fast GPU measure the host's kernel launches, not the GPU. The profiler gives
each kernel's device interval; their union over a few steps is the GPU's busy time per step, and
divided by the median step of the (unprofiled) window it is the share of the step in which any
kernel ran. The profiler slows the host, never the kernels, so the pass stays out of the window
and its own wall time is never used. The same pass names the attention kernels that ran."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Iterable

import torch

from dlbench.console import stderr
from dlbench.engine.timing.timer import synchronize

HOST_BOUND_BUSY_PCT = 90.0  # below this share busy, the GPU waits for the host a tenth of each step
# Profile about this long, in MIN_STEPS to MAX_STEPS steps: the busy share is each step's own
# (the same kernels every step): a longer pass costs collection (docs/decisions.md#warmup-default).
TARGET_PASS_S = 0.1
MIN_STEPS, MAX_STEPS = 2, 100
ISSUE_BURST = 8  # launches timed back to back: fewer than a launch queue holds

# (marker in an op or kernel name, backend); the first marker found for a name wins.
_ATTENTION_MARKERS = (
    ("decode_attention", "triton_decode"),  # dlbench's batch-1 LLM decode kernel
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


def covered_length(intervals: Iterable[tuple[float, float]]) -> float:
    """Length of the union of [start, end) intervals, in their unit (kernels on several
    streams overlap; a sweep's tasks)."""
    total, reach = 0.0, -math.inf
    for start, end in sorted(intervals):
        if end <= reach:
            continue
        total += end - max(start, reach)
        reach = end
    return total


def busy_columns(kernel_us: float, steps: int, median_step_s: float) -> dict[str, object]:
    """`gpu_busy_pct` (at most 100) and `host_bound` (busy under HOST_BOUND_BUSY_PCT), from the
    kernel time of `steps` profiled steps (or units) and the window's median step."""
    busy = min(100.0, 100.0 * kernel_us / steps / (median_step_s * 1e6))
    return {"gpu_busy_pct": busy, "host_bound": busy < HOST_BOUND_BUSY_PCT}


def window_busy_pct(busy_pct: float, median_step_s: float, steps: int, window_s: float) -> float:
    """How busy the GPU was over the whole window, in %: the median step's busy share times the
    median step's share of the window. Steps that waited for input (a loader behind now and
    then) stretch the window past steps x median; a host that waits while the device stays
    busy (inside nvJPEG's device synchronisation) does not."""
    return busy_pct * median_step_s * steps / window_s if window_s > 0 else math.nan


def attention_backend(names: Iterable[str]) -> str:
    """Which attention ran ('flash', 'efficient', 'cudnn', 'flash_cpu', 'triton_decode';
    several joined by '+'),
    from op and kernel names; 'math' when SDPA was called but no fused kernel ran; empty when
    no SDPA ran (convolutions, or attention written out by hand)."""
    found, sdpa = set(), False
    for name in names:
        sdpa = sdpa or name.endswith("scaled_dot_product_attention")
        for marker, backend in _ATTENTION_MARKERS:
            if marker in name:
                found.add(backend)
                break
    if sdpa and not found:
        return "math"
    return "+".join(sorted(found))


def pass_steps(median_step_s: float) -> int:
    """Enough steps for about TARGET_PASS_S, within [MIN_STEPS, MAX_STEPS]."""
    wanted = math.ceil(TARGET_PASS_S / median_step_s) if median_step_s > 0 else MAX_STEPS
    return max(MIN_STEPS, min(MAX_STEPS, wanted))


def run_profiled_pass(
    step: Callable[[int], None],
    device: torch.device,
    steps: Iterable[int],
    median_unit_s: float,
    units: int,
) -> dict[str, object]:
    """Profile `step(i)` for the given step indices (`units` whole units of the loop); the
    row's busy and attention columns. On a GPU the profiler records kernels; on the CPU (where
    the host is the device and there is no busy share) the op names of the steps suffice."""
    indices = list(steps)
    if device.type != "cuda":
        one_unit = indices[: max(1, len(indices) // units)]
        return {"attention_backend": attention_backend(_op_names(step, one_unit))}
    from torch.profiler import ProfilerActivity, profile

    synchronize(device)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for i in indices:
            step(i)
        synchronize(device)
    # kineto's own records, not the profiler's event tree built from them: only names and
    # device intervals are needed, and building the tree took most of the pass
    # (docs/decisions.md#profile-pass)
    events = prof.profiler.kineto_results.events()
    kernels = [
        (e.start_ns() / 1e3, e.end_ns() / 1e3)
        for e in events
        if e.device_type().name == "CUDA" and e.end_ns() > e.start_ns()
    ]
    row: dict[str, object] = {"attention_backend": attention_backend(e.name() for e in events)}
    row.update(busy_columns(covered_length(kernels), units, median_unit_s))
    return row


def issue_columns(
    step: Callable[[int], None], device: torch.device, steps: Iterable[int], median_step_s: float
) -> dict[str, object]:
    """For steps that are one launch each (CUDA-graph replays): the host's time to issue one
    step, as a share of the window's median step. The GPU waits for the host only when the
    host needs longer to issue a step than the GPU to run it; the gaps between a graph's own
    kernels are the GPU's and do not count. Launches are timed in bursts of ISSUE_BURST from a
    drained queue (median burst): a longer run fills the launch queue, and the host's wait for
    the GPU is not its cost (vit's batch-1 graph, whose memset nodes take queue space, read
    many times its burst figure back to back; docs/decisions.md#profile-pass)."""
    indices = list(steps)[:MAX_STEPS]
    bursts = [indices[k : k + ISSUE_BURST] for k in range(0, len(indices), ISSUE_BURST)]
    per_launch = []
    for burst in bursts:
        synchronize(device)
        began = time.perf_counter()
        for i in burst:
            step(i)
        per_launch.append((time.perf_counter() - began) / len(burst))
    synchronize(device)
    issued = statistics.median(per_launch)
    share = 100.0 * issued / median_step_s
    return {
        "host_issue_ms": issued * 1e3,
        "host_issue_pct": share,
        "host_bound": share > HOST_BOUND_BUSY_PCT,
    }


def _op_names(step: Callable[[int], None], indices: list[int]) -> set[str]:
    """The torch functions the steps call and the aten ops they dispatch (two modes, no
    profiler start-up): SDPA's math path decomposes before dispatch, the fused ones do not."""
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    names: set[str] = set()

    class Functions(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            names.add(getattr(func, "__name__", str(func)))
            return func(*args, **(kwargs or {}))

    class Ops(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            names.add(str(func.overloadpacket))
            return func(*args, **(kwargs or {}))

    with Functions(), Ops():
        for i in indices:
            step(i)
    return names


def profile_after_window(step, device, first_step: int, loop, agree) -> dict:
    """The profiled pass (GPU busy share, attention backend) over whole units (steps, or
    generation rounds), the same ones on every rank; a profiler that cannot start costs a
    warning and empty columns, never the run."""
    [median] = agree([loop.stats.median_s])
    units = pass_steps(median)
    steps = range(first_step, first_step + units * loop.steps_per_unit)
    try:
        return run_profiled_pass(step, device, steps, loop.stats.median_s, units)
    except RuntimeError as exc:
        stderr.print(f"[yellow]warning:[/yellow] profiled pass failed ({exc}); no gpu_busy_pct")
        return {}
