"""Image classifiers from timm, random weights: the named set and any `timm:NAME`."""

from __future__ import annotations

import torch
from torch import nn

from dlbench.errors import unknown_choice
from dlbench.workloads.base import Batch, InputShape, SizeRule, Workload, cross_entropy
from dlbench.workloads.registry import register_prefix, register_workload

NUM_CLASSES = 1000
CNN_RULE = SizeRule(minimum=32)
PATCH16_RULE = SizeRule(minimum=32, multiple=16, reason=" (16-pixel patches)")
SWIN_RULE = SizeRule(minimum=32, multiple=32, reason=" (4-pixel patches merged 3 times)")


def classification_batch(batch_size: int, shape: InputShape, gen: torch.Generator) -> Batch:
    """Random pixels and random class labels."""
    on = gen.device
    pixels = torch.randn(batch_size, 3, shape.height, shape.width, generator=gen, device=on)
    labels = torch.randint(0, NUM_CLASSES, (batch_size,), generator=gen, device=on)
    return Batch(pixels, labels)


def _timm_builder(timm_name: str):
    def build(shape: InputShape) -> nn.Module:
        import timm

        kwargs: dict = {"pretrained": False, "num_classes": NUM_CLASSES}
        try:  # transformers fix their position grid at build time; CNNs take any size
            return timm.create_model(timm_name, img_size=(shape.height, shape.width), **kwargs)
        except TypeError:
            return timm.create_model(timm_name, **kwargs)

    return build


def classifier(
    name: str, timm_name: str, summary: str, rule: SizeRule, optimizer: str = "sgd"
) -> Workload:
    """A timm classifier workload, trained with the optimizer its family is trained with."""
    return Workload(
        name=name,
        summary=f"{summary} (timm {timm_name})",
        family="vision",
        sample_unit="image",
        build=_timm_builder(timm_name),
        make_batch=classification_batch,
        loss=cross_entropy,
        size_rule=rule,
        default_optimizer=optimizer,
        num_classes=NUM_CLASSES,
    )


def timm_workload(timm_name: str) -> Workload:
    """Any model timm can build, by its timm name; its size limits are timm's own."""
    import timm

    if not timm.is_model(timm_name):
        raise unknown_choice(
            "--model", f"timm:{timm_name}", [f"timm:{n}" for n in timm.list_models()]
        )
    return classifier(f"timm:{timm_name}", timm_name, "timm model", SizeRule(minimum=8))


for _name, _timm, _summary, _rule, _optimizer in (
    ("resnet50", "resnet50", "ResNet-50", CNN_RULE, "sgd"),
    ("convnext", "convnext_base", "ConvNeXt-Base", CNN_RULE, "adamw"),
    ("vgg16", "vgg16", "VGG-16", CNN_RULE, "sgd"),
    ("efficientnet_v2", "efficientnetv2_m", "EfficientNetV2-M", CNN_RULE, "sgd"),
    ("mobilenet_v3", "mobilenetv3_large_100", "MobileNetV3-Large", CNN_RULE, "sgd"),
    ("resnext50", "resnext50_32x4d", "ResNeXt-50 32x4d", CNN_RULE, "sgd"),
    ("swin", "swin_base_patch4_window7_224", "Swin-B, window 7", SWIN_RULE, "adamw"),
    ("vit", "vit_base_patch16_224", "ViT-B/16", PATCH16_RULE, "adamw"),
):
    register_workload(classifier(_name, _timm, _summary, _rule, _optimizer))

TIMM_PREFIX = "timm:"
register_prefix(TIMM_PREFIX, timm_workload, "<any timm model>")
