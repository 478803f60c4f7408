"""Result rows for analysis tests, written through the real CSV store."""

from __future__ import annotations

from pathlib import Path

from dlbench.results.row import identity
from dlbench.results.store import CsvStore


def benchmark_row(**columns: object) -> dict[str, object]:
    """An ok benchmark row with ordinary defaults; keyword arguments override."""
    row = {
        **identity(None, "ok"),
        "run_kind": "benchmark",
        "data": "synthetic",
        "model": "resnet50",
        "mode": "train",
        "precision": "bf16-mixed",
        "batch_size": 64,
        "world_size": 1,
        "steps": 50,
        "samples_per_s": 1000.0,
        "step_time_stdev_pct": 2.0,
        "step_time_median_ms": 64.0,
        "step_time_p90_ms": 65.0,
        "step_time_p99_ms": 66.0,
        "gpu_name": "NVIDIA H100 80GB HBM3",
        "driver": "580.159.04",
        "torch": "2.11.0",
    }
    row = {**row, **columns}
    return {"strategy": "ddp" if float(row["world_size"]) > 1 else "single", **row}


def write_rows(path: Path, rows: list[dict[str, object]]) -> Path:
    store = CsvStore(path)
    for row in rows:
        store.append(row)
    return path
