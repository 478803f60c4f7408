"""A point measured in several fresh processes, one after another (pyperf's way: a process's
state can move a launch-bound figure, and only the spread across processes says how far), as
one row: the process whose figure is the median, with how many ran (`processes`) and the spread
of their figures (`process_spread_pct`); its published columns and verdict drawn again, since
the spread widens a published row's band (results.published.band_pct). Why the default plan's
batch-1 points run in three: docs/decisions.md#launch-bound-processes."""

from __future__ import annotations

from collections.abc import Mapping

from dlbench.errors import number_or_none
from dlbench.results.pairing import figure_of
from dlbench.results.published import published_columns
from dlbench.results.schema import COLUMNS, NUMBER_COLUMNS
from dlbench.results.stats import spread_pct
from dlbench.results.verdict import verdict_columns

# What a row draws from its figures and the published rows: drawn again for the combined row
DRAWN_AGAIN = (
    "published_ratio",
    "published_rows",
    "published_source",
    "published_band_pct",
    "verdict",
    "verdict_reasons",
    "verdict_notes",
)


def combined_row(rows: list[Mapping[str, object]], run_id: str) -> dict[str, object]:
    """One row for the processes' finished rows (as a CSV gives them back: text): the median
    process's, named `run_id`, its numbers numbers again."""
    figures = [number_or_none(r.get(figure_of(r)[0])) or 0.0 for r in rows]
    order = sorted(range(len(rows)), key=figures.__getitem__)
    middle = rows[order[(len(rows) - 1) // 2]]
    row = {k: _typed(k, v) for k, v in middle.items() if k not in DRAWN_AGAIN}
    row.update(run_id=run_id, processes=len(rows), process_spread_pct=spread_pct(figures))
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
