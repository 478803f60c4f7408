"""Measured peaks beside the datasheet and beside identical siblings: a GPU that attains less
than its model's datasheet promises, or less than the median of the same model's other GPUs
(a bad HBM stack, a throttled board, a mis-set clock), is named. The thresholds are the
verdict's (results.verdict); this module computes the shares the verdict reads."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from dlbench.console import number_or_none
from dlbench.hardware import peak_bandwidth_tb_s, peak_tflops

# The figures a sibling is compared on: the matmul rate MFU divides by, and memory read.
FLEET_METRICS = ("attained_bf16_tflops", "attained_read_tb_s")


def datasheet_shares(row: dict) -> dict[str, float | None]:
    """bf16 matmul and memory read against the datasheet of the row's GPU (None when the GPU
    is not in dlbench.hardware or the figure is missing)."""
    name = str(row.get("gpu_name") or "")
    matmul = peak_tflops(name, "bf16-mixed") if name else None
    bandwidth = peak_bandwidth_tb_s(name) if name else None
    bf16, read = (number_or_none(row.get(m)) for m in FLEET_METRICS)
    return {
        "attained_bf16_datasheet_share": bf16 / matmul[0] if bf16 and matmul else None,
        "attained_read_datasheet_share": read / bandwidth if read and bandwidth else None,
    }


def sibling_shares(rows: Sequence[dict]) -> list[dict[str, object]]:
    """For each row, its lowest share of the median of the same GPU model's rows over
    FLEET_METRICS (`siblings_share`), on which figure (`siblings_low`), and how many GPUs of
    the model were compared (`siblings`); no share where a model has one GPU."""
    by_model: dict[str, list[dict]] = {}
    for row in rows:
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
        siblings = len(by_model[model])
        shares = {
            metric: value / medians[(model, metric)]
            for metric in FLEET_METRICS
            if (value := number_or_none(row.get(metric))) and medians.get((model, metric))
        }
        if siblings < 2 or not shares:
            out.append({"siblings": siblings, "siblings_share": None, "siblings_low": ""})
            continue
        low = min(shares, key=shares.get)
        out.append({"siblings": siblings, "siblings_share": shares[low], "siblings_low": low})
    return out
