"""Print the rows of the CSVs a GPU call wrote, with the columns its closing note quotes
(those present). Usage: python3 benchmarks/gpu/show_rows.py FILE.csv..."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

COLUMNS = (
    "model", "mode", "batch_size", "precision", "compile", "cuda_graphs", "data_decode",
    "data_decoder", "data_workers", "samples_per_s", "step_time_median_ms", "gpu_busy_pct",
    "host_issue_pct", "latency_p50_ms", "latency_p99_ms", "data_wait_pct", "host_cpu_pct",
    "verdict", "verdict_reasons", "graph_fallback", "warmup_s", "first_step_s", "capture_s",
    "profile_s", "tokens_per_s", "staged_ahead", "cudnn_limit", "cdt", "generation_path",
    "decode_tokens_per_s", "hbm_bandwidth_share", "itl_p50_ms", "mfu",
    "peak_memory_allocated_mb", "avg_power_w", "sm_clock_avg_mhz", "verdict_notes",
)  # fmt: skip


def main(paths: list[str]) -> None:
    for path in paths:
        with open(path, newline="") as file:
            rows = list(csv.DictReader(file))
        for row in rows:
            shown = " ".join(f"{c}={row[c]}" for c in COLUMNS if row.get(c) not in (None, ""))
            print(f"{Path(path).name}: {shown}")


if __name__ == "__main__":
    main(sys.argv[1:])
