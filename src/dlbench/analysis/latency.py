"""Per-query latency at batch 1, machine against machine: the figure people quote for serving
(MLPerf's SingleStream), and a GPU-to-GPU ratio only where the rows measured the GPU (replayed
as CUDA graphs, not host-bound)."""

from __future__ import annotations

import pandas as pd

# Rows compare only with rows taken the same way: a compiled graph against an eager one would
# measure the compiler, not the GPU; one attention kernel against another, the kernels.
LATENCY_KEY = (
    "model",
    "precision",
    "width",
    "height",
    "seq_len",
    "compile",
    "cuda_graphs",
    "attention",
)
LATENCY_COLUMNS = {
    "gpu_busy_pct": "GPU busy %",
    "latency_p50_ms": "p50 ms",
    "latency_p90_ms": "p90 ms",
    "latency_p99_ms": "p99 ms",
    "samples_per_s": "samples/s",
    "speed_ratio": "speed vs baseline (p50)",
}


def latency_table(runs: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """Batch-1 inference rows (newest per model and machine), their latency percentiles, and
    how much faster each machine answers than the baseline machine (baseline p50 / p50)."""
    if "latency_p50_ms" not in runs:
        return pd.DataFrame()
    rows = runs[(runs["mode"] == "infer") & (runs["batch_size"] == 1)]
    rows = rows[rows["latency_p50_ms"].notna()]
    if rows.empty:
        return pd.DataFrame()
    key = [c for c in LATENCY_KEY if c in rows]
    rows = rows.sort_values("timestamp").groupby([*key, "machine"], dropna=False).tail(1)
    base = rows[rows["machine"] == baseline][[*key, "latency_p50_ms"]]
    merged = rows.merge(base, on=key, how="left", suffixes=("", "_base"))
    merged["speed_ratio"] = merged["latency_p50_ms_base"] / merged["latency_p50_ms"]
    shown = [*key, "machine", *(c for c in LATENCY_COLUMNS if c in merged)]
    table = merged[shown].rename(columns=LATENCY_COLUMNS)
    return table.dropna(axis=1, how="all").sort_values([*key, "machine"]).reset_index(drop=True)
