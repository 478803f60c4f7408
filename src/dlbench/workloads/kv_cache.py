"""The native Llama's static KV cache: keys and values per layer, written in place at the
positions a step is given (workloads.llama), so that a step has static shapes."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class KVCache:
    """Static keys and values per layer, [batch, kv_heads, max_len, head_dim], written in place."""

    keys: list[torch.Tensor]
    values: list[torch.Tensor]

    def reset(self) -> None:
        for t in (*self.keys, *self.values):
            t.zero_()

    @property
    def max_len(self) -> int:
        """The positions each sequence's cache holds."""
        return self.keys[0].shape[2]

    def rows(self, count: int) -> KVCache:
        """The first `count` sequences' cache, as views (written in place like the whole)."""
        return KVCache([k[:count] for k in self.keys], [v[:count] for v in self.values])

    def bytes_per_token(self) -> int:
        """Cache bytes one token of context takes in one sequence, over all layers."""
        return sum(2 * k.shape[1] * k.shape[3] * k.element_size() for k in self.keys)
