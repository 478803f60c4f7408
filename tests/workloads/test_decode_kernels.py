"""The Triton kernels of batch-1 LLM decode, run by Triton's interpreter on the CPU (in a
subprocess: the interpreter is chosen at import), against torch's unfused ops: the GEMV with
its fused RMSNorm, SiLU gate and residual, and attention to the cache up to the position."""

from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch
from torch.nn import functional as F

from dlbench.workloads.llama import RMSNorm, project

GEMV_CHECK = """
import torch
from torch import nn
from torch.nn import functional as F
from dlbench.workloads.decode_kernels import gemv_kernel
from dlbench.workloads.llama import RMSNorm, project
torch.manual_seed(0)
worst = 0.0
for n, k, gated, norm, res, fp8 in (
    (37, 300, False, False, False, False), (16, 512, True, False, True, False),
    (5, 1000, False, True, False, False), (9, 640, False, True, True, False),
    (16, 512, True, False, True, True), (9, 640, False, True, True, True),
):
    w = torch.randn(n, k, dtype=torch.float16) / k**0.5
    x = torch.randn(2 * k if gated else k, dtype=torch.float16)
    rms = RMSNorm(k, 1e-5).half()
    with torch.no_grad():
        rms.weight.uniform_(0.5, 1.5)
    r = torch.randn(n, dtype=torch.float16)
    y = torch.empty(n, dtype=torch.float16)
    scale = None
    if fp8:  # a scale per output row, as torchao quantizes a weight per row
        scale = w.float().abs().amax(1) / 448.0
        w = (w.float() / scale[:, None]).to(torch.float8_e4m3fn)
    gemv_kernel.fn[((n + 3) // 4,)](x, w, y, rms.weight, r, x if scale is None else scale, n, k,
                                   rms.eps, GATED=gated, NORM=norm, RESIDUAL=res,
                                   SCALED=scale is not None, PDL=False, BLOCK_N=4, BLOCK_K=256)
    linear = nn.Linear(k, n, bias=False)
    with torch.no_grad():  # torch's ops in float32 from the same inputs (fp8: dequantized)
        linear.weight.copy_(w.float() * (1 if scale is None else scale[:, None]))
        ref = project(x.float(), linear, rms.float() if norm else None, gated,
                      r.float() if res else None)
    worst = max(worst, float((y.float() - ref).abs().max() / ref.abs().max()))
print(f"{worst:.6f}")
"""

ATTENTION_CHECK = """
import torch
from torch.nn import functional as F
from dlbench.workloads.decode_attention import decode_attention_kernel
from dlbench.workloads.llama import rotate
torch.manual_seed(0)
b, heads, kv, L, d = 2, 8, 2, 150, 16
worst = 0.0
inv_freq = 1.0 / 10000 ** (torch.arange(d // 2) / (d // 2))
for position, scaling in ((0, 1.0), (63, 0.9), (64, 1.0), (100, 1.2), (149, 1.0)):
    qkv = torch.randn(b, (heads + 2 * kv) * d, dtype=torch.float16)
    keys = torch.randn(b, kv, L, d, dtype=torch.float16)  # random beyond the position too
    values = torch.randn(b, kv, L, d, dtype=torch.float16)
    freqs = position * inv_freq  # as the model forms cos and sin for its torch path
    angles = torch.cat((freqs, freqs))
    cos, sin = (angles.cos() * scaling).half(), (angles.sin() * scaling).half()
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
    decode_attention_kernel[(heads, b)](qkv, keys, values, out, at, inv_freq, scaling, d**-0.5, L,
                                        GROUP=heads // kv, HEAD_DIM=d, BLOCK_L=64, PDL=False)
    worst = max(worst, float((out.float() - ref).abs().max()))
    written = slice(position, position + 1)
    worst = max(worst, float((keys[:, :, written].float() - ref_keys[:, :, written]).abs().max()))
    assert torch.equal(values[:, :, written].float(), ref_values[:, :, written])
print(f"{worst:.6f}")
"""

GREEDY_CHECK = """
import torch
from dlbench.workloads import greedy_kernels
torch.manual_seed(0)
misses = 0
for vocab, tie in ((3000, None), (2048, (5, 2047)), (5000, (1500, 1024 + 1500)), (77, (3, 4))):
    logits = torch.randn(1, vocab).to(torch.bfloat16)
    if tie:  # the maximum twice: argmax takes the first, also across blocks
        logits[0, list(tie)] = 9.0
    token, position = torch.zeros(1, 1, dtype=torch.long), torch.tensor([41])
    greedy_kernels.greedy_advance(logits, token, position)
    misses += int(token.item() != logits.argmax(-1).item()) + int(position.item() != 42)
print(misses)
"""


