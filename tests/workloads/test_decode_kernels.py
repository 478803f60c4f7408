"""The Triton kernels of batch-1 LLM decode, run by Triton's interpreter on the CPU (in a
subprocess: the interpreter is chosen at import), against torch's unfused ops: the GEMV with
its fused RMSNorm, SiLU gate and residual, and attention to the cache up to the position."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
from torch.nn import functional as F

from dlbench.workloads.llama import RMSNorm, project

GEMV_CHECK = """
import torch
from torch.nn import functional as F
from dlbench.workloads.decode_kernels import gemv_kernel
from dlbench.workloads.llama import RMSNorm, project
torch.manual_seed(0)
worst = 0.0
for n, k, gated, norm, res in ((37, 300, False, False, False), (16, 512, True, False, True),
                              (5, 1000, False, True, False), (9, 640, False, True, True)):
    w = torch.randn(n, k, dtype=torch.float16) / k**0.5
    x = torch.randn(2 * k if gated else k, dtype=torch.float16)
    rms = RMSNorm(k, 1e-5).half()
    with torch.no_grad():
        rms.weight.uniform_(0.5, 1.5)
    r = torch.randn(n, dtype=torch.float16)
    y = torch.empty(n, dtype=torch.float16)
    gemv_kernel.fn[((n + 3) // 4,)](x, w, y, rms.weight, r, n, k, rms.eps, GATED=gated,
                                   NORM=norm, RESIDUAL=res, BLOCK_N=4, BLOCK_K=256)
    with torch.no_grad():  # torch's ops in float32 from the same half-precision inputs
        ref = project(x.float(), w.float(), rms.float() if norm else None, gated,
                      r.float() if res else None)
    worst = max(worst, float((y.float() - ref).abs().max() / ref.abs().max()))
print(f"{worst:.6f}")
"""

ATTENTION_CHECK = """
import torch
from torch.nn import functional as F
from dlbench.workloads.decode_kernels import decode_attention_kernel
from dlbench.workloads.llama import rotate
torch.manual_seed(0)
b, heads, kv, L, d = 2, 8, 2, 150, 16
worst = 0.0
for position in (0, 63, 64, 100, 149):
    qkv = torch.randn(b, (heads + 2 * kv) * d, dtype=torch.float16)
    keys = torch.randn(b, kv, L, d, dtype=torch.float16)  # random beyond the position too
    values = torch.randn(b, kv, L, d, dtype=torch.float16)
    freqs = position / 10000 ** (torch.arange(d // 2) / (d // 2))
    angles = torch.cat((freqs, freqs))
    cos, sin = angles.cos().half(), angles.sin().half()
    ref_keys, ref_values = keys.float(), values.float()
    q, k, v = qkv.float().split([heads * d, kv * d, kv * d], -1)
    q, k = rotate(q.view(b, 1, heads, d).transpose(1, 2), cos.float(), sin.float()), rotate(
        k.view(b, 1, kv, d).transpose(1, 2), cos.float(), sin.float())
    at = torch.tensor([position])
    ref_keys.index_copy_(2, at, k)
    ref_values.index_copy_(2, at, v.view(b, 1, kv, d).transpose(1, 2))
    mask = (torch.arange(L) <= position)[None, None, None]
    ref = F.scaled_dot_product_attention(q, ref_keys, ref_values, attn_mask=mask,
                                         enable_gqa=True).reshape(b, heads * d)
    out = torch.empty(b, heads * d, dtype=torch.float16)
    decode_attention_kernel[(heads, b)](qkv, keys, values, out, at, cos, sin, d**-0.5, L,
                                        GROUP=heads // kv, HEAD_DIM=d, BLOCK_L=64)
    worst = max(worst, float((out.float() - ref).abs().max()))
    written = slice(position, position + 1)
    worst = max(worst, float((keys[:, :, written].float() - ref_keys[:, :, written]).abs().max()))
    assert torch.equal(values[:, :, written].float(), ref_values[:, :, written])
print(f"{worst:.6f}")
"""


def interpreted(script: str) -> float:
    pytest.importorskip("triton")
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": "src"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return float(done.stdout.strip())


def test_the_gemv_kernel_equals_torchs_norm_gate_projection_and_residual():
    """Plain, gated (silu(gate) * up formed as it reads), RMSNorm before, residual after:
    within half-precision rounding of torch's ops in float32 (a wrong scale, a missed
    residual or a gate applied to the wrong half would be off by far more)."""
    assert interpreted(GEMV_CHECK) < 2e-3


def test_the_decode_attention_kernel_rotates_writes_the_cache_and_reads_it_to_the_position():
    """From the fused projection's output: RoPE on query and key, the new key and value in
    the cache at the position, one query per head against grouped kv heads, positions at,
    before and after a loop block's edge; equal to the layer's torch path (rotate, index_copy,
    SDPA under the model's mask). The cache beyond the position is random, so reading it, or
    a key written unrotated, would show."""
    assert interpreted(ATTENTION_CHECK) < 2e-3


def test_project_composes_norm_gate_and_residual_as_the_layers_do():
    """Off the GEMV kernel's domain (CPU, several rows) project is torch's unfused ops."""
    torch.manual_seed(1)
    x, w, r = torch.randn(3, 8), torch.randn(5, 4), torch.randn(3, 5)
    gate, up = x.chunk(2, dim=-1)
    assert torch.allclose(project(x, w, gated=True, residual=r), r + F.linear(F.silu(gate) * up, w))
    norm = RMSNorm(8, 1e-6)
    w8 = torch.randn(5, 8)
    assert torch.allclose(project(x, w8, norm=norm), F.linear(norm(x), w8))


def test_the_kernels_compile_for_hopper_with_float_scalars_as_inductor_passes_them():
    """Inside a compiled graph inductor hands the kernels' float scalars (scale, eps) over as
    float64; Triton then widened the attention's running maximum and refused the loop (the
    error an H100 run hit). Compiled here for sm_90 without a GPU."""
    triton = pytest.importorskip("triton")
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from dlbench.workloads.decode_kernels import decode_attention_kernel, gemv_kernel

    hopper = GPUTarget("cuda", 90, 32)
    pointers = dict.fromkeys(("qkv", "keys", "values", "out"), "*bf16")
    signature = {**pointers, "position": "*i64", "cos": "*bf16", "sin": "*bf16"}
    signature.update(scale="fp64", max_len="i32")
    signature.update(dict.fromkeys(("GROUP", "HEAD_DIM", "BLOCK_L"), "constexpr"))
    constants = {"GROUP": 4, "HEAD_DIM": 64, "BLOCK_L": 256}
    source = ASTSource(decode_attention_kernel, signature, constants)
    triton.compile(source, target=hopper, options={"num_warps": 8})
    pointers = dict.fromkeys(("x", "w", "y", "norm_weight", "residual"), "*bf16")
    signature = {**pointers, "N": "i32", "K": "i32", "eps": "fp64"}
    flags = ("GATED", "NORM", "RESIDUAL", "BLOCK_N", "BLOCK_K")
    signature.update(dict.fromkeys(flags, "constexpr"))
    for gated, norm, residual in ((True, False, True), (False, True, False)):
        constants = {"GATED": gated, "NORM": norm, "RESIDUAL": residual}
        constants.update(BLOCK_N=4, BLOCK_K=512)
        triton.compile(ASTSource(gemv_kernel.fn, signature, constants), target=hopper)
