"""Turn a list of step times into one set of statistics that every scenario reuses, and judge
their noise in one place: the measured loop's stopping rule, the verdict, the console and
`compare` all read `Noise` (docs/timing.md#noise says how and why)."""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass

# How noise is judged; every threshold here. The throughput's confidence interval (half its width, %
# of the throughput) beyond MAX_NOISE_PCT (or --max-noise) is noise: the number is not known
# well enough. So is a robust spread of the steps beyond MAX_SPREAD_PCT (pyperf warns past it),
# and outliers that took more than MAX_OUTLIER_TIME_PCT of the window beyond a median step: they
# moved the number. Outliers are rare steps (one, or at most RARE_OUTLIERS_PCT of the steps):
# where more lie outside the fences, the steps have two modes (a sampler thread sharing the
# host's cores) and the interval, not the fences, says how well the number is known. A second
# half whose median step is more than MAX_DRIFT_PCT off the first's, and off by more than chance
# allows, drifted (heat, clocks, a neighbour arriving): each half holds half the steps, so the
# difference of the two has DRIFT_INTERVALS times the width of the whole window's interval.
# A CPU row's spread, rare outliers and drift are shown, not judged (SPREAD_SHOWN_ONLY, by the
# row's accelerator): a shared host's scheduler spreads a CPU's steps however long the window,
# its neighbours change its speed while it measures, the batch means carry both into the
# interval, and the interval says how well the number is known; on a GPU each is a fault of its
# own (launch jitter, a clock that moves) and stays a reason. Nor is a CPU's interval held to a
# GPU's limit: its figure strays from the next run's by CPU_RUN_SPREAD_PCT whatever its window,
# so a window known to within that (CPU_NOISE_PCT) is known as well as its machine allows
# (docs/decisions.md#cpu-rows).
MAX_NOISE_PCT = 5.0
MAX_SPREAD_PCT = 10.0
SPREAD_SHOWN_ONLY = frozenset({"cpu"})
MAX_OUTLIER_TIME_PCT = 1.0
RARE_OUTLIERS_PCT = 10.0
MAX_DRIFT_PCT = 3.0
DRIFT_INTERVALS = 2.0  # sqrt(2) for half the steps in each half, sqrt(2) for their difference
MAD_TO_SIGMA = 1.4826  # a normal distribution's standard deviation is 1.4826 MADs
TUKEY_FENCE = 1.5  # outliers lie this many interquartile ranges beyond the quartiles
FENCE_FLOOR = 1e-6  # ... and further than this share of the median (equal steps: no outliers)
MAX_BATCHES = 10  # batch means: at most this many batches of consecutive steps ...
MIN_BATCHES = 4  # ... and at least this many, else no interval
# Student's t at its 97.5th percentile by degrees of freedom, 1 to 30 (beyond: t_975's series)
_T_975 = (
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
    2.120,
    2.110,
    2.101,
    2.093,
    2.086,
    2.080,
    2.074,
    2.069,
    2.064,
    2.060,
    2.056,
    2.052,
    2.048,
    2.045,
    2.042,
)
Z_975 = 1.959964  # the normal distribution's 97.5th percentile: t's limit
# How far a CPU row's figure strays from the next run's of the same command on the same machine
# (a standard deviation, %): a shared host's neighbours move it run to run where the window
# cannot see (docs/decisions.md#cpu-rows)
CPU_RUN_SPREAD_PCT = 16.0
CPU_NOISE_PCT = Z_975 * CPU_RUN_SPREAD_PCT


def t_975(degrees_of_freedom: int) -> float:
    """Student's t at its 97.5th percentile: the one factor every interval at 95 percent
    confidence is drawn with (a window's batch means, runs of a configuration, an older row's
    steps), as pyperf draws every interval from one helper. Beyond 30 degrees of freedom,
    Cornish and Fisher's series around the normal's (within 1e-4 of the table)."""
    if degrees_of_freedom < 1:
        return math.inf
    if degrees_of_freedom <= len(_T_975):
        return _T_975[degrees_of_freedom - 1]
    z, n = Z_975, float(degrees_of_freedom)
    return z + (z**3 + z) / (4 * n) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * n * n)


def t_975_at(degrees_of_freedom: float) -> float:
    """`t_975` at any degrees of freedom an interval holds: a fractional count (Welch's) at its
    floor and at least 1, an infinite one (a known variance, a prior) the normal's Z_975."""
    if math.isinf(degrees_of_freedom):
        return Z_975
    return t_975(max(1, math.floor(degrees_of_freedom)))


def noise_limit_pct(max_noise_pct: float | None, gpu: bool) -> float:
    """The widest interval a window may have: --max-noise where given, else a GPU's
    MAX_NOISE_PCT or a CPU's CPU_NOISE_PCT."""
    return max_noise_pct or (MAX_NOISE_PCT if gpu else CPU_NOISE_PCT)


