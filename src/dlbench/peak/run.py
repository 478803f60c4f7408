"""`dlbench peak` end to end: measure each device (peak.measure) inside a telemetry window, one
row per device (run_kind=peak) with its datasheet shares, its siblings' shares and a verdict;
append the rows, and record each GPU's figures in the cache folder for later runs'
`mfu_attained` (results.peaks.attained)."""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import torch

from dlbench.caches import use_caches
from dlbench.config.fields import DEFAULT_SAMPLE_INTERVAL_S
from dlbench.console import show_frame, stderr
from dlbench.engine.distribution.devices import gpu_uuid
from dlbench.errors import UserError, invalid
from dlbench.peak.measure import MATMUL_DTYPES, measure_device
from dlbench.peak.search import Best
from dlbench.results.environment import collect_environment, gpu_facts
from dlbench.results.peaks.attained import record_peaks
from dlbench.results.peaks.siblings import datasheet_shares, sibling_shares
from dlbench.results.row import RowBuilder, identity
from dlbench.results.store import CsvStore
from dlbench.results.verdict import impossible_peak
from dlbench.telemetry.monitor import open_monitor

# Units of the host and peer copies and of memory: the name suffixes of their columns.
_RATE_COLUMNS = {
    "read": "attained_read_tb_s",
    "copy": "attained_copy_tb_s",
    "h2d": "attained_h2d_gb_s",
    "d2h": "attained_d2h_gb_s",
}


def peak_devices(accelerator: str, devices: str) -> list[torch.device]:
    """The devices to measure: every visible GPU (or the listed indices), else the CPU."""
    indices = None
    if devices != "all":
        try:
            indices = [int(part) for part in devices.split(",")]
        except ValueError:
            raise invalid("--devices", devices, "'all' or GPU indices, e.g. 0,1") from None
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if accelerator == "cpu" or (accelerator == "auto" and not gpus):
        if indices is not None:
            raise invalid("--devices", devices, "GPU indices, and the CPU is measured")
        return [torch.device("cpu")]
    if not gpus:
        raise UserError("--accelerator gpu: no CUDA GPU is visible")
    if indices is None:
        return [torch.device("cuda", i) for i in range(gpus)]
    wrong = [i for i in indices if not 0 <= i < gpus]
    if wrong or len(set(indices)) != len(indices):
        raise invalid("--devices", devices, f"indices 0 to {gpus - 1}, each once")
    return [torch.device("cuda", i) for i in indices]


def peak_row(device: torch.device, found: dict, seconds: float, telemetry: dict) -> RowBuilder:
    """One device's figures as a row's parts: what was measured, and the window's telemetry."""
    row: dict[str, object] = {
        "accelerator": device.type,
        "gpu_index": device.index,
        "gpu_uuid": gpu_uuid(device),
        "window_s": seconds,
    }
    shapes = []
    for dtype in MATMUL_DTYPES:
        best = found.get(dtype)
        if isinstance(best, Best):
            row[f"attained_{dtype}_tflops"] = best.rate
            shapes.append(f"{dtype}={best.shape_text}")
    row["attained_matmul_shapes"] = " ".join(shapes)
    bf16 = found.get("bf16")
    row["attained_bf16_sustained_tflops"] = bf16.sustained if isinstance(bf16, Best) else None
    for name, column in _RATE_COLUMNS.items():
        best = found.get(name)
        row[column] = best.rate if isinstance(best, Best) else None
    row.update(peer_columns(found.get("p2p") or []))
    tried = sum(b.tried for b in found.values() if isinstance(b, Best))
    row["peak_shapes_tried"] = tried
    return (
        RowBuilder()
        .add("identity", {**identity(None, "ok"), "run_kind": "peak"})
        .add("the peak", row)
        .add("the window's telemetry", telemetry)
    )


def peer_columns(pairs: list[tuple[str, float]]) -> dict[str, object]:
    """Copies from this GPU to each peer: the median and the slowest pair's GB/s, and every
    pair as `peer:GB/s` (a slow link names itself)."""
    rates = sorted(rate for _, rate in pairs)
    return {
        "attained_p2p_gb_s": statistics.median(rates) if rates else None,
        "attained_p2p_min_gb_s": rates[0] if rates else None,
        "attained_p2p_pairs": " ".join(f"{peer}:{rate:.1f}" for peer, rate in pairs),
    }


