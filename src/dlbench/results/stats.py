"""Turn a list of step times into one set of statistics that every scenario reuses."""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class StepStats:
    """Summary of per-step seconds: centre, tail and spread."""

    count: int
    mean_s: float
    median_s: float
    p90_s: float
    p95_s: float
    p99_s: float
    min_s: float
    max_s: float
    stdev_s: float

    @property
    def stdev_pct(self) -> float:
        """Relative spread: stdev as a percentage of the mean."""
        return 100.0 * self.stdev_s / self.mean_s if self.mean_s > 0 else 0.0

    @classmethod
    def from_values(cls, values: list[float]) -> StepStats:
        """Statistics of a non-empty list; percentiles by linear interpolation."""
        if not values:
            raise ValueError("no step times to summarise")
        ordered = sorted(values)
        return cls(
            count=len(values),
            mean_s=statistics.fmean(values),
            median_s=percentile(ordered, 50),
            p90_s=percentile(ordered, 90),
            p95_s=percentile(ordered, 95),
            p99_s=percentile(ordered, 99),
            min_s=ordered[0],
            max_s=ordered[-1],
            stdev_s=statistics.stdev(values) if len(values) > 1 else 0.0,
        )

    def as_row(self, prefix: str = "step_time") -> dict[str, float]:
        """Columns in milliseconds, named `<prefix>_<stat>_ms`, plus the relative spread."""
        row = {f"{prefix}_{k[:-2]}_ms": v * 1e3 for k, v in asdict(self).items() if k != "count"}
        row[f"{prefix}_stdev_pct"] = self.stdev_pct
        return row


def percentile(ordered: list[float], pct: float) -> float:
    """The pct-th percentile of sorted values, interpolating between neighbours."""
    if len(ordered) == 1:
        return ordered[0]
    rank = (len(ordered) - 1) * pct / 100.0
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


MIN_TAIL_SAMPLES = 1000  # a p99 latency from fewer queries is the slowest few, not a percentile


def latency_columns(step_times_s: list[float]) -> dict[str, object]:
    """Per-query latency of an inference window in ms (a step is one query of one batch):
    p50, p90 and, from at least MIN_TAIL_SAMPLES steps, p99."""
    stats = StepStats.from_values(step_times_s)
    return {
        "latency_samples": stats.count,
        "latency_p50_ms": stats.median_s * 1e3,
        "latency_p90_ms": stats.p90_s * 1e3,
        "latency_p99_ms": stats.p99_s * 1e3 if stats.count >= MIN_TAIL_SAMPLES else None,
    }
