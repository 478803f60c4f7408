"""The columns of how close a run came to the GPU's limits (results.efficiency): FLOPs, MFU against
the datasheet and against what the GPU attained, and what of them ran in FP8."""

from __future__ import annotations

EFFICIENCY_COLUMNS: dict[str, str] = {
    "flops_per_sample": "FLOPs of one sample (forward, + backward when training)",
    "flops_method": "flop_counter (torch, real model and shape) or analytic_palm (LLMs)",
    "achieved_tflops": "flops_per_sample x samples/s per device / 1e12",
    "peak_tflops": "dense peak of the GPU at this precision (dlbench.hardware)",
    "peak_source": "where the peak figure comes from",
    "mfu": "achieved_tflops / peak_tflops; empty for GPUs not in the table. fp8: peak_tflops is "
    "the peak of the mix that ran, fp8_flops_share of the FLOPs at the FP8 datasheet peak and "
    "the rest at bf16's (1 / (share / fp8 + (1 - share) / bf16))",
    "mfu_bf16": "achieved_tflops / the GPU's dense bf16 peak, whatever ran (torchtitan's MFU of "
    "FP8 runs): rows of every precision compare on it",
    "fp8_linear_layers": "fp8: Linear layers that ran in float8 (both dimensions multiples of "
    "16, not the output head)",
    "fp8_flops_per_sample": "fp8: FLOPs of one sample in float8 GEMMs (those layers' forward, "
    "and in training the backward GEMMs the recipe runs in float8)",
    "fp8_flops_share": "fp8: fp8_flops_per_sample / flops_per_sample",
    "attained_tflops": "the dense matmul rate this GPU attained at this precision's dtype, "
    "from the latest dlbench peak row of the same GPU (by UUID) and software; empty without one",
    "mfu_attained": "achieved_tflops / attained_tflops: MFU against what this GPU was measured "
    "to attain, beside mfu (against the datasheet); fp8: the mix's peak from the attained fp8 "
    "and bf16 figures",
    "attained_peak_run_id": "run_id of the dlbench peak row that attained_* came from",
}
