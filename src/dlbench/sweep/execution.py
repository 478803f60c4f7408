"""One sweep's run: its points handed to its worker (sweep.worker_queue) in plan order, the points
that need a process of their own run alone between them, each row held against the published rows
as it lands and, where it lies outside its band, measured once more (a fresh process, as every
point is); and where the sweep's wall time went."""

from __future__ import annotations

from dataclasses import dataclass

from dlbench.config.row_tags import RowTags
from dlbench.errors import number_or_none
from dlbench.results.pairing import kind_of
from dlbench.results.row import new_run_id
from dlbench.results.store import CsvStore
from dlbench.subprocesses import ChildResult
from dlbench.sweep.launcher import Launcher, needs_own_process
from dlbench.sweep.outcome import PointOutcome, SweepOutcome, result_line
from dlbench.sweep.plan import ServePoint, SweepPlan, SweepPoint
from dlbench.sweep.point_rows import PointRows
from dlbench.sweep.power import PowerLimiter
from dlbench.sweep.recheck import HeldRow, Recheck
from dlbench.sweep.timing import TimeSplit
from dlbench.sweep.worker_queue import Ended, Task, WorkerQueue


@dataclass(frozen=True)
class SweepScope:
    """What a point sequence reads of its sweep (sweep.runner.SweepRunner makes it): the plan,
    its points (this shard's), the CSV and its rows, how points are isolated, and whether a
    row outside its band is measured again."""

    plan: SweepPlan
    points: list[SweepPoint | ServePoint]
    store: CsvStore
    rows: PointRows
    isolation: str
    recheck: bool


@dataclass
class PointRun:
    """One run of a point: its plan position, row id and tags; `first` names the row a recheck
    measures again."""

    index: int
    run_id: str
    tags: dict[str, str]
    first: HeldRow | None = None


