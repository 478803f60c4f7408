"""--attention: which fused kernel scaled_dot_product_attention runs, held for a whole run.

PyTorch picks the kernel from the shapes and the GPU; on an H100 it picks cuDNN's for ViT-B at
batch 1, whose memset before each call leaves the GPU idle inside a CUDA graph
(docs/decisions.md#attention-default). The choice holds from model build to profiled pass, so that
compilation traces the kernel asked for, and it is part of the compile caches' key: a cached
compile made under another choice would otherwise be reused as it was traced."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

# --attention's names (config.ATTENTION_KERNELS) as SDPA's backends
SDPA_BACKENDS = {
    "flash": SDPBackend.FLASH_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
    "math": SDPBackend.MATH,
}


@contextmanager
def attention_kernel(choice: str | None) -> Iterator[None]:
    """Only `choice`'s SDPA kernel inside (flash, efficient, cudnn or math); PyTorch's own
    choice for None."""
    if choice is None:
        yield
        return
    tag = f"{torch.compiler.config.cache_key_tag}attention={choice};"
    with sdpa_kernel(SDPA_BACKENDS[choice]), torch.compiler.config.patch(cache_key_tag=tag):
        yield
