"""A point measured in several fresh processes, one after another (pyperf's way: a process's
state can move a launch-bound figure, and only the spread across processes says how far), as
one row pooled from all of them: the figure is the mean of the processes' figures, its interval
Student's t over their spread (or the windows' own, where that is wider), and the spread
between processes a standard deviation (`process_spread_pct`), each process's figure kept
(`process_figures`). The step and latency columns are one whole window's: the process whose
figure lies nearest the mean (pooled percentiles would need every step). Its published columns
and verdict are drawn again. Why and how: docs/timing.md#processes; why the default plan's
batch-1 points run in three: docs/decisions.md#launch-bound-processes."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping

from dlbench.errors import number_or_none
from dlbench.results.pairing import figure_of
from dlbench.results.published import published_columns
from dlbench.results.schema import COLUMNS, NUMBER_COLUMNS
from dlbench.results.stats import t_975
from dlbench.results.verdict import verdict_columns

# What a row draws from its figures and the published rows: drawn again for the pooled row
DRAWN_AGAIN = (
    "published_ratio",
    "published_rows",
    "published_source",
    "published_band_pct",
    "verdict",
    "verdict_reasons",
    "verdict_notes",
)
# Columns proportional to the figure (a rate of the same window): scaled from the nearest
# process's to the pooled figure, so that a row's rates agree with each other.
RATE_COLUMNS = (
    "samples_per_s",
    "samples_per_s_per_device",
    "images_per_s",
    "batches_per_s",
    "megapixels_per_s",
    "tokens_per_s",
    "achieved_tflops",
    "mfu",
    "mfu_bf16",
    "mfu_attained",
    "decode_tokens_per_s",
    "e2e_tokens_per_s",
    "decode_hbm_tb_s",
    "hbm_bandwidth_share",
    "hbm_bandwidth_share_attained",
)


class ProcessWithoutFigure(ValueError):
    """A process's row holds no positive finite figure: the pooled row cannot stand for it."""


def process_figures(rows: list[Mapping[str, object]]) -> list[float]:
    """Each process's figure, in the order they ran; ProcessWithoutFigure naming the first
    process (1-based) that has none."""
    figures = []
    for k, row in enumerate(rows, 1):
        value = number_or_none(row.get(figure_of(row)[0]))
        if value is None or not math.isfinite(value) or value <= 0:
            raise ProcessWithoutFigure(f"process {k} of {len(rows)} measured no figure")
        figures.append(value)
    return figures


def pooled_spread_pct(figures: list[float]) -> float:
    """The standard deviation between the processes' figures, % of their mean (0 for one)."""
    if len(figures) < 2:
        return 0.0
    return 100.0 * statistics.stdev(figures) / statistics.fmean(figures)


def pooled_interval(
    figures: list[float], windows_pct: list[float | None], window_dof: float | None = None
) -> tuple[float | None, float | None]:
    """Half the mean figure's interval (t_975), %, and its degrees of freedom
    (results.intervals): Student's t over the processes' spread (N - 1), or the windows' own
    intervals combined (each process an independent estimate: sqrt(sum w^2) / N, their
    `window_dof`) where that is wider, since a lucky agreement of few processes knows no more
    than their windows. None where a window knew nothing."""
    n = len(figures)
    between = t_975(n - 1) * pooled_spread_pct(figures) / math.sqrt(n) if n > 1 else 0.0
    if any(w is None or not math.isfinite(w) for w in windows_pct):
        return (None, None) if n < 2 else (between, n - 1)
    within = math.sqrt(sum(w * w for w in windows_pct)) / n  # type: ignore[operator]
    if within > between:
        return within, window_dof
    return between, (n - 1 if n > 1 else window_dof)


def combined_row(rows: list[Mapping[str, object]], run_id: str) -> dict[str, object]:
    """One row for the processes' finished rows (as a CSV gives them back: text), named
    `run_id`, its numbers numbers again: pooled as the module says."""
    figures = process_figures(rows)
    mean = statistics.fmean(figures)
    nearest = min(range(len(rows)), key=lambda k: (abs(figures[k] - mean), k))
    row = {k: _typed(k, v) for k, v in rows[nearest].items() if k not in DRAWN_AGAIN}
    scale = mean / figures[nearest]
    for column in RATE_COLUMNS:
        if isinstance(row.get(column), (int, float)) and not isinstance(row[column], bool):
            row[column] = float(row[column]) * scale  # type: ignore[arg-type]
    windows = [number_or_none(r.get("throughput_interval_pct")) for r in rows]
    dofs = [number_or_none(r.get("throughput_interval_dof")) for r in rows]
    half, dof = pooled_interval(figures, windows, min((d for d in dofs if d), default=None))
    row.update(
        run_id=run_id,
        processes=len(rows),
        process_spread_pct=pooled_spread_pct(figures),
        process_figures=" ".join(f"{f:.6g}" for f in figures),
        throughput_interval_pct=half,
        throughput_interval_dof=dof,
    )
    row.update(published_columns(row))
    row.update(verdict_columns(row))
    known = [c for c in COLUMNS if c in row]
    return {c: row[c] for c in (*known, *(c for c in row if c not in COLUMNS))}


def _typed(column: str, cell: object) -> object:
    """A number column's text as its number (a whole one as written: 2, not 2.0); any other
    cell as it is."""
    number = number_or_none(cell) if column in NUMBER_COLUMNS else None
    if number is None:
        return cell
    return int(number) if str(cell).strip().lstrip("-").isdigit() else number
