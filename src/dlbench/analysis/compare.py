"""Baseline vs candidate: one line per configuration, a noise-aware verdict, and failures named.

A configuration is every field that decides the experiment plus the GPU and the world size
(EXPERIMENT_KEY). Each side's figure is the mean over its repeats (rows with a `repeat` column,
as `dlbench sweep --repeats` writes them; otherwise the latest row, since a rerun replaces an
older one), with its confidence interval. Within noise means the two intervals overlap. A baseline
configuration with no finished candidate row fails the gate: the candidate's failure row is
named if it has one (`failed (oom)`), else it is `missing`. A row invalid only for its noise
(`noisy`, `drift`) is compared with its own, wide, interval and says so in its note: one hiccup
does not fail a gate, a slowdown beyond the threshold and outside the noise does."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

import pandas as pd

from dlbench.analysis.load import (
    finished_rows,
    flag_column,
    latest,
    split_invalid,
    text_column,
)
from dlbench.analysis.machines import code_labels, keyed, pairs_of_one_code
from dlbench.config.serve_scenarios import serve_figure
from dlbench.errors import UserError, number_or_none
from dlbench.results.pairing import EXPERIMENT_KEY, GATE_THRESHOLD_PCT, key_text
from dlbench.results.serve_columns import SERVE_KEY
from dlbench.results.stats import t_975

NOISE_FLOOR_PCT = 1.0  # run-to-run differences that step statistics cannot see (clocks, heat)
FAILED_STATUSES = ("oom", "error", "timeout", "interrupted")
# A line's verdict, each word once: what a gate reads (a failed or invalid verdict carries its
# detail after the word, "failed (oom): ...", "invalid (noisy)", built by the functions below)
SAME, FASTER, SLOWER, REGRESSION = "same", "faster", "slower", "regression"
MISSING = "missing"  # a configuration of the baseline the candidate has no row of
NEW = "new"  # a configuration of the candidate the baseline has no row of
OTHER_CODE = "other code"  # --same-code: a pair measured by two versions of dlbench
NOT_PUBLISHED = "not published"  # against the published rows: none of this configuration
FAILED, INVALID = "failed", "invalid"


def failed_verdict(status: object, error: str = "") -> str:
    """`failed (STATUS)`, with the row's error after a colon."""
    return f"{FAILED} ({status})" + (f": {error}" if error else "")


def invalid_verdict(reasons: str) -> str:
    """`invalid (REASONS)`: the candidate's rows of this configuration were invalid."""
    return f"{INVALID} ({reasons})"


def fails_the_gate(verdict: str) -> bool:
    """A line the gate fails on whatever its figures: a failed, invalid or missing one."""
    return verdict.startswith((FAILED, INVALID)) or verdict == MISSING


ENVIRONMENT = (
    "gpu_name",
    "cpu",
    "cpu_count",
    "driver",
    "torch",
    "cuda",
    "cudnn",
    "cuda_env",
    "lightning",
    "timm",
    "code",  # dlbench's release and commit (analysis.machines.code_labels)
)


@dataclass(frozen=True)
class Comparison:
    """One line per configuration of either side, and the overall outcome; against the
    published rows, the candidate's GPUs that have none."""

    table: pd.DataFrame
    key: list[str]
    threshold_pct: float
    unpublished_gpus: tuple[str, ...] = ()

    @property
    def regressions(self) -> pd.DataFrame:
        """Configurations slower than the noise allows and by more than the threshold."""
        return self.table[self.table["verdict"] == REGRESSION]

    @property
    def failures(self) -> pd.DataFrame:
        """Baseline configurations the candidate did not finish: failed or missing."""
        verdict = self.table["verdict"]
        return self.table[verdict.map(fails_the_gate).astype(bool)]

    @property
    def passed(self) -> bool:
        """The gate's answer: no regression, nothing failed or missing."""
        return self.regressions.empty and self.failures.empty


NOISE_REASONS = {"noisy", "drift"}  # invalid for these alone: compared, with their interval


def interval_pct(row: pd.Series | dict) -> float:
    """Half the width of one row's confidence interval of its throughput, in %: its own column
    (results.stats.Noise; results.upgrade's for an older row), NaN where it has none."""
    recorded = number_or_none(row.get("throughput_interval_pct"))
    return math.nan if recorded is None else recorded


def _uncertainty_pct(group: pd.DataFrame) -> float:
    """Half the width of the confidence interval of the mean over a configuration's runs, in %: the
    larger of the within-run one (each run's interval) and the between-run one (the runs'
    throughputs, Student's t by their count: 12.7 for two runs, 4.3 for three)."""
    rates = group["samples_per_s"].astype(float).tolist()
    within = [interval_pct(r) for _, r in group.iterrows()]
    known = [w for w in within if not math.isnan(w)]
    within_mean = math.sqrt(sum(w * w for w in known)) / len(rates) if known else 0.0
    between = 0.0
    if len(rates) > 1:
        mean = statistics.fmean(rates)
        spread = statistics.stdev(rates) / mean / math.sqrt(len(rates))
        between = t_975(len(rates) - 1) * 100.0 * spread
    return max(within_mean, between)


