"""How close a run came to the GPU's limits: model FLOPs utilisation (achieved FLOP/s over the
dense peak) for steps, and for decode the bytes a step must read over its time against the
peak memory bandwidth (decode at small batch is bound by memory, not FLOPs)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from dlbench.hardware import peak_bandwidth_tb_s, peak_tflops, precision_field


class FlopsPerSample(Protocol):
    """A sample's FLOPs and how they were counted (workloads.flops.FlopCount)."""

    per_sample: float
    method: str


def mixed_peak(fp8_share: float, fp8_peak: float, bf16_peak: float) -> float:
    """The peak of a mix of FLOPs: `fp8_share` of them at `fp8_peak`, the rest at `bf16_peak`
    (each share in the time its own peak would take)."""
    return 1.0 / (fp8_share / fp8_peak + (1.0 - fp8_share) / bf16_peak)


def mfu_columns(
    flops: FlopsPerSample | None,
    samples_per_s_per_device: float,
    gpu_name: str,
    precision: str,
    fp8_flops_per_sample: float | None = None,
) -> dict[str, object]:
    """FLOPs per sample, achieved TFLOP/s and MFU; MFU is empty for an unknown GPU. `mfu`
    divides by the peak of what ran: an fp8 row's FP8 share of the FLOPs by the FP8 peak, the
    rest by the bf16 one (`mixed_peak`); `mfu_bf16` divides all of them by the bf16 peak, as
    torchtitan reports FP8 runs, so rows of both precisions compare."""
    if flops is None:
        return {}
    achieved = flops.per_sample * samples_per_s_per_device / 1e12
    row: dict[str, object] = {
        "flops_per_sample": flops.per_sample,
        "flops_method": flops.method,
        "achieved_tflops": achieved,
    }
    bf16 = peak_tflops(gpu_name, "bf16-mixed") if gpu_name else None
    if bf16:
        row["mfu_bf16"] = achieved / bf16[0]
    if precision == "fp8":
        share = None
        if fp8_flops_per_sample is not None and flops.per_sample > 0:
            share = min(fp8_flops_per_sample / flops.per_sample, 1.0)
            row["fp8_flops_share"] = share
        fp8 = peak_tflops(gpu_name, "fp8") if gpu_name else None
        if share is not None and fp8 and bf16:
            peak = mixed_peak(share, fp8[0], bf16[0])
            row.update(peak_tflops=peak, peak_source=fp8[1], mfu=achieved / peak)
        return row
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


def attained_columns(
    row: Mapping[str, object], precision: str, peaks: Mapping[str, object] | None
) -> dict[str, object]:
    """MFU and decode's bandwidth share against what this GPU attained (`dlbench peak`, the
    latest figures for its UUID and software), beside the datasheet's; empty without them."""
    if not peaks:
        return {}
    out: dict[str, object] = {"attained_peak_run_id": peaks.get("run_id")}
    achieved, attained = row.get("achieved_tflops"), peaks.get(precision_field(precision))
    if precision == "fp8":  # the mix of what ran, against what this GPU attains of each
        share, bf16 = row.get("fp8_flops_share"), peaks.get("bf16")
        ok = all(isinstance(v, float) and v > 0 for v in (attained, bf16)) and share is not None
        attained = mixed_peak(float(share), attained, bf16) if ok else None  # type: ignore[arg-type]
    # a run above what the GPU "attains" shows the record wrong, not a share above 1
    if isinstance(achieved, float) and isinstance(attained, float) and attained >= achieved:
        out.update(attained_tflops=attained, mfu_attained=achieved / attained)
    decode, read = row.get("decode_hbm_tb_s"), peaks.get("read_tb_s")
    if isinstance(decode, float) and isinstance(read, float) and read >= decode:
        out.update(attained_hbm_tb_s=read, hbm_bandwidth_share_attained=decode / read)
    return out


def energy_columns(telemetry: dict, samples: int, tokens_per_sample: int | None) -> dict:
    """Telemetry columns (the job's: every rank's GPU summed, results.job), with the energy
    divided per sample of the window (every rank's), per token where a sample has tokens
    (generated tokens for generation, sequence tokens otherwise), and above the GPUs' own
    idle power."""
    energy = telemetry.get("energy_j")
    if not isinstance(energy, float):
        return telemetry
    columns = {**telemetry, "energy_per_sample_j": energy / samples}
    idle, window = telemetry.get("idle_power_w"), telemetry.get("telemetry_window_s")
    if isinstance(idle, float) and window:
        above = energy - idle * window
        columns.update(energy_above_idle_j=above, energy_above_idle_per_sample_j=above / samples)
    if tokens_per_sample:
        columns["energy_per_token_j"] = energy / (samples * tokens_per_sample)
    return columns
