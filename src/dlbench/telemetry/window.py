"""What the hardware did in one measured window, as a typed measurement (`end_window()` returns
it): the energy with where it came from and whether the window was long enough to trust it,
power, clocks, heat and throttling from the samples; `columns()` is its part of the row."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise

from dlbench.config.limits import CLOCK_MARGIN_PCT
from dlbench.telemetry.base import Reading, throttle_names

# A counter read at the window's edges can be off by one update period at each: the window
# lasts this many periods at least (docs/decisions.md#energy-window).
COUNTER_PERIODS = 40
# A counter whose steps were timed inside the window is off by the timing, not by a period: its
# first and last step inside the window are at least this many periods apart.
TIMED_PERIODS = 10
# NVML's default application clock is the boost clock on Hopper: a GPU under it at its power
# cap, or idling, is where it should be; under it with neither, it is not.
_EXPLAINED = 0x1 | 0x4  # gpu_idle, sw_power_cap
TIMED_SUFFIX = "_counter_timed"


def energy_quality(
    window_s: float, source: str, counter_period_s: float | None, min_integral_s: float
) -> str:
    """'ok', or why the window is too short for the energy source to be trusted."""
    if source == "power_integral":
        needed = min_integral_s
    elif counter_period_s is not None:
        periods = TIMED_PERIODS if source.endswith(TIMED_SUFFIX) else COUNTER_PERIODS
        needed = periods * counter_period_s
    else:
        return "ok"
    if window_s >= needed:
        return "ok"
    return f"short window: {window_s:.2f} s < {needed:.2f} s needed by {source} (use --min-time)"


def timed_counter_j(
    steps: Sequence[tuple[float, float]], t0: float, t1: float, min_span_s: float
) -> float | None:
    """The window's energy from a stepping counter's steps timed inside [t0, t1] (time, value
    just after each step): the energy between its first and last step there, scaled to the
    window. The GPU was as busy just outside the window (the warm-up runs up to it), so the
    scale costs less than a whole period at each edge would. None where the steps inside span
    less than `min_span_s`."""
    inside = [(t, e) for t, e in steps if t0 <= t <= t1]
    if len(inside) < 2:
        return None
    (ta, ea), (tb, eb) = inside[0], inside[-1]
    if tb - ta < min_span_s or tb <= ta:
        return None
    return (eb - ea) * (t1 - t0) / (tb - ta)


@dataclass(frozen=True)
class Energy:
    """The window's GPU energy: the board's counter where it has one (its steps timed inside
    the window where the sampler saw enough of them, else its delta between the edges), else
    sampled power integrated; `quality` says whether the window was long enough to trust it."""

    counter_j: float | None  # the counter's delta between the window's edges
    timed_j: float | None  # from the counter's steps timed inside the window
    integral_j: float | None
    source: str  # "<backend>_counter_timed", "<backend>_counter", "power_integral" or ""
    quality: str  # "ok", why not, or "" (no energy)
    counter_period_s: float | None

    @classmethod
    def of(
        cls,
        backend: str,
        counter_j: float | None,
        timed_j: float | None,
        integral_j: float | None,
        window_s: float,
        counter_period_s: float | None,
        min_integral_s: float,
    ) -> Energy:
        """The timed counter where there is one, else the counter's delta, else the integral."""
        if timed_j is not None:
            source = f"{backend}{TIMED_SUFFIX}"
        elif counter_j is not None:
            source = f"{backend}_counter"
        else:
            source = "power_integral" if integral_j is not None else ""
        quality = ""
        if source:
            quality = energy_quality(window_s, source, counter_period_s, min_integral_s)
        return cls(counter_j, timed_j, integral_j, source, quality, counter_period_s)

    @property
    def trusted_j(self) -> float | None:
        """The energy, where the window was long enough for its source; else None."""
        if self.quality != "ok":
            return None
        if self.timed_j is not None:
            return self.timed_j
        return self.counter_j if self.counter_j is not None else self.integral_j


