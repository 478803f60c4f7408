"""The fleet check across hosts: every GPU's latest `dlbench peak` row beside its datasheet and
the median of the same model's GPUs in the rows given, the GPUs to look at first."""

from __future__ import annotations

import pandas as pd

from dlbench.analysis.load import finished_rows
from dlbench.errors import number_or_none
from dlbench.results.peaks.siblings import datasheet_shares, sibling_shares
from dlbench.results.verdict import (
    MIN_DATASHEET_MATMUL_SHARE,
    MIN_DATASHEET_READ_SHARE,
    MIN_SIBLINGS_SHARE,
    verdict_columns,
)

COLUMNS = {
    "hostname": "host",
    "gpu_index": "GPU",
    "gpu_name": "model",
    "gpu_uuid": "UUID",
    "attained_bf16_tflops": "bf16 TFLOP/s",
    "attained_bf16_datasheet_share": "bf16 of datasheet",
    "attained_read_tb_s": "read TB/s",
    "attained_read_datasheet_share": "read of datasheet",
    "siblings": "siblings",
    "siblings_share": "of siblings' median",
    "siblings_low": "lowest on",
    "verdict": "verdict",
    "verdict_reasons": "why",
}
NAMED = "below_|above_datasheet|impossible_figure"  # the verdict's reasons that name a GPU
RULE = (
    f"A GPU is named when it attains under {MIN_DATASHEET_MATMUL_SHARE:.0%} of its datasheet's "
    f"dense bf16 matmul or {MIN_DATASHEET_READ_SHARE:.0%} of its memory bandwidth, or under "
    f"{MIN_SIBLINGS_SHARE:.0%} of the median of the same model's GPUs in these rows, or "
    "when a figure is one no GPU has (above its datasheet, not a finite positive rate)."
)


def peak_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """Finished `dlbench peak` rows, the latest of each GPU (by UUID)."""
    peaks = finished_rows(rows, "peak")
    if peaks.empty:
        return peaks
    ordered = peaks.sort_values("timestamp", kind="stable")
    return ordered.groupby("gpu_uuid", dropna=False, sort=False).tail(1)


def fleet_table(rows: pd.DataFrame) -> pd.DataFrame:
    """One line per GPU, the ones named first; empty without peak rows."""
    peaks = peak_rows(rows)
    if peaks.empty:
        return pd.DataFrame()
    records = [{k: v for k, v in r.items() if not _missing(v)} for r in peaks.to_dict("records")]
    for record in records:  # the datasheet first: an impossible figure is nobody's sibling
        record.update(datasheet_shares(record))
    for record, shares in zip(records, sibling_shares(records)):
        record.update(shares)
        record.update(verdict_columns(record))
    table = pd.DataFrame(records)
    table["named"] = table["verdict_reasons"].astype(str).str.contains(NAMED)
    order = [c for c in ("named", "hostname", "gpu_index") if c in table]
    table = table.sort_values(order, ascending=[False] + [True] * (len(order) - 1))
    table["gpu_uuid"] = table["gpu_uuid"].astype(str).str[:13]
    return table[[c for c in COLUMNS if c in table]].rename(columns=COLUMNS)


def named_gpus(table: pd.DataFrame) -> list[str]:
    """`host GPU i (model): why` for each GPU the check names."""
    if table.empty:
        return []
    named = table[table["why"].astype(str).str.contains(NAMED)]
    return [
        f"{r.get('host', '')} GPU {_index(r.get('GPU'))} ({r.get('model', '')}): {r['why']}"
        for _, r in named.iterrows()
    ]


def _index(value: object) -> str:
    """A GPU's index as a whole number (read back from a CSV as 1.0), empty where missing."""
    number = number_or_none(value)
    return "" if number is None else str(int(number))


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and pd.isna(value))
