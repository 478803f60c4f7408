"""Points prepared ahead: several workers run a sweep's one-device points at once, and the GPU's
turn (sweep.turns) keeps every measurement alone. While one worker measures, the others have
given way (or compile, on other cores); the rest of the time they build their models, compile,
capture and warm up side by side.
A compiler worker goes further ahead: it compiles the plan's compiled points (their graphs
traced and lowered, their Triton kernels built and tuned) into the cache folder, so that the
worker that measures one later finds them there (`compile_cache` hit), and stops where the
point would be measured.

Two points sit in GPU memory at once only where both are known to fit (`MemoryBudget`, from the
published rows' peak memory); a point of unknown size runs with nothing beside it. One worker and
no compiler is the plain sweep: points one after another in one process."""

from __future__ import annotations

import selectors
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from dlbench.config import RunConfig
from dlbench.subprocesses import ChildResult
from dlbench.sweep.launcher import Worker
from dlbench.sweep.messages import MEASURE_TASK
from dlbench.sweep.turns import TurnBroker

# Each worker's CUDA context and the allocator's slack, beside its point's own peak
CONTEXT_MB = 1024.0
# The share of the GPU's memory that points measured and prepared side by side may fill
MEMORY_SHARE = 0.85
GRANT_POLL_S = 0.002  # while a turn waits for the others to give way


@dataclass
class Task:
    """A point for a worker: measured (its row), or compiled ahead (no row)."""

    key: object  # the runner's name for it (a plan position; a recheck's differs)
    config: RunConfig
    auto_batch: bool = False
    kind: str = MEASURE_TASK
    memory_mb: float | None = None  # its peak GPU memory where known
    avoid: Worker | None = None  # not in this worker (a recheck: not where the first row ran)
    worker: Worker | None = None
    started: float = 0.0
    deadline: float = 0.0


@dataclass
class MemoryBudget:
    """Whether a task fits beside those in flight: the GPU's memory (None: not known, no limit)
    against their known peaks; a task of unknown size runs with nothing beside it."""

    total_mb: float | None = None

    def fits(self, task: Task, running: list[Task]) -> bool:
        if not running:
            return True
        if self.total_mb is None:
            return True
        sizes = [t.memory_mb for t in (*running, task)]
        if any(s is None for s in sizes):
            return False
        need = sum(sizes) + CONTEXT_MB * len(sizes)  # type: ignore[arg-type]
        return need <= MEMORY_SHARE * self.total_mb


@dataclass
class Ended:
    """A task that ended, how, and its seconds from dispatch to answer."""

    task: Task
    result: ChildResult
    seconds: float


