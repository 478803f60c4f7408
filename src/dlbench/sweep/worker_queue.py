"""A sweep's points through its one worker, one at a time, in the order given: each point's
answer, or its timeout (the worker and the point's child stopped, a fresh worker started for
the next), or the worker's death (how it ended). A point's seconds count from when its worker is
ready: a fresh worker's imports have their own limit (WORKER_START_TIMEOUT_S). One point measures
at a time, so none ever shares the GPU or the host with another of the sweep's
(docs/time-to-result.md says what two workers cost the rows)."""

from __future__ import annotations

import selectors
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dlbench.config import RunConfig
from dlbench.config.limits import DEFAULT_POINT_TIMEOUT_S, WORKER_START_TIMEOUT_S
from dlbench.subprocesses import ChildResult
from dlbench.sweep.launcher import Worker


@dataclass
class Task:
    """A point for the worker: a config (a sweep's), or a command line and the file its output
    goes to (a gate's, protocol 2: sweep.messages)."""

    key: object  # the runner's name for it (a plan position; a recheck's differs)
    config: RunConfig | None = None
    auto_batch: bool = False
    args: list[str] | None = None
    log: Path | None = None
    started: float = 0.0
    deadline: float = 0.0


@dataclass
class Ended:
    """A task that ended, how, and its seconds from dispatch to answer."""

    task: Task
    result: ChildResult
    seconds: float


class WorkerQueue:
    """Tasks run in order in one worker; `wait` hands back the one that ended."""

    def __init__(
        self,
        timeout_s: float = DEFAULT_POINT_TIMEOUT_S,
        early: Worker | None = None,
        clock: Callable[[], float] = time.monotonic,
        new_worker: Callable[[], Worker] = Worker,
    ) -> None:
        self.timeout_s, self.clock, self.new_worker = timeout_s, clock, new_worker
        self.worker = early  # started before the plan was read, or None
        self.queue: deque[Task] = deque()
        self.running: Task | None = None
        self.first_ready: float | None = None  # when the first worker's imports were done
        self.worker_ready = False  # the worker in hand said its imports are done
        self.protocol = 0  # what the worker in hand said it understands (sweep.messages)
        self.started = clock()

    def submit(self, task: Task) -> None:
        self.queue.append(task)

    def started_keys(self) -> set[object]:
        """The key of the point the worker has begun, if any."""
        return {self.running.key} if self.running is not None else set()

    @property
    def busy(self) -> bool:
        return bool(self.queue or self.running)

    def wait(self) -> list[Ended]:
        """Start the next task if none runs, then block until it ends (or times out)."""
        if self.running is None and self.queue:
            task = self.queue.popleft()
            task.started = self.clock()
            self.running = task
            if self.worker is None:
                self.worker, self.worker_ready = self.new_worker(), False
            task.deadline = task.started + (
                self.timeout_s if self.worker_ready else WORKER_START_TIMEOUT_S
            )
            if task.args is None:
                self.worker.assign(task.config, task.auto_batch)
            else:
                self.worker.give({"args": task.args}, task.log)
        task = self.running
        if task is None:
            return []
        while True:
            result = self._answer()
            if result is not None:
                break
            if self.clock() >= task.deadline:
                result = ChildResult(None, self._late(), timed_out=True)
                self._replace()
                break
            self._select(task.deadline - self.clock())
        self.running = None
        return [Ended(task, result, self.clock() - task.started)]

    def start(self, timeout_s: float = WORKER_START_TIMEOUT_S) -> int:
        """Start the worker now and wait until it is ready: the protocol it said it understands
        (sweep.messages), 0 where it died or did not get ready within `timeout_s` (stopped)."""
        if self.worker is None:
            self.worker, self.worker_ready = self.new_worker(), False
        self.worker.start()
        deadline = self.clock() + timeout_s
        while not self.worker_ready:
            for message in self.worker.messages():
                if message.get("ready"):
                    self._hello(message)
            if self.worker_ready:
                break
            if self.worker.ended or self.clock() >= deadline:
                self._replace()
                return 0
            self._select(deadline - self.clock())
        return self.protocol

    def _hello(self, message: dict) -> None:
        """The worker's ready message: what it understands, and its seconds start now."""
        protocol = message.get("protocol")
        self.protocol = protocol if isinstance(protocol, int) else 1
        self._ready()

    def _answer(self) -> ChildResult | None:
        """The running task's result, where the worker answered or died."""
        worker = self.worker
        for message in worker.messages():
            if message.get("ready"):
                self._hello(message)
            if "code" in message:
                return ChildResult(message["code"], str(message.get("last", ""))[:500])
        if worker.ended:
            result = worker.result()
            self.worker = None
            return result
        return None

    def _ready(self) -> None:
        """The worker's imports are done: the point it holds starts its own seconds now."""
        now = self.clock()
        if self.first_ready is None:
            self.first_ready = now
        if not self.worker_ready and self.running is not None:
            self.running.deadline = now + self.timeout_s
        self.worker_ready = True

    def _late(self) -> str:
        """Why the running point was stopped: its own seconds, or its worker's start."""
        if self.worker_ready:
            return f"timed out after {self.timeout_s:g} s"
        return f"timed out: its worker did not start within {WORKER_START_TIMEOUT_S:g} s"

    def _select(self, timeout_s: float) -> None:
        with selectors.DefaultSelector() as selector:
            selector.register(self.worker.proc.stdout, selectors.EVENT_READ)
            selector.select(max(0.0, timeout_s))

    def _replace(self) -> None:
        """Stop the worker and what it started; the next task starts a fresh one."""
        if self.worker is not None:
            self.worker.close()
        self.worker = None

    def close(self) -> None:
        """Stop the worker (a point that runs alone, the sweep's end, an interruption)."""
        self._replace()
