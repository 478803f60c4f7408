"""The report's serving sections: requests a second under a bound (`dlbench serve`), and the
serving frontier (`--sweep-concurrency`); each also drawn from serve rows alone, where a report
has no benchmark rows (analysis.report)."""

from __future__ import annotations

import pandas as pd

from dlbench.analysis import figures
from dlbench.analysis.report_rows import Part, ReportRows, Section
from dlbench.analysis.serving import frontier_points, frontier_table, search_points, serve_table


def serving_under_load(r: ReportRows) -> Part | None:
    """Requests a second within a p99 bound, beside offline throughput and batch-1 latency."""
    return serving_part(r.rows)


def serving_part(rows: pd.DataFrame) -> Part | None:
    """The serving section from any rows (a report of serve rows alone has only this one)."""
    table, points = serve_table(rows), search_points(rows)
    text = (
        "dlbench serve: latency from each query's scheduled arrival; the figure is each rate "
        "a search tried and its p99 against the bound (docs/serving.md)."
    )
    part = Section("Serving under load", text, table), figures.latency_against_rate(points)
    return None if table.empty else part


def serving_frontier(r: ReportRows) -> Part | None:
    """Output tokens a second per GPU against each user's, over concurrencies."""
    return frontier_part(r.rows)


def frontier_part(rows: pd.DataFrame) -> Part | None:
    """The serving frontier from any rows (`dlbench serve --sweep-concurrency`)."""
    points = frontier_points(rows)
    if points.empty:
        return None
    text = (
        "An LLM served offline at each concurrency (dlbench serve --sweep-concurrency): output "
        "tokens a second per GPU against a user's own (1 / the median time per output token), "
        "and the energy of a token; each point is labelled with its concurrency "
        "(docs/serving.md#the-serving-frontier)."
    )
    return Section("The serving frontier", text, frontier_table(points)), figures.serving_frontier(
        points
    )
