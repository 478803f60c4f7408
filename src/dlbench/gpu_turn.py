"""The GPU's turn. A sweep prepares its next points in other worker processes while one point is
measured (sweep.turns grants the turn): whatever a row's figures or a timed choice depend on runs
while every other worker waits, off the GPU. Two kinds of work take the turn:

- `MEASURE`: a graphed step's check against the eager step, the steady warm-up, the window and
  the passes after it, and the idle power baseline;
- `CHOICE`: a choice made by timing kernels (inductor's and Triton's autotuning), so that a
  point compiled beside others picks what it would alone.

A worker holds the turn from a `hold` to the end of the region around it; `alone` holds it for a
block. The others give way only where they can, never stopped from outside (a process stopped
inside the CUDA driver, NVML or a cache's file lock could hold the others up): at a
`checkpoint` (between warm-up steps, before a capture, as a compilation ends, between points) a
worker asked to give way waits for its queued GPU work and then until the turn ends; a worker
waiting for its own turn or for its next point, or one compiling (host work only, on cores away
from the holder's), already has.
A process with no sweep around it (a single run, a test) has the machine to itself: every call
here is then free. A compile-ahead task (the sweep's compiler) stops where its point would be
measured: asked for a `MEASURE` turn, its client raises `PreparedOnly`."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Protocol

MEASURE, CHOICE = "measure", "choice"


class PreparedOnly(Exception):
    """A compile-ahead task reached its point's measurement: its graphs are compiled, its
    kernels built and tuned, and the run stops here without a row."""


class TurnClient(Protocol):
    """A worker's line to the sweep that grants turns."""

    def ask(self, kind: str) -> None:
        """Return once this worker has the turn (or raise PreparedOnly)."""
        ...

    def done(self) -> None:
        """Give the turn back."""
        ...

    def checkpoint(self) -> None:
        """Give way here if another worker's turn asks it (returns when that turn ended)."""
        ...

    def compiling(self, on: bool) -> None:
        """Say that a compilation (host work only) began or ended."""
        ...

    @property
    def waited_s(self) -> float:
        """How long the task gave way or waited for turns so far."""
        ...


class _State:
    client: TurnClient | None = None
    held = False
    owner = 0  # who gives the turn back: the region at this depth, `alone`, or a burst
    regions = 0
    timer: threading.Timer | None = None  # a burst's release, unless another benchmark comes


_state = _State()
_lock = threading.RLock()  # a burst's timer gives the turn back from its own thread
_ALONE, _BURST = -1, -2
# Inductor benchmarks a kernel's launch shapes one after another as it first runs: a burst of
# benchmarks keeps the turn while the next comes within this long (one turn for the burst).
BURST_LINGER_S = 0.05


def use(client: TurnClient | None) -> None:
    """Make `client` this process's line to its sweep (None: no sweep; everything is free)."""
    with _lock:
        _end_burst_timer()
        _state.client, _state.held, _state.regions = client, False, 0


def active() -> bool:
    """Whether a sweep grants this process its turns."""
    return _state.client is not None


def _take(kind: str, owner: int) -> bool:
    """Ask for the turn unless held (a burst's turn is taken over); whether this call took it
    (and its owner gives it back)."""
    with _lock:
        if _state.client is None:
            return False
        if _state.held:
            if _state.owner != _BURST:
                return False
            _end_burst_timer()  # the burst is over: its turn is the new owner's to give back
            _state.owner = owner
            return True
        _drain()
        _state.client.ask(kind)
        _state.held, _state.owner = True, owner
        return True


def _drain() -> None:
    """Wait for this process's queued GPU work (nothing of it may run into another's turn)."""
    import torch

    if torch.cuda.is_initialized() and not torch.cuda.is_current_stream_capturing():
        torch.cuda.synchronize()


def hold(kind: str = MEASURE) -> None:
    """Take the turn now (returns once every other worker has given way) and keep it until the
    innermost region ends; already held: nothing."""
    _take(kind, _state.regions)


def release() -> None:
    """Give the turn back, whoever took it (the end of a task)."""
    with _lock:
        _end_burst_timer()
        if _state.client is not None and _state.held:
            _state.held = False
            _state.client.done()


