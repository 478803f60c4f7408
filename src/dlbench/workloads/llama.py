"""A compact Llama written for the GPU (`--llm-impl native`), loaded with the transformers
model's own random weights, so both implementations compute the same function.

What makes it fast where the transformers module layout is slow: q, k and v projected by one
weight and gate and up by one (concatenated once, at load), fewer and larger GEMVs at batch 1;
a static KV cache written in place at a position tensor on the device, so a decode step has
static shapes and compiles (norms, RoPE and residuals fused by inductor) and captures as one
CUDA graph; and for training, a loss that never materialises the large vocabulary's logits of
the whole batch in fp32 (workloads.llm_loss). One forward takes one path for all its layers
(`ForwardPath`): at batch-1 decode on CUDA in half precision the whole step runs as Triton kernels
(workloads.decode_kernels): the projections with their norms and residual adds, the attention
with RoPE and the cache write, and the greedy token."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from dlbench.workloads.float8_weights import float8_weight
from dlbench.workloads.kv_cache import KVCache
from dlbench.workloads.llm_loss import Hidden, LogitsInLoss


class RMSNorm(nn.Module):
    """transformers' LlamaRMSNorm: normalised in fp32, scaled in the weights' dtype."""

    def __init__(self, hidden: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.eps = eps

    def reset_parameters(self) -> None:
        """Unit scale (a model built on the meta device is filled by this)."""
        nn.init.ones_(self.weight)

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

    def forward(self, x, path: ForwardPath, cache: tuple[torch.Tensor, torch.Tensor] | None, pos):
        qkv = path.project(x, self.wqkv, norm=self.attention_norm)
        out = path.attend(self, qkv, cache, pos)
        x = path.project(out, self.wo, residual=x)
        gate_up = path.project(x, self.w13, norm=self.ffn_norm)
        return path.project(gate_up, self.w2, gated=True, residual=x)

    def attend(self, qkv, cos, sin, cache, pos, mask, per_row: bool = False) -> torch.Tensor:
        """RoPE and SDPA: causal over the sequence (training), or the new positions written to
        the static cache and attending to it up to the position ([b, t, heads * head_dim]);
        `per_row`: one new token a sequence, each at its own position (a served batch)."""
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
            if per_row:
                rows = torch.arange(b, device=pos.device)
                keys[rows, :, pos] = k[:, :, 0]
                values[rows, :, pos] = v[:, :, 0]
            else:
                keys.index_copy_(2, pos, k)
                values.index_copy_(2, pos, v)
            out = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, enable_gqa=True)
        return out.transpose(1, 2).reshape(b, t, -1)


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
    linear: nn.Linear,
    norm: RMSNorm | None = None,
    gated: bool = False,
    residual: torch.Tensor | None = None,
) -> torch.Tensor:
    """residual + linear(f(x)) in torch's ops, f: RMSNorm `norm`, silu(gate) * up of the fused
    gate/up projection's output (`gated`), or nothing (`ForwardPath.project` fuses the same
    into the GEMV kernel). The layer's own forward runs, so a layer swapped for torchao's
    Float8Linear computes in FP8."""
    if norm is not None:
        x = norm(x)
    if gated:
        gate, up = x.chunk(2, dim=-1)
        x = F.silu(gate) * up
    out = linear(x)
    return out if residual is None else residual + out


@dataclass(frozen=True)
class ForwardPath:
    """How one forward computes, chosen once for all its layers (`NativeLlama.path`): the
    projections through the GEMV kernel or torch's ops, the attention through the decode
    kernel (which forms RoPE from `rope` = frequencies and scale, and writes the cache) or
    torch's SDPA (`rope` = cos and sin at the positions, `mask` over the static cache)."""

    gemv: bool
    kernel_attention: bool
    rope: tuple
    mask: torch.Tensor | None = None
    per_row: bool = False  # decode of sequences at positions of their own (Block.attend)

    def project(self, x: torch.Tensor, linear: nn.Linear, **fused) -> torch.Tensor:
        """`project`, by the GEMV kernel with its norm, gate and residual fused on this path
        (a float8 weight read as float8, scaled per row)."""
        if not self.gemv:
            return project(x, linear, **fused)
        from dlbench.workloads.decode_kernels import gemv

        norm, residual = fused.get("norm"), fused.get("residual")
        weight, scale = float8_weight(linear.weight) or (linear.weight, None)
        out = gemv(
            x.reshape(-1).contiguous(),
            weight,
            fused.get("gated", False),
            None if norm is None else norm.weight,
            1e-6 if norm is None else norm.eps,
            None if residual is None else residual.reshape(-1).contiguous(),
            scale,
        )
        return out.view(*x.shape[:-1], -1)

    def attend(self, block: Block, qkv: torch.Tensor, cache, pos) -> torch.Tensor:
        """The layer's attention output, [b, t, heads * head_dim]."""
        if not self.kernel_attention:
            return block.attend(qkv, *self.rope, cache, pos, self.mask, self.per_row)
        from dlbench.workloads.decode_attention import decode_attention

        b, t, _ = qkv.shape
        rows = qkv.reshape(b, -1)
        return decode_attention(rows, *cache, pos, *self.rope, block.heads).view(b, t, -1)


def _rope_frequencies(rotary: nn.Module, config) -> torch.Tensor:
    """The rotary module's inverse frequencies on the host: made again there where the model
    was built on the meta device (they are computed, not learned)."""
    if rotary.inv_freq.is_meta:
        with torch.device("cpu"):
            rotary = type(rotary)(config)
    return rotary.inv_freq.detach().float().cpu()


