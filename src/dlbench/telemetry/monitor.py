"""A measurement window for the hardware: energy counters at the edges, a sampler in between."""

from __future__ import annotations

import csv
import os
import statistics
import threading
import time
from dataclasses import asdict
from itertools import pairwise
from pathlib import Path

import torch

from dlbench.console import stderr
from dlbench.telemetry.base import GpuBackend, Reading, throttle_names
from dlbench.telemetry.rapl import RaplReader


class TelemetryMonitor:
    """begin_window / end_window around the measured steps (both after a device sync), then
    `summary()` gives the row's telemetry columns. Any part may be missing: columns stay empty."""

    def __init__(
        self,
        gpu: GpuBackend | None,
        cpu: RaplReader | None,
        interval_s: float = 0.1,
        log_path: Path | None = None,
    ) -> None:
        self.gpu, self.cpu = gpu, cpu
        self.interval_s = interval_s
        self.log_path = log_path
        self.devices = list(range(len(gpu.device_names))) if gpu else []
        self.readings: list[Reading] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = self._t1 = 0.0
        self._energy0: list[float | None] = []
        self._energy1: list[float | None] = []
        self._procs = 0
        self._cpu_j: float | None = None

    def _sample_all(self) -> None:
        now = time.monotonic()
        for d in self.devices:
            self.readings.append(self.gpu.read(d, now))

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample_all()

    def begin_window(self) -> None:
        """Read counters and start sampling; called right after the device synchronized."""
        self.readings.clear()
        if self.gpu:
            self._procs = max(self.gpu.other_processes(d) for d in self.devices)
            self._energy0 = [self.gpu.energy_j(d) for d in self.devices]
            self._sample_all()
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="dlbench-telemetry", daemon=True)
            self._thread.start()
        if self.cpu:
            self.cpu.begin()
        self._t0 = time.monotonic()

    def end_window(self) -> None:
        """Stop sampling and read counters; called right after the closing synchronize."""
        self._t1 = time.monotonic()
        if self.gpu:
            self._energy1 = [self.gpu.energy_j(d) for d in self.devices]
            self._stop.set()
            if self._thread:
                self._thread.join()
            self._sample_all()
            self._procs = max(self._procs, *(self.gpu.other_processes(d) for d in self.devices))
        if self.cpu:
            self._cpu_j = self.cpu.end_j()
        if self.log_path and self.readings:
            self._write_log()

    def _integral_j(self) -> float | None:
        """Trapezoid over sampled power, per device, summed."""
        total = 0.0
        for d in self.devices:
            points = [(r.t, r.power_w) for r in self.readings if r.device == d and r.power_w]
            if len(points) < 2:
                return None
            total += sum((t2 - t1) * (p1 + p2) / 2 for (t1, p1), (t2, p2) in pairwise(points))
        return total

    def _counter_j(self) -> float | None:
        pairs = list(zip(self._energy0, self._energy1))
        if not pairs or any(a is None or b is None for a, b in pairs):
            return None
        return sum(b - a for a, b in pairs)

    def summary(self) -> dict[str, object]:
        """Telemetry columns for the row; empty when nothing could be read."""
        row: dict[str, object] = {"cpu_energy_j": self._cpu_j}
        if not self.gpu or not self.readings:
            return row
        duration = self._t1 - self._t0
        counter, integral = self._counter_j(), self._integral_j()
        energy = counter if counter is not None else integral
        source = (
            ""
            if energy is None
            else f"{self.gpu.name}_counter"
            if counter is not None
            else "power_integral"
        )

        def values(field: str) -> list[float]:
            return [getattr(r, field) for r in self.readings if getattr(r, field) is not None]

        power_by_time: dict[float, float] = {}
        for r in self.readings:
            power_by_time[r.t] = power_by_time.get(r.t, 0.0) + (r.power_w or 0.0)
        throttled = [r for r in self.readings if throttle_names(r.throttle_bits)]
        reasons = sorted({n for r in throttled for n in throttle_names(r.throttle_bits)})
        sm = values("sm_clock_mhz")
        row.update(
            telemetry_backend=self.gpu.name,
            telemetry_samples=len(self.readings),
            energy_j=energy,
            energy_source=source,
            energy_counter_j=counter,
            energy_integral_j=integral,
            avg_power_w=energy / duration if energy is not None and duration > 0 else None,
            peak_power_w=max(power_by_time.values()) if power_by_time else None,
            power_limit_w=self.gpu.power_limit_w(0),
            temp_max_c=max(values("temp_c"), default=None),
            gpu_util_avg=_mean(values("gpu_util")),
            mem_util_avg=_mean(values("mem_util")),
            mem_used_max_mb=max(values("mem_used_mb"), default=None),
            sm_clock_avg_mhz=_mean(sm),
            sm_clock_min_mhz=min(sm, default=None),
            mem_clock_avg_mhz=_mean(values("mem_clock_mhz")),
            throttle_pct=100.0 * len(throttled) / len(self.readings),
            throttle_reasons=" ".join(reasons),
            other_gpu_processes=self._procs,
        )
        return row

    def _write_log(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        fields = list(asdict(self.readings[0]))
        new = not self.log_path.exists()
        with self.log_path.open("a", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=fields)
            if new:
                writer.writeheader()
            writer.writerows(asdict(r) for r in self.readings)

    def close(self) -> None:
        if self.gpu:
            self.gpu.close()


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def open_monitor(
    device: torch.device, interval_s: float, log_path: Path | None, index: int | None = None
) -> TelemetryMonitor:
    """Pick the backend for the device; what cannot be opened becomes one warning, not a failure.
    `index` is the GPU to watch (default: the device's own); each DDP rank passes its own."""
    gpu: GpuBackend | None = None
    if index is None:
        index = device.index or 0
    try:
        if os.environ.get("DLBENCH_FAKE_NVML") or (device.type == "cuda" and not torch.version.hip):
            from dlbench.telemetry.nvml import NvmlBackend

            uuids = None
            if device.type == "cuda":
                uuids = [str(torch.cuda.get_device_properties(index).uuid)]
            gpu = NvmlBackend([index], uuids)
        elif device.type == "cuda":
            from dlbench.telemetry.amd import AmdSmiBackend

            gpu = AmdSmiBackend([index])
    except Exception as exc:
        stderr.print(
            f"[yellow]warning:[/yellow] GPU telemetry unavailable ({exc}); "
            "power and energy columns stay empty"
        )
    try:
        cpu = RaplReader()
    except (OSError, PermissionError):
        cpu = None
    return TelemetryMonitor(gpu, cpu, interval_s, log_path)
