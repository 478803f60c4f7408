"""The columns of a `dlbench peak` row (run_kind=peak) beyond those every row has: what one
device attained, beside its datasheet and its siblings (results.schema lists them last)."""

from __future__ import annotations

PEAK_COLUMNS: dict[str, str] = {
    "gpu_index": "peak: the GPU's index on its host",
    "attained_fp32_tflops": "peak: dense fp32 matmul (no TF32), best shape found",
    "attained_tf32_tflops": "peak: fp32 matmul on TF32 tensor cores, best shape found",
    "attained_fp16_tflops": "peak: dense fp16 matmul, best shape found",
    "attained_bf16_tflops": "peak: dense bf16 matmul, best shape found (what mfu_attained "
    "divides by for bf16 rows)",
    "attained_bf16_sustained_tflops": "peak: the best bf16 shape again over seconds, at the clocks "
    "a long GEMM settles to under the power cap (the fleet check's and MFU's figure is the "
    "best rate measured)",
    "attained_fp8_tflops": "peak: e4m3 matmul (torch._scaled_mm, bf16 out) where the GPU has FP8",
    "attained_matmul_shapes": "peak: the m x n x k that attained each dtype's figure",
    "attained_read_tb_s": "peak: device memory read (a sum over a buffer of GBs)",
    "attained_copy_tb_s": "peak: device memory copy, bytes read plus bytes written",
    "attained_h2d_gb_s": "peak: pinned host memory to the GPU",
    "attained_d2h_gb_s": "peak: the GPU to pinned host memory",
    "attained_p2p_gb_s": "peak: a copy from this GPU to another of the host (NVLink or PCIe), "
    "median over its peers; empty with one GPU",
    "attained_p2p_min_gb_s": "peak: the slowest of those copies (the weakest link)",
    "attained_p2p_pairs": "peak: GB/s to each peer, as PEER:GB/s (peer = GPU index)",
    "peak_shapes_tried": "peak: candidate shapes and buffer sizes timed within --max-time",
    "attained_bf16_datasheet_share": "peak: attained_bf16_tflops over the datasheet's dense bf16",
    "attained_read_datasheet_share": "peak: attained_read_tb_s over the datasheet's bandwidth",
    "attained_datasheet_share_max": "peak: the highest share of its datasheet of any matmul dtype, "
    "memory read or copy; over 1 no GPU attains (verdict above_datasheet, never a recorded peak)",
    "siblings": "peak: GPUs of the same model compared in the fleet check",
    "siblings_share": "peak: the lowest share of the siblings' median over bf16 matmul and "
    "memory read (results.peaks.siblings); empty with no sibling",
    "siblings_low": "peak: the figure siblings_share was lowest on",
}