@dataclass(frozen=True)
class Samples:
    """What the sampler saw over the window, reduced: maxima, means and shares."""

    count: int
    peak_power_w: float | None
    temp_max_c: float | None
    gpu_util_avg: float | None
    mem_util_avg: float | None
    mem_used_max_mb: float | None
    sm_clock_avg_mhz: float | None
    sm_clock_min_mhz: float | None
    mem_clock_avg_mhz: float | None
    jpeg_decoder_busy_pct: float | None
    throttle_pct: float
    throttle_reasons: str

    @classmethod
    def of(cls, readings: Sequence[Reading]) -> Samples:
        def values(name: str) -> list[float]:
            return [getattr(r, name) for r in readings if getattr(r, name) is not None]

        power_by_time: dict[float, float] = {}
        for r in readings:  # all the run's GPUs at one instant, summed
            power_by_time[r.t] = power_by_time.get(r.t, 0.0) + (r.power_w or 0.0)
        throttled = [r for r in readings if throttle_names(r.throttle_bits)]
        sm = values("sm_clock_mhz")
        return cls(
            count=len(readings),
            peak_power_w=max(power_by_time.values()) if power_by_time else None,
            temp_max_c=max(values("temp_c"), default=None),
            gpu_util_avg=_mean(values("gpu_util")),
            mem_util_avg=_mean(values("mem_util")),
            mem_used_max_mb=max(values("mem_used_mb"), default=None),
            sm_clock_avg_mhz=_mean(sm),
            sm_clock_min_mhz=min(sm, default=None),
            mem_clock_avg_mhz=_mean(values("mem_clock_mhz")),
            jpeg_decoder_busy_pct=_mean(values("jpeg_util")),
            throttle_pct=100.0 * len(throttled) / len(readings) if readings else 0.0,
            throttle_reasons=" ".join(
                sorted({n for r in throttled for n in throttle_names(r.throttle_bits)})
            ),
        )


@dataclass(frozen=True)
class WindowMeasurement:
    """One window on the run's GPUs (and the CPU package, where RAPL reads)."""

    backend: str  # "" where no GPU telemetry was read
    window_s: float
    energy: Energy | None
    samples: Samples | None
    cpu_energy_j: float | None
    power_limit_w: float | None = None
    sm_clock_base_mhz: float | None = None
    sm_clock_below_base_pct: float | None = None
    idle_power_w: float | None = None
    idle_power_age_s: float | None = None
    gpu_processes_hidden: bool = False
    other_gpu_processes: int = 0
    other_gpu_process_list: str = ""
    device: dict[str, object] = field(default_factory=dict)  # the backend's own description

    def columns(self) -> dict[str, object]:
        """The row's telemetry columns; only cpu_energy_j where no GPU sample was taken."""
        row: dict[str, object] = {"cpu_energy_j": self.cpu_energy_j}
        if self.samples is None or self.energy is None:
            return row
        energy, samples, trusted = self.energy, self.samples, self.energy.trusted_j
        row.update(
            telemetry_backend=self.backend,
            telemetry_samples=samples.count,
            telemetry_window_s=self.window_s,
            energy_j=trusted,
            energy_source=energy.source,
            energy_quality=energy.quality,
            energy_counter_j=energy.counter_j,
            energy_counter_period_s=energy.counter_period_s,
            energy_integral_j=energy.integral_j,
            avg_power_w=trusted / self.window_s if trusted is not None and self.window_s else None,
            peak_power_w=samples.peak_power_w,
            power_limit_w=self.power_limit_w,
            temp_max_c=samples.temp_max_c,
            gpu_util_avg=samples.gpu_util_avg,
            mem_util_avg=samples.mem_util_avg,
            mem_used_max_mb=samples.mem_used_max_mb,
            sm_clock_avg_mhz=samples.sm_clock_avg_mhz,
            sm_clock_min_mhz=samples.sm_clock_min_mhz,
            sm_clock_base_mhz=self.sm_clock_base_mhz,
            sm_clock_below_base_pct=self.sm_clock_below_base_pct,
            idle_power_w=self.idle_power_w,
            idle_power_age_s=self.idle_power_age_s,
            energy_scope="gpu_board" + ("+cpu_package" if self.cpu_energy_j is not None else ""),
            gpu_processes_hidden=self.gpu_processes_hidden,
            **self.device,
            mem_clock_avg_mhz=samples.mem_clock_avg_mhz,
            jpeg_decoder_busy_pct=samples.jpeg_decoder_busy_pct,
            throttle_pct=samples.throttle_pct,
            throttle_reasons=samples.throttle_reasons,
            other_gpu_processes=self.other_gpu_processes,
            other_gpu_process_list=self.other_gpu_process_list,
        )
        return row


def power_integral_j(readings: Sequence[Reading], devices: Sequence[int]) -> float | None:
    """Trapezoid over sampled power, per device, summed; None where a device has too few."""
    total = 0.0
    for d in devices:
        points = [(r.t, r.power_w) for r in readings if r.device == d and r.power_w]
        if len(points) < 2:
            return None
        total += sum((t2 - t1) * (p1 + p2) / 2 for (t1, p1), (t2, p2) in pairwise(points))
    return total


def below_base_pct(readings: Sequence[Reading], base: float | None) -> float | None:
    """% of samples with the SM clock more than CLOCK_MARGIN_PCT under `base` that neither
    idling nor the power cap explains."""
    clocked = [r for r in readings if r.sm_clock_mhz is not None]
    if not base or not clocked:
        return None
    floor = base * (1 - CLOCK_MARGIN_PCT / 100)
    low = [r for r in clocked if r.sm_clock_mhz < floor and not r.throttle_bits & _EXPLAINED]
    return 100.0 * len(low) / len(clocked)


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None
