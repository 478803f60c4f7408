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

import gc
import io
import json
import os
import sys
from pathlib import Path

from dlbench.config.flags import config_from_json
from dlbench.sweep.messages import send

# What every point of a sweep imports (torch and Lightning Fabric; timm for the vision models;
# dlbench's own run path and NVML's bindings, none of which starts CUDA): imported as the
# worker starts, while its parent still reads and checks the plan, and never again by a point.
PRELOADED = ("torch", "lightning.fabric", "timm", "dlbench.run", "pynvml")


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
    _preload()
    from dlbench.run import run_in_fork  # preloaded above (it brings torch): no start-up cost

    send(answers, {"ready": True})
    while True:
        task = _read(tasks)
        if not task:
            return
        config = config_from_json(task["config"])
        log = Path(task["log"]) if task.get("log") else None
        result = run_in_fork(config, bool(task.get("auto_batch")), log=log)
        send(answers, {"code": result.returncode, "last": result.last_line})


def _preload() -> None:
    """Import what the points will (`PRELOADED`) before the first arrives, then freeze what the
    imports made: each forked point then shares those pages and its collections walk its own
    objects only (docs/decisions.md#worker-gc-freeze). A worker is started before its parent
    reads the plan, and the parent's own checks import torch and timm meanwhile. An import that
    fails here is left for the point to meet and report."""
    import importlib

    for name in PRELOADED:
        try:
            importlib.import_module(name)
        except Exception:  # the point's own import says what is wrong
            return
    gc.collect()
    gc.freeze()
