"""Worker mode: one `dlbench` process runs sweep points back to back, replaced after any failure.

Each point costs a fresh process far more time outside its window (imports, CUDA start, cuDNN's
first autotune) than the window itself (docs/decisions.md#worker-mode). A worker pays the imports
and the CUDA start once. A point is a RunConfig and goes through `run.execute`, as a command line
does after parsing, so rows are the same; only `isolation` says `worker`. Whatever goes wrong in a
point (OOM, error, a crash, a timeout) ends the worker: the next point starts in a new process with
a clean allocator. Points that start processes of their own (DDP ranks re-run their command line)
and `--isolation process` run `dlbench` with the config's command line instead.

Protocol: the parent writes one JSON line {"config": {...}, "auto_batch": bool} to the worker's
stdin; the worker answers one JSON line {"code": N, "last": "..."} on its stdout and prints
everything else on stderr (the parent keeps that in a log)."""

from __future__ import annotations

import contextlib
import gc
import io
import json
import selectors
import subprocess
import sys
import tempfile

from dlbench.config import RunConfig
from dlbench.config.flags import config_args, config_from_json, config_to_json
from dlbench.signals import Interrupted
from dlbench.startup import mark_command_start
from dlbench.subprocesses import ChildResult, child_environment, last_line_of, run_child, stop_group

# What every point of a sweep imports (torch and Lightning Fabric; timm for the vision models):
# imported as the worker starts, while its parent still reads and checks the plan.
PRELOADED = ("torch", "lightning.fabric", "timm")


def serve() -> None:
    """The worker's side: run each point given on stdin, answer on stdout, until stdin ends."""
    _preload()
    answers = sys.stdout
    for line in sys.stdin:
        point = json.loads(line)
        code, last = _run_in_process(config_from_json(point["config"]), point["auto_batch"])
        if code == 0:  # before the answer: the point's teardown is its own time, not the next's
            _release_memory()
        answers.write(json.dumps({"code": code, "last": last}) + "\n")
        answers.flush()
        if code != 0:
            return  # the parent starts a new worker for the next point


def _run_in_process(config: RunConfig, auto_batch: bool) -> tuple[int, str]:
    """One point in this process; its exit code and last printed line."""
    from dlbench.run import execute, guarded

    mark_command_start(fresh_process=False)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        code = guarded(lambda: execute(config, auto_batch))
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
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


class Worker:
    """The parent's side: a worker process kept across points, replaced after any failure."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.log = tempfile.TemporaryFile("w+")  # noqa: SIM115 (open while the worker lives)

    def start(self) -> Worker:
        """Start the process now, before the first point: its imports and CUDA's start then
        overlap the parent's own (reading and checking the plan)."""
        self.proc = self.proc or self._start()
        return self

    def _start(self) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "dlbench", "sweep-worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
            start_new_session=True,
            env=child_environment(),
        )

    def run(self, config: RunConfig, auto_batch: bool, timeout_s: float) -> ChildResult:
        """Run one point; any result but success ends this worker."""
        self.proc = self.proc or self._start()
        self.log.seek(0)
        self.log.truncate()
        point = {"config": config_to_json(config), "auto_batch": auto_batch}
        try:
            self.proc.stdin.write(json.dumps(point) + "\n")
            self.proc.stdin.flush()
            answer = _read_line(self.proc, timeout_s)
        except Interrupted:
            self.close()
            raise
        except BrokenPipeError:
            answer = ""
        if answer is None:
            self.close()
            return ChildResult(None, f"timed out after {timeout_s:g} s", timed_out=True)
        if not answer:
            return self._died()
        result = json.loads(answer)
        if result["code"] != 0:
            self.close()
        return ChildResult(result["code"], result["last"][:500])

    def _died(self) -> ChildResult:
        """The worker ended without answering (killed, crashed): its exit and last line."""
        code = self.proc.wait()
        self.log.seek(0)
        last = last_line_of(self.log.read())
        self.proc = None
        if code < 0:
            import signal

            last = f"killed by {signal.Signals(-code).name}" + (f"; {last}" if last else "")
        return ChildResult(code, last[:500])

    def close(self) -> None:
        """Stop the worker and everything it started."""
        if self.proc is not None:
            stop_group(self.proc)
            self.proc = None


def _read_line(proc: subprocess.Popen, timeout_s: float) -> str | None:
    """The worker's next answer line; None on timeout, '' when it ended without one."""
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        if not selector.select(timeout_s):
            return None
    return proc.stdout.readline()


def needs_own_process(config: RunConfig) -> bool:
    """Points that launch several processes (DDP ranks re-run their own command line) cannot
    share a worker."""
    return config.devices.per_node != "1" or config.devices.num_nodes > 1


class Launcher:
    """Runs sweep points in workers (isolation='worker') or each in its own process."""

    def __init__(self, isolation: str, worker: Worker | None = None) -> None:
        self.isolation = isolation
        self.worker = (worker or Worker()) if isolation == "worker" else None
        if worker is not None and self.worker is None:
            worker.close()

    def run(self, config: RunConfig, auto_batch: bool, timeout_s: float) -> ChildResult:
        """Run one point in the worker, or in a process of its own."""
        if self.worker is None or needs_own_process(config):
            tagged = config.replace(tags=config.output.tags.with_facts(isolation="process"))
            return self.run_alone(config_args(tagged, auto_batch), timeout_s)
        tagged = config.replace(tags=config.output.tags.with_facts(isolation="worker"))
        return self.worker.run(tagged, auto_batch, timeout_s)

    def run_alone(self, args: list[str], timeout_s: float) -> ChildResult:
        """`dlbench ARGS` in a process of its own, the worker stopped first (its context would
        sit on the GPU beside the point's)."""
        if self.worker is not None:
            self.worker.close()
        return run_child(args, timeout_s)

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()
