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

from dlbench.config import RunConfig
from dlbench.config.limits import DEFAULT_POINT_TIMEOUT_S, WORKER_START_TIMEOUT_S
from dlbench.subprocesses import ChildResult
from dlbench.sweep.launcher import Worker


@dataclass
class Task:
    """A point for the worker."""

    key: object  # the runner's name for it (a plan position; a recheck's differs)
    config: RunConfig
    auto_batch: bool = False
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
            self.worker.assign(task.config, task.auto_batch)
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

    def _answer(self) -> ChildResult | None:
        """The running task's result, where the worker answered or died."""
        worker = self.worker
        for message in worker.messages():
            if message.get("ready"):
                self._ready()
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
