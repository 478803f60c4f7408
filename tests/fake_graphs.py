"""A CPU stand-in for CUDA-graph capture, behind the engine's capturer interface: it refuses
what a real capture refuses (a value read back to the host) and replays by calling the step
again. Tests register it for the CPU; the GPU script checks the real one."""

from __future__ import annotations

from collections.abc import Callable

from torch.utils._python_dispatch import TorchDispatchMode

from dlbench.engine.acceleration.graphs import GRAPH_WARMUP_CALLS

captured: list[Callable[[], None]] = []  # what the fake captured, in order


class _RefuseHostSyncs(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.__name__.split(".")[0] in ("_local_scalar_dense", "item"):
            raise RuntimeError("operation not permitted when stream is capturing")
        return func(*args, **(kwargs or {}))


def fake_capture(fn: Callable[[], None], ready: Callable[[], None], pool: object = None):
    for _ in range(GRAPH_WARMUP_CALLS):
        ready()
        fn()
    with _RefuseHostSyncs():
        fn()
    captured.append(fn)
    return fn, pool or object()


# The slow replay does the step's work this many times: a ratio, not a fixed delay, so that a
# loaded host, which slows the eager step and the replay alike, cannot make the replay look faster.
REPLAY_SLOWER_BY = 4


def slow_capture(fn: Callable[[], None], ready: Callable[[], None], pool: object = None):
    """A capture whose replay is slower than the eager step (as transformers 5.17 builds a full
    attention mask while a stream captures, where eager passes none)."""
    replay, pool = fake_capture(fn, ready, pool)

    def slower() -> None:
        for _ in range(REPLAY_SLOWER_BY):
            replay()

    return slower, pool
