"""How close a run came to the GPU's limits: model FLOPs utilisation (achieved FLOP/s over the
dense peak) for steps, and for decode the bytes a step must read over its time against the
peak memory bandwidth (decode at small batch is bound by memory, not FLOPs)."""

from __future__ import annotations

import math

from dlbench.engine.plan import Plan
from dlbench.hardware import peak_bandwidth_tb_s, peak_tflops
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


def bandwidth_columns(
    bytes_per_step: float, kv_bytes_per_token: int, itl_mean_s: float | None, gpu_name: str
) -> dict[str, object]:
    """Achieved TB/s of the decode steps and its share of the peak; the share is empty for a
    GPU not in the table (and for the CPU)."""
    row: dict[str, object] = {
        "decode_bytes_per_step": bytes_per_step,
        "kv_cache_bytes_per_token": kv_bytes_per_token,
    }
    if not itl_mean_s:
        return row
    achieved = bytes_per_step / itl_mean_s / 1e12
    row["decode_hbm_tb_s"] = achieved
    peak = peak_bandwidth_tb_s(gpu_name) if gpu_name else None
    if peak:
        row.update(peak_hbm_tb_s=peak, hbm_bandwidth_share=achieved / peak)
    return row


def energy_columns(
    telemetry: dict, energy_all_ranks: float, plan: Plan, steps: int, scenario: dict
) -> dict:
    """Telemetry columns, with energy summed over every rank's GPU and divided per sample
    (and per token: generated tokens for generation, sequence tokens otherwise)."""
    if math.isnan(energy_all_ranks):
        return telemetry
    samples = plan.config.batch_size * steps * plan.devices.world_size
    columns = {**telemetry, "energy_j": energy_all_ranks}
    columns["energy_per_sample_j"] = energy_all_ranks / samples
    idle, window = telemetry.get("idle_power_w"), telemetry.get("telemetry_window_s")
    if idle is not None and window:  # every GPU taken to idle as rank 0's does
        above = energy_all_ranks - idle * window * plan.devices.world_size
        columns.update(energy_above_idle_j=above, energy_above_idle_per_sample_j=above / samples)
    tokens = scenario.get("new_tokens") or plan.workload.tokens_per_sample(plan.shape)
    if tokens:
        columns["energy_per_token_j"] = energy_all_ranks / (samples * tokens)
    return columns
