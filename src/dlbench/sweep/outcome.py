"""How a sweep ended, point by point, and the lines that say so: each point's line above the
progress bar, the summary table, where the wall time went, and the exit code."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from rich.table import Table

from dlbench.console import stderr
from dlbench.errors import EXIT_FAILED, EXIT_INVALID, EXIT_OK, number_or_none
from dlbench.results.advice import advice, verdict_label
from dlbench.sweep.recheck import HeldRow, Recheck
from dlbench.sweep.timing import TimeSplit


@dataclass(frozen=True)
class PointOutcome:
    """How one point ended, and how long it took from the sweep's side."""

    label: str
    status: str
    seconds: float = 0.0
    window_s: float | None = None
    figure: str = ""  # the throughput with its unit
    published_ratio: float | None = None  # the row over its published rows (None: none)
    verdict: str = ""  # `valid`, or `INVALID (noisy, drift)`: whether to trust the figure
    advice: str = ""  # an invalid row's words: what failed and what to do (results.verdict)

    @classmethod
    def of_row(
        cls, label: str, status: str, seconds: float, window: float | None, row: dict
    ) -> PointOutcome:
        """A finished point's outcome from its row: its figure, ratio and verdict."""
        figure = ""
        if status == "ok" and row.get("serve_achieved_qps"):
            figure = f"{float(row['serve_achieved_qps']):,.1f} queries/s"
        elif status == "ok" and row.get("samples_per_s"):
            figure = f"{float(row['samples_per_s']):,.1f} {row.get('sample_unit', 'sample')}s/s"
        ratio = number_or_none(row.get("published_ratio"))  # read as HeldRow reads it
        verdict = verdict_label(row) if status == "ok" else ""
        words = advice(row) if verdict.startswith("INVALID") else ""
        return cls(label, status, seconds, window, figure, ratio, verdict, words)


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


def result_line(done: PointOutcome, index: int) -> str:
    """One line per finished point above the progress bar: what it measured, what it cost."""
    figure = f" {done.figure}" if done.figure else ""
    if done.verdict:  # whether to trust it, beside the figure
        figure += f", {done.verdict}"
    if done.published_ratio is not None:  # each point's line says where it stands
        figure += f", {done.published_ratio:.3f}x published"
    return f"  {index:3d}. {done.label}: {done.status}{figure} ({done.seconds:.0f} s)"


def summary_table(outcome: SweepOutcome) -> Table:
    """Status, wall time, the time outside the measured window and the row over its published
    rows, per point, and totals."""
    table = Table(title="sweep summary")
    left = ("point", "status", "verdict")
    published = any(p.published_ratio is not None for p in outcome.points)  # else no column
    columns = ("point", "status", "verdict", "seconds", "outside window (s)")
    for column in (*columns, *(["x published"] if published else [])):
        table.add_column(column, justify="left" if column in left else "right")
    for p in outcome.points:
        outside = "" if p.window_s is None else f"{p.seconds - p.window_s:.1f}"
        ratio = "" if p.published_ratio is None else f"{p.published_ratio:.3f}"
        seconds = f"{p.seconds:.1f}" if p.seconds else ""
        cells = (p.label, p.status, p.verdict, seconds, outside)
        table.add_row(*cells, *([ratio] if published else []))
    totals = ", ".join(f"{k}: {v}" for k, v in sorted(outcome.counts().items()))
    invalid = sum(p.verdict.startswith("INVALID") for p in outcome.points)
    table.caption = f"{totals}; {invalid} invalid; {outcome.seconds:.0f} s in all"
    return table


def advice_lines(outcome: SweepOutcome) -> list[str]:
    """Each invalid point's words under the summary: what failed first, and what to do."""
    return [f"{p.label}: {p.advice}" for p in outcome.points if p.advice]


def time_lines(outcome: SweepOutcome) -> list[str]:
    """Where the sweep's wall time went (sweep.timing), one line."""
    return [outcome.split.line(outcome.seconds)] if outcome.split else []


def finish(outcome: SweepOutcome, invalid_ok: bool = False) -> int:
    """The sweep's exit code, with one line where points failed (CI must see a failed point) or
    where every point it measured is INVALID (nothing of it is a figure to trust; `invalid_ok`
    keeps exit 0 for that)."""
    if outcome.failed:
        stderr.print(
            f"[red]error:[/red] {outcome.failed} of {len(outcome.points)} point(s) failed "
            "(oom, error, timeout or interrupted); their rows say why"
        )
        return EXIT_FAILED
    measured = [p for p in outcome.points if p.status == "ok"]
    if measured and all(p.verdict.startswith("INVALID") for p in measured) and not invalid_ok:
        stderr.print(
            f"[red]error:[/red] every point measured ({len(measured)}) is INVALID: no figure of "
            "this sweep is one to trust (each point's line says why and what to change; "
            "--invalid-ok exits 0 all the same)"
        )
        return EXIT_INVALID
    return EXIT_OK
