"""Run a sweep so that one OOM, crash or hang never costs the rest: each point in a fresh process
forked from one worker (the default), or each as a `dlbench` command of its own.

Rows: the point's process writes its own row (ok, or oom); where it could not (crash, timeout,
interruption) this process writes one for it. The CSV grows point by point, so a report can run
on a partial sweep. Resume: a rerun skips points that already have an ok row of the same dlbench
version and commit (`--no-resume` runs them again). One sweep at a time per CSV: the sweep
holds `.<csv>.sweep.lock` for its lifetime (an OS lock, released when the process dies, however
it dies)."""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from dlbench.config.row_tags import ISOLATIONS
from dlbench.errors import UserError
from dlbench.results.file_lock import BesideLock
from dlbench.results.pairing import kind_of
from dlbench.results.published import check_published_folder
from dlbench.results.store import CsvStore, check_side_file, held
from dlbench.signals import Interrupted
from dlbench.sweep.execution import PointSequence, SweepScope
from dlbench.sweep.launcher import Worker
from dlbench.sweep.outcome import PointOutcome, SweepOutcome
from dlbench.sweep.plan import SweepPlan, SweepPoint, shard_points
from dlbench.sweep.point_rows import PointRows
from dlbench.sweep.power import PowerLimiter
from dlbench.sweep.recheck import HeldRow
from dlbench.sweep.worker_queue import WorkerQueue


class SweepRunner:
    """A plan into one CSV: the CSV checked and locked, power limits set and restored, the
    points resumed or run (sweep.execution.PointSequence), the rows held against the
    published ones at the end."""

    def __init__(
        self,
        plan: SweepPlan,
        output: Path,
        allow_power_changes: bool = False,
        settle_s: float = 10.0,
        shard: tuple[int, int] = (0, 1),
        isolation: str = "worker",
        resume: bool = True,
        worker: Worker | None = None,
        recheck: bool = True,
    ) -> None:
        if isolation not in ISOLATIONS:
            raise UserError(f"--isolation: invalid value {isolation!r}; {' or '.join(ISOLATIONS)}")
        self.isolation = isolation
        self.recheck = recheck
        self.worker = worker  # one started early (Worker.start), or None
        self.plan, self.store = plan, CsvStore(output)
        self.points = shard_points(plan.points(), *shard)
        self.allow_power_changes = allow_power_changes
        self.settle_s = settle_s
        self.rows = PointRows(self.store, resume)
        if any(p.power_limit_w for p in self.points) and not allow_power_changes:
            raise UserError(
                "PLAN: this plan has power_limits; add --allow-power-changes to let the sweep "
                "set them (it restores the original limits afterwards)"
            )

    def run(self, console: Console | None = None) -> SweepOutcome:
        """All points under the sweep's lock on the CSV, with a progress bar; power limits
        restored however it ends."""
        self.store.check_writable()
        for point in self.points:  # a log no point could write costs every point its row
            if isinstance(point, SweepPoint):
                check_side_file(point.config().telemetry.log, "PLAN: telemetry_log")
        check_published_folder()
        lock = BesideLock(self.store.beside(".sweep.lock"), timeout=0)
        busy = f"another sweep is writing {self.store.path}; wait for it or choose another --output"
        with held(lock, "--output", busy):
            return self._run_points(console or Console(stderr=True))

    def _run_points(self, console: Console) -> SweepOutcome:
        outcome = SweepOutcome(points=[PointOutcome(p.label, "skipped") for p in self.points])
        limiter = None
        if self.allow_power_changes and any(p.power_limit_w for p in self.points):
            gpus = max(int(p.flags.get("devices", "1")) for p in self.points)
            limiter = PowerLimiter(gpus, settle_s=self.settle_s)
        rows = self.store.rows() if self.rows.resume else []  # read once for the count
        todo = [i for i, p in enumerate(self.points) if not self.rows.done(p, rows)]
        self._say_resumed(console, rows, len(self.points) - len(todo))
        worker_queue = WorkerQueue(self.plan.timeout_s, self.worker)
        scope = SweepScope(
            self.plan, self.points, self.store, self.rows, self.isolation, self.recheck
        )
        sweep = PointSequence(scope, outcome, worker_queue, limiter)
        columns = (
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
        )
        try:
            with Progress(*columns, console=console, transient=False) as progress:
                sweep.progress = progress
                sweep.task = progress.add_task(f"sweep {self.plan.name}", total=len(self.points))
                progress.advance(sweep.task, len(self.points) - len(todo))
                sweep.run(todo)
            worker_queue.close()
            self._hold_against_published(outcome)
        except Interrupted as exc:
            sweep.write_interrupted(str(exc))
            raise
        finally:
            worker_queue.close()
            if limiter:
                limiter.__exit__(None, None, None)
            outcome.seconds = time.monotonic() - worker_queue.started
            outcome.split = sweep.split()
        return outcome

    def _say_resumed(self, console: Console, rows: list[dict[str, str]], done: int) -> None:
        if done:
            console.print(
                f"resuming: {done} of {len(self.points)} point(s) already have an ok row in "
                f"{self.store.path} and are skipped (--no-resume runs them again)"
            )
        other = sum(r.get("status") == "ok" and not self.rows.same_code(r) for r in rows)
        if other:
            console.print(
                f"{other} ok row(s) in {self.store.path} were measured by other dlbench code "
                "and are not resumed from: their points run again"
            )

    def _hold_against_published(self, outcome: SweepOutcome) -> None:
        """Each point's latest row of this code against the published rows (a point resumed
        from an earlier run too)."""
        rows = self.store.rows()
        measured = {h.label for h in outcome.held}
        for point in self.points:
            if point.label in measured:
                continue
            mine = self.rows.latest(point, rows)
            if mine is not None and kind_of(mine) == "benchmark":
                outcome.held.append(HeldRow.of(point.label, mine))
