"""Whether a configuration changed between two sides, and what the evidence allows: `same`,
`faster`, `slower`, or `inconclusive` where it cannot tell (nvbench's SAME / FAST / SLOW /
AMBIGUOUS, with pyperf's pooled statistics and its "not significant").

Each side is evidence about its figure on a log scale (`Evidence`): from several independent
runs (repeats, the gate's rounds, published rows of several leases), their mean and Student's t
over their spread, each run's own interval a floor; from one run, its own interval
(results.intervals: its standard deviation and degrees of freedom) and, since one run cannot
see how far the next would stray, a prior standard deviation between runs for its kind
(`RUN_SPREAD_PCT`), unless the run pooled several processes and so measured that spread.
The change is head over base (a latency inverted: above 1 is faster), with its interval by
Welch's t (t_975). It is called

- `slower` where the slowdown is beyond the threshold (the smallest change worth a word,
  results.pairing.GATE_THRESHOLD_PCT) and the interval lies wholly beyond MIN_EFFECT_SHARE of
  it: significant against a negligible shift, not merely against none, so that many runs of a
  real but small shift never read as a slowdown;
- `faster` likewise upwards;
- `same` where the interval lies inside the threshold both ways;
- `inconclusive` otherwise, with how many runs a side would settle it (`runs_to_settle`).

How often each is called on seeded samples, and why these constants: docs/timing.md#compare and
docs/decisions.md#change-verdict."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from dlbench.errors import check_finite, invalid
from dlbench.results.stats import CPU_RUN_SPREAD_PCT, t_975, t_975_at

SAME, FASTER, SLOWER, INCONCLUSIVE = "same", "faster", "slower", "inconclusive"
VERDICTS = (SAME, FASTER, SLOWER, INCONCLUSIVE)
MIN_EFFECT_SHARE = 0.4  # a change is called where its interval excludes this share of the threshold
# How far one run's figure strays from the next run's (a standard deviation, %), where a side has
# one run and nothing measured it: a launch-bound row (the host holds the GPU back part of each
# step) moves with its process's state, a GPU-bound one barely; a served rate beyond what its
# search resolves (its interval: results.intervals); a served latency (a single stream's p90, a
# fixed rate's p99) as a launch-bound row's, for want of its own (docs/decisions.md#change-verdict).
RUN_SPREAD_PCT = {
    "launch_bound": 4.0,
    "gpu_bound": 1.0,
    "serve": 1.0,
    "serve_latency": 4.0,
    "cpu": CPU_RUN_SPREAD_PCT,  # a CPU row: its machine's neighbours (results.stats)
}
MAX_RUNS = 100  # the most runs a side the advice will ask for


@dataclass(frozen=True)
class Evidence:
    """What one side knows of a figure: the mean of its logarithm, that mean's variance, the
    degrees of freedom of that variance (inf: known, a prior) and the runs behind it."""

    mean_log: float
    variance: float
    dof: float
    runs: int

    @classmethod
    def of_runs(cls, figures: Sequence[float], sds_pct: Sequence[float] = ()) -> Evidence:
        """Independent runs' figures (two or more: their spread; one: see `of_one`), each
        run's own standard deviation (results.intervals) a floor for what their mean can know."""
        if len(figures) < 2:
            raise ValueError("of_runs needs two runs or more (one: Evidence.of_one)")
        logs = [math.log(f) for f in figures]
        n = len(logs)
        variance = statistics.variance(logs) / n
        if any(math.isinf(sd) for sd in sds_pct):  # a run that knows nothing of its figure
            return cls(statistics.fmean(logs), math.inf, n - 1, n)
        within = sum((sd / 100) ** 2 for sd in sds_pct if math.isfinite(sd)) / n / n
        return cls(statistics.fmean(logs), max(variance, within), n - 1, n)

    @classmethod
    def of_one(
        cls, figure: float, sd_pct: float, run_spread_pct: float, dof: float = math.inf
    ) -> Evidence:
        """One run: its own interval's standard deviation (`dof` its degrees of freedom) and
        the prior spread between runs for its kind (0: the run measured it), as independent
        standard deviations; a prior makes the whole known (infinite dof)."""
        own = (sd_pct / 100) ** 2 if math.isfinite(sd_pct) else math.inf
        prior = (run_spread_pct / 100) ** 2
        return cls(math.log(figure), own + prior, math.inf if prior else dof, 1)


@dataclass(frozen=True)
class Change:
    """Head over base as a speed ratio (above 1: faster) with its interval (t_975), the verdict,
    and for an inconclusive one the runs a side that would settle it."""

    ratio: float
    low: float
    high: float
    verdict: str
    runs_to_settle: int | None = None

    @property
    def change_pct(self) -> float:
        return 100.0 * (self.ratio - 1.0)


