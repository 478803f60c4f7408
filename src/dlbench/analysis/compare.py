"""Baseline vs candidate: one line per configuration, a verdict the evidence allows, and failures
named.

A configuration is every field that decides the experiment plus the GPU and the world size
(EXPERIMENT_KEY). Each side's figure is the mean over its runs (rows with a `repeat` or `round`
column, as `dlbench sweep --repeats` and `dlbench gate` write them; otherwise the latest row,
since a rerun replaces an older one), and what it knows of it (analysis.change.Evidence: several
runs' spread, or one run's window and its kind's spread between runs). The verdict is
analysis.change.judge's: `same`, `faster`, `slower` (the gate fails) or `inconclusive` (its own exit
code, with how many runs would settle it). A baseline configuration with no finished candidate row
fails the gate: the candidate's failure row is named if it has one (`failed (oom)`), else it is
`missing`. A row invalid only for its noise (`noisy`, `drift`) is compared with its own, wide,
interval and says so in its note."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from dlbench.analysis.change import (
    FASTER,
    INCONCLUSIVE,
    SAME,
    SLOWER,
    Evidence,
    change_columns,
    judge,
    run_spread_pct,
    settle_note,
)
from dlbench.analysis.load import (
    finished_rows,
    flag_column,
    latest,
    split_invalid,
    text_column,
)
from dlbench.analysis.machines import code_labels, keyed, pairs_of_one_code
from dlbench.config.serve_scenarios import serve_figure
from dlbench.errors import EXIT_FAILED, EXIT_INCONCLUSIVE, EXIT_OK, UserError, number_or_none
from dlbench.results.intervals import interval_of, pooled
from dlbench.results.pairing import EXPERIMENT_KEY, GATE_THRESHOLD_PCT, key_text
from dlbench.results.serve_columns import SERVE_KEY

# A GPU busy for less of the window than this waited for its host part of each step: a
# launch-bound row, whose figure moves with its process's state (analysis.change.RUN_SPREAD_PCT)
LAUNCH_BOUND_BUSY_PCT = 95.0
FAILED_STATUSES = ("oom", "error", "timeout", "interrupted")
# A line's verdict, each word once: what a gate reads (analysis.change's four; a failed or invalid
# verdict carries its detail after the word, "failed (oom): ...", "invalid (noisy)")
VERDICT_WORDS = (SAME, FASTER, SLOWER, INCONCLUSIVE)
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
    def slower(self) -> pd.DataFrame:
        """Configurations slower beyond the threshold, as the evidence shows (the gate fails)."""
        return self.table[self.table["verdict"] == SLOWER]

    @property
    def inconclusive(self) -> pd.DataFrame:
        """Configurations whose evidence cannot tell whether they changed."""
        return self.table[self.table["verdict"] == INCONCLUSIVE]

    @property
    def failures(self) -> pd.DataFrame:
        """Baseline configurations the candidate did not finish: failed or missing."""
        verdict = self.table["verdict"]
        return self.table[verdict.map(fails_the_gate).astype(bool)]

    @property
    def passed(self) -> bool:
        """The gate's answer: nothing slower, nothing failed or missing."""
        return self.slower.empty and self.failures.empty

    def exit_code(self, inconclusive_fails: bool = False) -> int:
        """0: passed; 1: something slower, failed or missing (or, with `inconclusive_fails`,
        inconclusive); EXIT_INCONCLUSIVE: passed but for configurations the evidence cannot
        tell."""
        if not self.passed:
            return EXIT_FAILED
        if self.inconclusive.empty:
            return EXIT_OK
        return EXIT_FAILED if inconclusive_fails else EXIT_INCONCLUSIVE


RUN_COLUMNS = ("repeat", "round")  # what tells one run of a configuration from another
NOISE_REASONS = {"noisy", "drift"}  # invalid for these alone: compared, with their interval


def sd_pct(row: pd.Series | dict) -> float:
    """The standard deviation (%) one row's interval was drawn from (results.intervals), NaN
    where it has none."""
    interval = interval_of(dict(row))
    return math.nan if interval is None else interval.sd_pct


def launch_bound(row: pd.Series | dict) -> bool:
    """Whether the host held the GPU back part of the row's window (LAUNCH_BOUND_BUSY_PCT)."""
    busy = number_or_none(row.get("gpu_busy_pct"))
    return key_text(row.get("host_bound")) == "True" or (
        busy is not None and busy < LAUNCH_BOUND_BUSY_PCT
    )


def evidence_of(group: pd.DataFrame) -> Evidence:
    """What a configuration's runs know of its figure: two or more runs, their spread (each
    run's interval a floor); one, its interval (results.intervals) and its kind's spread between
    runs, unless it pooled several processes (their spread is in its interval)."""
    figures = group["samples_per_s"].astype(float).tolist()
    if len(figures) > 1:
        return Evidence.of_runs(figures, [sd_pct(r) for _, r in group.iterrows()])
    row = group.iloc[0].to_dict()
    serve = ""
    if key_text(row.get("run_kind")) == "serve":
        serve = "latency" if bool(row.get("lower_is_better")) else "rate"
    cpu = key_text(row.get("accelerator")) == "cpu"
    spread = 0.0 if pooled(row) else run_spread_pct(launch_bound(row), serve, cpu)
    interval = interval_of(row)
    own, dof = (interval.sd_pct, interval.dof) if interval else (0.0, math.inf)
    return Evidence.of_one(figures[0], own, spread, dof)


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
    runs = latest(keyed(runs, key), [*key, *(c for c in RUN_COLUMNS if c in runs)])
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
                "evidence": evidence_of(group),
                "host_bound": bool(bound.any()),
                "noisy": _reasons_of(group[noisy]),
                "lower_is_better": bool(newest["lower_is_better"]),
                "figure": newest["figure"],
                **{c: newest[c] for c in ENVIRONMENT if c in group},
            }
        )
    if not lines:
        return pd.DataFrame(columns=[*key, "samples_per_s", "runs", "evidence"])
    return pd.DataFrame(lines)


def failure_verdict_of(candidate: pd.DataFrame, key: list[str], wanted: pd.Series) -> str:
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
    """change = candidate / baseline - 1 per configuration (a latency: baseline / candidate -
    1), its interval and verdict by analysis.change.judge.
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
        line["verdict"] = failure_verdict_of(candidate, key, r)
    elif pd.isna(r["samples_per_s_baseline"]):
        line["verdict"] = NEW
    elif same_code and not r["one_code"]:
        line["verdict"] = OTHER_CODE
    else:
        lower = bool(r["lower_is_better_baseline"])
        change = judge(r["evidence_baseline"], r["evidence_candidate"], threshold_pct, lower)
        line.update(change_columns(change))
    line["note"] = "; ".join(n for n in (_note(r), settle_note(line.get("runs_to_settle"))) if n)
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
