"""A measurement window for the hardware: energy counters at the edges, a sampler in between.

Energy is only as good as its window. NVML's energy counter moves in steps (its update period,
measured here once before any window), so each edge can be off by one step: a window of at least
COUNTER_PERIODS steps keeps that small. NVML's power reading is a trailing average on recent GPUs,
so integrating it needs a window of seconds (docs/decisions.md#energy-window). A row whose window is
shorter says so in `energy_quality` and carries no energy figure, only the raw readings."""

from __future__ import annotations

import csv
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from itertools import pairwise
from pathlib import Path

import torch

from dlbench.console import stderr
from dlbench.telemetry.base import GpuBackend, Reading, throttle_names
from dlbench.telemetry.nvml import NvmlBackend, provided_nvml
from dlbench.telemetry.rapl import RaplReader

# Each edge of a window can be off by one counter period: the window lasts this many periods
# at least (docs/decisions.md#energy-window).
COUNTER_PERIODS = 40
MIN_INTEGRAL_WINDOW_S = 5.0  # NVML's power is a trailing average: integrate over seconds
PERIOD_PROBE_S = 0.5  # longest time spent finding the counter's update period (before the window)
PERIOD_POLL_S = 0.001
IDLE_BASELINE_S = 2.0  # power sampled on a quiet GPU before warm-up: the run's idle baseline
IDLE_REUSE_S = 600.0  # a process's idle sample of a GPU serves its later runs this long

# Per process, by GPU: what a sweep worker's later points need not measure again
# (docs/decisions.md#idle-baseline-reuse): the energy counter's update period, and the idle
# baseline with the monotonic time it was sampled.
_counter_periods: dict[tuple, float | None] = {}
_idle_baselines: dict[tuple, tuple[float, float]] = {}


def forget_baselines() -> None:
    """Measure the idle power and the counter period again on the next run in this process."""
    _counter_periods.clear()
    _idle_baselines.clear()


def counter_update_period(read: Callable[[], float | None], budget_s: float = PERIOD_PROBE_S):
    """Seconds between changes of a cumulative counter, by polling it (median of the gaps
    between changes); `budget_s` as a lower bound if it did not change twice; None if unreadable."""
    first = read()
    if first is None:
        return None
    changes: list[float] = []
    last, started = first, time.monotonic()
    while time.monotonic() - started < budget_s and len(changes) < 5:
        time.sleep(PERIOD_POLL_S)
        value = read()
        if value is not None and value != last:
            changes.append(time.monotonic())
            last = value
    if len(changes) < 2:
        return budget_s
    return statistics.median(b - a for a, b in pairwise(changes))


def energy_quality(
    window_s: float, source: str, counter_period_s: float | None, min_integral_s: float
) -> str:
    """'ok', or why the window is too short for the energy source to be trusted."""
    if source == "power_integral":
        needed = min_integral_s
    elif counter_period_s is not None:
        needed = COUNTER_PERIODS * counter_period_s
    else:
        return "ok"
    if window_s >= needed:
        return "ok"
    return f"short window: {window_s:.2f} s < {needed:.2f} s needed by {source} (use --min-time)"