@dataclass(frozen=True)
class Noise:
    """How far a window's number can be trusted: the robust spread of its steps, its outliers
    (count, and their time beyond a median step as a share of the window), drift between its
    halves, and the confidence interval of its throughput, each in % (inf: too few steps to
    tell)."""

    robust_spread_pct: float
    outliers: int
    outlier_time_pct: float
    drift_pct: float
    interval_pct: float
    steps: int = 0

    @classmethod
    def of(cls, times: list[float]) -> Noise:
        """The noise of step (or unit) times, in the order they ran."""
        if len(times) < 2:
            return cls(math.inf, 0, 0.0, 0.0, math.inf)
        ordered = sorted(times)
        median = percentile(ordered, 50)
        mad = statistics.median(abs(t - median) for t in times)
        q1, q3 = percentile(ordered, 25), percentile(ordered, 75)
        fence = TUKEY_FENCE * (q3 - q1) + FENCE_FLOOR * median
        low, high = q1 - fence, q3 + fence
        outside = [t for t in times if t < low or t > high]
        excess = sum(max(t - median, 0.0) for t in outside)
        half = len(times) // 2
        first, second = statistics.median(times[:half]), statistics.median(times[-half:])
        return cls(
            robust_spread_pct=100.0 * MAD_TO_SIGMA * mad / median if median > 0 else math.inf,
            outliers=len(outside),
            outlier_time_pct=100.0 * excess / sum(times) if sum(times) > 0 else 0.0,
            drift_pct=100.0 * (second / first - 1.0) if first > 0 else 0.0,
            interval_pct=batch_means_interval_pct(times),
            steps=len(times),
        )

    @property
    def outliers_moved_it(self) -> bool:
        """Rare outliers that took more than MAX_OUTLIER_TIME_PCT of the window."""
        rare = self.outliers <= max(1.0, self.steps * RARE_OUTLIERS_PCT / 100.0)
        return rare and self.outlier_time_pct > MAX_OUTLIER_TIME_PCT

    def noisy_parts(self, max_noise_pct: float | None = None, gpu: bool = True) -> list[str]:
        """Which of the noise checks failed: `interval` (over --max-noise, else MAX_NOISE_PCT on a
        GPU and CPU_NOISE_PCT on a CPU), and on a GPU (`gpu`; see SPREAD_SHOWN_ONLY) `spread`
        (over MAX_SPREAD_PCT) and `outliers` (rare ones that moved the number)."""
        limit = noise_limit_pct(max_noise_pct, gpu)
        checks = {
            "interval": self.interval_pct > limit,
            "spread": gpu and self.robust_spread_pct > MAX_SPREAD_PCT,
            "outliers": gpu and self.outliers_moved_it,
        }
        return [name for name, failed in checks.items() if failed]

    def reasons(self, max_noise_pct: float | None = None, gpu: bool = True) -> list[str]:
        """`noisy` and `drift` where they apply, against --max-noise or the device's limit."""
        found = []
        if self.noisy_parts(max_noise_pct, gpu):
            found.append("noisy")
        drifted = abs(self.drift_pct) > max(MAX_DRIFT_PCT, DRIFT_INTERVALS * self.interval_pct)
        if gpu and drifted:
            found.append("drift")
        return found

    def settled(self, max_noise_pct: float | None = None) -> bool:
        """Whether measuring longer would not help: the interval is narrow enough and the
        outliers' share small enough (both shrink as the window grows; a spread does not)."""
        limit = max_noise_pct or MAX_NOISE_PCT
        return self.interval_pct <= limit and not self.outliers_moved_it

    def columns(self) -> dict[str, float | int | None]:
        """The row's noise columns (None where there were too few steps to tell)."""
        finite = {
            k: (v if math.isfinite(v) else None) for k, v in asdict(self).items() if k != "steps"
        }
        return {
            "step_time_robust_spread_pct": finite["robust_spread_pct"],
            "step_outliers": self.outliers,
            "step_outlier_time_pct": finite["outlier_time_pct"],
            "step_time_drift_pct": finite["drift_pct"],
            "throughput_interval_pct": finite["interval_pct"],
            "throughput_interval_dof": (
                window_dof(self.steps) if finite["interval_pct"] is not None else None
            ),
        }


def window_dof(steps: int) -> int:
    """The degrees of freedom of a window's batch means (`batch_means_interval_pct`)."""
    return max(1, min(MAX_BATCHES, steps // 2) - 1)


def batch_means_interval_pct(times: list[float]) -> float:
    """Half the width of the confidence interval of the mean step, % of it, by batch means: the
    window cut into MAX_BATCHES runs of consecutive steps, Student's t over their means.
    Steps in a row are not independent (clocks and heat wander), and consecutive batches
    carry that into the interval where treating steps as independent would hide it; it is
    deterministic, unlike a bootstrap. The throughput's interval is the same share, to first
    order. inf under MIN_BATCHES batches of at least two steps."""
    batches = min(MAX_BATCHES, len(times) // 2)
    if batches < MIN_BATCHES:
        return math.inf
    size = len(times) // batches
    used = times[len(times) - size * batches :]  # whole batches, the latest steps
    means = [statistics.fmean(used[k * size : (k + 1) * size]) for k in range(batches)]
    mean = statistics.fmean(means)
    if mean <= 0:
        return math.inf
    return 100.0 * t_975(batches - 1) * statistics.stdev(means) / math.sqrt(batches) / mean


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


def spread_pct(figures: list[float]) -> float:
    """(highest - lowest) / median, in %: how far apart several measurements of one thing lie
    (published rows of one configuration, the processes of one run); 0 for one."""
    if len(figures) < 2:
        return 0.0
    return 100.0 * (max(figures) - min(figures)) / statistics.median(figures)


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