def judge(
    base: Evidence, head: Evidence, threshold_pct: float, lower_is_better: bool = False
) -> Change:
    """The change from `base` to `head` and what it may be called (module docstring)."""
    sign = -1.0 if lower_is_better else 1.0
    d = sign * (head.mean_log - base.mean_log)
    variance = base.variance + head.variance
    half = t_975_at(_welch_dof(base, head)) * math.sqrt(variance)
    low, high = d - half, d + half
    slow, fast = math.log1p(-threshold_pct / 100), math.log1p(threshold_pct / 100)
    share = MIN_EFFECT_SHARE * threshold_pct / 100
    if d < slow and high < math.log1p(-share):
        verdict = SLOWER
    elif d > fast and low > math.log1p(share):
        verdict = FASTER
    elif low > slow and high < fast:
        verdict = SAME
    else:
        verdict = INCONCLUSIVE
    settle = _runs_to_settle(base, head, d, threshold_pct) if verdict == INCONCLUSIVE else None
    return Change(math.exp(d), math.exp(low), math.exp(high), verdict, settle)


MAX_THRESHOLD_PCT = 100.0  # a slowdown of all of it is no throughput at all


def check_threshold(threshold_pct: float) -> None:
    """--threshold: a finite change worth a word, from 0 up to (not) MAX_THRESHOLD_PCT; a
    negative one would call an unchanged configuration slower, and 100 or more has no slowdown
    to call (a UserError naming the flag)."""
    check_finite("--threshold", threshold_pct)
    if not 0 <= threshold_pct < MAX_THRESHOLD_PCT:
        raise invalid(
            "--threshold", threshold_pct, f"a change in % from 0 to under {MAX_THRESHOLD_PCT:g}"
        )


def _welch_dof(base: Evidence, head: Evidence) -> float:
    """Welch and Satterthwaite's degrees of freedom of the difference (a known variance adds
    none of its own)."""
    terms = [e.variance**2 / e.dof for e in (base, head) if math.isfinite(e.dof) and e.dof > 0]
    total = (base.variance + head.variance) ** 2
    if not terms or total == 0 or not math.isfinite(total):  # a side that knows nothing: inf
        return math.inf
    return total / sum(terms)


def _runs_to_settle(base: Evidence, head: Evidence, d: float, threshold_pct: float) -> int:
    """The fewest runs a side, more than either has, that would bring the interval inside the
    threshold (where the change looks small) or beyond its share (where it looks large), the
    spread and the change staying what they are: runs measure their own spread, so Student's t
    at their degrees of freedom."""
    per_run = base.variance * base.runs + head.variance * head.runs  # one run of each side
    slow, fast = math.log1p(-threshold_pct / 100), math.log1p(threshold_pct / 100)
    share = MIN_EFFECT_SHARE * threshold_pct / 100
    room = min(fast - d, d - slow) if slow < d < fast else abs(d) - share
    if room <= 0 or per_run <= 0 or not math.isfinite(per_run):
        return MAX_RUNS
    for runs in range(max(2, base.runs + 1, head.runs + 1), MAX_RUNS):
        if t_975(2 * runs - 2) * math.sqrt(per_run / runs) < room:
            return runs
    return MAX_RUNS


def run_spread_pct(launch_bound: bool, serve: str = "", cpu: bool = False) -> float:
    """The prior spread between runs of one row's kind (RUN_SPREAD_PCT); `serve`: a serve
    row's figure kind, `rate` or `latency`; `cpu`: a row measured on the CPU."""
    if cpu:
        return RUN_SPREAD_PCT["cpu"]
    if serve:
        return RUN_SPREAD_PCT["serve" if serve == "rate" else "serve_latency"]
    return RUN_SPREAD_PCT["launch_bound" if launch_bound else "gpu_bound"]


def change_columns(change: Change) -> dict[str, object]:
    """A line's figures of the change: its ratio's %, its interval's ends (%), the verdict
    and, where inconclusive, the runs a side that would settle it."""
    return {
        "change_pct": change.change_pct,
        "low_pct": 100.0 * (change.low - 1.0),
        "high_pct": 100.0 * (change.high - 1.0),
        "verdict": change.verdict,
        "runs_to_settle": change.runs_to_settle,
    }


def settle_note(runs: object) -> str:
    """What an inconclusive line asks for: more runs a side, or a longer window."""
    if not isinstance(runs, int | float) or not math.isfinite(runs):
        return ""
    return (
        f"inconclusive: about {int(runs)} runs a side would settle it (dlbench gate --rounds "
        f"{int(runs)}, or sweep --repeats), or a longer window (--min-time)"
    )
