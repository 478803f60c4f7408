"""Attention of batch-1 decode's one new query to the static cache, as one Triton kernel.

PyTorch picks cuDNN's kernel for these shapes, which reads the whole cache under a mask, after
inductor's kernels for RoPE and the cache writes; here one kernel rotates the new query and key,
writes the cache and attends, one program per query head reading its kv head's cache up to the
position only, with the softmax online; RoPE is formed in the kernel from the model's
frequencies. Launched as a programmatic dependent like the rest of the step
(workloads.decode_kernels). Imported only with Triton and CUDA."""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch.library import triton_op, wrap_triton

from dlbench.workloads.decode_kernels import await_inputs, dependent_launch


@triton.jit
def _attend_block(k, v, ok, query, best, acc, total):
    """Online softmax over one block of cached keys and values (`ok`: the slots to count)."""
    scores = tl.where(ok, tl.sum(k.to(tl.float32) * query[None, :], axis=1), float("-inf"))
    new_best = tl.maximum(best, tl.max(scores.to(tl.float32), axis=0))
    weights = tl.exp(scores - new_best)
    shrink = tl.exp(best - new_best)
    acc = acc * shrink + tl.sum(weights[:, None] * v.to(tl.float32), axis=0)
    return new_best, acc, total * shrink + tl.sum(weights, axis=0)


@triton.jit
def _rope_turn(end, inv_freq, rope_scaling, dims, out, HEAD_DIM: tl.constexpr):
    """RoPE's cos and signed sin at position `end` as the model's torch path forms them:
    angles in float32, cos and sin scaled and rounded to the activations' (`out`'s) dtype."""
    dtype = out.dtype.element_ty
    angle = end.to(tl.float32) * tl.load(inv_freq + dims % (HEAD_DIM // 2))
    sign = tl.where(dims < HEAD_DIM // 2, -1.0, 1.0)
    turn_cos = (tl.cos(angle) * rope_scaling).to(tl.float32).to(dtype).to(tl.float32)
    turn_sin = (tl.sin(angle) * rope_scaling).to(tl.float32).to(dtype).to(tl.float32) * sign
    return turn_cos, turn_sin


@triton.jit
def _rotated(at, dims, partner, turn_cos, turn_sin):
    """One head's vector at `at`, rotated (halves swapped), in float32."""
    rotated = tl.load(at + dims).to(tl.float32) * turn_cos
    return rotated + tl.load(at + partner).to(tl.float32) * turn_sin


@triton.jit
def _attend_rest(
    keys, values, base, end, query, best, acc, total, BLOCK_L: tl.constexpr, HEAD_DIM: tl.constexpr
):
    """The cache's blocks after the first, up to `end`, into the online softmax."""
    slots = tl.arange(0, BLOCK_L)
    dims = tl.arange(0, HEAD_DIM)
    for start in range(BLOCK_L, end, BLOCK_L):
        at = start + slots
        ok = at < end
        offsets = base + at[:, None] * HEAD_DIM + dims[None, :]
        k = tl.load(keys + offsets, mask=ok[:, None], other=0.0)
        v = tl.load(values + offsets, mask=ok[:, None], other=0.0)
        best, acc, total = _attend_block(k, v, ok, query, best, acc, total)
    return acc, total


@triton.jit
def decode_attention_kernel(
    qkv,
    keys,
    values,
    out,
    position,
    inv_freq,
    rope_scaling,
    scale,
    max_len,
    GROUP: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_L: tl.constexpr,
    PDL: tl.constexpr,
):
    """Program (head, sequence): RoPE on the new query and key (halves swapped), the new key
    and value written to the cache at `position` (by the group's first head), then one query
    head's attention over positions 0..position: the new one from registers, the earlier
    ones from the cache, softmax online.
    PDL: the position, the frequencies and the first block of the cache are read while the
    kernel before still runs (earlier steps wrote them; a dependent starts only once the
    kernel before has passed its own wait), the projection's output only after it."""
    head, seq = tl.program_id(0), tl.program_id(1)
    heads = tl.num_programs(0)
    kv_heads = heads // GROUP
    kv_head = head // GROUP
    dtype = out.dtype.element_ty
    dims = tl.arange(0, HEAD_DIM)
    end = tl.load(position)
    base = (seq * kv_heads + kv_head).to(tl.int64) * max_len * HEAD_DIM
    slots = tl.arange(0, BLOCK_L)
    first = base + slots[:, None] * HEAD_DIM + dims[None, :]
    k_first = tl.load(keys + first, mask=(slots < end)[:, None], other=0.0)
    v_first = tl.load(values + first, mask=(slots < end)[:, None], other=0.0)
    turn_cos, turn_sin = _rope_turn(end, inv_freq, rope_scaling, dims, out, HEAD_DIM)
    await_inputs(PDL)
    partner = (dims + HEAD_DIM // 2) % HEAD_DIM
    row = qkv + seq * (heads + 2 * kv_heads) * HEAD_DIM
    query = _rotated(row + head * HEAD_DIM, dims, partner, turn_cos, turn_sin)
    # scalars stay float32: inductor may pass `scale` as a constant, which Triton widens
    query = (query.to(dtype).to(tl.float32) * scale).to(tl.float32)
    k_at = row + (heads + kv_head) * HEAD_DIM
    key = _rotated(k_at, dims, partner, turn_cos, turn_sin).to(dtype)
    value = tl.load(row + (heads + kv_heads + kv_head) * HEAD_DIM + dims)
    if head % GROUP == 0:
        tl.store(keys + base + end * HEAD_DIM + dims, key)
        tl.store(values + base + end * HEAD_DIM + dims, value)
    best = tl.sum(key.to(tl.float32) * query, axis=0).to(tl.float32)
    total = tl.full((), 1.0, tl.float32)
    acc = value.to(tl.float32)
    best, acc, total = _attend_block(k_first, v_first, slots < end, query, best, acc, total)
    acc, total = _attend_rest(keys, values, base, end, query, best, acc, total, BLOCK_L, HEAD_DIM)
    tl.store(out + (seq * heads + head) * HEAD_DIM + dims, (acc / total).to(dtype))


ATTENTION_BLOCK = 256  # cached positions per loop step, at most (one step for llm rows)
ATTENTION_WARPS = 8


@triton_op("dlbench::decode_attention", mutates_args=("keys", "values"))
def decode_attention(
    qkv: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    position: torch.Tensor,
    inv_freq: torch.Tensor,
    rope_scaling: float,
    heads: int,
) -> torch.Tensor:
    """One decode step's attention from the fused q/k/v projection's output [batch, (heads +
    2 kv_heads) * head_dim]: RoPE at `position` (a one-element tensor) from the model's
    float32 frequencies [head_dim / 2] and scale, the new key and value into the cache
    [batch, kv_heads, max_len, head_dim], softmax(q k^T / sqrt(d)) v over positions
    0..position. Returns [batch, heads * head_dim]."""
    batch = qkv.shape[0]
    kv_heads, max_len, head_dim = keys.shape[1], keys.shape[2], keys.shape[3]
    out = torch.empty(batch, heads * head_dim, dtype=qkv.dtype, device=qkv.device)
    wrap_triton(decode_attention_kernel)[(heads, batch)](
        qkv,
        keys,
        values,
        out,
        position,
        inv_freq,
        rope_scaling,
        head_dim**-0.5,
        max_len,
        GROUP=heads // kv_heads,
        HEAD_DIM=head_dim,
        BLOCK_L=min(ATTENTION_BLOCK, triton.next_power_of_2(max_len)),
        num_warps=ATTENTION_WARPS,
        **dependent_launch(qkv),
    )
    return out
