"""A compact Llama written for the GPU (`--llm-impl native`), loaded with the transformers
model's own random weights, so both implementations compute the same function.

What makes it fast where the transformers module layout is slow: q, k and v projected by one
weight and gate and up by one (concatenated once, at load), fewer and larger GEMVs at batch 1;
a static KV cache written in place at a position tensor on the device, so a decode step has
static shapes and compiles (norms, RoPE and residuals fused by inductor) and captures as one
CUDA graph; and for training, a loss that never materialises the 128k-vocabulary logits of
the whole batch in fp32 (chunked, with the gradients formed chunk by chunk in the forward).
At batch-1 decode on CUDA in half precision the whole step runs as Triton kernels
(workloads.decode_kernels): the projections with their norms and residual adds, the attention
with RoPE and the cache write, and the greedy token."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import nn
from torch.nn import functional as F

LOSS_CHUNK_TOKENS = 2048  # logits of this many tokens at a time in the training loss


class RMSNorm(nn.Module):
    """transformers' LlamaRMSNorm: normalised in fp32, scaled in the weights' dtype."""

    def __init__(self, hidden: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """RoPE as transformers applies it: halves swapped, not interleaved."""
    half = x.shape[-1] // 2
    turned = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + turned * sin


@dataclass
class KVCache:
    """Static keys and values per layer, [batch, kv_heads, max_len, head_dim], written in place."""

    keys: list[torch.Tensor]
    values: list[torch.Tensor]

    def reset(self) -> None:
        for t in (*self.keys, *self.values):
            t.zero_()

    def bytes_per_token(self) -> int:
        """Cache bytes one token of context takes in one sequence, over all layers."""
        return sum(2 * k.shape[1] * k.shape[3] * k.element_size() for k in self.keys)


class Block(nn.Module):
    """One decoder layer with fused projections."""

    def __init__(self, hidden: int, inter: int, heads: int, kv_heads: int, eps: float) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, hidden // heads
        self.wqkv = nn.Linear(hidden, (heads + 2 * kv_heads) * self.head_dim, bias=False)
        self.wo = nn.Linear(heads * self.head_dim, hidden, bias=False)
        self.w13 = nn.Linear(hidden, 2 * inter, bias=False)
        self.w2 = nn.Linear(inter, hidden, bias=False)
        self.attention_norm = RMSNorm(hidden, eps)
        self.ffn_norm = RMSNorm(hidden, eps)

    def forward(self, x, rope, cache: tuple[torch.Tensor, torch.Tensor] | None, pos, mask):
        """`rope`: cos and sin at the positions (torch's attention), or the frequencies
        (`KernelRope`: batch-1 decode, where the attention kernel forms RoPE itself)."""
        b, t, _ = x.shape
        qkv = project(x, self.wqkv.weight, norm=self.attention_norm)
        if isinstance(rope, KernelRope):
            from dlbench.workloads.decode_kernels import decode_attention

            rows = qkv.reshape(b, -1)
            out = decode_attention(rows, *cache, pos, *rope, self.heads).view(b, t, -1)
        else:
            out = self.attend(qkv, *rope, cache, pos, mask)
        x = project(out, self.wo.weight, residual=x)
        gate_up = project(x, self.w13.weight, norm=self.ffn_norm)
        return project(gate_up, self.w2.weight, gated=True, residual=x)

    def attend(self, qkv, cos, sin, cache, pos, mask) -> torch.Tensor:
        """RoPE and SDPA: causal over the sequence (training), or the new positions written to
        the static cache and attending to it up to the position ([b, t, heads * head_dim])."""
        b, t, _ = qkv.shape
        kv = self.kv_heads * self.head_dim
        q, k, v = qkv.split([self.heads * self.head_dim, kv, kv], -1)
        q = q.view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = k.view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = v.view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        if cache is None:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        else:
            keys, values = cache
            keys.index_copy_(2, pos, k)
            values.index_copy_(2, pos, v)
            out = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, enable_gqa=True)
        return out.transpose(1, 2).reshape(b, t, -1)


def _one_vector(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether `x @ weight.T` is one matrix-vector product the Triton kernel takes."""
    return _kernel_sized(x.shape[:-1].numel(), x.dtype, weight)


def _kernel_sized(rows: int, dtype: torch.dtype, weight: torch.Tensor) -> bool:
    """Whether `rows` inputs of `dtype` against `weight` are what the decode kernels take:
    batch-1 decode on CUDA in the weights' own half precision (autocast keeps torch's ops)."""
    return (
        weight.is_cuda
        and rows == 1
        and dtype == weight.dtype
        and dtype in (torch.bfloat16, torch.float16)
        and not torch.is_autocast_enabled()
    )


def project(
    x: torch.Tensor,
    weight: torch.Tensor,
    norm: RMSNorm | None = None,
    gated: bool = False,
    residual: torch.Tensor | None = None,
) -> torch.Tensor:
    """residual + f(x) @ weight.T, f: RMSNorm `norm`, silu(gate) * up of the fused gate/up
    projection's output (`gated`), or nothing. One vector (batch-1 decode) goes through the
    GEMV kernel with f and the residual fused into it; otherwise torch's ops."""
    if _one_vector(x, weight):
        from dlbench.workloads.decode_kernels import gemv

        out = gemv(
            x.reshape(-1).contiguous(),
            weight,
            gated,
            None if norm is None else norm.weight,
            1e-6 if norm is None else norm.eps,
            None if residual is None else residual.reshape(-1).contiguous(),
        )
        return out.view(*x.shape[:-1], -1)
    if norm is not None:
        x = norm(x)
    if gated:
        gate, up = x.chunk(2, dim=-1)
        x = F.silu(gate) * up
    out = F.linear(x, weight)
    return out if residual is None else residual + out


class KernelRope(NamedTuple):
    """RoPE as the decode attention kernel takes it: frequencies and scale, not cos and sin."""

    inv_freq: torch.Tensor
    scaling: float


class Hidden(NamedTuple):
    """The last layer's normalised output and the output weight: the training loss forms the
    logits from these chunk by chunk."""

    hidden: torch.Tensor
    head: torch.Tensor


class NativeLlama(nn.Module):
    """Llama-style decoder; `from_transformers` loads a LlamaForCausalLM's weights into it."""

    def __init__(self, config) -> None:
        super().__init__()
        hidden, heads = config.hidden_size, config.num_attention_heads
        kv_heads = config.num_key_value_heads
        self.embed = nn.Embedding(config.vocab_size, hidden)
        self.layers = nn.ModuleList(
            Block(hidden, config.intermediate_size, heads, kv_heads, config.rms_norm_eps)
            for _ in range(config.num_hidden_layers)
        )
        self.norm = RMSNorm(hidden, config.rms_norm_eps)
        self.output = nn.Linear(hidden, config.vocab_size, bias=False)
        self.tied = bool(config.tie_word_embeddings)
        if self.tied:
            self.output.weight = self.embed.weight
        self.head_dim, self.kv_heads = hidden // heads, kv_heads
        self.register_buffer("inv_freq", torch.ones(self.head_dim // 2), persistent=False)
        self.rope_scaling = 1.0
        self.cache: KVCache | None = None
        self.max_len = 0
        self.decode_kernels = True  # batch-1 decode's attention by the Triton kernel

    @classmethod
    def from_transformers(cls, hf) -> NativeLlama:
        """The same weights, q/k/v and gate/up concatenated; RoPE frequencies from its rotary
        module (so any rope configuration it has applies here too)."""
        config = hf.config
        with torch.device(hf.lm_head.weight.device):
            native = cls(config).to(hf.lm_head.weight.dtype)
        model = hf.model
        with torch.no_grad():
            native.embed.weight.copy_(model.embed_tokens.weight)
            native.norm.weight.copy_(model.norm.weight)
            if not native.tied:
                native.output.weight.copy_(hf.lm_head.weight)
            for block, layer in zip(native.layers, model.layers):
                a, m = layer.self_attn, layer.mlp
                block.wqkv.weight.copy_(
                    torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight])
                )
                block.wo.weight.copy_(a.o_proj.weight)
                block.w13.weight.copy_(torch.cat([m.gate_proj.weight, m.up_proj.weight]))
                block.w2.weight.copy_(m.down_proj.weight)
                block.attention_norm.weight.copy_(layer.input_layernorm.weight)
                block.ffn_norm.weight.copy_(layer.post_attention_layernorm.weight)
            native.inv_freq.copy_(model.rotary_emb.inv_freq.float())
        native.rope_scaling = float(getattr(model.rotary_emb, "attention_scaling", 1.0))
        return native

    def kernel_decode(self, batch: int) -> bool:
        """Whether a decode step of `batch` sequences runs the Triton kernels end to end."""
        weight = self.output.weight
        return self.decode_kernels and _kernel_sized(batch, weight.dtype, weight)

    def get_input_embeddings(self) -> nn.Embedding:
        """The token table (named as transformers names it, for the decode byte count)."""
        return self.embed

    def get_output_embeddings(self) -> nn.Linear:
        """The output layer (shares its weight with the table when tied)."""
        return self.output

    def setup_cache(self, batch: int, max_len: int) -> KVCache:
        """Static keys and values for `batch` sequences of up to `max_len` tokens."""
        ref = self.output.weight
        shape = (batch, self.kv_heads, max_len, self.head_dim)
        keys = [torch.zeros(shape, dtype=ref.dtype, device=ref.device) for _ in self.layers]
        values = [torch.zeros(shape, dtype=ref.dtype, device=ref.device) for _ in self.layers]
        self.cache, self.max_len = KVCache(keys, values), max_len
        return self.cache

    def _rope(self, positions: torch.Tensor, dtype: torch.dtype):
        freqs = positions[:, None].float() * self.inv_freq[None, :]
        angles = torch.cat((freqs, freqs), dim=-1)
        cos, sin = angles.cos() * self.rope_scaling, angles.sin() * self.rope_scaling
        return cos.to(dtype)[None, None], sin.to(dtype)[None, None]

    def hidden_states(self, ids: torch.Tensor, positions: torch.Tensor | None = None):
        """The last layer's output, before the final norm: over the sequence (training), or
        for `positions` with the cache (generation: prefill writes positions 0..T-1, decode
        one position)."""
        x = self.embed(ids)
        generating = positions is not None
        if not generating:
            positions = torch.arange(ids.shape[1], device=ids.device)
        mask = None
        if generating and self.kernel_decode(ids.numel()):
            rope = KernelRope(self.inv_freq, self.rope_scaling)
        else:
            rope = self._rope(positions, x.dtype)
            if generating:
                span = torch.arange(self.max_len, device=ids.device)
                mask = (span[None, :] <= positions[:, None])[None, None]  # [1, 1, T, max_len]
        for i, block in enumerate(self.layers):
            cache = (self.cache.keys[i], self.cache.values[i]) if generating else None
            x = block(x, rope, cache, positions, mask)
        return x

    def forward(self, ids: torch.Tensor) -> Hidden:
        """Training: the hidden states and the output weight (the loss forms the logits)."""
        return Hidden(self.norm(self.hidden_states(ids)), self.output.weight)

    def logits(self, ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Generation: logits of the last position only."""
        last = self.hidden_states(ids, positions)[:, -1:]
        return project(last, self.output.weight, norm=self.norm)


def _chunk_loss(h: torch.Tensor, head: torch.Tensor, y: torch.Tensor, count: int, wide):
    """One chunk's summed cross-entropy and the gradient of the mean loss for its logits
    (softmax minus the one-hot target, over `count`), in `h`'s dtype. The target's one is
    taken off after the cast, in place: compiled, the softmax, scale and cast are one pass
    and the subtraction touches one element a row; eager, no one-hot is ever built."""
    logits = (h @ head.t()).to(wide)
    lse = torch.logsumexp(logits, dim=-1)
    picked = logits.gather(1, y[:, None]).squeeze(1)
    grad = (torch.exp(logits - lse[:, None]) / count).to(h.dtype)
    grad[torch.arange(len(y), device=y.device), y] -= 1.0 / count
    return (lse - picked).sum(), grad


class _ChunkedCrossEntropy(torch.autograd.Function):
    """Mean cross-entropy of `hidden @ head.T` against `targets`, LOSS_CHUNK_TOKENS tokens at a
    time: each chunk's logits (fp32 for the softmax) exist only while it is processed, and its
    gradients for `hidden` and `head` are formed right then (backward only scales them)."""

    @staticmethod
    def forward(ctx, hidden: torch.Tensor, head: torch.Tensor, targets: torch.Tensor):
        flat, labels = hidden.reshape(-1, hidden.shape[-1]), targets.reshape(-1)
        count = flat.shape[0]
        wide = torch.promote_types(flat.dtype, torch.float32)  # softmax and sums: fp32 at least
        grad_hidden = torch.empty_like(flat)
        grad_head = torch.zeros(head.shape, dtype=wide, device=head.device)
        total = torch.zeros((), dtype=wide, device=flat.device)
        for start in range(0, count, LOSS_CHUNK_TOKENS):
            h = flat[start : start + LOSS_CHUNK_TOKENS]
            y = labels[start : start + LOSS_CHUNK_TOKENS]
            loss, grad = _chunk_loss(h, head, y, count, wide)
            total += loss
            grad_hidden[start : start + LOSS_CHUNK_TOKENS] = grad @ head
            grad_head += (grad.t() @ h).to(wide)
        ctx.save_for_backward(grad_hidden.view_as(hidden), grad_head.to(head.dtype))
        return total / count

    @staticmethod
    def backward(ctx, grad_loss: torch.Tensor):
        grad_hidden, grad_head = ctx.saved_tensors
        return grad_hidden * grad_loss, grad_head * grad_loss, None


def chunked_cross_entropy(outputs: Hidden, targets: torch.Tensor) -> torch.Tensor:
    """The native model's training loss (a workload loss: outputs, targets -> scalar)."""
    return _ChunkedCrossEntropy.apply(outputs.hidden, outputs.head, targets)
