"""The sweep's side of its worker processes (the worker's own side: sweep.worker): start one, hand
it a task, read its messages without blocking, ask it to give way while another worker has the
GPU's turn (and keep it off that worker's cores), and stop it with everything it started.
Points that start processes of their own (DDP ranks re-run their command line), serve points and
`--isolation process` run `dlbench` with the point's command line instead (`Launcher.run_alone`)."""

from __future__ import annotations

import contextlib
import fcntl
import mmap
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from dlbench.config import RunConfig
from dlbench.config.flags import config_to_json
from dlbench.subprocesses import ChildResult, child_environment, last_line_of, run_child, stop_group
from dlbench.sweep.messages import GIVE_WAY, SHARED_BYTES, STATE, WAITING, LineReader, send
from dlbench.sweep.worker import SHARED_FILE_VARIABLE


class Worker:
    """One worker process, started early and kept across tasks, replaced after any failure."""

    def __init__(self, name: str = "worker", turns: bool = False) -> None:
        self.name = name
        self.turns = turns  # it asks for the GPU's turn and gives way (points prepared ahead)
        self.proc: subprocess.Popen | None = None
        self.log = tempfile.TemporaryFile("w+")  # noqa: SIM115 (open while the worker lives)
        self.reader: LineReader | None = None
        self.ready_at: float | None = None  # when its imports were done (monotonic)
        self._shared_path: Path | None = None
        self._shared: mmap.mmap | None = None
        self.job_pids: list[int] = []  # the sweep's other workers (sweep.pipeline sets them)

    def start(self) -> Worker:
        """Start the process now, before the first point: its imports and CUDA's start then
        overlap the parent's own (reading and checking the plan)."""
        if self.proc is None:
            self.proc = self._start()
        return self

    def _start(self) -> subprocess.Popen:
        env = child_environment()
        if self.turns:
            handle, path = tempfile.mkstemp(prefix="dlbench-turn-")
            os.write(handle, bytes(SHARED_BYTES))
            self._shared = mmap.mmap(handle, SHARED_BYTES)
            os.close(handle)
            self._shared_path = Path(path)
            env[SHARED_FILE_VARIABLE] = path
        proc = subprocess.Popen(
            [sys.executable, "-m", "dlbench", "sweep-worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            start_new_session=True,
            env=env,
        )
        flags = fcntl.fcntl(proc.stdout.fileno(), fcntl.F_GETFL)
        fcntl.fcntl(proc.stdout.fileno(), fcntl.F_SETFL, flags | os.O_NONBLOCK)
        self.reader = LineReader(proc.stdout.fileno())
        self.ready_at = None
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
    def grant(self) -> None:
        self.give_way(False)
        self._send({"granted": True, "job_pids": self.job_pids})

    def give_way(self, asked: bool) -> None:
        """Ask the worker to give way at its next checkpoint (or let it go on)."""
        if self._shared is not None:
            self._shared[GIVE_WAY] = int(asked)

    def state(self) -> int:
        """What the worker says it is doing (sweep.messages); WAITING once it is gone."""
        if self._shared is None or self.proc is None or self.ended:
            return WAITING
        return self._shared[STATE]

    def pin(self, cpus: set[int] | None) -> None:
        """Keep every thread of the worker and of what it started on `cpus` (None: on every
        core again): off the cores of the worker that measures."""
        if self.proc is not None:
            pin_group(self.proc.pid, cpus or set(range(os.cpu_count() or 1)))

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
            self.give_way(False)
            stop_group(self.proc)
            self.proc = None
        if self._shared_path is not None:
            self._shared_path.unlink(missing_ok=True)
            self._shared_path = None


def pin_group(pgid: int, cpus: set[int]) -> None:
    """Every thread of every process in process group `pgid` onto `cpus` (a process or thread
    gone meanwhile is skipped)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) != pgid:  # the process group, after state and parent
                continue
            for task in (stat.parent / "task").iterdir():
                os.sched_setaffinity(int(task.name), cpus)
        except (OSError, ValueError, IndexError):
            continue


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