class PointSequence:
    """A sweep's points one after another (in its worker, or alone where a point needs its
    own processes), each row held against the published rows as it lands and measured again
    where it lies outside its band; outcomes into `outcome` as they end. The sweep around it
    (sweep.runner.SweepRunner) owns the CSV's lock, power limits and the summary."""

    def __init__(
        self,
        scope: SweepScope,
        outcome: SweepOutcome,
        worker_queue: WorkerQueue,
        limiter: PowerLimiter | None,
    ) -> None:
        self.scope, self.outcome, self.worker_queue = scope, outcome, worker_queue
        self.limiter = limiter
        self.points = scope.points
        self.runs: dict[object, PointRun] = {}
        self.progress = self.task = None
        self.split_parts = TimeSplit(started=worker_queue.started)

    def run(self, todo: list[int]) -> None:
        """Every point in `todo` (plan positions), then the rechecks of resumed rows."""
        queue = list(todo)
        while queue or self.worker_queue.busy:
            if queue and not self.worker_queue.busy and self._runs_in_worker(self.points[queue[0]]):
                self._submit(queue.pop(0))
            alone = queue and not self._runs_in_worker(self.points[queue[0]])
            if alone and not self.worker_queue.busy:
                self._run_alone(queue.pop(0))
                continue
            for ended in self.worker_queue.wait():
                self._ended(ended)
        self._recheck_resumed()
        while self.worker_queue.busy:
            for ended in self.worker_queue.wait():
                self._ended(ended)

    def _runs_in_worker(self, point) -> bool:
        """Whether the point runs in a worker: a one-device benchmark point (not a serve point,
        not DDP, not a batch-size search, whose probes need the GPU's memory to themselves)."""
        if isinstance(point, ServePoint) or self.scope.isolation == "process":
            return False
        return not point.auto_batch and not needs_own_process(point.config())

    def _tags(self, point, extra: dict[str, str] | None = None) -> dict[str, str]:
        return {**point.all_tags, "sweep": self.scope.plan.name, **(extra or {})}

    def _submit(self, index: int, first: HeldRow | None = None) -> None:
        point: SweepPoint = self.points[index]
        if self.limiter is not None:
            self.limiter.apply(point.power_limit_w)
        extra = {"recheck_of": first.run_id} if first else {}
        run = PointRun(index, new_run_id(), self._tags(point, extra), first)
        tags = RowTags(run.tags).with_facts(isolation="worker")
        config = point.config(output=self.scope.store.path, run_id=run.run_id, tags=tags)
        key = (index, run.run_id)
        self.runs[key] = run
        self.worker_queue.submit(Task(key, config, point.auto_batch))

    def _run_alone(self, index: int) -> None:
        """A point in a process of its own, the worker stopped first."""
        point = self.points[index]
        if self.limiter is not None:
            self.limiter.apply(point.power_limit_w)
        tags = self._tags(point)
        if isinstance(point, SweepPoint):
            tags["isolation"] = "process"
        run = PointRun(index, new_run_id(), tags)
        self.runs[("alone", run.run_id)] = run  # a row for it if a signal stops the sweep
        began = self.split_parts.clock()
        launcher, output = Launcher(self.worker_queue.close), self.scope.store.path
        result = point.launch(launcher, self.scope.plan.timeout_s, output, run.run_id, tags)
        del self.runs[("alone", run.run_id)]
        seconds = self.split_parts.clock() - began
        self.split_parts.tasks.append((began, began + seconds, "alone"))
        self._record(point, run, result, seconds)

    def _ended(self, ended: Ended) -> None:
        task = ended.task
        span = (task.started, task.started + ended.seconds)
        run = self.runs.pop(task.key)
        self.split_parts.tasks.append((*span, "recheck" if run.first else "measure"))
        row = self._record(self.points[run.index], run, ended.result, ended.seconds)
        if run.first is not None:
            return
        if row is not None and row.get("status") == "ok":
            held = HeldRow.of(self.points[run.index].label, row)
            self.outcome.held.append(held)
            if held.outside and self.scope.recheck:
                self._say(f"  measuring again (outside its published band): {held.label}")
                self._submit(run.index, first=held)

    def _record(self, point, run: PointRun, result: ChildResult, seconds: float):
        """The point's status and row; its line above the progress bar, or its recheck."""
        status = self.scope.rows.status(point, run.run_id, run.tags, result)
        found = next((r for r in self.scope.store.rows() if r.get("run_id") == run.run_id), None)
        row = found or {}
        window = number_or_none(row.get("wall_window_s"))
        self.split_parts.windows += window or 0.0
        self.split_parts.count_reused(row)
        if run.first is not None:
            self.split_parts.recheck_windows += window or 0.0
            ok = found is not None and status == "ok"
            second = HeldRow.of(point.label, row) if ok else None
            self.outcome.rechecks.append(Recheck(run.first, second))
            return found
        done = PointOutcome.of_row(point.label, status, seconds, window, row)
        self.outcome.points[run.index] = done
        if self.progress is not None:
            self.progress.console.print(result_line(done, run.index + 1))
            self.progress.advance(self.task)
        return found

    def _recheck_resumed(self) -> None:
        """A resumed point whose row lies outside its band and was never rechecked: measured
        again now (a sweep cut short before its recheck)."""
        if not self.scope.recheck:
            return
        rows = self.scope.store.rows()
        rechecked = {r.get("recheck_of"): r for r in rows if r.get("recheck_of")}
        measured = {h.label for h in self.outcome.held}
        for index, point in enumerate(self.points):
            if point.label in measured or not self._runs_in_worker(point):
                continue
            row = self.scope.rows.latest(point, rows)
            if row is None or kind_of(row) != "benchmark":
                continue
            held = HeldRow.of(point.label, row)
            self.outcome.held.append(held)
            second = rechecked.get(held.run_id)
            if held.outside and second is not None:  # measured again by an earlier run
                ok = second.get("status") == "ok"
                self.outcome.rechecks.append(
                    Recheck(held, HeldRow.of(point.label, second) if ok else None)
                )
            elif held.outside:
                self._say(f"  measuring again (outside its published band): {held.label}")
                self._submit(index, first=held)

    def _say(self, line: str) -> None:
        if self.progress is not None:
            self.progress.console.print(line)

    def write_interrupted(self, why: str) -> None:
        """Rows for the points in flight when a signal stopped the sweep; a point still queued
        never started and has none (a resumed sweep measures it)."""
        started = self.worker_queue.started_keys()
        for key, run in self.runs.items():
            if key in started or key[0] == "alone":
                point = self.points[run.index]
                self.scope.rows.write_failure(point, run.run_id, run.tags, "interrupted", why)

    def split(self) -> TimeSplit:
        """Where the sweep's wall time went (sweep.timing)."""
        self.split_parts.first_ready = self.worker_queue.first_ready
        return self.split_parts
