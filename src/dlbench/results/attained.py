"""The latest attained peaks of each GPU, kept in the run's cache folder (dlbench.caches: one
folder per GPU model, driver, torch and dlbench, so figures from other software are never
read) by GPU UUID: `dlbench peak` writes them, every later run divides by them
(`mfu_attained`, `hbm_bandwidth_share_attained`)."""

from __future__ import annotations

from pathlib import Path

from dlbench.caches import read_record, write_json

PEAKS_FILE = "attained_peaks.json"


def recorded_peaks(folder: Path | None) -> dict[str, dict]:
    """Every GPU's latest figures in a cache folder, by UUID (none when unreadable)."""
    return {k: v for k, v in read_record(folder, PEAKS_FILE).items() if isinstance(v, dict)}


def attained_peaks(folder: Path | None, uuid: str) -> dict | None:
    """The latest figures `dlbench peak` recorded for this GPU, or None."""
    return recorded_peaks(folder).get(uuid)


def record_peaks(folder: Path, uuid: str, figures: dict) -> None:
    """Replace this GPU's figures; the other GPUs' stay."""
    peaks = recorded_peaks(folder)
    peaks[uuid] = figures
    write_json(folder / PEAKS_FILE, peaks)


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
