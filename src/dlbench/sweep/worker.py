"""A sweep worker: one `dlbench` process that runs sweep points back to back, replaced after any
failure (the sweep's side: sweep.launcher).

Each point costs a fresh process far more time outside its window (imports, CUDA start, cuDNN's
first autotune) than the window itself (docs/decisions.md#worker-mode). A worker pays the imports
and the CUDA start once. A point is a RunConfig and goes through `run.execute`, as a command line
does after parsing, so rows are the same; only `isolation` says `worker`. Whatever goes wrong in a
point (OOM, error, a crash, a timeout) ends the worker: the next point starts in a new process with
a clean allocator.

A sweep that prepares points ahead runs several workers and grants the GPU's turn
(dlbench.gpu_turn) to one at a time: this worker asks for its own over its pipes, and gives way
to another's at its checkpoints when the shared bytes ask it to (sweep.messages). A `prepare`
task compiles a point ahead and stops where it would be measured, leaving its graphs and kernels
in the cache for the worker that measures it.

Protocol: sweep.messages. The worker reads tasks and grants on stdin and answers on what was its
stdout; everything else it (or a library below it) prints goes to stderr, which the sweep keeps
in a log."""

from __future__ import annotations

import contextlib
import gc
import io
import json
import mmap
import os
import sys
import time

from dlbench import gpu_turn
from dlbench.config import RunConfig
from dlbench.config.flags import config_from_json
from dlbench.engine.timing.carried import note_point_start, restore_after_point
from dlbench.startup import mark_command_start
from dlbench.subprocesses import last_line_of
from dlbench.sweep.messages import (
    COMPILING,
    GAVE_WAY,
    GIVE_WAY,
    PREPARE_TASK,
    RUNNING,
    SHARED_BYTES,
    STATE,
    WAITING,
    send,
)
from dlbench.sweep.turns import STATES, trace
from dlbench.telemetry.isolation import add_job_processes

# What every point of a sweep imports (torch and Lightning Fabric; timm for the vision models):
# imported as the worker starts, while its parent still reads and checks the plan.
PRELOADED = ("torch", "lightning.fabric", "timm")
# The file of a worker's shared bytes (sweep.messages), named by the sweep
SHARED_FILE_VARIABLE = "DLBENCH_TURN_FILE"


class WorkerTurn:
    """This worker's line to the sweep's turns (gpu_turn.TurnClient): messages for its own
    turns, shared bytes for giving way to another's (sweep.messages)."""

    def __init__(self, tasks: io.BufferedReader, answers: int, shared_file: str | None) -> None:
        self.tasks, self.answers = tasks, answers
        self.prepare_only = False
        self.waited_s = 0.0
        self._compiling = 0
        self._shared = _open_shared(shared_file)

    def ask(self, kind: str) -> None:
        if self.prepare_only and kind == gpu_turn.MEASURE:
            raise gpu_turn.PreparedOnly(kind)
        began = time.monotonic()
        self.say(WAITING)
        trace(f"worker#{os.getpid()} asks {kind}")
        send(self.answers, {"ask": kind})
        message = _read(self.tasks)
        if not message.get("granted"):
            raise RuntimeError(f"sweep protocol: a grant expected, got {message}")
        add_job_processes(message.get("job_pids", ()))  # a worker replaced meanwhile
        self.say(RUNNING)
        self.waited_s += time.monotonic() - began

    def done(self) -> None:
        send(self.answers, {"done": True})
        self.say(COMPILING if self._compiling else RUNNING)

    def checkpoint(self) -> None:
        if self._shared is None or not self._shared[GIVE_WAY]:
            return
        began = time.monotonic()
        import torch

        if torch.cuda.is_initialized() and not torch.cuda.is_current_stream_capturing():
            torch.cuda.synchronize()  # nothing of ours runs into another's turn
        self.say(GAVE_WAY)
        while self._shared[GIVE_WAY]:
            time.sleep(CHECKPOINT_POLL_S)
        self.say(COMPILING if self._compiling else RUNNING)
        self.waited_s += time.monotonic() - began

    def compiling(self, on: bool) -> None:
        self._compiling = max(0, self._compiling + (1 if on else -1))
        self.say(COMPILING if self._compiling else RUNNING)

    def say(self, state: int) -> None:
        """This worker's state, for the sweep that grants turns."""
        if self._shared is not None:
            if self._shared[STATE] != state:
                trace(f"worker#{os.getpid()} {STATES.get(state)}")
            self._shared[STATE] = state