class NativeLlama(nn.Module, LogitsInLoss):
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
        self.frequencies = torch.ones(self.head_dim // 2, device="cpu")  # inv_freq's values
        self.cache: KVCache | None = None
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
            native.frequencies = _rope_frequencies(model.rotary_emb, config)
            native.inv_freq.copy_(native.frequencies)
        native.rope_scaling = float(getattr(model.rotary_emb, "attention_scaling", 1.0))
        return native

    def reset_parameters(self) -> None:
        """RoPE's frequencies again (a model built on the meta device is filled by this; its
        layers fill their own weights)."""
        with torch.no_grad():
            self.inv_freq.copy_(self.frequencies)

    def kernel_decode(self, batch: int) -> bool:
        """Whether a decode step of `batch` sequences runs the Triton kernels end to end."""
        return self._kernels(batch, self.output.weight.dtype, generating=True)[1]

    def _kernels(self, rows: int, dtype: torch.dtype, generating: bool) -> tuple[bool, bool]:
        """The one choice of path: (GEMV for the projections, the decode attention kernel).
        Generation of one vector in the weights' half precision on CUDA takes the GEMV; the
        attention kernel too unless --attention asked for one of SDPA's kernels."""
        gemv = generating and _kernel_sized(rows, dtype, self.output.weight)
        return gemv, gemv and self.decode_kernels

    def path(
        self,
        rows: int,
        dtype: torch.dtype,
        positions: torch.Tensor,
        cache: KVCache | None,
        per_row: bool = False,
    ) -> ForwardPath:
        """The path of a forward over `rows` token vectors at `positions`: generation (a
        `cache`) reads and writes the static cache up to them, training attends causally;
        `per_row`: a position for each sequence's one new token rather than for each token."""
        gemv, kernel_attention = self._kernels(rows, dtype, cache is not None)
        if kernel_attention:
            return ForwardPath(True, True, (self.inv_freq, self.rope_scaling))
        if cache is None:
            return ForwardPath(gemv, False, self._rope(positions, dtype))
        span = torch.arange(cache.max_len, device=positions.device)
        mask = (span[None, :] <= positions[:, None])[None, None]  # [1, 1, T, max_len]
        cos, sin = self._rope(positions, dtype)
        if per_row:  # [1, 1, b, ...] -> [b, 1, 1, ...]: sequence i at positions[i]
            cos, sin, mask = cos.transpose(0, 2), sin.transpose(0, 2), mask.transpose(0, 2)
        return ForwardPath(gemv, False, (cos, sin), mask, per_row)

    def get_input_embeddings(self) -> nn.Embedding:
        """The token table (named as transformers names it, for the decode byte count)."""
        return self.embed

    def get_output_embeddings(self) -> nn.Linear:
        """The output layer (shares its weight with the table when tied)."""
        return self.output

    def setup_cache(self, batch: int, max_len: int, dtype: torch.dtype | None = None) -> KVCache:
        """Static keys and values for `batch` sequences of up to `max_len` tokens, in `dtype`
        (default: the output weights')."""
        ref = self.output.weight
        on = {"dtype": dtype or ref.dtype, "device": ref.device}
        shape = (batch, self.kv_heads, max_len, self.head_dim)
        keys = [torch.zeros(shape, **on) for _ in self.layers]
        values = [torch.zeros(shape, **on) for _ in self.layers]
        self.cache = KVCache(keys, values)
        return self.cache

    def _rope(self, positions: torch.Tensor, dtype: torch.dtype):
        freqs = positions[:, None].float() * self.inv_freq[None, :]
        angles = torch.cat((freqs, freqs), dim=-1)
        cos, sin = angles.cos() * self.rope_scaling, angles.sin() * self.rope_scaling
        return cos.to(dtype)[None, None], sin.to(dtype)[None, None]

    def hidden_states(
        self,
        ids: torch.Tensor,
        positions: torch.Tensor | None = None,
        cache: KVCache | None = None,
        blocks: Sequence[nn.Module] | None = None,
    ):
        """The last layer's output, before the final norm: over the sequence (training), or
        for `positions` with the cache (generation: prefill writes positions 0..T-1, decode
        one position; `cache` in place of the model's own). A decode of b > 1 sequences
        given b positions runs each sequence at its own (a served batch). `blocks`: the
        layers as called (a server's compiled ones), default the model's."""
        x = self.embed(ids)
        generating = positions is not None
        if not generating:
            positions = torch.arange(ids.shape[1], device=ids.device)
        cache = (cache or self.cache) if generating else None
        per_row = generating and ids.shape[1] == 1 and positions.numel() == ids.shape[0] > 1
        path = self.path(ids.numel(), x.dtype, positions, cache, per_row)
        for i, block in enumerate(blocks or self.layers):
            layer_cache = (cache.keys[i], cache.values[i]) if cache is not None else None
            x = block(x, path, layer_cache, positions)
        return x

    def forward(self, ids: torch.Tensor) -> Hidden:
        """Training: the hidden states and the output weight (the loss forms the logits)."""
        return Hidden(self.norm(self.hidden_states(ids)), self.output.weight, self.head_float8)

    def logits(
        self,
        ids: torch.Tensor,
        positions: torch.Tensor,
        cache: KVCache | None = None,
        last: torch.Tensor | None = None,
        blocks: Sequence[nn.Module] | None = None,
    ) -> torch.Tensor:
        """Generation: logits of the last position only, or of position `last[i]` of sequence
        i (prompts padded after their end to one length); `blocks` as `hidden_states`."""
        hidden = self.hidden_states(ids, positions, cache, blocks)
        if last is None:
            last = hidden[:, -1:]
        else:
            last = hidden[torch.arange(hidden.shape[0], device=hidden.device), last][:, None]
        gemv, _ = self._kernels(last.shape[0], last.dtype, generating=True)
        return ForwardPath(gemv, False, ()).project(last, self.output, norm=self.norm)
