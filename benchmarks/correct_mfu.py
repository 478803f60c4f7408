"""Recompute FLOPs per sample, achieved TFLOP/s and MFU in result CSVs written before grouped
convolutions were counted right (torch's counter overstated their backward up to 27x).

The throughput in each row is measured and stays; only the FLOP count (deterministic for a
model, mode and input size) and what follows from it change. Usage:
PYTHONPATH=src python3 benchmarks/correct_mfu.py benchmarks/reference/h100-core.csv ...
"""

from __future__ import annotations

import csv
import sys
from functools import cache
from pathlib import Path

from dlbench.hardware import peak_tflops
from dlbench.results.store import CsvStore
from dlbench.workloads import get_workload
from dlbench.workloads.flops import flops_per_sample


@cache
def counted(model: str, mode: str, width: int, height: int) -> float:
    workload = get_workload(model)
    return flops_per_sample(workload, workload.shape(width, height, 128), mode).per_sample


def correct(row: dict[str, str]) -> bool:
    """Rewrite one row's FLOP columns in place; False when it has none counted by torch."""
    if row.get("flops_method") != "flop_counter" or not row.get("samples_per_s_per_device"):
        return False
    if not row.get("width") or get_workload(row["model"]).family not in ("vision", "segmentation"):
        return False  # text models have no grouped convolutions: their count was right
    flops = counted(row["model"], row["mode"], int(float(row["width"])), int(float(row["height"])))
    achieved = flops * float(row["samples_per_s_per_device"]) / 1e12
    row["flops_per_sample"], row["achieved_tflops"] = repr(flops), repr(achieved)
    peak = peak_tflops(row.get("gpu_name", ""), row["precision"])
    if peak:
        row["mfu"] = repr(achieved / peak[0])
    return True


def main(paths: list[str]) -> None:
    for path in map(Path, paths):
        with path.open(newline="") as f:
            rows = list(csv.DictReader(f))
        changed = sum(correct(row) for row in rows)
        path.unlink()
        CsvStore(path).append_many(rows)
        Path(f"{path}.lock").unlink(missing_ok=True)
        print(f"{path}: {changed} row(s) corrected")


if __name__ == "__main__":
    main(sys.argv[1:])
