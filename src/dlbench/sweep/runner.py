"""Run a sweep so that one OOM, crash or hang never costs the rest: each point in a worker
process that is replaced after any failure (the default), or each in a process of its own.

Rows: the point's process writes its own row (ok, or oom); where it could not (crash, timeout,
interruption) this process writes one for it. The CSV grows point by point, so a report can run
on a partial sweep. Resume: a rerun skips points that already have an ok row of the same dlbench
version and commit (`--no-resume` runs them again). One sweep at a time per CSV: the sweep
holds `.<csv>.sweep.lock` for its lifetime (an OS lock, released when the process dies, however
it dies)."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from filelock import FileLock
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from dlbench.config.row_tags import ISOLATIONS
from dlbench.console import stderr
from dlbench.errors import EXIT_FAILED, EXIT_OK, EXIT_OOM, UserError
from dlbench.results.environment import collect_environment
from dlbench.results.pairing import kind_of
from dlbench.results.published import check_published_folder
from dlbench.results.row import failure_row
from dlbench.results.store import CsvStore, check_side_file, held
from dlbench.signals import Interrupted
from dlbench.subprocesses import ChildResult
from dlbench.sweep.execution import PointRun, SweepExecution
from dlbench.sweep.launcher import Worker
from dlbench.sweep.plan import (
    ServePoint,
    SweepPlan,
    SweepPoint,
    shard_points,
)
from dlbench.sweep.power import PowerLimiter
from dlbench.sweep.recheck import HeldRow, Recheck
from dlbench.sweep.timing import TimeSplit
from dlbench.sweep.worker_queue import WorkerQueue


@dataclass(frozen=True)
class PointOutcome:
    """How one point ended, and how long it took from the sweep's side."""

    label: str
    status: str
    seconds: float = 0.0
    window_s: float | None = None
    figure: str = ""  # the throughput with its unit
    published_ratio: float | None = None  # the row over its published rows (None: none)


@dataclass
class SweepOutcome:
    """Every point's outcome, in plan order, the sweep's wall time, each point's row against
    the published rows and the points measured again."""

    points: list[PointOutcome] = field(default_factory=list)
    seconds: float = 0.0
    held: list[HeldRow] = field(default_factory=list)
    rechecks: list[Recheck] = field(default_factory=list)
    split: TimeSplit | None = None  # where the wall time went

    def counts(self) -> Counter:
        return Counter(p.status for p in self.points)

    @property
    def failed(self) -> int:
        """Points that did not finish: oom, error, timeout or interrupted."""
        return sum(p.status not in ("ok", "skipped") for p in self.points)


Point = SweepPoint | ServePoint
CODE_COLUMNS = ("dlbench", "dlbench_commit")  # the code a row was measured by