def _reasons_of(runs: pd.DataFrame) -> str:
    """The verdict reasons of these rows, once each."""
    text = runs.get("verdict_reasons", pd.Series(dtype=object)).dropna().astype(str)
    return ";".join(sorted({r for t in text for r in t.split(";") if r}))


def _only_noisy(runs: pd.DataFrame) -> pd.Series:
    """Invalid rows whose every reason is noise."""
    reasons = text_column(runs, "verdict_reasons")
    return reasons.map(lambda text: bool(text) and set(text.split(";")) <= NOISE_REASONS)


def comparable_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """The finished rows a comparison reads: benchmark rows by their samples/s, serve rows by
    their own figure (config.serve_scenarios.serve_figure) in its place, `lower_is_better` and
    `figure` saying which; a serve row measured before LoadGen drove serve has no such figure
    and is left out."""
    benchmark = finished_rows(rows).assign(lower_is_better=False, figure="samples/s")
    served = finished_rows(rows, "serve")
    if served.empty:
        return benchmark
    picks = {i: serve_figure(r) for i, r in zip(served.index, served.to_dict("records"))}
    served = served.assign(
        samples_per_s=[
            pd.to_numeric(served.at[i, c], errors="coerce") if c in served else math.nan
            for i, (c, _) in picks.items()
        ],
        lower_is_better=[lower for _, lower in picks.values()],
        figure=[column.removeprefix("serve_") for column, _ in picks.values()],
    )
    served = served[served["samples_per_s"].notna()]
    return pd.concat([benchmark, served], ignore_index=True, sort=False)


def summarise(rows: pd.DataFrame, key: list[str]) -> pd.DataFrame:
    """One line per configuration: mean figure over its runs (samples/s, or a serve row's),
    their count and uncertainty, whether any run was host-bound, and the latest run's
    environment."""
    valid, invalid = split_invalid(comparable_rows(rows))
    noisy = invalid[_only_noisy(invalid)]
    runs = pd.concat([valid, noisy.assign(noisy=True)]) if not noisy.empty else valid
    runs = latest(keyed(runs, key), [*key, "repeat"] if "repeat" in runs else key)
    lines = []
    for values, group in runs.groupby(key, dropna=False, sort=False):
        newest = group.iloc[-1]
        bound = flag_column(group, "host_bound")
        noisy = group["noisy"].fillna(False).astype(bool) if "noisy" in group else group.index < 0
        lines.append(
            {
                **dict(zip(key, values if isinstance(values, tuple) else (values,))),
                "samples_per_s": group["samples_per_s"].astype(float).mean(),
                "runs": len(group),
                "uncertainty_pct": _uncertainty_pct(group),
                "host_bound": bool(bound.any()),
                "noisy": _reasons_of(group[noisy]),
                "lower_is_better": bool(newest["lower_is_better"]),
                "figure": newest["figure"],
                **{c: newest[c] for c in ENVIRONMENT if c in group},
            }
        )
    if not lines:
        return pd.DataFrame(columns=[*key, "samples_per_s", "runs", "uncertainty_pct"])
    return pd.DataFrame(lines)


def change_verdict(change_pct: float, band_pct: float, threshold_pct: float, lower: bool) -> str:
    """same, faster, slower or regression; `lower`: a latency, where a rise is the slowdown."""
    if abs(change_pct) <= band_pct:
        return SAME
    worse = -change_pct if not lower else change_pct
    if worse < 0:
        return FASTER
    return REGRESSION if worse > threshold_pct else SLOWER


def _failure(candidate: pd.DataFrame, key: list[str], wanted: pd.Series) -> str:
    """`failed (STATUS): error` when the candidate holds a failure row for this configuration
    (matched on the key fields the failure row has), `invalid (reasons)` when its rows were all
    invalid, else `missing`."""
    _, invalid = split_invalid(comparable_rows(candidate))
    for _, row in invalid.iloc[::-1].iterrows():
        if all(key_text(row.get(k), k) == wanted[k] for k in key):
            return invalid_verdict(key_text(row.get("verdict_reasons")))
    status = candidate.get("status", pd.Series(dtype=object))
    failed = candidate[status.isin(FAILED_STATUSES)]
    for _, row in failed.iloc[::-1].iterrows():
        given = {k: key_text(row.get(k), k) for k in key}
        if all(v == "" or v == wanted[k] for k, v in given.items()):
            error = key_text(row.get("error"))
            return failed_verdict(row["status"], error)
    return MISSING


