"""Run a sweep: every point in its own process, so one OOM, crash or hang never costs the rest.

Rows: a child writes its own row (ok, or oom); where it could not (crash, timeout, interruption)
this process writes one for it. Rerunning skips points that already have an ok row."""

from __future__ import annotations

import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from dlbench.config import CONFIG_KEY
from dlbench.engine.ddp import resolved_strategy
from dlbench.errors import UserError
from dlbench.results.environment import collect_environment
from dlbench.results.row import failure_row, new_run_id
from dlbench.results.store import CsvStore
from dlbench.run import EXIT_OK, EXIT_OOM
from dlbench.signals import Interrupted
from dlbench.sweep.autobatch import find_batch_size
from dlbench.sweep.child import run_child
from dlbench.sweep.plan import DISTINGUISHING_TAGS, SweepPlan, SweepPoint, shard_points
from dlbench.sweep.power import PowerLimiter


@dataclass
class SweepOutcome:
    """Status of every point, in plan order."""

    statuses: list[tuple[str, str]] = field(default_factory=list)

    def counts(self) -> Counter:
        return Counter(status for _, status in self.statuses)


def point_matches(point: SweepPoint, row: dict[str, str]) -> bool:
    """Whether a stored row measured this point (on the fields the point sets)."""
    wanted = {"mode": point.mode, **point.flags}
    if wanted.get("batch_size") == "auto":
        wanted.pop("batch_size")
        if row.get("batch_size_mode") != "auto":
            return False
    tags = point.all_tags
    for key in (*DISTINGUISHING_TAGS, *tags):
        if row.get(key, "") != tags.get(key, ""):
            return False
    processes = int(wanted.get("devices", 1)) * int(wanted.get("num_nodes", 1))
    wanted["strategy"] = resolved_strategy(str(wanted.get("strategy", "auto")), processes)
    for key in CONFIG_KEY:
        if key in wanted and row.get(key, "") != "" and row[key] != str(wanted[key]):
            return False  # an empty value: the key does not apply (seq_len of an image model)
    return True


class SweepRunner:
    """Runs the points of a plan into one CSV."""

    def __init__(
        self,
        plan: SweepPlan,
        output: Path,
        allow_power_changes: bool = False,
        settle_s: float = 10.0,
        shard: tuple[int, int] = (0, 1),
    ) -> None:
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

    def _done(self, point: SweepPoint) -> bool:
        return any(
            r.get("status") == "ok"
            and r.get("run_kind", "benchmark") in ("", "benchmark")
            and point_matches(point, r)
            for r in self.store.rows()
        )

    def _fail(self, point: SweepPoint, run_id: str, status: str, error: str) -> None:
        if any(r.get("run_id") == run_id for r in self.store.rows()):
            return  # the child wrote its own row
        columns = {"mode": point.mode, **point.flags, "run_id": run_id, "sweep": self.plan.name}
        self.store.append(failure_row({**columns, **point.all_tags}, status, error, self.env))

    def _run_point(self, point: SweepPoint) -> str:
        run_id = new_run_id()
        args = point.cli_args()
        if point.flags.get("batch_size") == "auto":
            mode_args = [a for a in args if a not in ("--batch-size", "auto")]
            with tempfile.TemporaryDirectory() as tmp:
                found = find_batch_size(
                    mode_args, str(Path(tmp) / "probe.csv"), self.plan.timeout_s, limit=4096
                )
            args = [*mode_args, "--batch-size", str(found), "--tag", "batch_size_mode=auto"]
        args += [
            "--run-id",
            run_id,
            "--output",
            str(self.store.path),
            "--tag",
            f"sweep={self.plan.name}",
        ]
        try:
            result = run_child(args, self.plan.timeout_s)
        except Interrupted as exc:
            self._fail(point, run_id, "interrupted", str(exc))
            raise
        if result.timed_out:
            self._fail(point, run_id, "timeout", result.last_line)
            return "timeout"
        if result.returncode == EXIT_OK:
            return "ok"
        if result.returncode == EXIT_OOM:
            return "oom"
        self._fail(point, run_id, "error", result.last_line)
        return "error"

    def run(self, console: Console | None = None) -> SweepOutcome:
        """All points in order, with a progress bar; power limits restored however it ends."""
        console = console or Console(stderr=True)
        self.store.check_writable()
        outcome = SweepOutcome()
        limiter = None
        if self.allow_power_changes and any(p.power_limit_w for p in self.points):
            gpus = max(int(p.flags.get("devices", "1")) for p in self.points)
            limiter = PowerLimiter(gpus, settle_s=self.settle_s)
        columns = (
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
        )
        try:
            with Progress(*columns, console=console, transient=False) as progress:
                task = progress.add_task(f"sweep {self.plan.name}", total=len(self.points))
                for point in self.points:
                    progress.update(task, description=point.label)
                    if self._done(point):
                        status = "skipped"
                    else:
                        if limiter:
                            limiter.apply(point.power_limit_w)
                        status = self._run_point(point)
                    outcome.statuses.append((point.label, status))
                    progress.advance(task)
        finally:
            if limiter:
                limiter.__exit__(None, None, None)
        return outcome


def summary_table(outcome: SweepOutcome) -> Table:
    """ok / oom / error / timeout / skipped per point, and totals."""
    table = Table(title="sweep summary")
    table.add_column("point")
    table.add_column("status")
    for label, status in outcome.statuses:
        table.add_row(label, status)
    totals = ", ".join(f"{k}: {v}" for k, v in sorted(outcome.counts().items()))
    table.caption = totals
    return table
