"""A measurement window for the hardware: energy counters at the edges, a sampler in between.

Energy is only as good as its window. NVML's energy counter moves in steps (its update period,
measured here once before any window), so a counter read at the edges can be off by one step at
each. The sampler (telemetry.sampler) therefore reads the counter every COUNTER_POLL_S and
times its steps: the energy between the first and last step inside the window, scaled to the
window, needs TIMED_PERIODS steps where the edges alone need COUNTER_PERIODS. NVML's power
reading is a trailing average on recent GPUs, so integrating it needs a window of seconds
(docs/decisions.md#energy-window). A row whose window is shorter says so in `energy_quality` and
carries no energy figure, only the raw readings."""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import torch

from dlbench.console import stderr
from dlbench.telemetry.base import GpuBackend, Reading
from dlbench.telemetry.gpu_facts import (
    PROCESS_GPU_FACTS,
    GpuFacts,
    KeptGpuFacts,
    counter_update_period,
)
from dlbench.telemetry.isolation import IsolationCheck
from dlbench.telemetry.nvml import NvmlBackend, provided_nvml
from dlbench.telemetry.rapl import RaplReader
from dlbench.telemetry.sampler import Sampler, write_log
from dlbench.telemetry.window import (
    TIMED_PERIODS,
    Energy,
    Samples,
    WindowMeasurement,
    below_base_pct,
    power_integral_j,
    timed_counter_j,
)

MIN_INTEGRAL_WINDOW_S = 5.0  # NVML's power is a trailing average: integrate over seconds
IDLE_BASELINE_S = 2.0  # power sampled on a quiet GPU before warm-up: the run's idle baseline
NOTHING_KEPT = KeptGpuFacts()  # a monitor without a cache folder keeps nothing for later


