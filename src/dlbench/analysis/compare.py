"""Baseline vs candidate: join on the configuration, ratio per row, a noise-aware verdict."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from dlbench.analysis.load import benchmark_rows, latest
from dlbench.errors import UserError

DEFAULT_KEY = ("model", "mode", "precision", "batch_size")
NOISE_FLOOR_PCT = 1.0  # run-to-run differences that step statistics cannot see (clocks, heat)
ENVIRONMENT = (
    "gpu_name",
    "cpu",
    "cpu_count",
    "driver",
    "torch",
    "cuda",
    "cudnn",
    "lightning",
    "timm",
    "dlbench",
)


@dataclass(frozen=True)
class Comparison:
    """The joined rows and the overall outcome."""

    table: pd.DataFrame
    threshold_pct: float

    @property
    def regressions(self) -> pd.DataFrame:
        """Rows slower than the noise allows and by more than the threshold."""
        return self.table[self.table["verdict"] == "regression"]


def noise_pct(stdev_pct: float, steps: float) -> float:
    """Uncertainty of one row's mean throughput, in %: the step spread over sqrt(steps)."""
    if any(pd.isna(v) for v in (stdev_pct, steps)) or steps <= 0:
        return math.nan
    return float(stdev_pct) / math.sqrt(float(steps))


def _verdict(change_pct: float, band_pct: float, threshold_pct: float) -> str:
    if abs(change_pct) <= band_pct:
        return "same"
    if change_pct > 0:
        return "faster"
    return "regression" if -change_pct > threshold_pct else "slower"


def compare_runs(
    baseline: pd.DataFrame,
    candidate: pd.DataFrame,
    key: list[str] | tuple[str, ...] = DEFAULT_KEY,
    threshold_pct: float = 5.0,
) -> Comparison:
    """Latest ok benchmark row per key on each side; change = candidate / baseline - 1.

    The noise band is twice the combined uncertainty of the two means (about 95 %), at least
    NOISE_FLOOR_PCT: inside it the verdict is `same`; a slowdown outside it is `slower`, and
    `regression` when it also exceeds the threshold."""
    key = list(key)
    sides = []
    for name, rows in (("baseline", baseline), ("candidate", candidate)):
        runs = benchmark_rows(rows)
        missing = [k for k in key if k not in runs.columns]
        if missing:
            raise UserError(f"--key: {name} rows have no column {', '.join(missing)}")
        for k in key:
            runs[k] = runs[k].astype(str)
        sides.append(latest(runs, key))
    joined = sides[0].merge(sides[1], on=key, suffixes=("_baseline", "_candidate"))
    if joined.empty:
        raise UserError(f"--key: no row of the candidate matches a baseline row on {key}")
    table = joined[key].copy()
    table["baseline"] = joined["samples_per_s_baseline"]
    table["candidate"] = joined["samples_per_s_candidate"]
    table["change_pct"] = 100.0 * (table["candidate"] / table["baseline"] - 1.0)
    noise = [
        2
        * math.hypot(
            noise_pct(r["step_time_stdev_pct_baseline"], r["steps_baseline"]),
            noise_pct(r["step_time_stdev_pct_candidate"], r["steps_candidate"]),
        )
        for _, r in joined.iterrows()
    ]
    table["noise_pct"] = [
        max(NOISE_FLOOR_PCT, n) if not math.isnan(n) else NOISE_FLOOR_PCT for n in noise
    ]
    table["verdict"] = [
        _verdict(c, n, threshold_pct) for c, n in zip(table["change_pct"], table["noise_pct"])
    ]
    table["differs"] = [_differences(r) for _, r in joined.iterrows()]
    return Comparison(table, threshold_pct)


def _differences(joined_row: pd.Series) -> str:
    """Environment columns that differ between the two rows, e.g. `torch 2.11 -> 2.14`."""
    notes = []
    for column in ENVIRONMENT:
        a = joined_row.get(f"{column}_baseline")
        b = joined_row.get(f"{column}_candidate")
        if pd.isna(a) and pd.isna(b):
            continue
        if str(a) != str(b):
            notes.append(f"{column} {a} -> {b}")
    return "; ".join(notes)


def markdown_table(frame: pd.DataFrame, digits: int = 1) -> str:
    """A GitHub-flavoured Markdown table (for job summaries and the report's summary)."""
    return frame.to_markdown(index=False, floatfmt=f",.{digits}f")
