"""The two decoders generation drives, behind one interface (reset, prefill, decode, the cache's
bytes per token): transformers' model with its StaticCache, and the native Llama with its own
cache; and the greedy token both use."""

from __future__ import annotations

import inspect
from typing import Any

import torch

from dlbench.workloads.llama import NativeLlama


class HfDecoder:
    """transformers' own model and StaticCache (`--llm-impl hf`: benchmarks transformers)."""

    impl = "hf"
    kernel_decode = False

    def __init__(self, model: Any, max_len: int) -> None:
        from transformers import StaticCache

        self.model = model
        self.cache = StaticCache(config=model.config, max_cache_len=max_len)
        self._cache = {cache_argument(model): self.cache}

    def reset(self) -> None:
        self.cache.reset()

    def prefill(self, prompts: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return self.model(
            input_ids=prompts,
            cache_position=positions,
            logits_to_keep=1,
            use_cache=True,
            **self._cache,
        ).logits

    def decode(self, token: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
        return self.model(
            input_ids=token, cache_position=position, use_cache=True, **self._cache
        ).logits

    def kv_bytes_per_token(self) -> int:
        return sum(
            2 * layer.keys.shape[1] * layer.keys.shape[3] * layer.keys.element_size()
            for layer in self.cache.layers
        )


def cache_argument(model: Any) -> str:
    """The name the model's forward takes its cache by: `cache` where transformers has it (it
    supersedes `past_key_values`, which goes in 5.40), else `past_key_values` (the releases
    before, the GPU image's 5.17 among them)."""
    parameters = inspect.signature(model.forward).parameters
    return "cache" if "cache" in parameters else "past_key_values"


class NativeDecoder:
    """The native Llama with fused projections and its static cache (`--llm-impl native`)."""

    impl = "native"

    def __init__(self, model: NativeLlama, batch: int, max_len: int, sdpa_only: bool) -> None:
        self.model = model
        self.cache = model.setup_cache(batch, max_len)
        model.decode_kernels = not sdpa_only  # --attention asks for one of SDPA's kernels
        # each decode step the Triton kernels end to end (batch 1 on CUDA in half precision):
        # launched as called, each starts while the one before finishes (programmatic
        # dependent launch), which inductor's launches of them would forgo
        self.kernel_decode = model.kernel_decode(batch)

    def reset(self) -> None:
        self.cache.reset()

    def prefill(self, prompts: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return self.model.logits(prompts, positions)

    def decode(self, token: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
        return self.model.logits(token, position)

    def kv_bytes_per_token(self) -> int:
        return self.cache.bytes_per_token()


# Logits per first-stage maximum in greedy_token (docs/decisions.md#greedy-block).
GREEDY_BLOCK = 256


def greedy_token(logits: torch.Tensor) -> torch.Tensor:
    """The greedy token of each row of [batch, vocab] logits, [batch, 1]: the first index of
    the maximum, as argmax gives it, in two stages (the maximum of each block of GREEDY_BLOCK,
    then of the blocks), since one row of a large vocabulary's logits is one long serial
    reduction for inductor."""
    batch, vocab = logits.shape
    if vocab % GREEDY_BLOCK:
        return logits.argmax(-1, keepdim=True)
    values, within = logits.view(batch, -1, GREEDY_BLOCK).max(-1)
    block = values.argmax(-1, keepdim=True)
    return block * GREEDY_BLOCK + within.gather(-1, block)
