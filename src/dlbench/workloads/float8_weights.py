"""Weights quantized to float8 for inference (torchao's Float8Tensor, a scale per row), as the
batch-1 decode kernels read them, and the bytes any weight takes as stored."""

from __future__ import annotations

import torch


def float8_weight(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(float8 data, a scale per output row) of a weight quantized for inference (torchao's
    Float8Tensor, per row), None for a plain weight: batch-1 decode reads them itself."""
    data, scale = getattr(weight, "qdata", None), getattr(weight, "scale", None)
    if data is None or scale is None or data.dtype != torch.float8_e4m3fn:
        return None
    if scale.numel() != data.shape[0]:  # a scale per tensor: not what the GEMV applies
        return None
    return data, scale.reshape(-1).float()


def stored_bytes(tensor: torch.Tensor) -> int:
    """Bytes a tensor takes on its device: a float8 weight's data and scales as stored."""
    fp8 = float8_weight(tensor)
    if fp8 is not None:
        return sum(t.numel() * t.element_size() for t in fp8)
    return tensor.numel() * tensor.element_size()
