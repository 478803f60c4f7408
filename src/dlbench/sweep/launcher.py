"""The sweep's side of its worker processes (the worker's own side: sweep.worker): start one, hand
it a task, read its messages without blocking, hold it still while another worker has the GPU's
turn, and stop it with everything it started. Points that start processes of their own (DDP
ranks re-run their command line), serve points and `--isolation process` run `dlbench` with the
point's command line instead (`Launcher.run_alone`)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dlbench.config import RunConfig
from dlbench.config.flags import config_to_json
from dlbench.subprocesses import ChildResult, child_environment, last_line_of, run_child, stop_group
from dlbench.sweep.messages import LineReader, send
from dlbench.sweep.worker import PENDING_FILE_VARIABLE


class Worker:
    """One worker process, started early and kept across tasks, replaced after any failure."""

    def __init__(self, name: str = "worker") -> None:
        self.name = name
        self.proc: subprocess.Popen | None = None
        self.log = tempfile.TemporaryFile("w+")  # noqa: SIM115 (open while the worker lives)
        self.reader: LineReader | None = None
        self.ready_at: float | None = None  # when its imports were done (monotonic)
        self._pending_path: Path | None = None
        self.frozen = self.waiting = False
        self._blocked_since: float | None = None
        self.blocked_s = 0.0  # held still or waiting for the turn, during the current task
        self.job_pids: list[int] = []  # the sweep's other workers (sweep.pipeline sets them)

    def start(self) -> Worker:
        """Start the process now, before the first point: its imports and CUDA's start then
        overlap the parent's own (reading and checking the plan)."""
        if self.proc is None:
            self.proc = self._start()
        return self

    def _start(self) -> subprocess.Popen:
        handle, path = tempfile.mkstemp(prefix="dlbench-turn-")
        os.write(handle, struct.pack("d", 0.0))
        os.close(handle)
        self._pending_path = Path(path)
        proc = subprocess.Popen(
            [sys.executable, "-m", "dlbench", "sweep-worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            start_new_session=True,
            env={**child_environment(), PENDING_FILE_VARIABLE: path},
        )
        flags = fcntl.fcntl(proc.stdout.fileno(), fcntl.F_GETFL)
        fcntl.fcntl(proc.stdout.fileno(), fcntl.F_SETFL, flags | os.O_NONBLOCK)
        self.reader = LineReader(proc.stdout.fileno())
        self.ready_at = None
        self.frozen = self.waiting = False
        return proc

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def assign(self, task: str, config: RunConfig, auto_batch: bool) -> None:
        """Hand the worker a task (sweep.messages); its log starts afresh."""
        if self.proc is None:
            self.proc = self._start()
        self.log.seek(0)
        self.log.truncate()
        self.blocked_s, self._blocked_since = 0.0, None
        self._mark()
        point = {"task": task, "config": config_to_json(config), "auto_batch": auto_batch}
        self._send({**point, "job_pids": self.job_pids})

    def _send(self, message: dict) -> None:
        with contextlib.suppress(OSError):  # it died: its end shows as the end of its output
            send(self.proc.stdin.fileno(), message)

    def messages(self) -> list[dict]:
        """What the worker said since the last call (never blocks)."""
        return self.reader.feed() if self.reader is not None else []

    @property
    def ended(self) -> bool:
        """Its output closed: it exited or died."""
        return self.reader is not None and self.reader.closed

    # The GPU's turn: sweep.turns decides, these carry it out.
    def asked(self) -> None:
        self.waiting = True
        self._mark()

    def grant(self) -> None:
        self.waiting = False
        self._mark()
        self._send(
            {"granted": True, "waited_s": round(self.blocked_s, 6), "job_pids": self.job_pids}
        )

    def freeze(self) -> None:
        """Hold the worker and everything it started still (SIGSTOP to its process group)."""
        if not self.frozen and self._signal(signal.SIGSTOP):
            self.frozen = True
            self._mark()

    def thaw(self) -> None:
        if self.frozen:
            self._signal(signal.SIGCONT)
            self.frozen = False
            self._mark()

    def _signal(self, sig: int) -> bool:
        if self.proc is None:
            return False
        try:
            os.killpg(self.proc.pid, sig)
            return True
        except ProcessLookupError:
            return False

    def _mark(self) -> None:
        """Count time spent held still or waiting for the turn (the row's `turn_wait_s`)."""
        now = time.monotonic()
        if self._blocked_since is not None:
            self.blocked_s += now - self._blocked_since
        self._blocked_since = now if (self.frozen or self.waiting) else None

    def pending_s(self) -> float:
        """How much longer the GPU may run what the worker said it queued, in seconds."""
        try:
            until = struct.unpack("d", self._pending_path.read_bytes()[:8])[0]
        except (OSError, struct.error, AttributeError):
            return 0.0
        return max(0.0, until - time.monotonic())

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
        """Stop the worker and everything it started (woken first: a stopped process hears no
        SIGTERM)."""
        if self.proc is not None:
            self.thaw()
            stop_group(self.proc)
            self.proc = None
        if self._pending_path is not None:
            self._pending_path.unlink(missing_ok=True)
            self._pending_path = None


def needs_own_process(config: RunConfig) -> bool:
    """Points that launch several processes (DDP ranks re-run their own command line) cannot
    share a worker."""
    return config.devices.per_node != "1" or config.devices.num_nodes > 1


class Launcher:
    """Runs a point in a process of its own (`--isolation process`, DDP and serve points), the
    sweep's workers stopped first (their contexts would sit on the GPU beside the point's)."""

    def __init__(self, close_workers=lambda: None) -> None:
        self.close_workers = close_workers

    def run_alone(self, args: list[str], timeout_s: float) -> ChildResult:
        """`dlbench ARGS` in a process of its own."""
        self.close_workers()
        return run_child(args, timeout_s)
