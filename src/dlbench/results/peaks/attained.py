"""The latest attained peaks of each GPU, kept in the run's cache folder (dlbench.caches: one
folder per GPU model, driver, torch and dlbench, so figures from other software are never
read) by GPU UUID: `dlbench peak` writes them, every later run divides by them
(`mfu_attained`, `hbm_bandwidth_share_attained`)."""

from __future__ import annotations

import math
from pathlib import Path

from dlbench.caches import keep_record, read_record
from dlbench.hardware import dtype_peak_tflops, peak_bandwidth_tb_s
from dlbench.results.verdict import MAX_DATASHEET_SHARE

PEAKS_FILE = "attained_peaks.json"
# Figures a record may hold: at least a host's rate (a CPU core's fp32 is tens of GFLOP/s, its
# memory tens of GB/s), at most its GPU's datasheet, or where the GPU is not in dlbench.hardware
# beyond any device made.
MIN_FIGURE = 1e-3  # TFLOP/s or TB/s
MAX_TFLOPS, MAX_TB_S = 1e5, 1e3


def recorded_peaks(folder: Path | None) -> dict[str, dict]:
    """Every GPU's latest figures in a cache folder, by UUID (none when unreadable)."""
    return {k: v for k, v in read_record(folder, PEAKS_FILE).items() if isinstance(v, dict)}


def attained_peaks(folder: Path | None, uuid: str, gpu_name: str = "") -> dict | None:
    """The latest figures `dlbench peak` recorded for this GPU, those it can have (a record
    is a hint from a file anyone can edit: a figure that is not finite, under a sane floor or
    above the datasheet of `gpu_name` is no figure), or None."""
    peaks = recorded_peaks(folder).get(uuid)
    if peaks is None:
        return None
    kept = {
        k: v for k, v in peaks.items() if k in ("run_id", "timestamp") or _possible(k, v, gpu_name)
    }
    return kept if set(kept) - {"run_id", "timestamp"} else None


def _possible(key: str, value: object, gpu_name: str) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if not (math.isfinite(value) and value >= MIN_FIGURE):
        return False
    if key == "read_tb_s":
        sheet = peak_bandwidth_tb_s(gpu_name)
        return value <= (sheet or MAX_TB_S) * MAX_DATASHEET_SHARE
    sheet = dtype_peak_tflops(gpu_name, key)
    return value <= (sheet or MAX_TFLOPS) * MAX_DATASHEET_SHARE


def record_peaks(folder: Path, uuid: str, figures: dict) -> None:
    """Replace this GPU's figures; the other GPUs' stay."""
    peaks = recorded_peaks(folder)
    peaks[uuid] = figures
    keep_record(folder, PEAKS_FILE, peaks)


def job_peaks(peaks: list[dict | None]) -> dict | None:
    """What a job of several GPUs divides by: each figure's mean over its GPUs' own records,
    none unless every GPU has one (a job is judged against all its GPUs or none)."""
    if not peaks or any(not p for p in peaks):
        return None
    if len(peaks) == 1:
        return peaks[0]
    out: dict[str, object] = {
        "run_id": " ".join(dict.fromkeys(str(p.get("run_id")) for p in peaks))
    }
    for key in peaks[0]:
        values = [p.get(key) for p in peaks]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            out[key] = sum(values) / len(values)
    return out
