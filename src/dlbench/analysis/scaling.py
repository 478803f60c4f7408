"""Scaling efficiency: throughput at N devices against N times the one-device run."""

from __future__ import annotations

import pandas as pd

from dlbench.analysis.load import RUN_KEY, benchmark_rows, key_columns, latest

SCALING_COLUMNS = [
    "world_size",
    "samples_per_s",
    "samples_per_s_per_device",
    "baseline_samples_per_s",
    "scaling_efficiency",
    "run_id",
    "baseline_run_id",
]


def scaling_table(rows: pd.DataFrame) -> pd.DataFrame:
    """One line per world size of each configuration run on more than one device that has a
    world-size-1 run to compare with (same GPU model too);
    efficiency = samples_per_s(N) / (N x samples_per_s(1))."""
    runs = benchmark_rows(rows)
    if runs.empty or "world_size" not in runs:
        return pd.DataFrame(columns=SCALING_COLUMNS)
    if "samples_per_s_per_device" not in runs:
        runs["samples_per_s_per_device"] = runs["samples_per_s"] / runs["world_size"]
    key = key_columns(runs, (*RUN_KEY, "gpu_name"))
    measured = ["world_size", "samples_per_s", "samples_per_s_per_device", "run_id"]
    runs = latest(runs, [*key, "world_size"])[[*key, *measured]]
    base = runs[runs["world_size"] == 1][[*key, "samples_per_s", "run_id"]]
    base = base.rename(
        columns={"samples_per_s": "baseline_samples_per_s", "run_id": "baseline_run_id"}
    )
    merged = runs.merge(base, on=key, how="inner")
    merged["scaling_efficiency"] = merged["samples_per_s"] / (
        merged["world_size"] * merged["baseline_samples_per_s"]
    )
    spans = merged.groupby(key, dropna=False)["world_size"].transform("max")
    ordered = merged[spans > 1].sort_values([*key, "world_size"])
    return ordered[[*key, *SCALING_COLUMNS]].reset_index(drop=True)
