"""Scaling efficiency: throughput at N devices against N times a one-device run.

Two one-device baselines tell two costs apart: the plain run (no DDP) gives
`scaling_efficiency`, what a user gains over one GPU; the DDP-wrapped run (`--strategy ddp` on
one process: DDP's hooks and buckets, no partner to talk to) gives `scaling_efficiency_ddp`,
which leaves communication alone. `ddp_overhead` is what the wrapper costs on one GPU."""

from __future__ import annotations

import pandas as pd

from dlbench.analysis.load import (
    finished_rows,
    key_columns,
    latest,
    load_rows,
    text_column,
    verdict_labels,
)
from dlbench.results.pairing import RUN_KEY
from dlbench.results.row import RowBuilder, identity
from dlbench.results.store import CsvStore

SCALING_COLUMNS = [
    "world_size",
    "samples_per_s",
    "samples_per_s_per_device",
    "baseline_samples_per_s",
    "scaling_efficiency",
    "ddp_baseline_samples_per_s",
    "scaling_efficiency_ddp",
    "ddp_overhead",
    "run_id",
    "baseline_run_id",
]


def _strategy(runs: pd.DataFrame) -> pd.Series:
    """single, ddp or fsdp (results.upgrade fills it for rows from before the column)."""
    return text_column(runs, "strategy")


def scaling_table(rows: pd.DataFrame) -> pd.DataFrame:
    """One line per world size of each configuration run on more than one device that has a
    plain one-device run to compare with (same GPU model too); the DDP columns where a
    DDP-wrapped one-device run exists."""
    runs = finished_rows(rows)
    if runs.empty or "world_size" not in runs:
        return pd.DataFrame(columns=SCALING_COLUMNS)
    if "samples_per_s_per_device" not in runs:
        runs["samples_per_s_per_device"] = runs["samples_per_s"] / runs["world_size"]
    runs["strategy"] = _strategy(runs)
    apart = ("strategy", "activation_checkpointing")  # a sharded run against the plain one
    key = key_columns(runs, tuple(k for k in (*RUN_KEY, "gpu_name") if k not in apart))
    measured = ["world_size", "samples_per_s", "samples_per_s_per_device", "run_id"]
    if "verdict" in runs:  # whether each run is to be trusted goes beside its figure
        runs["verdict_label"] = verdict_labels(runs)
        measured.append("verdict_label")
    runs = latest(runs, [*key, "world_size", "strategy"])
    single = runs[runs["strategy"] == "single"]
    wrapped = runs[(runs["strategy"] == "ddp") & (runs["world_size"] == 1)]
    scaled = runs[runs["strategy"].isin(("ddp", "fsdp"))]
    scaled = pd.concat([single, scaled[scaled["world_size"] > 1]])[[*key, *measured]]
    base = single[single["world_size"] == 1][[*key, "samples_per_s", "run_id"]].rename(
        columns={"samples_per_s": "baseline_samples_per_s", "run_id": "baseline_run_id"}
    )
    merged = scaled.merge(base, on=key, how="inner")
    ddp_base = wrapped[[*key, "samples_per_s"]]
    merged = merged.merge(
        ddp_base.rename(columns={"samples_per_s": "ddp_baseline_samples_per_s"}), on=key, how="left"
    )
    n = merged["world_size"]
    merged["scaling_efficiency"] = merged["samples_per_s"] / (n * merged["baseline_samples_per_s"])
    merged["scaling_efficiency_ddp"] = merged["samples_per_s"] / (
        n * merged["ddp_baseline_samples_per_s"]
    )
    merged["ddp_overhead"] = (
        1 - merged["ddp_baseline_samples_per_s"] / merged["baseline_samples_per_s"]
    )
    spans = merged.groupby(key, dropna=False)["world_size"].transform("max")
    ordered = merged[spans > 1].sort_values([*key, "world_size"])
    return ordered[[*key, *SCALING_COLUMNS]].reset_index(drop=True)


def record_scaling(store: CsvStore, model: str, mode: str) -> pd.DataFrame:
    """Compute efficiency from the stored rows and append one `scaling` row per world size > 1
    that has none yet (so a rerun adds only what is new); returns this model's table."""
    rows = load_rows([store.path], "--output")
    table = scaling_table(rows)
    if table.empty:
        return table
    table = table[(table["model"] == model) & (table["mode"] == mode)]
    recorded = set()
    if "benchmark_run_id" in rows:
        recorded = set(rows["benchmark_run_id"].dropna().astype(str))
    new = []
    for line in table[table["world_size"] > 1].to_dict("records"):
        if str(line["run_id"]) in recorded:
            continue
        run_id = str(line.pop("run_id"))
        columns = {k: v for k, v in line.items() if not pd.isna(v)}
        row = (
            RowBuilder()
            .add("identity", {**identity(None, "ok"), "run_kind": "scaling"})
            .add("the scaling table", columns)
            .add("the benchmark row", {"benchmark_run_id": run_id})
        )
        new.append(row.columns())
    if new:
        store.append_many(new)
    return table
