"""The columns of an LLM generation row (results.schema lists them in its order): the prompt and
the tokens generated, the path the steps ran, the kernels' launch shapes, time to first token and
between tokens, and the decode's bytes against the GPU's bandwidth."""

from __future__ import annotations

GENERATION_COLUMNS: dict[str, str] = {
    "prompt_len": "generation: prompt tokens per sequence",
    "new_tokens": "generation: tokens generated per sequence (no early stop)",
    "generation_path": "generation: eager, compiled, cuda_graph or compiled+cuda_graph",
    "gemv_tuning": "batch-1 decode: where the GEMV kernels' launch shapes came from: packaged "
    "(tuned for this GPU model and Triton release in the whole decode step, shipped with "
    "dlbench: workloads/launch_shapes), autotuned (Triton timed each matrix's shapes alone in "
    "warm-up, or read its autotuning cache), or both joined",
    "gemv_launch_shapes": "batch-1 decode: each matrix (rows x columns, dtype, what is fused) "
    "and the launch shape it ran (N outputs per program, K inputs per step, w warps)",
    "prefill_samples": "generation: prefills timed for TTFT (a window of their own, >= 100)",
    "ttft_p50_ms": "generation: median time to first token (prefill; no cache reset in it)",
    "ttft_p99_ms": "generation: p99 time to first token (from >= 100 prefills)",
    "itl_mean_ms": "generation: mean inter-token latency (decode step)",
    "itl_p50_ms": "generation: median inter-token latency",
    "itl_p99_ms": "generation: p99 inter-token latency",
    "prefill_tokens_per_s": "generation: batch x prompt_len / median TTFT",
    "decode_tokens_per_s": "generation: batch / mean inter-token latency",
    "e2e_tokens_per_s": "generation: generated tokens / rounds window (reset, prefill, decode)",
    "decode_bytes_per_step": "generation: bytes a decode step must read (weights + KV cache)",
    "kv_cache_bytes_per_token": "generation: cache bytes per token of context per sequence",
    "decode_hbm_tb_s": "generation: decode_bytes_per_step / mean ITL, in TB/s",
    "peak_hbm_tb_s": "generation: the GPU's peak memory bandwidth (dlbench.hardware)",
    "hbm_bandwidth_share": "generation: decode_hbm_tb_s / peak_hbm_tb_s (decode's roofline)",
    "attained_hbm_tb_s": "generation: the memory read rate this GPU attained (dlbench peak, "
    "same GPU and software)",
    "hbm_bandwidth_share_attained": "generation: decode_hbm_tb_s / attained_hbm_tb_s, beside "
    "hbm_bandwidth_share (against the datasheet)",
}
