"""Measured peaks beside the datasheet and beside identical siblings: a GPU that attains less
than its model's datasheet promises, or less than the median of the same model's other GPUs
(a bad HBM stack, a throttled board, a mis-set clock), is named; a figure a GPU cannot have
(above its datasheet, not finite, not positive) is no sibling's yardstick. The thresholds are
the verdict's (results.verdict); this module computes the shares the verdict reads."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from dlbench.errors import number_or_none
from dlbench.hardware import dtype_peak_tflops, peak_bandwidth_tb_s
from dlbench.results.verdict import impossible_peak

# The figures a sibling is compared on: the matmul rate MFU divides by, and memory read.
FLEET_METRICS = ("attained_bf16_tflops", "attained_read_tb_s")


def datasheet_shares(row: dict) -> dict[str, float | None]:
    """bf16 matmul and memory read against the datasheet of the row's GPU (None when the GPU
    is not in dlbench.hardware or the figure is missing), and the highest share of any matmul
    dtype or of memory read and copy (`attained_datasheet_share_max`): over 1 is a figure the
    GPU cannot have, a timing fault, never a peak."""
    name = str(row.get("gpu_name") or "")
    bandwidth = peak_bandwidth_tb_s(name) if name else None
    shares: dict[str, float] = {}
    for dtype in ("fp32", "tf32", "fp16", "bf16", "fp8"):
        sheet = dtype_peak_tflops(name, dtype)
        value = number_or_none(row.get(f"attained_{dtype}_tflops"))
        if sheet and value is not None:
            shares[dtype] = value / sheet
    for kind in ("read", "copy"):
        value = number_or_none(row.get(f"attained_{kind}_tb_s"))
        if bandwidth and value is not None:
            shares[kind] = value / bandwidth
    return {
        "attained_bf16_datasheet_share": shares.get("bf16"),
        "attained_read_datasheet_share": shares.get("read"),
        "attained_datasheet_share_max": max(shares.values()) if shares else None,
    }


def sibling_shares(rows: Sequence[dict]) -> list[dict[str, object]]:
    """For each row, its lowest share of the median of the same GPU model's possible rows over
    FLEET_METRICS (`siblings_share`), on which figure (`siblings_low`), and how many GPUs of
    the model were compared (`siblings`); no share where a model has one possible GPU, and none
    for an impossible row (its verdict says so)."""
    by_model: dict[str, list[dict]] = {}
    for row in rows:
        if not impossible_peak(row):
            by_model.setdefault(str(row.get("gpu_name") or ""), []).append(row)
    medians = {
        (model, metric): statistics.median(values)
        for model, group in by_model.items()
        for metric in FLEET_METRICS
        if (values := [v for r in group if (v := number_or_none(r.get(metric)))])
    }
    out = []
    for row in rows:
        model = str(row.get("gpu_name") or "")
        siblings = len(by_model.get(model, []))
        shares = {
            metric: value / medians[(model, metric)]
            for metric in FLEET_METRICS
            if (value := number_or_none(row.get(metric))) and medians.get((model, metric))
        }
        if siblings < 2 or not shares or impossible_peak(row):
            out.append({"siblings": siblings, "siblings_share": None, "siblings_low": ""})
            continue
        low = min(shares, key=shares.get)
        out.append({"siblings": siblings, "siblings_share": shares[low], "siblings_low": low})
    return out
