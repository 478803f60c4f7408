"""Power limits for sweeps: set, wait to settle, and always restore the original limits.

Only used with --allow-power-changes. The original limit of every GPU is read before the first
change and written back on every exit path of the sweep process (normal end, exception, SIGTERM,
SIGINT; a crashed child does not matter, since the sweep process owns the limits)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from types import ModuleType

from dlbench.console import stderr
from dlbench.errors import UserError
from dlbench.telemetry.nvml import load_pynvml, visible_nvml_indices

CAP_SYS_ADMIN = 21


def has_admin_rights(
    status_file: Path = Path("/proc/self/status"), euid: int | None = None
) -> bool:
    """Root, or CAP_SYS_ADMIN in the effective capability set (containers grant it per run)."""
    if (os.geteuid() if euid is None else euid) == 0:
        return True
    try:
        for line in status_file.read_text().splitlines():
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> CAP_SYS_ADMIN & 1)
    except OSError:
        pass
    return False


class PowerLimiter:
    """Context manager over the GPUs a sweep uses; `apply(watts)` clamps and sets each one."""

    def __init__(
        self,
        gpu_count: int,
        settle_s: float = 10.0,
        nvml: ModuleType | None = None,
        admin: bool | None = None,
    ) -> None:
        if not (has_admin_rights() if admin is None else admin):
            raise UserError(
                "--allow-power-changes: setting power limits needs root or CAP_SYS_ADMIN "
                "(docker run --cap-add SYS_ADMIN); the sweep did not start"
            )
        self.nvml = nvml or load_pynvml()
        self.nvml.nvmlInit()
        ids = visible_nvml_indices(gpu_count, os.environ.get("CUDA_VISIBLE_DEVICES"))
        self.handles = [
            self.nvml.nvmlDeviceGetHandleByIndex(i)
            if isinstance(i, int)
            else self.nvml.nvmlDeviceGetHandleByUUID(i)
            for i in ids
        ]
        self.settle_s = settle_s
        self.original_mw = [self.nvml.nvmlDeviceGetPowerManagementLimit(h) for h in self.handles]
        self.current_w: float | None = None

    def clamp_mw(self, handle, watts: float) -> int:
        """Watts to milliwatts inside the GPU's allowed range."""
        low, high = self.nvml.nvmlDeviceGetPowerManagementLimitConstraints(handle)
        return int(min(max(watts * 1000, low), high))

    def apply(self, watts: float | None) -> float | None:
        """Set every GPU to `watts` (None: the originals), wait to settle; the limit set, in W."""
        if watts == self.current_w:
            return watts
        try:
            for handle, original in zip(self.handles, self.original_mw):
                target = original if watts is None else self.clamp_mw(handle, watts)
                self.nvml.nvmlDeviceSetPowerManagementLimit(handle, target)
        except self.nvml.NVMLError as exc:
            raise UserError(f"--allow-power-changes: NVML refused the limit: {exc}") from exc
        self.current_w = watts
        if watts is not None:
            time.sleep(self.settle_s)
        return watts

    def restore(self) -> None:
        """Write every original limit back; report, never raise, so every GPU gets its turn."""
        for handle, original in zip(self.handles, self.original_mw):
            try:
                self.nvml.nvmlDeviceSetPowerManagementLimit(handle, original)
            except Exception as exc:
                stderr.print(f"[red]error:[/red] could not restore a GPU's power limit: {exc}")
        self.current_w = None

    def __enter__(self) -> PowerLimiter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.restore()
        self.nvml.nvmlShutdown()
