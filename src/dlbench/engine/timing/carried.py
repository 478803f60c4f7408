"""What a point inherits from the process it runs in. A sweep worker runs points back to back; a
point must start from the state a point run first would: no thread an earlier point left
running, no global switch of torch's it flipped (autocast, TF32, cuDNN's search, the attention
kernels allowed), no profiler left on, no CUDA graph kept alive (docs/time-to-result.md).

`snapshot()` reads that state; a worker notes it as each point starts, and each row says what
differs from the state before the worker's first point (`carried_state`, empty: nothing).
The measured loop notes it again as its window opens (`window_state`), which the tests compare
between a point run first and the same point run after others."""

from __future__ import annotations

import gc
import threading
import weakref
from dataclasses import dataclass, field

import torch

# Python threads that belong to the process, not to a point (torch's and CUDA's own threads are
# no Python threads); what a point starts, it must stop.
_PROCESS_THREADS = ("MainThread",)


_GRAPHS: weakref.WeakSet = weakref.WeakSet()  # the CUDA graphs dlbench captured, while alive


def track_graph(graph: object) -> None:
    """Count a captured graph while it lives (engine.acceleration.graphs): a point's graphs
    must die with it, or their memory pools stay reserved under the next point."""
    _GRAPHS.add(graph)


def snapshot() -> dict[str, str]:
    """The process-wide state a point's window depends on, as text by name."""
    backends = torch.backends
    state = {
        "threads": " ".join(sorted(_point_threads())),
        "grad": str(torch.is_grad_enabled()),
        "inference_mode": str(torch.is_inference_mode_enabled()),
        "autocast_cpu": str(torch.is_autocast_enabled("cpu")),
        "autocast_cuda": str(torch.is_autocast_enabled("cuda")),
        "deterministic": str(torch.are_deterministic_algorithms_enabled()),
        "matmul_precision": torch.get_float32_matmul_precision(),
        "cudnn_benchmark": str(backends.cudnn.benchmark),
        "cudnn_tf32": str(backends.cudnn.allow_tf32),
        "sdpa": " ".join(
            name
            for name, on in (
                ("flash", backends.cuda.flash_sdp_enabled()),
                ("efficient", backends.cuda.mem_efficient_sdp_enabled()),
                ("math", backends.cuda.math_sdp_enabled()),
                ("cudnn", backends.cuda.cudnn_sdp_enabled()),
            )
            if on
        ),
        "torch_function_modes": str(torch._C._len_torch_function_stack()),
        "profiler": str(torch.autograd.profiler._is_profiler_enabled),
        "cuda_graphs_alive": str(len(_GRAPHS)),
        "gc": str(gc.isenabled()),
        "threads_torch": str(torch.get_num_threads()),
    }
    return state


def _point_threads() -> list[str]:
    return [
        t.name
        for t in threading.enumerate()
        if not t.name.startswith(_PROCESS_THREADS) and t.is_alive()
    ]


def _restore_switches(state: dict[str, str]) -> None:
    """Torch's global switches back as `state` has them (what a point set and left)."""
    backends = torch.backends
    torch.set_grad_enabled(state["grad"] == "True")
    torch.use_deterministic_algorithms(state["deterministic"] == "True")
    torch.set_float32_matmul_precision(state["matmul_precision"])
    backends.cudnn.benchmark = state["cudnn_benchmark"] == "True"
    backends.cudnn.allow_tf32 = state["cudnn_tf32"] == "True"
    allowed = state["sdpa"].split()
    backends.cuda.enable_flash_sdp("flash" in allowed)
    backends.cuda.enable_mem_efficient_sdp("efficient" in allowed)
    backends.cuda.enable_math_sdp("math" in allowed)
    backends.cuda.enable_cudnn_sdp("cudnn" in allowed)
    torch.set_num_threads(int(state["threads_torch"]))


def differences(before: dict[str, str], now: dict[str, str]) -> list[str]:
    """`name: before -> now` for each entry that changed."""
    return [f"{k}: {before.get(k, '')} -> {v}" for k, v in now.items() if before.get(k) != v]


@dataclass
class _Notes:
    first: dict[str, str] | None = None  # before this process's first point
    carried: list[str] = field(default_factory=list)
    window: dict[str, str] = field(default_factory=dict)


_notes = _Notes()


def note_point_start() -> None:
    """A point begins in this process: what it carries from the earlier ones."""
    now = snapshot()
    if _notes.first is None:
        _notes.first = now
    _notes.carried = differences(_notes.first, now)


def restore_after_point() -> None:
    """A point ended in a worker: torch's switches as they were before the first point, so the
    next point starts from them whatever this one set (a point sets its own, but not every
    point sets every switch)."""
    if _notes.first is not None:
        _restore_switches(_notes.first)


def note_window_start() -> None:
    """The measured window opens (engine.timing.loop)."""
    _notes.window = snapshot()


def window_state() -> dict[str, str]:
    """The state as the last window opened."""
    return dict(_notes.window)


def carried_columns() -> dict[str, str]:
    """The row's `carried_state` where a process ran earlier points ({} for its first)."""
    if _notes.first is None:
        return {}
    return {"carried_state": "; ".join(_notes.carried)}