def attained_figures(row: dict) -> dict[str, object]:
    """What a later run divides by: matmul per dtype and memory read, with the row's id."""
    figures = {d: row.get(f"attained_{d}_tflops") for d in MATMUL_DTYPES}
    return {
        **figures,
        "read_tb_s": row.get("attained_read_tb_s"),
        "run_id": row["run_id"],
        "timestamp": row["timestamp"],
    }


def run_peak(
    accelerator: str, devices: str, max_time_s: float, output: Path, cache_dir: Path | None
) -> list[dict]:
    """Measure every device in turn (each within about `max_time_s`), then the fleet check
    over them; rows appended, figures recorded for later runs. Returns the rows."""
    store = CsvStore(output)
    store.check_writable()
    chosen = peak_devices(accelerator, devices)
    env = collect_environment(chosen[0].type)
    try:
        folder = use_caches(cache_dir, env)
    except OSError as exc:
        where = cache_dir or "the default cache folder"
        raise UserError(f"--cache-dir: cannot use {where}: {exc.strerror or exc}") from None
    built = []
    for device in chosen:
        stderr.print(f"measuring what {_label(device)} attains (at most {max_time_s:g} s)")
        peers = [d for d in chosen if d != device and device.type == "cuda"]
        built.append(_measure_one(device, max_time_s, peers, env))
    for row, shares in zip(built, sibling_shares([b.columns() for b in built])):
        row.add("the fleet check", shares)
    rows = [row.row() for row in built]  # each with its verdict, from all its parts
    store.append_many(rows)
    for row in rows:
        if impossible_peak(row):  # a timing fault is no GPU's peak
            continue
        try:
            record_peaks(folder, str(row["gpu_uuid"]), attained_figures(row))
        except OSError as exc:  # the rows are written; later runs just go without the figures
            stderr.print(
                f"[yellow]warning:[/yellow] cannot keep the attained peaks in {folder} "
                f"({exc.strerror or exc}); later rows get no mfu_attained"
            )
    return rows


def _measure_one(device: torch.device, max_time_s: float, peers, env: dict) -> RowBuilder:
    monitor = None
    if device.type == "cuda":
        monitor = open_monitor(device, DEFAULT_SAMPLE_INTERVAL_S, None, device.index)
        monitor.begin_window()
    began = time.perf_counter()
    try:
        found = measure_device(device, max_time_s, peers)
        seconds = time.perf_counter() - began
        telemetry = {}
        if monitor:
            monitor.end_window()
            telemetry = monitor.summary()
    finally:
        if monitor:
            monitor.close()
    row = (
        peak_row(device, found, seconds, telemetry)
        .add("environment", env)
        .amend("the device measured", gpu_facts(device.index if device.type == "cuda" else None))
    )
    return row.add("the datasheet", datasheet_shares(row.columns()))


def _label(device: torch.device) -> str:
    if device.type != "cuda":
        return "the CPU"
    return f"GPU {device.index} ({torch.cuda.get_device_name(device)})"


SHOWN = {
    "gpu_index": "GPU",
    "gpu_name": "model",
    "attained_bf16_tflops": "bf16 TFLOP/s",
    "attained_bf16_datasheet_share": "of datasheet",
    "attained_fp8_tflops": "fp8 TFLOP/s",
    "attained_read_tb_s": "read TB/s",
    "attained_read_datasheet_share": "of datasheet ",
    "attained_h2d_gb_s": "H2D GB/s",
    "attained_d2h_gb_s": "D2H GB/s",
    "attained_p2p_gb_s": "P2P GB/s",
    "siblings_share": "of siblings",
    "verdict": "verdict",
    "verdict_reasons": "why",
}


def show_peaks(rows: list[dict]) -> None:
    """The rows' main figures as one table."""
    import pandas as pd

    frame = pd.DataFrame(rows)
    shown = frame[[c for c in SHOWN if c in frame]].rename(columns=SHOWN)
    show_frame(shown, "What each device attains (dlbench peak)")
