"""NVIDIA GPUs through NVML (nvidia-ml-py), mapped to torch devices by UUID."""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from dlbench.plugins import load_plugins
from dlbench.telemetry.base import GpuProcess, Reading

# Plugins may provide a module with pynvml's interface (a fake NVML for machines without an
# NVIDIA GPU, say): the first provider that returns one is used in place of pynvml.
_PROVIDERS: list[Callable[[], ModuleType | None]] = []


def register_nvml_provider(provider: Callable[[], ModuleType | None]) -> None:
    """Add a provider of a pynvml-like module (a plugin hook; see dlbench.plugins)."""
    _PROVIDERS.append(provider)


def provided_nvml() -> ModuleType | None:
    """The module a registered provider offers now, if any."""
    load_plugins()
    return next((m for m in (p() for p in _PROVIDERS) if m is not None), None)


def load_pynvml() -> ModuleType:
    """A provided pynvml-like module, else pynvml itself."""
    return provided_nvml() or importlib.import_module("pynvml")


def visible_nvml_indices(count: int, visible: str | None) -> list[str | int]:
    """NVML ids for torch devices 0..count-1 under CUDA_VISIBLE_DEVICES (indices or UUIDs)."""
    if not visible:
        return list(range(count))
    entries = [e.strip() for e in visible.split(",") if e.strip()]
    return [int(e) if e.isdigit() else e for e in entries[:count]]


class NvmlBackend:
    """Reads the GPUs that this run uses; `uuids` come from torch, so containers map right."""

    name = "nvml"

    def __init__(
        self,
        torch_indices: list[int],
        uuids: list[str] | None = None,
        nvml: ModuleType | None = None,
    ) -> None:
        self.nvml = nvml or load_pynvml()
        self.nvml.nvmlInit()
        if uuids:
            self.handles = [self.nvml.nvmlDeviceGetHandleByUUID(_nvml_uuid(u)) for u in uuids]
        else:
            ids = visible_nvml_indices(
                max(torch_indices) + 1, os.environ.get("CUDA_VISIBLE_DEVICES")
            )
            self.handles = [self._handle(ids[i]) for i in torch_indices]
        self.device_names = [_text(self.nvml.nvmlDeviceGetName(h)) for h in self.handles]
        self.identity = (id(self.nvml), *(uuids or torch_indices))  # which GPUs, in this process
        self._has_counter = [self._counter_mj(h) is not None for h in self.handles]

    def facts_key(self) -> str | None:
        """What a GPU's kept facts depend on (telemetry.gpu_facts.KeptGpuFacts): the driver and
        each GPU's UUID, in order; None where NVML cannot say."""
        driver = self._try(self.nvml.nvmlSystemGetDriverVersion)
        uuids = [self._try(self.nvml.nvmlDeviceGetUUID, h) for h in self.handles]
        if not driver or not all(uuids):
            return None
        return " ".join([f"driver {_text(driver)}", *map(_text, uuids)])

    def _handle(self, nvml_id: str | int):
        if isinstance(nvml_id, int):
            return self.nvml.nvmlDeviceGetHandleByIndex(nvml_id)
        return self.nvml.nvmlDeviceGetHandleByUUID(nvml_id)

    def _counter_mj(self, handle) -> float | None:
        try:
            return float(self.nvml.nvmlDeviceGetTotalEnergyConsumption(handle))
        except self.nvml.NVMLError:
            return None

    def _try(self, fn, *args):
        try:
            return fn(*args)
        except self.nvml.NVMLError:
            return None

    def read(self, device: int, t: float) -> Reading:
        """One sample; each query may fail alone (None) without losing the others."""
        n, h = self.nvml, self.handles[device]
        power = self._try(n.nvmlDeviceGetPowerUsage, h)
        util = self._try(n.nvmlDeviceGetUtilizationRates, h)
        memory = self._try(n.nvmlDeviceGetMemoryInfo, h)
        reasons = (
            getattr(n, "nvmlDeviceGetCurrentClocksEventReasons", None)
            or n.nvmlDeviceGetCurrentClocksThrottleReasons
        )
        jpeg_query = getattr(n, "nvmlDeviceGetJpgUtilization", None)  # newer NVML only
        jpeg = self._try(jpeg_query, h) if jpeg_query else None
        return Reading(
            t=t,
            device=device,
            power_w=power / 1000 if power is not None else None,
            temp_c=self._try(n.nvmlDeviceGetTemperature, h, n.NVML_TEMPERATURE_GPU),
            gpu_util=util.gpu if util else None,
            mem_util=util.memory if util else None,
            mem_used_mb=memory.used / 2**20 if memory else None,
            sm_clock_mhz=self._try(n.nvmlDeviceGetClockInfo, h, n.NVML_CLOCK_SM),
            mem_clock_mhz=self._try(n.nvmlDeviceGetClockInfo, h, n.NVML_CLOCK_MEM),
            throttle_bits=self._try(reasons, h) or 0,
            jpeg_util=float(jpeg[0]) if jpeg else None,
        )

    def energy_j(self, device: int) -> float | None:
        """Total energy since driver load (Volta and newer), in joules."""
        if not self._has_counter[device]:
            return None
        value = self._counter_mj(self.handles[device])
        return value / 1000 if value is not None else None

    def power_limit_w(self, device: int) -> float | None:
        limit = self._try(self.nvml.nvmlDeviceGetEnforcedPowerLimit, self.handles[device])
        return limit / 1000 if limit is not None else None

    def describe(self, device: int) -> dict[str, object]:
        """What makes two GPUs of one name differ: the link they sit on and whether their
        application clocks were moved from the default (locked)."""
        n, h = self.nvml, self.handles[device]
        generation = self._try(n.nvmlDeviceGetCurrPcieLinkGeneration, h)
        width = self._try(n.nvmlDeviceGetCurrPcieLinkWidth, h)
        clock = self._try(n.nvmlDeviceGetApplicationsClock, h, n.NVML_CLOCK_SM)
        base = self.base_sm_clock_mhz(device)
        return {
            "gpu_pcie_link": f"gen{generation} x{width}" if generation and width else "",
            "gpu_app_clocks_locked": None if not clock or not base else float(clock) != base,
        }

    def base_sm_clock_mhz(self, device: int) -> float | None:
        clock = self._try(
            self.nvml.nvmlDeviceGetDefaultApplicationsClock,
            self.handles[device],
            self.nvml.NVML_CLOCK_SM,
        )
        return float(clock) if clock else None

    def gpu_processes(self, device: int) -> list[GpuProcess]:
        """Every process with a compute context on the GPU: its PID as NVML gives it (the
        host's, seen from a container), its name and the device memory it holds."""
        procs = self._try(self.nvml.nvmlDeviceGetComputeRunningProcesses, self.handles[device])
        return [
            GpuProcess(p.pid, self._process_name(p.pid), _memory_mb(p.usedGpuMemory))
            for p in procs or []
        ]

    def _process_name(self, pid: int) -> str:
        try:
            return Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            name = self._try(getattr(self.nvml, "nvmlSystemGetProcessName", _no_name), pid)
            return Path(_text(name)).name if name else ""

    def close(self) -> None:
        self._try(self.nvml.nvmlShutdown)


def _memory_mb(used: int | None) -> float | None:
    """NVML's bytes (None where it cannot say, as inside some containers) in MiB."""
    return used / 2**20 if isinstance(used, int) and used >= 0 else None


def _no_name(pid: int) -> str:
    return ""


def _nvml_uuid(torch_uuid: str) -> str:
    text = str(torch_uuid)
    return text if text.startswith("GPU-") else f"GPU-{text}"


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value