def _end_burst_timer() -> None:
    if _state.timer is not None:
        _state.timer.cancel()
        _state.timer = None


@contextlib.contextmanager
def region() -> Iterator[None]:
    """A turn taken by `hold` inside is kept until the region ends: a point's measurement from
    its steady warm-up through the passes after its window."""
    _state.regions += 1
    depth = _state.regions
    try:
        yield
    finally:
        _state.regions -= 1
        if _state.held and _state.owner == depth:
            release()


@contextlib.contextmanager
def alone(kind: str = CHOICE) -> Iterator[None]:
    """The block runs with the turn: taken for it unless already held."""
    took = _take(kind, _ALONE)
    try:
        yield
    finally:
        if took:
            release()


@contextlib.contextmanager
def benchmark_burst() -> Iterator[None]:
    """One of inductor's GPU benchmarks: run with a `CHOICE` turn, kept for BURST_LINGER_S
    after it in case the next benchmark follows (a timer gives it back otherwise)."""
    with _lock:
        renewing = _state.held and _state.owner == _BURST
        if renewing:
            _end_burst_timer()
        took = renewing or _take(CHOICE, _BURST)
    try:
        yield
    finally:
        with _lock:
            if took and _state.held and _state.owner == _BURST:
                _state.timer = threading.Timer(BURST_LINGER_S, _burst_over)
                _state.timer.daemon = True
                _state.timer.start()


def _burst_over() -> None:
    with _lock:
        if _state.held and _state.owner == _BURST and _state.timer is not None:
            _state.timer = None
            _state.held = False
            _state.client.done()


def checkpoint() -> None:
    """A place where this process may give way to another worker's turn (between steps, before
    a capture, after a compilation); a burst of benchmarks is over once the process gets here."""
    if _state.client is None:
        return
    with _lock:
        if _state.held:
            if _state.owner == _BURST:
                release()
            else:
                return  # the holder gives way to no one
    _state.client.checkpoint()


def wait_columns() -> dict[str, float]:
    """The row's `turn_wait_s` in a sweep that grants turns; {} elsewhere."""
    return {"turn_wait_s": _state.client.waited_s} if _state.client is not None else {}


def install_compile_hooks() -> None:
    """Inductor's GPU benchmarks (autotuning, padding choices) take a `CHOICE` turn in bursts,
    and a compilation says when it starts and ends (host work in between, which need not give
    way). torch's own benchmark hook where it has one (2.14: `set_gpu_benchmark_lock_context`),
    else a wrapper on the benchmarker's class; an inductor without either benchmarks unguarded."""
    try:
        from torch._inductor.runtime import benchmarking
    except ImportError:
        return
    lock = getattr(benchmarking, "set_gpu_benchmark_lock_context", None)
    if lock is not None:
        lock(benchmark_burst)
    else:
        _wrap_benchmarker(benchmarking)
    _say_when_compiling()


def _wrap_benchmarker(benchmarking) -> None:
    """Each GPU benchmark of inductor's default benchmarker runs in a burst's turn."""
    owner = type(getattr(benchmarking, "benchmarker", None))
    method = getattr(owner, "benchmark_gpu", None)
    if method is None or getattr(method, "_dlbench_turn", False):
        return

    def benchmark_gpu(self, *args, **kwargs):
        with benchmark_burst():
            return method(self, *args, **kwargs)

    benchmark_gpu._dlbench_turn = True  # type: ignore[attr-defined]
    owner.benchmark_gpu = benchmark_gpu


def _say_when_compiling() -> None:
    """Dynamo calls back as a compilation starts and ends: in between the process traces and
    lowers on the host, after waiting for what it had queued; after it, the compiled code runs
    on the GPU, so it gives way first where a turn asks it."""
    try:
        from torch._dynamo.callback import callback_handler

        register_start = callback_handler.register_start_callback
        register_end = callback_handler.register_end_callback
    except (ImportError, AttributeError):
        return

    def started(*_args: object) -> None:
        if _state.client is None or _state.held:
            return
        _drain()
        _state.client.compiling(True)

    def ended(*_args: object) -> None:
        if _state.client is None:
            return
        _state.client.compiling(False)
        checkpoint()

    register_start(started)
    register_end(ended)
