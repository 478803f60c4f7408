"""The sweep's side of its worker process (the worker's own side: sweep.worker): start one, hand
it a point, read its messages without blocking, and stop it with everything it started.
Points that start processes of their own (DDP ranks re-run their command line), serve points and
`--isolation process` run `dlbench` with the point's command line instead (`Launcher.run_alone`)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from dlbench.config import RunConfig
from dlbench.config.flags import config_to_json
from dlbench.subprocesses import ChildResult, child_environment, last_line_of, run_child, stop_group
from dlbench.sweep.messages import LineReader, send

WORKER_COMMAND = "sweep-worker"


class Worker:
    """One worker process, started early and kept across points (each point runs in a child it
    forks), replaced where it dies or a point times out. `dlbench`: the command that starts its
    dlbench (this one's by default; a gate's side: another checkout's, an image's)."""

    def __init__(
        self, dlbench: list[str] | None = None, on_close: Callable[[], None] | None = None
    ) -> None:
        """`on_close`: what else stopping it takes (a side's container, in its engine)."""
        self.command = [*(dlbench or [sys.executable, "-m", "dlbench"]), WORKER_COMMAND]
        self.on_close = on_close
        self.proc: subprocess.Popen | None = None
        self.log = tempfile.TemporaryFile("w+")  # noqa: SIM115 (open while the worker lives)
        self.reader: LineReader | None = None

    def start(self) -> Worker:
        """Start the process now, before the first point: its imports then overlap the
        parent's own (reading and checking the plan)."""
        if self.proc is None:
            self.proc = subprocess.Popen(
                self.command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self.log,
                start_new_session=True,
                env=child_environment(),
            )
            out = self.proc.stdout.fileno()
            fcntl.fcntl(out, fcntl.F_SETFL, fcntl.fcntl(out, fcntl.F_GETFL) | os.O_NONBLOCK)
            self.reader = LineReader(out)
        return self

    def assign(self, config: RunConfig, auto_batch: bool) -> None:
        """Hand the worker a point (sweep.messages), its output to be kept in its own file
        (`point_log`); the worker's own log starts afresh."""
        log = point_log(config.output.path, config.output.run_id or "point")
        self.give({"config": config_to_json(config), "auto_batch": auto_batch}, log)

    def give(self, task: dict, log: Path) -> None:
        """Hand the worker a task (sweep.messages: a point's config, or a command line), its
        output to be kept in `log`; the worker's own log starts afresh."""
        if self.proc is None:
            self.start()
        self.log.seek(0)
        self.log.truncate()
        log.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):  # it died: its end shows as the end of its output
            send(self.proc.stdin.fileno(), {**task, "log": str(log)})

    def messages(self) -> list[dict]:
        """What the worker said since the last call (never blocks)."""
        return self.reader.feed() if self.reader is not None else []

    @property
    def ended(self) -> bool:
        """Its output closed: it exited or died."""
        return self.reader is not None and self.reader.closed

    def result(self) -> ChildResult:
        """How the worker ended, once its output closed (killed, crashed): its exit and last
        line."""
        code = self.proc.wait()
        self.log.seek(0)
        last = last_line_of(self.log.read())
        self.close()
        if code < 0:
            last = f"killed by {signal.Signals(-code).name}" + (f"; {last}" if last else "")
        return ChildResult(code, last[:500])

    def close(self) -> None:
        """Stop the worker and everything it started."""
        if self.proc is not None:
            stop_group(self.proc)
            self.proc = None
            self.reader = None
            if self.on_close is not None:
                self.on_close()


def logs_folder(output: Path) -> Path:
    """Where a sweep keeps its points' output: `<CSV's stem>.logs/` beside the CSV."""
    return output.with_name(f"{output.stem}.logs")


def point_log(output: Path, run_id: str) -> Path:
    """One point's output (what it printed, its traceback where it crashed), by its run id."""
    return logs_folder(output) / f"{run_id}.log"


def needs_own_process(config: RunConfig) -> bool:
    """Points that launch several processes (DDP ranks re-run their own command line) cannot
    share a worker."""
    return config.devices.per_node != "1" or config.devices.num_nodes > 1


class Launcher:
    """Runs a point in a process of its own (`--isolation process`, DDP and serve points), the
    sweep's worker stopped first: the point has the host to itself (the worker holds no CUDA
    context, but its imports' memory and its process would sit beside the point's)."""

    def __init__(self, close_workers=lambda: None) -> None:
        self.close_workers = close_workers

    def run_alone(self, args: list[str], timeout_s: float) -> ChildResult:
        """`dlbench ARGS` in a process of its own."""
        self.close_workers()
        return run_child(args, timeout_s)
