"""A server search's points as a row keeps them (`serve_points`): each rate tried as
`qps:figures:outcome`, the figures the load was held to in ms (a query's p99 latency, or an
LLM's p99 TTFT/TPOT), the outcome ok (held), over (LoadGen called it INVALID) or behind (VALID,
but the server fell behind the rate). Written by the search and read by the report: one format,
stated here."""

from __future__ import annotations

import math
from dataclasses import dataclass

OUTCOMES = ("ok", "over", "behind")


def point_text(qps: float, figures: tuple[float, ...], outcome: str) -> str:
    """One point as the row keeps it: `412.5:12.031/3.250:ok`."""
    return f"{qps:.1f}:{'/'.join(f'{f:.3f}' for f in figures)}:{outcome}"


@dataclass(frozen=True)
class SearchPoint:
    """One rate tried: its figures in ms (a query's p99, or an LLM's TTFT and TPOT p99)."""

    qps: float
    figures: tuple[float, ...]
    outcome: str

    @property
    def passed(self) -> bool:
        return self.outcome == "ok"


def parse_point(text: str) -> SearchPoint | None:
    """A point from its text; None for anything else (a hand edit, a figure that is no finite
    number, a rate of 0 or less)."""
    fields = text.split(":")
    if len(fields) != 3 or fields[2] not in OUTCOMES:
        return None
    try:
        qps = float(fields[0])
        figures = tuple(float(f) for f in fields[1].split("/"))
    except ValueError:
        return None
    numbers = (qps, *figures)
    if not all(math.isfinite(n) for n in numbers) or qps <= 0 or min(figures) < 0:
        return None
    if len(figures) not in (1, 2):
        return None
    return SearchPoint(qps, figures, fields[2])
