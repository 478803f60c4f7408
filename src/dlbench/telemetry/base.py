"""The one interface every GPU telemetry backend implements, and what one reading holds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

# NVML clock-event reason bits that mean the GPU ran slower than it could.
THROTTLE_REASONS = {
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x20: "sw_thermal",
    0x40: "hw_thermal",
    0x80: "hw_power_brake",
}


@dataclass(frozen=True)
class Reading:
    """One sample of one GPU; None where the backend cannot read a value."""

    t: float
    device: int
    power_w: float | None
    temp_c: float | None
    gpu_util: float | None
    mem_util: float | None
    mem_used_mb: float | None
    sm_clock_mhz: float | None
    mem_clock_mhz: float | None
    throttle_bits: int = 0
    jpeg_util: float | None = None  # the hardware JPEG decoders' busy share (NVJPG), in %


@dataclass(frozen=True)
class GpuProcess:
    """A process that holds a context on a GPU, as the driver lists it."""

    pid: int
    name: str = ""
    memory_mb: float | None = None

    def describe(self) -> str:
        """`PID NAME MEMORY`, for a row that names who else used the GPU."""
        memory = "" if self.memory_mb is None else f" {self.memory_mb:.0f} MiB"
        return f"{self.pid} {self.name or '?'}{memory}"


class GpuBackend(Protocol):
    """NVML, amdsmi or a fake: read one GPU (by position in this run's device list)."""

    name: str
    device_names: list[str]

    def read(self, device: int, t: float) -> Reading: ...

    def energy_j(self, device: int) -> float | None:
        """The GPU's cumulative energy counter in joules, or None if it has none."""
        ...

    def power_limit_w(self, device: int) -> float | None: ...

    def base_sm_clock_mhz(self, device: int) -> float | None:
        """The SM clock the GPU guarantees (its default application clock), if known."""
        ...

    def gpu_processes(self, device: int) -> list[GpuProcess]:
        """Every process with a context on the GPU, this one included."""
        ...

    def close(self) -> None: ...


def throttle_names(bits: int) -> list[str]:
    """Names of the slowdown reasons set in an NVML clock-event bitmask."""
    return [name for bit, name in THROTTLE_REASONS.items() if bits & bit]