class TelemetryMonitor:
    """begin_window / end_window around the measured steps (both after a device sync);
    end_window returns the window's `WindowMeasurement`, and `summary()` its columns. Any part
    may be missing: columns stay empty."""

    def __init__(
        self,
        gpu: GpuBackend | None,
        cpu: RaplReader | None,
        interval_s: float = 0.1,
        log_path: Path | None = None,
        min_integral_s: float = MIN_INTEGRAL_WINDOW_S,
        facts: GpuFacts = PROCESS_GPU_FACTS,
        kept: KeptGpuFacts = NOTHING_KEPT,
    ) -> None:
        self.gpu, self.cpu = gpu, cpu
        self.min_integral_s = min_integral_s
        self.interval_s = interval_s
        self.log_path = log_path
        self.devices = list(range(len(gpu.device_names))) if gpu else []
        self.readings: list[Reading] = []
        self.sampler: Sampler | None = None
        self._t0 = self._t1 = 0.0
        self._energy0: list[float | None] = []
        self._energy1: list[float | None] = []
        self._steps: dict[int, list[tuple[float, float]]] = {}  # per device: (time, value)
        self.isolation = IsolationCheck()  # the job's PIDs: distribution.ranks sets them (DDP)
        self._cpu_j: float | None = None
        self.counter_period_s = None
        self.idle_power_w: float | None = None
        self.idle_power_age_s: float | None = None
        self.measurement = WindowMeasurement("", 0.0, None, None, None)
        self.facts, self.kept = facts, kept
        # time the energy counter's steps in the window (a poll every COUNTER_POLL_S): a short
        # window needs it; a serve load of seconds reads the counter at its edges alone
        self.time_counter_steps = True
        # which GPUs these are, as far as this process can tell (the key of its kept facts)
        names = gpu.device_names if gpu else []
        self._gpus = (type(gpu).__name__, getattr(gpu, "identity", None), *names)
        if gpu and self.devices:
            self.counter_period_s = facts.counter_period(self._gpus, self._counter_period)

    def _facts_key(self, *depends_on: object) -> str | None:
        """The cache folder's key for these GPUs' facts (None: the backend cannot name them)."""
        key = getattr(self.gpu, "facts_key", None)
        named = key() if key else None
        return None if named is None else " ".join(map(str, (named, *depends_on)))

    def _counter_period(self) -> float | None:
        """The counter's period kept in the cache folder for these GPUs, else measured (and
        kept)."""
        key = self._facts_key()
        period = self.kept.counter_period(key)
        if period is None:
            period = counter_update_period(lambda: self.gpu.energy_j(0))
            self.kept.keep_counter_period(key, period)
        return period

    def _idle_key(self) -> str | None:
        limits = [self.gpu.power_limit_w(d) for d in self.devices]
        return self._facts_key("limit", *limits)

    def measure_idle(self, seconds: float = IDLE_BASELINE_S) -> None:
        """Sample power for `seconds` while nothing runs (before warm-up): the idle baseline
        that energy above idle is counted from. A sample of the same GPUs taken within
        IDLE_REUSE_S is used again, its age recorded: this process's (a sweep worker's later
        points), else one kept in the cache folder at the same power limit (a later process)."""
        if not self.gpu:
            return
        kept = self.facts.idle_baseline(self._gpus, time.monotonic())
        if kept:
            self.idle_power_w, self.idle_power_age_s = kept
            return
        key = self._idle_key()
        stored = self.kept.idle_baseline(key, time.time())
        if stored:
            self.idle_power_w, self.idle_power_age_s = stored
            self.facts.idle_baselines[self._gpus] = (time.monotonic() - stored[1], stored[0])
            return
        readings = []
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            readings += [self.gpu.read(d, time.monotonic()).power_w for d in self.devices]
            time.sleep(self.interval_s)
        powers = [p for p in readings if p is not None]
        self.idle_power_w = statistics.fmean(powers) * len(self.devices) if powers else None
        if self.idle_power_w is not None:
            self.facts.idle_baselines[self._gpus] = (time.monotonic(), self.idle_power_w)
            self.kept.keep_idle_baseline(key, time.time(), self.idle_power_w)
            self.idle_power_age_s = 0.0

    def begin_window(self) -> None:
        """Start sampling, then read the counters last, the window's start time beside them;
        called right after the device synchronized."""
        self.readings, self._steps = [], {}
        self.isolation.reset()
        if self.gpu:
            self.isolation.check(self.gpu, self.devices)
            period = self.counter_period_s if self.time_counter_steps else None
            self.sampler = Sampler(self.gpu, self.devices, self.interval_s, period)
            self.sampler.start()
        if self.cpu:
            self.cpu.begin()
        if self.gpu:
            self._energy0 = [self.gpu.energy_j(d) for d in self.devices]
        self._t0 = time.monotonic()

    def end_window(self) -> WindowMeasurement:
        """Read the counters first, the window's end time beside them, then stop sampling;
        called right after the closing synchronize. The window's measurement, also kept."""
        self._t1 = time.monotonic()
        if self.gpu:
            self._energy1 = [self.gpu.energy_j(d) for d in self.devices]
        if self.cpu:
            self._cpu_j = self.cpu.end_j()
        if self.sampler:
            self.readings, self._steps = self.sampler.stop()
            self.isolation.check(self.gpu, self.devices)
        if self.log_path and self.readings:
            write_log(self.log_path, self.readings)
        self.measurement = self._measure()
        return self.measurement

    def _counter_j(self) -> float | None:
        pairs = list(zip(self._energy0, self._energy1))
        if not pairs or any(a is None or b is None for a, b in pairs):
            return None
        return sum(b - a for a, b in pairs)

    def _timed_j(self) -> float | None:
        """The counters' timed steps, summed over the devices; None unless every device's
        steps span TIMED_PERIODS periods inside the window."""
        if self.counter_period_s is None or not self._steps:
            return None
        span = TIMED_PERIODS * self.counter_period_s
        each = [
            timed_counter_j(self._steps.get(d, []), self._t0, self._t1, span) for d in self.devices
        ]
        return None if any(e is None for e in each) else sum(each)

    def _measure(self) -> WindowMeasurement:
        if not self.gpu or not self.readings:
            return WindowMeasurement("", self._t1 - self._t0, None, None, self._cpu_j)
        window_s = self._t1 - self._t0
        bases = {d: self.gpu.base_sm_clock_mhz(d) for d in self.devices}
        limits = {self.gpu.power_limit_w(d) for d in self.devices}
        low = [
            below_base_pct([r for r in self.readings if r.device == d], bases[d])
            for d in self.devices
        ]
        energy = Energy.of(
            self.gpu.name,
            self._counter_j(),
            self._timed_j(),
            power_integral_j(self.readings, self.devices),
            window_s,
            self.counter_period_s,
            self.min_integral_s,
        )
        one = len(self.devices) == 1  # a description is of one GPU (each rank watches its own)
        return WindowMeasurement(
            backend=self.gpu.name,
            window_s=window_s,
            energy=energy,
            samples=Samples.of(self.readings),
            cpu_energy_j=self._cpu_j,
            power_limit_w=limits.pop() if len(limits) == 1 else None,  # one, or none common
            sm_clock_base_mhz=min((b for b in bases.values() if b), default=None),
            sm_clock_below_base_pct=max((p for p in low if p is not None), default=None),
            idle_power_w=self.idle_power_w,
            idle_power_age_s=self.idle_power_age_s,
            gpu_processes_hidden=self.isolation.hidden,
            other_gpu_processes=self.isolation.most,
            other_gpu_process_list=self.isolation.named(),
            device=self.gpu.describe(0) if hasattr(self.gpu, "describe") and one else {},
        )

    def summary(self) -> dict[str, object]:
        """Telemetry columns for the row, from the last window; empty when nothing was read."""
        return self.measurement.columns()

    def close(self) -> None:
        if self.gpu:
            self.gpu.close()


def open_monitor(
    device: torch.device,
    interval_s: float,
    log_path: Path | None,
    index: int | None = None,
    cache: Path | None = None,
) -> TelemetryMonitor:
    """Pick the backend for the device; what cannot be opened becomes one warning, not a failure.
    `index` is the GPU to watch (default: the device's own); each DDP rank passes its own.
    `cache`: the cache folder that keeps the GPU's facts between processes (None: nothing)."""
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
    return TelemetryMonitor(gpu, cpu, interval_s, log_path, kept=KeptGpuFacts(cache))
