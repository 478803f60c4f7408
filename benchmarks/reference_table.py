"""The README's reference table from a plan's CSV (the newest ok row per point), so the figures
on the front page are the CSV's, not retyped (tests/test_readme.py checks). Usage:
PYTHONPATH=src python3 benchmarks/reference_table.py benchmarks/reference/h100-default-verdict.csv
"""

from __future__ import annotations

import sys

import pandas as pd

from dlbench.analysis.load import verdict_labels
from dlbench.workloads import get_workload


def table(path: str) -> str:
    rows = pd.read_csv(path)
    rows = rows[rows["status"] == "ok"].drop_duplicates(
        ["model", "mode", "batch_size", "precision"], keep="last"
    )
    rows = rows.assign(verdict_label=verdict_labels(rows))
    gpu = rows["gpu_name"].dropna().iloc[0]
    lines = [
        f"| model | mode | batch | precision | purpose | unit | {gpu} /s | p50 ms | MFU "
        "| GPU busy % | graphs | verdict |",
        "|---|---|--:|---|---|---|--:|--:|--:|--:|---|---|",
    ]
    for r in rows.itertuples():
        unit = get_workload(r.model).sample_unit
        p50 = f"{r.latency_p50_ms:.3f}" if r.batch_size == 1 and pd.notna(r.latency_p50_ms) else ""
        mfu = f"{r.mfu:.3f}" if pd.notna(r.mfu) else ""
        graphs = "yes" if str(r.cuda_graphs) == "True" else ""
        lines.append(
            f"| {r.model} | {r.mode} | {r.batch_size} | {r.precision} | {r.purpose} | {unit} "
            f"| {r.samples_per_s:,.1f} | {p50} | {mfu} | {r.gpu_busy_pct:.0f} | {graphs} "
            f"| {r.verdict_label} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    print(table(sys.argv[1]))
