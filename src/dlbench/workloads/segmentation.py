"""UNet with a ResNet-50 encoder from segmentation-models-pytorch, per-pixel loss."""

from __future__ import annotations

import torch
from torch import nn

from dlbench.errors import UserError
from dlbench.workloads.base import Batch, InputShape, SizeRule, Workload, cross_entropy
from dlbench.workloads.registry import register_workload

NUM_SEG_CLASSES = 21


def segmentation_batch(batch_size: int, shape: InputShape, gen: torch.Generator) -> Batch:
    """Random pixels and a random class per pixel."""
    on, size = gen.device, (batch_size, shape.height, shape.width)
    pixels = torch.randn(batch_size, 3, shape.height, shape.width, generator=gen, device=on)
    mask = torch.randint(0, NUM_SEG_CLASSES, size, generator=gen, device=on)
    return Batch(pixels, mask)


def build_unet_resnet50(shape: InputShape) -> nn.Module:
    """smp.Unet with random encoder weights (no download)."""
    try:
        import segmentation_models_pytorch as smp
    except ImportError as exc:
        raise UserError(
            "--model unet_resnet50 needs segmentation-models-pytorch: pip install 'dlbench[seg]'"
        ) from exc
    return smp.Unet("resnet50", encoder_weights=None, classes=NUM_SEG_CLASSES)


register_workload(
    Workload(
        name="unet_resnet50",
        summary="UNet, ResNet-50 encoder, 21 classes (segmentation-models-pytorch)",
        family="segmentation",
        sample_unit="image",
        build=build_unet_resnet50,
        make_batch=segmentation_batch,
        loss=cross_entropy,
        size_rule=SizeRule(minimum=32, multiple=32, reason=" (5 encoder downsamplings)"),
    )
)
