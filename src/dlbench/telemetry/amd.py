"""AMD GPUs through amdsmi (ROCm), behind the same interface as NVML."""

from __future__ import annotations

import importlib
from types import ModuleType

from dlbench.errors import number_or_none
from dlbench.telemetry.base import GpuProcess, Reading


class AmdSmiBackend:
    """Reads the ROCm GPUs this run uses, by position (HIP_VISIBLE_DEVICES is applied by torch)."""

    name = "amdsmi"

    def __init__(self, torch_indices: list[int], amdsmi: ModuleType | None = None) -> None:
        self.smi = amdsmi or importlib.import_module("amdsmi")
        self.smi.amdsmi_init()
        every = self.smi.amdsmi_get_processor_handles()
        self.handles = [every[i] for i in torch_indices]
        self.device_names = [
            str(self._try(self.smi.amdsmi_get_gpu_board_info, h, default={}).get("product_name"))
            for h in self.handles
        ]

    def _try(self, fn, *args, default=None):
        try:
            return fn(*args)
        except Exception:
            return default

    def _power_w(self, handle) -> float | None:
        info = self._try(self.smi.amdsmi_get_power_info, handle, default={})
        for key in ("socket_power", "current_socket_power", "average_socket_power"):
            if number_or_none(info.get(key)) is not None:
                return number_or_none(info[key])
        return None

    def read(self, device: int, t: float) -> Reading:
        smi, h = self.smi, self.handles[device]
        activity = self._try(smi.amdsmi_get_gpu_activity, h, default={})
        vram = self._try(smi.amdsmi_get_gpu_vram_usage, h, default={})
        temp = self._try(
            smi.amdsmi_get_temp_metric,
            h,
            smi.AmdSmiTemperatureType.HOTSPOT,
            smi.AmdSmiTemperatureMetric.CURRENT,
        )
        sm_clock = self._try(smi.amdsmi_get_clock_info, h, smi.AmdSmiClkType.GFX, default={})
        mem_clock = self._try(smi.amdsmi_get_clock_info, h, smi.AmdSmiClkType.MEM, default={})
        return Reading(
            t=t,
            device=device,
            power_w=self._power_w(h),
            temp_c=number_or_none(temp),
            gpu_util=number_or_none(activity.get("gfx_activity")),
            mem_util=number_or_none(activity.get("umc_activity")),
            mem_used_mb=number_or_none(vram.get("vram_used")),
            sm_clock_mhz=number_or_none(sm_clock.get("clk")),
            mem_clock_mhz=number_or_none(mem_clock.get("clk")),
        )

    def energy_j(self, device: int) -> float | None:
        """Energy accumulator x resolution (microjoules), in joules."""
        count = self._try(self.smi.amdsmi_get_energy_count, self.handles[device], default={})
        ticks = number_or_none(count.get("energy_accumulator", count.get("power")))
        resolution = number_or_none(count.get("counter_resolution"))
        return ticks * resolution / 1e6 if ticks is not None and resolution else None

    def power_limit_w(self, device: int) -> float | None:
        info = self._try(self.smi.amdsmi_get_power_info, self.handles[device], default={})
        return number_or_none(info.get("power_limit"))

    def base_sm_clock_mhz(self, device: int) -> float | None:
        return None

    def gpu_processes(self, device: int) -> list[GpuProcess]:
        """The GPU's processes as amdsmi lists them (PID, name and VRAM where it says)."""
        h = self.handles[device]
        found = []
        for proc in self._try(self.smi.amdsmi_get_gpu_process_list, h, default=[]) or []:
            query = getattr(self.smi, "amdsmi_get_gpu_process_info", None)
            info = self._try(query, h, proc) if query else None
            info = info if isinstance(info, dict) else proc if isinstance(proc, dict) else {}
            memory = number_or_none((info.get("memory_usage") or {}).get("vram_mem"))
            pid = info.get("pid")
            found.append(
                GpuProcess(
                    int(pid) if isinstance(pid, int) else -1,
                    str(info.get("name") or ""),
                    memory / 2**20 if memory is not None else None,
                )
            )
        return found

    def close(self) -> None:
        self._try(self.smi.amdsmi_shut_down)