class SweepRunner:
    """Runs the points of a plan into one CSV."""

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
        self.resume = resume
        self.recheck = recheck
        self.worker = worker  # one started early (Worker.start), or None
        self.plan, self.store = plan, CsvStore(output)
        self.points = shard_points(plan.points(), *shard)
        self.allow_power_changes = allow_power_changes
        self.settle_s = settle_s
        self.env = collect_environment("cpu")
        if any(p.power_limit_w for p in self.points) and not allow_power_changes:
            raise UserError(
                "PLAN: this plan has power_limits; add --allow-power-changes to let the sweep "
                "set them (it restores the original limits afterwards)"
            )

    def _done(self, point: Point, rows: list[dict[str, str]] | None = None) -> bool:
        """Whether `rows` (default: the CSV as it is now) hold an ok row of this point measured
        by this code (a row of another dlbench version or commit is no resume's: a CSV that
        mixed them would read as one code's figures)."""
        return self.resume and any(
            r.get("status") == "ok" and self._same_code(r) and point.matches(r)
            for r in (self.store.rows() if rows is None else rows)
        )

    def _same_code(self, row: dict[str, str]) -> bool:
        return all(str(row.get(k) or "") == str(self.env.get(k) or "") for k in CODE_COLUMNS)

    def _fail(self, point: Point, run_id: str, tags: dict, status: str, error: str) -> None:
        if any(r.get("run_id") == run_id for r in self.store.rows()):
            return  # the child wrote its own row
        columns = {"mode": point.mode, **point.flags, "run_id": run_id, **tags}
        self.store.append(failure_row(columns, status, error, self.env))

    def _status(self, point: Point, run: PointRun, result: ChildResult) -> str:
        """The point's status from how its process ended; a row for it where it wrote none."""
        if result.timed_out:
            self._fail(point, run.run_id, run.tags, "timeout", result.last_line)
            return "timeout"
        if result.returncode == EXIT_OK:
            return "ok"
        if result.returncode == EXIT_OOM:
            return "oom"
        self._fail(point, run.run_id, run.tags, "error", result.last_line)
        return "error"

    def run(self, console: Console | None = None) -> SweepOutcome:
        """All points under the sweep's lock on the CSV, with a progress bar; power limits
        restored however it ends."""
        self.store.check_writable()
        for point in self.points:  # a log no point could write costs every point its row
            if isinstance(point, SweepPoint):
                check_side_file(point.config().telemetry.log, "PLAN: telemetry_log")
        check_published_folder()
        lock = FileLock(self.store.beside(".sweep.lock"), timeout=0)
        busy = f"another sweep is writing {self.store.path}; wait for it or choose another --output"
        with held(lock, "--output", busy):
            return self._run_points(console or Console(stderr=True))

    def _run_points(self, console: Console) -> SweepOutcome:
        outcome = SweepOutcome(points=[PointOutcome(p.label, "skipped") for p in self.points])
        limiter = None
        if self.allow_power_changes and any(p.power_limit_w for p in self.points):
            gpus = max(int(p.flags.get("devices", "1")) for p in self.points)
            limiter = PowerLimiter(gpus, settle_s=self.settle_s)
        rows = self.store.rows() if self.resume else []  # read once for the count
        todo = [i for i, p in enumerate(self.points) if not self._done(p, rows)]
        self._say_resumed(console, rows, len(self.points) - len(todo))
        worker_queue = WorkerQueue(self.plan.timeout_s, self.worker)
        sweep = SweepExecution(self, outcome, worker_queue, limiter)
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
            sweep.interrupted(str(exc))
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
        other = sum(r.get("status") == "ok" and not self._same_code(r) for r in rows)
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
            mine = self.latest_row(point, rows)
            if mine is not None and kind_of(mine) == "benchmark":
                outcome.held.append(HeldRow.of(point.label, mine))

    def latest_row(self, point: Point, rows: list[dict[str, str]]) -> dict[str, str] | None:
        """The point's latest ok row of this code, not a recheck's."""
        mine = [
            r
            for r in rows
            if r.get("status") == "ok"
            and self._same_code(r)
            and point.matches(r)
            and not r.get("recheck_of")
        ]
        return mine[-1] if mine else None


def result_line(done: PointOutcome, index: int) -> str:
    """One line per finished point above the progress bar: what it measured, what it cost."""
    figure = f" {done.figure}" if done.figure else ""
    if done.published_ratio is not None:  # each point's line says where it stands
        figure += f", {done.published_ratio:.3f}x published"
    return f"  {index:3d}. {done.label}: {done.status}{figure} ({done.seconds:.0f} s)"


def summary_table(outcome: SweepOutcome) -> Table:
    """Status, wall time, the time outside the measured window and the row over its published
    rows, per point, and totals."""
    table = Table(title="sweep summary")
    for column in ("point", "status", "seconds", "outside window (s)", "x published"):
        table.add_column(column, justify="left" if column in ("point", "status") else "right")
    for p in outcome.points:
        outside = "" if p.window_s is None else f"{p.seconds - p.window_s:.1f}"
        ratio = "" if p.published_ratio is None else f"{p.published_ratio:.3f}"
        table.add_row(p.label, p.status, f"{p.seconds:.1f}" if p.seconds else "", outside, ratio)
    totals = ", ".join(f"{k}: {v}" for k, v in sorted(outcome.counts().items()))
    table.caption = f"{totals}; {outcome.seconds:.0f} s in all"
    return table


def time_lines(outcome: SweepOutcome) -> list[str]:
    """Where the sweep's wall time went (sweep.timing), one line."""
    return [outcome.split.line(outcome.seconds)] if outcome.split else []


def finish(outcome: SweepOutcome) -> int:
    """The sweep's exit code, with one line when points failed: CI must see a failed point."""
    if not outcome.failed:
        return EXIT_OK
    stderr.print(
        f"[red]error:[/red] {outcome.failed} of {len(outcome.points)} point(s) failed "
        "(oom, error, timeout or interrupted); their rows say why"
    )
    return EXIT_FAILED