@dataclass
class Pipeline:
    """Runs measure tasks in `workers` workers (and compile-ahead tasks in a compiler worker)
    under one turn broker; `wait` hands back the tasks that ended."""

    workers: int = 1
    compiler: bool = False
    budget: MemoryBudget = field(default_factory=MemoryBudget)
    timeout_s: float = 900.0
    early: Worker | None = None  # a worker started before the plan was read
    broker: TurnBroker = field(default_factory=TurnBroker)
    clock: Callable[[], float] = time.monotonic

    def __post_init__(self) -> None:
        self.queue: deque[Task] = deque()
        self.ahead: deque[Task] = deque()
        self.running: list[Task] = []
        self.pool: list[Worker] = []
        self.compiling: Worker | None = None
        self.first_ready: float | None = None
        self.started = self.clock()

    def start(self) -> None:
        """Start every worker now: their imports run while the sweep prepares."""
        turns = self.workers > 1 or self.compiler  # one worker alone never waits for a turn
        early = self.early
        if early is not None and early.turns != turns:
            early.close()  # started before the plan was read, for the other kind of sweep
        while len(self.pool) < self.workers:
            if early is not None and early.proc is not None and not self.pool:
                self.pool.append(early)  # started before the plan was read
            else:
                self.pool.append(Worker(f"worker {len(self.pool)}", turns).start())
        if self.compiler and self.compiling is None:
            self.compiling = Worker("compiler", turns).start()
        self._share_pids()

    def _share_pids(self) -> None:
        """Every worker joins the broker and knows the others' PIDs (the job's own processes,
        no neighbours in the isolation check)."""
        workers = self._all()
        for worker in workers:
            self.broker.join(worker)
            worker.job_pids = [w.pid for w in workers if w is not worker and w.pid is not None]

    def submit(self, task: Task) -> None:
        self.queue.append(task)

    def compile_ahead(self, task: Task) -> None:
        """A point to compile ahead, in plan order (skipped once its measurement started)."""
        if self.compiler:
            self.ahead.append(task)

    def started_keys(self) -> set[object]:
        """The keys of the points a worker has begun to measure (a compile ahead is not one)."""
        return {t.key for t in self.running if t.worker is not self.compiling}

    @property
    def busy(self) -> bool:
        return bool(self.queue or self.running)

    def _all(self) -> list[Worker]:
        return [*self.pool, *([self.compiling] if self.compiling else [])]

    def _free(self, worker: Worker) -> bool:
        return all(t.worker is not worker for t in self.running)

    def _dispatch(self) -> None:
        self.start()
        compiling = {t.key for t in self.running if t.worker is self.compiling}
        for task in list(self.queue):
            if task.key in compiling or not self.budget.fits(task, self.running):
                break  # in order; a point being compiled ahead is waited for, not compiled twice
            free = [w for w in self.pool if self._free(w) and w is not task.avoid]
            if not free and task.avoid is not None and len(self.pool) == 1 and not self.running:
                self._replace(task.avoid)  # one worker: a recheck needs a fresh one
                free = [self.pool[0]]
            if not free:
                break
            self.queue.remove(task)
            self._run(task, free[0])
        self._dispatch_ahead()

    def _dispatch_ahead(self) -> None:
        worker = self.compiling
        if worker is None or not self._free(worker):
            return
        queued = {t.key for t in self.queue}
        while self.ahead:
            task = self.ahead[0]
            if task.key not in queued:  # its measurement began: nothing to win
                self.ahead.popleft()
                continue
            if not self.budget.fits(task, self.running):
                return
            self.ahead.popleft()
            self._run(task, worker)
            return

    def _run(self, task: Task, worker: Worker) -> None:
        task.worker, task.started = worker, self.clock()
        task.deadline = task.started + self.timeout_s
        self.running.append(task)
        worker.assign(task.kind, task.config, task.auto_batch)

    def _replace(self, worker: Worker) -> None:
        """A worker ended (or must not run a task): a new process in its place, started now."""
        self.broker.leave(worker)
        worker.close()
        fresh = Worker(worker.name, worker.turns).start()
        if worker is self.compiling:
            self.compiling = fresh
        else:
            self.pool[self.pool.index(worker)] = fresh
        self._share_pids()

    def wait(self) -> list[Ended]:
        """Dispatch what can start, then block until a task ends (or times out); the tasks
        that ended. Messages about turns are answered meanwhile."""
        self._dispatch()
        if not self.running:
            return []
        while True:
            ended = self._poll()
            if ended:
                self._dispatch()
                return ended
            timeout = min(t.deadline for t in self.running) - self.clock()
            if self.broker.waiting:  # workers are giving way: look again soon
                timeout = min(timeout, GRANT_POLL_S)
            self._select(timeout)

    def _select(self, timeout_s: float) -> None:
        with selectors.DefaultSelector() as selector:
            for worker in self._all():
                if worker.proc is not None:
                    selector.register(worker.proc.stdout, selectors.EVENT_READ, worker)
            selector.select(max(0.0, timeout_s))

    def _poll(self) -> list[Ended]:
        ended: list[Ended] = []
        for worker in self._all():
            for message in worker.messages():
                ended += self._heard(worker, message)
            if worker.ended:
                ended += self._died(worker)
        self.broker.poll()
        now = self.clock()
        for task in [t for t in self.running if now >= t.deadline]:
            result = ChildResult(None, f"timed out after {self.timeout_s:g} s", timed_out=True)
            ended.append(self._finish(task, result))
            self._replace(task.worker)
        return ended

    def _heard(self, worker: Worker, message: dict) -> list[Ended]:
        if message.get("ready"):
            worker.ready_at = self.clock()
            if self.first_ready is None and worker is not self.compiling:
                self.first_ready = worker.ready_at
        elif "ask" in message:
            self.broker.asked(worker)
        elif message.get("done"):
            self.broker.done(worker)
        elif "code" in message:
            task = next((t for t in self.running if t.worker is worker), None)
            if message["code"] != 0:
                self._replace(worker)
            if task is not None:
                return [self._finish(task, ChildResult(message["code"], message["last"][:500]))]
        return []

    def _died(self, worker: Worker) -> list[Ended]:
        task = next((t for t in self.running if t.worker is worker), None)
        self.broker.leave(worker)
        result = worker.result()
        self._replace(worker)
        return [self._finish(task, result)] if task is not None else []

    def _finish(self, task: Task, result: ChildResult) -> Ended:
        self.running.remove(task)
        return Ended(task, result, self.clock() - task.started)

    def drain(self) -> list[Ended]:
        """Every queued task run to its end (before a point that must run alone)."""
        ended: list[Ended] = []
        while self.busy:
            ended += self.wait()
        return ended

    def close(self) -> None:
        """Stop every worker (a point that runs alone, the sweep's end, an interruption)."""
        for worker in self._all():
            self.broker.leave(worker)
            worker.close()
        if self.early is not None:  # started before the plan was read, maybe never used
            self.early.close()
        self.pool, self.compiling = [], None
        self.ahead.clear()
