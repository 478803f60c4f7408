"""A sweep's points as rows of its CSV: whether a point is done (an ok row of this code, which a
rerun resumes from), a point's latest row, its status from how its process ended, and the row
the sweep writes for a point whose process could write none (a crash, a timeout, a signal).
Rows are of this code where their code labels name one known commit (results.pairing.same_code:
the rule every reader of rows uses)."""

from __future__ import annotations

from dlbench.errors import EXIT_OK, EXIT_OOM
from dlbench.results.environment import collect_environment
from dlbench.results.pairing import code_label, same_code
from dlbench.results.row import failure_row
from dlbench.results.store import CsvStore
from dlbench.subprocesses import ChildResult
from dlbench.sweep.plan import ServePoint, SweepPoint

Point = SweepPoint | ServePoint
Rows = list[dict[str, str]]


class PointRows:
    """The rows of one sweep's CSV, read for its points and written for those that wrote none."""

    def __init__(self, store: CsvStore, resume: bool = True) -> None:
        self.store, self.resume = store, resume
        self.env = collect_environment("cpu")  # the sweep's own process: no GPU of its own
        self.code = code_label(self.env)

    def same_code(self, row: dict[str, str]) -> bool:
        return same_code(code_label(row), self.code)

    def done(self, point: Point, rows: Rows | None = None) -> bool:
        """Whether `rows` (default: the CSV as it is now) hold an ok row of this point measured
        by this code (a row of other code is no resume's: a CSV that mixed them would read as
        one code's figures)."""
        return self.resume and any(
            r.get("status") == "ok" and self.same_code(r) and point.matches(r)
            for r in (self.store.rows() if rows is None else rows)
        )

    def latest(self, point: Point, rows: Rows) -> dict[str, str] | None:
        """The point's latest ok row of this code, not a recheck's."""
        mine = [
            r
            for r in rows
            if r.get("status") == "ok"
            and self.same_code(r)
            and point.matches(r)
            and not r.get("recheck_of")
        ]
        return mine[-1] if mine else None

    def write_failure(
        self, point: Point, run_id: str, tags: dict[str, str], status: str, error: str
    ) -> None:
        """A row for a point that ended without one (its own process wrote none)."""
        if any(r.get("run_id") == run_id for r in self.store.rows()):
            return  # the point's process wrote its own row
        columns = {"mode": point.mode, **point.flags, "run_id": run_id, **tags}
        self.store.append(failure_row(columns, status, error, self.env))

    def status(self, point: Point, run_id: str, tags: dict[str, str], result: ChildResult) -> str:
        """The point's status from how its process ended; a row for it where it wrote none."""
        if result.timed_out:
            self.write_failure(point, run_id, tags, "timeout", result.last_line)
            return "timeout"
        if result.returncode == EXIT_OK:
            return "ok"
        if result.returncode == EXIT_OOM:
            return "oom"
        self.write_failure(point, run_id, tags, "error", result.last_line)
        return "error"
