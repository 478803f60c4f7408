"""Short steps replayed as CUDA graphs: the host launches a whole step with one call, so a
batch-1 forward or a small training step measures the GPU, not Python's kernel launches.

A step is captured once per static input slot (the synthetic batches the loop rotates through,
or one buffer a loader's batches are copied into), all slots in one memory pool, after eager
warm-up (cuDNN autotuning, lazy optimizer state) and a few calls on a side stream. Capture
happens outside the measured window and its time goes into the warm-up. A step that cannot be
captured (a host sync, a data-dependent branch) runs eager with one warning, and the row says so.

Capturers are registered per device type: CUDA's here; tests register a fake for the CPU
behind the same interface."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import torch

from dlbench.console import stderr
from dlbench.errors import exception_line

GRAPH_WARMUP_CALLS = 3  # calls on a side stream before capture (allocator, lazy init)
# Capture refuses unsafe calls from this thread only: the data feed's staging thread goes on
# decoding and copying on its own stream while a step is captured.
CAPTURE_MODE = "thread_local"

# capture(fn, ready, pool) -> (replay, pool): `fn` warmed up (`ready()` before each call puts
# state where `fn` expects it) and captured into `pool` (None: a new one).
Capture = Callable[
    [Callable[[], None], Callable[[], None], object], tuple[Callable[[], None], object]
]


def cuda_graph(
    fn: Callable[[], None], ready: Callable[[], None], pool: object = None
) -> tuple[Callable[[], None], object]:
    """`fn` as a CUDA graph: warmed up on a side stream, captured once; its replay."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(GRAPH_WARMUP_CALLS):
            ready()
            fn()
        ready()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, pool=pool, capture_error_mode=CAPTURE_MODE):
        fn()
    return graph.replay, graph.pool()


CAPTURERS: dict[str, Capture] = {"cuda": cuda_graph}
K = TypeVar("K")


def can_capture(device_type: str) -> bool:
    """Whether steps on this device type can be captured at all."""
    return device_type in CAPTURERS


def capture(
    fn: Callable[[], None], ready: Callable[[], None], device_type: str = "cuda"
) -> Callable[[], None]:
    """One callable as a graph on its own pool (generation's reset, prefill and decode)."""
    replay, _ = CAPTURERS[device_type](fn, ready, None)
    return replay


@dataclass(frozen=True)
class GraphedStep:
    """The step as run in the window: replays, or the eager step when capture failed."""

    step: Callable[[int], None]
    graphed: bool
    fallback: str = ""  # why capture failed, for the row


def graph_slots(
    body: Callable[[torch.Tensor, torch.Tensor], None],
    slots: Sequence[tuple[torch.Tensor, torch.Tensor]],
    before_capture: Callable[[], None],
    device_type: str,
) -> list[Callable[[], None]]:
    """One replay per input slot, all in one memory pool (they replay one after another, in
    the order captured). `before_capture` resets state a capture must not see (gradients)."""
    replays, pool = [], None
    for inputs, targets in slots:
        before_capture()
        replay, pool = CAPTURERS[device_type](
            lambda x=inputs, y=targets: body(x, y), lambda: None, pool
        )
        replays.append(replay)
    return replays


def graphed_step(
    eager: Callable[[int], None],
    body: Callable[[torch.Tensor, torch.Tensor], None],
    slots: Sequence[tuple[torch.Tensor, torch.Tensor]],
    fetch: Callable[[int], tuple[torch.Tensor, torch.Tensor]] | None,
    before_capture: Callable[[], None],
    device: torch.device,
) -> GraphedStep:
    """The step replayed as graphs: slot i % n for resident batches (`fetch` None), or the one
    slot each fetched batch is copied into first; the eager step with a warning if capture
    fails."""
    try:
        replays = graph_slots(body, slots, before_capture, device.type)
    except Exception as exc:  # a host sync, an op capture refuses, a dynamic shape
        return GraphedStep(eager, False, failed_capture(exc, device, "the step"))
    if fetch is None:
        return GraphedStep(lambda i: replays[i % len(replays)](), True)
    [(static_inputs, static_targets)] = slots
    [replay] = replays

    def copy_and_replay(i: int) -> None:
        inputs, targets = fetch(i)
        static_inputs.copy_(inputs, non_blocking=True)
        static_targets.copy_(targets, non_blocking=True)
        replay()

    return GraphedStep(copy_and_replay, True)


def capture_each(
    fns: Mapping[K, Callable[[], None]], device: torch.device, what: str
) -> tuple[dict[K, Callable[[], None]], str]:
    """Each callable as a graph on a pool of its own (they may replay in any order), and ""; or,
    where any capture fails, none of them and why (the row's `graph_fallback`)."""
    try:
        capture = CAPTURERS[device.type]
        return {key: capture(fn, lambda: None, None)[0] for key, fn in fns.items()}, ""
    except Exception as exc:  # a host sync, an op capture refuses
        return {}, failed_capture(exc, device, what)


def failed_capture(exc: Exception, device: torch.device, what: str) -> str:
    """After a capture raised: the device as before, one warning, and the reason for the row."""
    reason = exception_line(exc)[:200]
    if device.type == "cuda":
        _end_failed_capture(device)
    stderr.print(
        f"[yellow]warning:[/yellow] {what} could not be captured as a CUDA graph "
        f"({reason}); it runs eager and the row says cuda_graphs=False"
    )
    return reason


def _end_failed_capture(device: torch.device) -> None:
    """A capture that failed never reached its epilogue, so the CUDA generators still believe
    they are capturing (the next random op raises). One trivial capture runs their prologue and
    epilogue again and leaves them as before."""
    torch.cuda.synchronize(device)
    graph = torch.cuda.CUDAGraph()
    scratch = torch.zeros(1, device=device)
    with torch.cuda.graph(graph):
        scratch.add_(1)
    torch.cuda.synchronize(device)