class TelemetryMonitor:
    """begin_window / end_window around the measured steps (both after a device sync), then
    `summary()` gives the row's telemetry columns. Any part may be missing: columns stay empty."""

    def __init__(
        self,
        gpu: GpuBackend | None,
        cpu: RaplReader | None,
        interval_s: float = 0.1,
        log_path: Path | None = None,
        min_integral_s: float = MIN_INTEGRAL_WINDOW_S,
    ) -> None:
        self.gpu, self.cpu = gpu, cpu
        self.min_integral_s = min_integral_s
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
        self.counter_period_s = None
        self.idle_power_w: float | None = None
        self.idle_power_age_s: float | None = None
        # which GPUs these are, as far as this process can tell (the key of its kept baselines)
        names = gpu.device_names if gpu else []
        self._gpus = (type(gpu).__name__, getattr(gpu, "identity", None), *names)
        if gpu and self.devices:
            if self._gpus not in _counter_periods:
                _counter_periods[self._gpus] = counter_update_period(lambda: gpu.energy_j(0))
            self.counter_period_s = _counter_periods[self._gpus]

    def measure_idle(self, seconds: float = IDLE_BASELINE_S) -> None:
        """Sample power for `seconds` while nothing runs (before warm-up): the idle baseline
        that energy above idle is counted from. A sample this process took of the same GPUs
        within IDLE_REUSE_S is used again (a sweep worker's later points), its age recorded."""
        if not self.gpu:
            return
        kept, now = _idle_baselines.get(self._gpus), time.monotonic()
        if kept and now - kept[0] < IDLE_REUSE_S:
            self.idle_power_w, self.idle_power_age_s = kept[1], now - kept[0]
            return
        readings = []
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            readings += [self.gpu.read(d, time.monotonic()).power_w for d in self.devices]
            time.sleep(self.interval_s)
        powers = [p for p in readings if p is not None]
        self.idle_power_w = statistics.fmean(powers) * len(self.devices) if powers else None
        if self.idle_power_w is not None:
            _idle_baselines[self._gpus] = (time.monotonic(), self.idle_power_w)
            self.idle_power_age_s = 0.0

    def _sample_all(self) -> None:
        now = time.monotonic()
        for d in self.devices:
            self.readings.append(self.gpu.read(d, now))

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample_all()

    def begin_window(self) -> None:
        """Start sampling, then read the counters last, the window's start time beside them;
        called right after the device synchronized."""
        self.readings.clear()
        if self.gpu:
            self._procs = max(self.gpu.other_processes(d) for d in self.devices)
            self._sample_all()
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="dlbench-telemetry", daemon=True)
            self._thread.start()
        if self.cpu:
            self.cpu.begin()
        if self.gpu:
            self._energy0 = [self.gpu.energy_j(d) for d in self.devices]
        self._t0 = time.monotonic()

    def end_window(self) -> None:
        """Read the counters first, the window's end time beside them, then stop sampling;
        called right after the closing synchronize."""
        self._t1 = time.monotonic()
        if self.gpu:
            self._energy1 = [self.gpu.energy_j(d) for d in self.devices]
        if self.cpu:
            self._cpu_j = self.cpu.end_j()
        if self.gpu:
            self._stop.set()
            if self._thread:
                self._thread.join()
            self._sample_all()
            self._procs = max(self._procs, *(self.gpu.other_processes(d) for d in self.devices))
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
        quality = energy_quality(duration, source, self.counter_period_s, self.min_integral_s)
        trusted = energy if quality == "ok" else None
        base = self.gpu.base_sm_clock_mhz(0)
        below = _below_base_pct(self.readings, base)
        row.update(
            telemetry_backend=self.gpu.name,
            telemetry_samples=len(self.readings),
            telemetry_window_s=duration,
            energy_j=trusted,
            energy_source=source,
            energy_quality=quality if energy is not None else "",
            energy_counter_j=counter,
            energy_counter_period_s=self.counter_period_s,
            energy_integral_j=integral,
            avg_power_w=trusted / duration if trusted is not None and duration > 0 else None,
            peak_power_w=max(power_by_time.values()) if power_by_time else None,
            power_limit_w=self.gpu.power_limit_w(0),
            temp_max_c=max(values("temp_c"), default=None),
            gpu_util_avg=_mean(values("gpu_util")),
            mem_util_avg=_mean(values("mem_util")),
            mem_used_max_mb=max(values("mem_used_mb"), default=None),
            sm_clock_avg_mhz=_mean(sm),
            sm_clock_min_mhz=min(sm, default=None),
            sm_clock_base_mhz=base,
            sm_clock_below_base_pct=below,
            idle_power_w=self.idle_power_w,
            idle_power_age_s=self.idle_power_age_s,
            energy_scope="gpu_board" + ("+cpu_package" if self._cpu_j is not None else ""),
            gpu_processes_hidden=bool(getattr(self.gpu, "processes_hidden", False)),
            **(self.gpu.describe(0) if hasattr(self.gpu, "describe") else {}),
            mem_clock_avg_mhz=_mean(values("mem_clock_mhz")),
            jpeg_decoder_busy_pct=_mean(values("jpeg_util")),
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


# NVML's default application clock is the boost clock on Hopper (1,980 MHz on an H100): a GPU
# under it at its power cap, or idling, is where it should be; under it with neither, it is not.
_EXPLAINED = 0x1 | 0x4  # gpu_idle, sw_power_cap


def _below_base_pct(readings: list[Reading], base: float | None) -> float | None:
    """% of samples with the SM clock under `base` that neither idling nor the power cap
    explains."""
    clocked = [r for r in readings if r.sm_clock_mhz is not None]
    if not base or not clocked:
        return None
    low = [r for r in clocked if r.sm_clock_mhz < base and not r.throttle_bits & _EXPLAINED]
    return 100.0 * len(low) / len(clocked)


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
        provided = provided_nvml()
        if provided or (device.type == "cuda" and not torch.version.hip):
            uuids = None
            if device.type == "cuda":
                uuids = [str(torch.cuda.get_device_properties(index).uuid)]
            gpu = NvmlBackend([index], uuids, nvml=provided)
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
