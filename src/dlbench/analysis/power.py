"""Power-limit recommendations from measured rows: least energy, least energy-delay, and least
energy within a slowdown cap. Only measured points are ever chosen or plotted."""

from __future__ import annotations

import pandas as pd

from dlbench.analysis.load import finished_rows, key_columns
from dlbench.errors import UserError
from dlbench.results.pairing import SHAPE_KEY

GROUP = ("gpu_name", *SHAPE_KEY)


def power_points(rows: pd.DataFrame) -> pd.DataFrame:
    """Benchmark rows with a known power limit and energy: the enforced limit the telemetry read,
    or the limit the sweep asked for where no reading exists."""
    runs = finished_rows(rows)
    limit = pd.Series(float("nan"), index=runs.index)
    for column in ("power_limit_request_w", "power_limit_w"):
        if column in runs:
            limit = pd.to_numeric(runs[column], errors="coerce").combine_first(limit)
    runs["limit_w"] = limit
    needed = ["limit_w", "energy_per_sample_j", "samples_per_s"]
    if any(c not in runs for c in needed):
        return runs.iloc[0:0]
    return runs.dropna(subset=needed)


def recommend_power(rows: pd.DataFrame, max_slowdown_pct: float = 10.0) -> pd.DataFrame:
    """One line per configuration measured at two or more limits."""
    points = power_points(rows)
    group = key_columns(points, GROUP)
    lines = []
    for values, curve in points.groupby(group, dropna=False, sort=True):
        curve = curve.sort_values("limit_w").drop_duplicates("limit_w", keep="last")
        if len(curve) < 2:
            continue
        edp = curve["energy_per_sample_j"] / curve["samples_per_s"]
        fastest = curve["samples_per_s"].max()
        allowed = curve[curve["samples_per_s"] >= fastest * (1 - max_slowdown_pct / 100)]
        capped = allowed.loc[allowed["energy_per_sample_j"].idxmin()]
        least = curve.loc[curve["energy_per_sample_j"].idxmin()]
        top = curve.loc[curve["samples_per_s"].idxmax()]
        lines.append(
            {
                **dict(zip(group, values if isinstance(values, tuple) else (values,))),
                "limits_measured": len(curve),
                "least_energy_w": least["limit_w"],
                "least_energy_j_per_sample": least["energy_per_sample_j"],
                "least_edp_w": curve.loc[edp.idxmin(), "limit_w"],
                "within_slowdown_w": capped["limit_w"],
                "within_slowdown_energy_saved_pct": 100
                * (1 - capped["energy_per_sample_j"] / top["energy_per_sample_j"]),
                "within_slowdown_slowdown_pct": 100 * (1 - capped["samples_per_s"] / fastest),
                "max_slowdown_pct": max_slowdown_pct,
            }
        )
    return pd.DataFrame(lines)


def require_recommendations(rows: pd.DataFrame, max_slowdown_pct: float) -> pd.DataFrame:
    """`recommend_power`, or a UserError saying what the rows lack."""
    if max_slowdown_pct < 0:
        raise UserError(f"--max-slowdown: invalid value {max_slowdown_pct}; must be >= 0")
    table = recommend_power(rows, max_slowdown_pct)
    if table.empty:
        raise UserError(
            "CSV: no configuration was measured at two or more power limits with energy "
            "(run a sweep with a power_limits axis and telemetry on)"
        )
    return table