def interpreted(script: str) -> float:
    pytest.importorskip("triton")
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": "src"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return float(done.stdout.strip())


@pytest.mark.slow
def test_the_gemv_kernel_equals_torchs_norm_gate_projection_and_residual():
    """Plain, gated (silu(gate) * up formed as it reads), RMSNorm before, residual after, and
    float8 weights scaled per row: within half-precision rounding of torch's ops in float32
    on the same (dequantized) weights (a wrong scale, a missed residual or a gate applied to
    the wrong half would be off by far more)."""
    assert interpreted(GEMV_CHECK) < 2e-3


@pytest.mark.slow
def test_the_decode_attention_kernel_rotates_writes_the_cache_and_reads_it_to_the_position():
    """From the fused projection's output: RoPE on query and key (formed in the kernel from
    the frequencies and scale), the new key and value in
    the cache at the position, one query per head against grouped kv heads, positions at,
    before and after a loop block's edge; equal to the layer's torch path (rotate, index_copy,
    SDPA under the model's mask). The cache beyond the position is random, so reading it, or
    a key written unrotated, would show."""
    assert interpreted(ATTENTION_CHECK) < 2e-3


@pytest.mark.slow
def test_the_greedy_kernels_pick_argmaxs_token_and_move_the_position_on(monkeypatch):
    """Two stages (block maxima, then the first block with the overall maximum): the first
    index of the maximum as torch's argmax gives it, ties within a block, across blocks and
    in one short block; the position one on."""
    assert interpreted(GREEDY_CHECK) == 0


def test_project_composes_norm_gate_and_residual_as_the_layers_do():
    """Off the GEMV kernel's domain (CPU, several rows) project is torch's unfused ops."""
    torch.manual_seed(1)
    x, r = torch.randn(3, 8), torch.randn(3, 5)
    w, w8 = torch.nn.Linear(4, 5, bias=False), torch.nn.Linear(8, 5, bias=False)
    gate, up = x.chunk(2, dim=-1)
    expected = r + F.linear(F.silu(gate) * up, w.weight)
    with torch.no_grad():
        assert torch.allclose(project(x, w, gated=True, residual=r), expected)
        norm = RMSNorm(8, 1e-6)
        assert torch.allclose(project(x, w8, norm=norm), F.linear(norm(x), w8.weight))


@pytest.mark.slow
def test_the_kernels_compile_for_hopper_with_float_scalars_as_inductor_passes_them():
    """Inside a compiled graph inductor hands the kernels' float scalars (scale, eps) over as
    float64; Triton then widened the attention's running maximum and refused the loop (the
    error an H100 run hit). Compiled here for sm_90 without a GPU, with and without the
    programmatic-dependent-launch waits."""
    triton = pytest.importorskip("triton")
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from dlbench.workloads.decode_attention import decode_attention_kernel
    from dlbench.workloads.decode_kernels import gemv_kernel

    hopper = GPUTarget("cuda", 90, 32)
    pointers = dict.fromkeys(("qkv", "keys", "values", "out"), "*bf16")
    signature = {**pointers, "position": "*i64", "inv_freq": "*fp32", "rope_scaling": "fp64"}
    signature.update(scale="fp64", max_len="i32")
    signature.update(dict.fromkeys(("GROUP", "HEAD_DIM", "BLOCK_L", "PDL"), "constexpr"))
    for pdl in (False, True):
        constants = {"GROUP": 4, "HEAD_DIM": 64, "BLOCK_L": 256, "PDL": pdl}
        source = ASTSource(decode_attention_kernel, signature, constants)
        ptx = triton.compile(source, target=hopper, options={"num_warps": 8}).asm["ptx"]
        assert ("griddepcontrol.wait" in ptx) == pdl  # the wait only where armed
    flags = ("GATED", "NORM", "RESIDUAL", "SCALED", "PDL", "BLOCK_N", "BLOCK_K")
    for gated, norm, residual, pdl, fp8 in (
        (True, False, True, False, False),
        (False, True, False, True, False),
        (True, False, True, True, True),  # float8 weights, a scale per row
    ):
        pointers = dict.fromkeys(("x", "y", "norm_weight", "residual"), "*bf16")
        pointers.update(w="*fp8e4nv" if fp8 else "*bf16", scale="*fp32" if fp8 else "*bf16")
        signature = {**pointers, "N": "i32", "K": "i32", "eps": "fp64"}
        signature.update(dict.fromkeys(flags, "constexpr"))
        constants = {"GATED": gated, "NORM": norm, "RESIDUAL": residual, "PDL": pdl}
        constants.update(SCALED=fp8, BLOCK_N=4, BLOCK_K=512)
        triton.compile(ASTSource(gemv_kernel.fn, signature, constants), target=hopper)