def resolve_key(baseline: pd.DataFrame, candidate: pd.DataFrame, key: list[str] | None):
    """The given key (every column must exist on both sides), or the default key's columns
    that both sides have."""
    if key is None:  # a serve row's settings too, where the rows have them
        default = (*EXPERIMENT_KEY, *SERVE_KEY)
        return [k for k in default if k in baseline.columns and k in candidate.columns]
    for name, rows in (("baseline", baseline), ("candidate", candidate)):
        missing = [k for k in key if k not in rows.columns]
        if missing:
            raise UserError(f"--key: {name} rows have no column {', '.join(missing)}")
    return key


def compare_runs(
    baseline: pd.DataFrame,
    candidate: pd.DataFrame,
    key: list[str] | None = None,
    threshold_pct: float = GATE_THRESHOLD_PCT,
    same_code: bool = False,
) -> Comparison:
    """change = candidate / baseline - 1 per configuration. The noise band is where the two
    means' confidence intervals overlap (the sum of their half-widths), at least NOISE_FLOOR_PCT:
    inside it the verdict is `same`; a slowdown outside it is `slower`, and `regression` beyond
    the threshold too.
    A pair measured by different code says so in its note; with `same_code` its verdict is `other
    code` and it neither passes nor fails the gate."""
    key = resolve_key(baseline, candidate, key)
    baseline, candidate = (rows.assign(code=code_labels(rows)) for rows in (baseline, candidate))
    if comparable_rows(baseline).empty:
        raise UserError(
            "BASELINE: holds no finished benchmark or serve rows to compare against (serve rows "
            "from before LoadGen drove serve have none of the figures compared)"
        )
    if comparable_rows(candidate).empty and candidate[candidate["status"] != "ok"].empty:
        raise UserError("CANDIDATE: holds no benchmark or serve rows")
    base, cand = summarise(baseline, key), summarise(candidate, key)
    if base.empty:
        raise UserError(
            "BASELINE: every row's verdict is invalid (see its verdict_reasons); nothing to "
            "compare against"
        )
    joined = base.merge(cand, on=key, how="outer", suffixes=("_baseline", "_candidate"))
    codes = (
        text_column(joined, f"code_{side}" if f"code_{side}" in joined else "code")
        for side in ("baseline", "candidate")
    )
    joined["one_code"] = pairs_of_one_code(*codes)
    lines = [_pair_line(r, key, candidate, threshold_pct, same_code) for _, r in joined.iterrows()]
    return Comparison(pd.DataFrame(lines), key, threshold_pct)


def _pair_line(
    r: pd.Series, key: list[str], candidate: pd.DataFrame, threshold_pct: float, same_code: bool
) -> dict[str, object]:
    """One configuration's line: both sides' figures and runs, the change and its noise band,
    and the verdict (a failure, new, other code, or the change's)."""
    line = {k: r[k] for k in key}
    line.update(
        baseline=r["samples_per_s_baseline"],
        candidate=r["samples_per_s_candidate"],
        runs_baseline=r["runs_baseline"],
        runs_candidate=r["runs_candidate"],
    )
    if pd.isna(r["samples_per_s_candidate"]):
        line["verdict"] = _failure(candidate, key, r)
    elif pd.isna(r["samples_per_s_baseline"]):
        line["verdict"] = NEW
    elif same_code and not r["one_code"]:
        line["verdict"] = OTHER_CODE
    else:
        change = 100.0 * (r["samples_per_s_candidate"] / r["samples_per_s_baseline"] - 1.0)
        u = [r[f"uncertainty_pct_{side}"] for side in ("baseline", "candidate")]
        band = max(NOISE_FLOOR_PCT, sum(0.0 if pd.isna(x) else x for x in u))
        lower = bool(r["lower_is_better_baseline"])
        line.update(
            change_pct=change,
            noise_pct=band,
            verdict=change_verdict(change, band, threshold_pct, lower),
        )
    line["note"] = _note(r)
    return line


def _note(joined_row: pd.Series) -> str:
    """What a serve pair compares (its figure), host-bound runs and environment columns that
    differ, e.g. `torch 2.11 -> 2.14`."""
    notes = []
    figure = joined_row.get("figure_baseline")
    if isinstance(figure, str) and figure != "samples/s":
        lower = bool(joined_row.get("lower_is_better_baseline"))
        notes.append(f"{figure}" + (" (lower is better)" if lower else ""))
    for side in ("baseline", "candidate"):
        if joined_row.get(f"host_bound_{side}") is True:
            notes.append(f"{side} host-bound")
        noisy = joined_row.get(f"noisy_{side}")
        if isinstance(noisy, str) and noisy:
            notes.append(f"{side} invalid ({noisy})")
    for column in ENVIRONMENT:
        a = joined_row.get(f"{column}_baseline")
        b = joined_row.get(f"{column}_candidate")
        if pd.isna(a) or pd.isna(b):
            continue
        was, now = key_text(a, column), key_text(b, column)  # 16 and 16.0 alike
        if was != now:
            notes.append(f"{column} {was} -> {now}")
    return "; ".join(notes)
