"""Model FLOPs utilisation: achieved FLOP/s per device over the GPU's dense peak."""

from __future__ import annotations

from dlbench.hardware import peak_tflops
from dlbench.workloads.flops import FlopCount


def mfu_columns(
    flops: FlopCount | None, samples_per_s_per_device: float, gpu_name: str, precision: str
) -> dict[str, object]:
    """FLOPs per sample, achieved TFLOP/s and MFU; MFU is empty for an unknown GPU."""
    if flops is None:
        return {}
    achieved = flops.per_sample * samples_per_s_per_device / 1e12
    row: dict[str, object] = {
        "flops_per_sample": flops.per_sample,
        "flops_method": flops.method,
        "achieved_tflops": achieved,
    }
    peak = peak_tflops(gpu_name, precision) if gpu_name else None
    if peak:
        row.update(peak_tflops=peak[0], peak_source=peak[1], mfu=achieved / peak[0])
    return row
