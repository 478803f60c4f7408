"""Triton kernels for batch-1 LLM decode: matrix-vector products and cached attention.

At batch 1 every decode projection reads a whole weight matrix to make a few thousand outputs,
so a token's time is how fast the weights stream from memory. cuBLAS and inductor's own
reduction for `x @ W.T` with one row leave the smaller matrices well under the bandwidth on an
H100 (llm_1b's down projection 1.7 TB/s, q/k/v 1.5 TB/s; `h100-decode-profile-native.txt`):
each output row's program re-reads the input vector, and inductor recomputes a fused SiLU for
every row. Here one program makes `BLOCK_N` outputs from one pass over the input, and the gated
form applies SiLU(gate) * up to each input chunk once for all of its rows. Launch shapes are
tuned per matrix shape on first use (warm-up), and the kernel is a `torch.library` op, so
inductor compiles around it and a CUDA graph captures it. The GEMV also takes the RMSNorm
before it and the residual add after it, which would otherwise be a kernel each.

Attention of the one new query to the static cache: PyTorch picks cuDNN's kernel for these
shapes (6.8 us a layer on an H100 for 256 cached positions of llm_1b), which reads the whole
cache under a mask, after inductor's kernels for RoPE and the cache writes (another 3.9 us);
here one kernel rotates the new query and key, writes the cache and attends, one program per
query head reading its kv head's cache up to the position only, with the softmax online.
Imported only with Triton and CUDA."""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch.library import triton_op, wrap_triton

# launch shapes tried per matrix shape: outputs per program, inputs per loop step, warps
CONFIGS = [
    triton.Config({"BLOCK_N": n, "BLOCK_K": k}, num_warps=w)
    for n in (1, 2, 4, 8, 16)
    for k in (256, 512, 1024, 2048)
    for w in (4, 8)
    if 1024 <= n * k <= 8192
]