# How often a worker that gave way looks whether the turn it gave way to has ended
CHECKPOINT_POLL_S = 0.001


def _open_shared(path: str | None) -> mmap.mmap | None:
    if not path:
        return None
    with open(path, "r+b") as f:
        return mmap.mmap(f.fileno(), SHARED_BYTES)


def _read(tasks: io.BufferedReader) -> dict:
    """The next message from the sweep ({} once stdin ends)."""
    line = tasks.readline()
    return json.loads(line) if line.strip() else {}


def serve(tasks: io.BufferedReader | None = None, answers: int | None = None) -> None:
    """The worker's side: run each task given on stdin, answer on stdout, until stdin ends
    (`tasks` and `answers`: other ends, for a test)."""
    if answers is None:  # the answers' own pipe; stray prints (C libraries') go to the log
        answers = os.dup(sys.stdout.fileno())
        sys.stdout.flush()
        os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    tasks = tasks or sys.stdin.buffer
    shared = os.environ.get(SHARED_FILE_VARIABLE)  # set where points are prepared ahead
    turn = WorkerTurn(tasks, answers, shared)
    gpu_turn.use(turn if shared else None)
    try:
        _preload()
        if shared:
            gpu_turn.install_compile_hooks()
        send(answers, {"ready": True})
        _serve_tasks(tasks, answers, turn)
    finally:
        gpu_turn.use(None)


def _serve_tasks(tasks: io.BufferedReader, answers: int, turn: WorkerTurn) -> None:
    while True:
        turn.say(WAITING)  # between points: nothing queued, nothing to give way
        task = _read(tasks)
        if not task:
            return
        turn.say(RUNNING)
        add_job_processes(task.get("job_pids", ()))
        turn.prepare_only, turn.waited_s = task.get("task") == PREPARE_TASK, 0.0
        config = config_from_json(task["config"])
        code, last = run_point(config, bool(task.get("auto_batch")))
        send(answers, {"code": code, "last": last})
        if code != 0:
            return  # the parent starts a new worker for the next point


def run_point(config: RunConfig, auto_batch: bool) -> tuple[int, str]:
    """One point as a worker runs it: from the state the process had before its first point
    (what it carries is noted for the row, torch's switches set back after it), its teardown
    done before it answers (a point's teardown is its own time, not the next's)."""
    gpu_turn.checkpoint()  # a point that arrives during another's turn starts after it
    note_point_start()
    code, last = _run_in_process(config, auto_batch)
    gpu_turn.release()  # whatever the task held (an error mid-window)
    restore_after_point()
    if code == 0:
        _release_memory()
    return code, last


def _run_in_process(config: RunConfig, auto_batch: bool) -> tuple[int, str]:
    """One point in this process; its exit code and last printed line (a point compiled ahead
    ends where it would be measured: 0, `prepared`)."""
    from dlbench.run import execute, guarded

    mark_command_start(fresh_process=False)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        try:
            code = guarded(lambda: execute(config, auto_batch))
        except gpu_turn.PreparedOnly:
            code = 0
            print("prepared: compiled and warmed, not measured")
    sys.stderr.write(printed.getvalue())
    return code, last_line_of(printed.getvalue())


def _preload() -> None:
    """Import what the points will (`PRELOADED`) before the first arrives, then freeze what the
    imports made, as after each point (`_release_memory`): a worker is started before its
    parent reads the plan, and the parent's own checks import torch and timm meanwhile. An
    import that fails here is left for the point to meet and report."""
    import importlib

    for name in PRELOADED:
        try:
            importlib.import_module(name)
        except Exception:  # the point's own import says what is wrong
            return
    gc.collect()
    gc.freeze()


def _release_memory() -> None:
    """Drop what the point left behind before the next one starts (compiled code included,
    which holds on to its model), then freeze what survives: the worker's own long-lived
    objects (torch, its imports, their caches) leave the collector's view, so the collection
    before each later window walks that point's objects only, not the whole process
    (docs/decisions.md#worker-gc-freeze)."""
    import torch

    torch._dynamo.reset()
    gc.collect()
    gc.freeze()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