@pytest.mark.slow
def test_dependent_launch_only_on_hopper_and_never_inside_a_compiled_graph(monkeypatch):
    """The kernels wait for the kernel before only when launched as its programmatic dependent:
    sm_90 and later, launched by this code; inductor (torch 2.11) launches the user kernels it
    compiles without the attribute, and an older GPU has no such instruction."""
    pytest.importorskip("triton")
    from torch._subclasses.fake_tensor import FakeTensorMode

    from dlbench.workloads import decode_kernels

    x = SimpleNamespace(is_cuda=True, device=torch.device("cuda", 0))  # this machine has none
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda d=None: (9, 0))
    assert decode_kernels.dependent_launch(x) == {"PDL": True, "launch_pdl": True}
    traced = torch.compile(lambda t: t + len(decode_kernels.dependent_launch(x)))
    assert traced(torch.zeros(1)).item() == 1  # one entry, PDL off, while dynamo traces
    with FakeTensorMode() as fake:  # as AOTAutograd runs a triton_op's body
        assert decode_kernels.dependent_launch(fake.from_tensor(torch.zeros(1))) == {"PDL": False}
    assert decode_kernels.dependent_launch(torch.zeros(1)) == {"PDL": False}  # on the CPU
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda d=None: (8, 0))
    assert decode_kernels.dependent_launch(x) == {"PDL": False}


def test_a_new_matrix_shape_compiles_every_launch_shape_once_before_the_autotuner_times_them(
    monkeypatch,
):
    """Cold, the autotuner compiled the GEMV at each launch shape in turn as it timed it:
    now a shape's first call compiles them all at once, in threads, each exactly once per
    shape, never inside a CUDA graph's capture, and a failure there costs nothing."""
    pytest.importorskip("triton")
    import contextlib

    from dlbench.workloads import decode_kernels

    compiled = []
    monkeypatch.setattr(decode_kernels, "_COMPILED_SHAPES", set())
    monkeypatch.setattr(torch.cuda, "device", lambda d: contextlib.nullcontext())
    capturing = [False]
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: capturing[0])
    monkeypatch.setattr(
        decode_kernels.gemv_kernel.fn, "warmup",
        lambda *a, grid, **kw: compiled.append((kw["BLOCK_N"], kw["BLOCK_K"], kw["num_warps"])),
    )  # fmt: skip
    x = SimpleNamespace(is_cuda=True, device="cuda:0", dtype=torch.bfloat16)
    weight = SimpleNamespace(shape=(2048, 512), dtype=torch.bfloat16)
    args = (x, weight)
    flags = {"GATED": False, "NORM": True, "RESIDUAL": False, "SCALED": False, "PDL": True}
    configs = [(c.kwargs["BLOCK_N"], c.kwargs["BLOCK_K"], c.num_warps)
               for c in decode_kernels.CONFIGS]  # fmt: skip
    with monkeypatch.context() as m:
        m.setattr(decode_kernels, "is_fake", lambda t: False)
        decode_kernels._compile_launch_shapes(args, flags)
        assert sorted(compiled) == sorted(configs)
        decode_kernels._compile_launch_shapes(args, flags)  # the same shape: nothing again
        assert len(compiled) == len(configs)
        capturing[0] = True
        decode_kernels._compile_launch_shapes((x, SimpleNamespace(shape=(8, 8), dtype=None)), flags)
        assert len(compiled) == len(configs)  # never while a graph is captured
        capturing[0] = False

        def fails(*a, **kw):
            raise RuntimeError("ptxas")

        m.setattr(decode_kernels.gemv_kernel.fn, "warmup", fails)
        decode_kernels._compile_launch_shapes(
            (x, SimpleNamespace(shape=(16, 16), dtype=None)), flags
        )
