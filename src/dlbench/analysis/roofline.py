"""Decode against the memory roofline across machines: each GPU's decode rate and share of its
peak bandwidth, and the ratio to a baseline machine beside the ratio of their peaks."""

from __future__ import annotations

DECODE_KEY = (
    "model",
    "precision",
    "batch_size",
    "prompt_len",
    "new_tokens",
    "generation_path",
    "llm_impl",
)
DECODE_COLUMNS = {
    "decode_tokens_per_s": "decode tokens/s",
    "decode_hbm_tb_s": "TB/s",
    "hbm_bandwidth_share": "share of peak",
    "hbm_bandwidth_share_attained": "share of attained",
    "decode_ratio": "decode vs baseline",
    "bandwidth_ratio": "peak bandwidth vs baseline",
}


def decode_table(runs, baseline: str):
    """Generation rows per machine: decode rate, achieved bandwidth and its share of the peak,
    and the ratio to the baseline machine beside the ratio of their peak bandwidths (decode is
    memory-bound, so the two should agree when the number measures the GPU)."""
    import pandas as pd

    from dlbench.analysis.load import text_column

    if "decode_tokens_per_s" not in runs:
        return pd.DataFrame()
    rows = runs[runs["decode_tokens_per_s"].notna()].copy()
    rows["llm_impl"] = text_column(rows, "llm_impl")
    key = [c for c in DECODE_KEY if c in rows]
    if rows.empty:
        return pd.DataFrame()
    rows["peak_hbm_tb_s"] = rows.get("peak_hbm_tb_s", pd.Series(float("nan"), index=rows.index))
    best = rows.sort_values("decode_tokens_per_s").groupby([*key, "machine"], dropna=False).tail(1)
    base = best[best["machine"] == baseline][[*key, "decode_tokens_per_s", "peak_hbm_tb_s"]]
    merged = best.merge(base, on=key, how="left", suffixes=("", "_base"))
    merged["decode_ratio"] = merged["decode_tokens_per_s"] / merged["decode_tokens_per_s_base"]
    merged["bandwidth_ratio"] = merged["peak_hbm_tb_s"] / merged["peak_hbm_tb_s_base"]
    shown = [*key, "machine", *(c for c in DECODE_COLUMNS if c in merged)]
    return merged[shown].rename(columns=DECODE_COLUMNS).sort_values([*key, "machine"])
