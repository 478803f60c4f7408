"""A sweep worker: one `dlbench` process that imports what every point needs once and runs each
point in a fresh child forked from it (the sweep's side: sweep.launcher).

A process per point costs far more time outside its window (imports, CUDA start) than the
window itself (docs/decisions.md#worker-mode), and a process that ran other points first carries
their state into the next (threads, torch's switches, CUDA's; docs/time-to-result.md). The worker
pays the imports once and never starts CUDA; each point is forked from it, so it starts as the
first point would and ends with everything it made (subprocesses.run_forked). A point is a
RunConfig and goes through `run.execute`, as a command line does after parsing, so rows are the
same; only `isolation` says `worker`. A point that fails (OOM, error, a crash) ends its child,
not the worker.

Protocol: sweep.messages. The worker reads tasks on stdin and answers on what was its stdout;
everything else it (or a library below it) prints goes to stderr, which the sweep keeps in a
log."""

from __future__ import annotations

import functools
import gc
import io
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

from dlbench.config.flags import config_from_json
from dlbench.sweep.messages import PROTOCOL, send

# What every point of a sweep imports (torch and Lightning Fabric; timm for the vision models;
# dlbench's own run path and NVML's bindings, none of which starts CUDA): imported as the
# worker starts, while its parent still reads and checks the plan, and never again by a point.
PRELOADED = ("torch", "timm", "dlbench.run", "pynvml")


def _read(tasks: io.BufferedReader) -> dict:
    """The next message from the sweep ({} once stdin ends)."""
    line = tasks.readline()
    return json.loads(line) if line.strip() else {}


def serve(
    run_args: Callable[[list[str]], int],
    tasks: io.BufferedReader | None = None,
    answers: int | None = None,
) -> None:
    """The worker's side: run each task given on stdin, answer on stdout, until stdin ends
    (`tasks` and `answers`: other ends, for a test). `run_args` runs a command line (the CLI's
    own entry, given by the command that starts the worker)."""
    if answers is None:  # the answers' own pipe; stray prints (C libraries') go to the log
        answers = os.dup(sys.stdout.fileno())
        sys.stdout.flush()
        os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    tasks = tasks or sys.stdin.buffer
    _preload()
    from dlbench.run import run_command_in_fork, run_in_fork  # preloaded: no start-up cost

    send(answers, {"ready": True, "protocol": PROTOCOL})
    while True:
        task = _read(tasks)
        if not task:
            return
        log = Path(task["log"]) if task.get("log") else None
        if "args" in task:
            command = functools.partial(run_args, [str(a) for a in task["args"]])
            result = run_command_in_fork(command, log)
        else:
            config = config_from_json(task["config"])
            result = run_in_fork(config, bool(task.get("auto_batch")), log=log)
        send(answers, {"code": result.returncode, "last": result.last_line})


def _preload() -> None:
    """Import what the points will (`PRELOADED`) before the first arrives, then freeze what the
    imports made: each forked point then shares those pages and its collections walk its own
    objects only (docs/decisions.md#worker-gc-freeze). A worker is started before its parent
    reads the plan, and the parent's own checks import torch and timm meanwhile. An import that
    fails here is left for the point to meet and report."""
    import importlib

    try:
        for name in PRELOADED:
            importlib.import_module(name)
        from dlbench.engine.distribution.lightning_import import import_fabric

        import_fabric()
    except Exception:  # the point's own import says what is wrong
        return
    gc.collect()
    gc.freeze()
