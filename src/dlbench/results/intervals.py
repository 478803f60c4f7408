"""What a row's interval is, stated once for every reader (compare and the gate's evidence, the
published band): the half-width of the confidence interval of its figure, in % (t_975 of its
degrees of freedom times a standard error), and those degrees of freedom (inf: a normal one).

- A window's throughput: batch means, t over `batches - 1` (results.stats.
  batch_means_interval_pct), the row's `throughput_interval_dof`.
- A row pooled over `--processes N`: t over the N processes' spread, N - 1 (or the windows' own
  where wider: their degrees of freedom then; results.processes). Its interval has measured the
  spread between processes: no prior between runs is added to it.
- A served rate found by a search (`serve_points`): the true edge lies between the rate found and
  the lowest rate above it that failed, uniformly as far as the search can tell: a standard
  deviation of the bracket's width over the square root of 12, normal; a search that saw no rate
  fail above it has no upper end, and its interval is infinite.

Readers compare standard deviations (`sd_pct`), so intervals of different degrees of freedom
combine as what they are."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from dlbench.errors import number_or_none
from dlbench.results.search_points import parse_point
from dlbench.results.stats import Z_975, t_975_at, window_dof

UNIFORM_SD = 1.0 / math.sqrt(12.0)  # a uniform spread's standard deviation per its width


@dataclass(frozen=True)
class Interval:
    """Half a confidence interval's width (% of the figure) and its t's degrees of freedom."""

    half_pct: float
    dof: float = math.inf

    @property
    def sd_pct(self) -> float:
        """The standard deviation (%) the interval was drawn from."""
        return self.half_pct / t_975_at(self.dof)


def interval_of(row: Mapping[str, object]) -> Interval | None:
    """A row's interval as this module states it; None where it has none (an older row, a
    window too short, a latency row of one run)."""
    searched = search_interval(row)
    if searched is not None:
        return searched
    half = number_or_none(row.get("throughput_interval_pct"))
    if half is None or not math.isfinite(half) or half < 0:
        return None
    recorded = number_or_none(row.get("throughput_interval_dof"))
    if recorded is not None and recorded >= 1:
        return Interval(half, recorded)
    if pooled(row):
        return Interval(half, float(row["processes"]) - 1)  # type: ignore[arg-type]
    steps = number_or_none(row.get("steps"))
    return Interval(half, window_dof(int(steps)) if steps else math.inf)


def pooled(row: Mapping[str, object]) -> bool:
    """Whether the row's interval measured its spread between processes (--processes N)."""
    return (number_or_none(row.get("processes")) or 1) > 1


def search_interval(row: Mapping[str, object]) -> Interval | None:
    """A searched serve row's interval from its own points (module docstring); None for a
    row no search found."""
    found = number_or_none(row.get("serve_qps_found"))
    text = row.get("serve_points")
    if found is None or found <= 0 or not isinstance(text, str) or not text.strip():
        return None
    points = [p for p in map(parse_point, text.split()) if p is not None]
    above = [p.qps for p in points if not p.passed and p.qps > found]
    if not above:
        return Interval(math.inf)
    width = (min(above) - found) / found
    return Interval(100.0 * Z_975 * UNIFORM_SD * width)