@triton.autotune(configs=CONFIGS, key=["N", "K", "GATED", "NORM", "RESIDUAL"])
@triton.jit
def gemv_kernel(
    x, w, y, norm_weight, residual, N, K, eps,
    GATED: tl.constexpr, NORM: tl.constexpr, RESIDUAL: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    """y[n] = sum_k w[n, k] * v[k] (+ residual[n]); v is x (K values), or GATED silu(x[:K]) *
    x[K:2K], or NORM x scaled to unit root mean square and by norm_weight (RMSNorm: the sum of
    squares is formed in the same pass, the scale applied to the sums). Rounded to x's dtype
    where torch's unfused ops would store a tensor, except the normalised input."""
    dtype = x.dtype.element_ty
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    row_ok = rows < N
    squares = tl.zeros((BLOCK_K,), dtype=tl.float32)  # NORM: x's, summed as read
    acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    for start in range(0, K, BLOCK_K):
        cols = start + tl.arange(0, BLOCK_K)
        col_ok = cols < K
        v = tl.load(x + cols, mask=col_ok, other=0.0).to(tl.float32)
        if GATED:
            up = tl.load(x + K + cols, mask=col_ok, other=0.0).to(tl.float32)
            v = (v * tl.sigmoid(v) * up).to(dtype).to(tl.float32)
        if NORM:  # RMSNorm's gain now, its scalar scale once the sums are done
            squares += v * v
            v = v * tl.load(norm_weight + cols, mask=col_ok, other=0.0).to(tl.float32)
        block = tl.load(
            w + rows[:, None].to(tl.int64) * K + cols[None, :],
            mask=row_ok[:, None] & col_ok[None, :],
            other=0.0,
            eviction_policy="evict_first",
        )
        acc += block.to(tl.float32) * v[None, :]
    out = tl.sum(acc, axis=1)
    if NORM:
        out = out * tl.rsqrt(tl.sum(squares, axis=0) / K + eps).to(tl.float32)
    if RESIDUAL:
        out = out.to(dtype).to(tl.float32) + tl.load(residual + rows, mask=row_ok).to(tl.float32)
    tl.store(y + rows, out.to(dtype), mask=row_ok)


@triton_op("dlbench::gemv", mutates_args=())
def gemv(
    x: torch.Tensor,
    weight: torch.Tensor,
    gated: bool,
    norm_weight: torch.Tensor | None,
    eps: float,
    residual: torch.Tensor | None,
) -> torch.Tensor:
    """weight @ v for one input vector x: v = x, silu(x[:K]) * x[K:] when gated, or
    RMSNorm(x) with norm_weight; plus residual when given. (N,) outputs in x's dtype."""
    n, k = weight.shape
    y = torch.empty(n, dtype=x.dtype, device=x.device)

    def grid(meta):
        return (triton.cdiv(n, meta["BLOCK_N"]),)

    wrap_triton(gemv_kernel)[grid](
        x, weight, y, x if norm_weight is None else norm_weight,
        x if residual is None else residual, n, k, eps,
        GATED=gated, NORM=norm_weight is not None, RESIDUAL=residual is not None,
    )  # fmt: skip
    return y


@triton.jit
def decode_attention_kernel(
    qkv, keys, values, out, position, cos, sin, scale, max_len,
    GROUP: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_L: tl.constexpr,
):  # fmt: skip
    """Program (head, sequence): RoPE on the new query and key (halves swapped), the new key
    and value written to the cache at `position` (by the group's first head), then one query
    head's attention over positions 0..position: the new one from registers, the earlier
    ones from the cache, softmax online."""
    head, seq = tl.program_id(0), tl.program_id(1)
    heads = tl.num_programs(0)
    kv_heads = heads // GROUP
    kv_head = head // GROUP
    dtype = out.dtype.element_ty
    dims = tl.arange(0, HEAD_DIM)
    partner = (dims + HEAD_DIM // 2) % HEAD_DIM
    sign = tl.where(dims < HEAD_DIM // 2, -1.0, 1.0)
    turn_cos = tl.load(cos + dims).to(tl.float32)
    turn_sin = tl.load(sin + dims).to(tl.float32) * sign
    row = qkv + seq * (heads + 2 * kv_heads) * HEAD_DIM
    q_at = row + head * HEAD_DIM
    query = tl.load(q_at + dims).to(tl.float32) * turn_cos
    query += tl.load(q_at + partner).to(tl.float32) * turn_sin
    # scalars stay float32: inductor may pass `scale` as a constant, which Triton widens
    query = (query.to(dtype).to(tl.float32) * scale).to(tl.float32)
    k_at = row + (heads + kv_head) * HEAD_DIM
    key = tl.load(k_at + dims).to(tl.float32) * turn_cos
    key = (key + tl.load(k_at + partner).to(tl.float32) * turn_sin).to(dtype)
    value = tl.load(row + (heads + kv_heads + kv_head) * HEAD_DIM + dims)
    end = tl.load(position)
    base = (seq * kv_heads + kv_head).to(tl.int64) * max_len * HEAD_DIM
    if head % GROUP == 0:
        tl.store(keys + base + end * HEAD_DIM + dims, key)
        tl.store(values + base + end * HEAD_DIM + dims, value)
    best = tl.sum(key.to(tl.float32) * query, axis=0).to(tl.float32)
    total = tl.full((), 1.0, tl.float32)
    acc = value.to(tl.float32)
    for start in range(0, end, BLOCK_L):
        slots = start + tl.arange(0, BLOCK_L)
        ok = slots < end
        offsets = base + slots[:, None] * HEAD_DIM + dims[None, :]
        k = tl.load(keys + offsets, mask=ok[:, None], other=0.0).to(tl.float32)
        v = tl.load(values + offsets, mask=ok[:, None], other=0.0).to(tl.float32)
        scores = tl.where(ok, tl.sum(k * query[None, :], axis=1), float("-inf")).to(tl.float32)
        new_best = tl.maximum(best, tl.max(scores, axis=0))
        weights = tl.exp(scores - new_best)
        shrink = tl.exp(best - new_best)
        acc = acc * shrink + tl.sum(weights[:, None] * v, axis=0)
        total = total * shrink + tl.sum(weights, axis=0)
        best = new_best
    tl.store(out + (seq * heads + head) * HEAD_DIM + dims, (acc / total).to(dtype))


ATTENTION_BLOCK = 256  # cached positions per loop step, at most (one step for llm rows)
ATTENTION_WARPS = 8


@triton_op("dlbench::decode_attention", mutates_args=("keys", "values"))
def decode_attention(
    qkv: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    position: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    heads: int,
) -> torch.Tensor:
    """One decode step's attention from the fused q/k/v projection's output [batch, (heads +
    2 kv_heads) * head_dim]: RoPE (cos, sin: [head_dim] at `position`, a one-element tensor),
    the new key and value into the cache [batch, kv_heads, max_len, head_dim], softmax(q k^T
    / sqrt(d)) v over positions 0..position. Returns [batch, heads * head_dim]."""
    batch = qkv.shape[0]
    kv_heads, max_len, head_dim = keys.shape[1], keys.shape[2], keys.shape[3]
    out = torch.empty(batch, heads * head_dim, dtype=qkv.dtype, device=qkv.device)
    wrap_triton(decode_attention_kernel)[(heads, batch)](
        qkv, keys, values, out, position, cos, sin, head_dim**-0.5, max_len,
        GROUP=heads // kv_heads, HEAD_DIM=head_dim,
        BLOCK_L=min(ATTENTION_BLOCK, triton.next_power_of_2(max_len)),
        num_warps=ATTENTION_WARPS,
    )  # fmt: skip
    return out
