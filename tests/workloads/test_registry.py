from __future__ import annotations

import pytest
import torch

from dlbench.errors import UserError
from dlbench.workloads import get_workload, is_workload, list_workloads

NAMED_VISION = [
    "resnet50",
    "convnext",
    "vgg16",
    "efficientnet_v2",
    "mobilenet_v3",
    "resnext50",
    "swin",
    "vit",
    "unet_resnet50",
]


def test_registry_lists_with_wildcards():
    assert set(NAMED_VISION) <= set(list_workloads())
    assert list_workloads("*vit*") == ["vit"]
    assert "distilbert" in list_workloads("distil*")


def test_unknown_model_suggests_nearest_and_lists_valid():
    with pytest.raises(UserError) as err:
        get_workload("resnet5")
    message = str(err.value)
    assert "--model" in message and "'resnet5'" in message
    assert "Did you mean resnet50" in message and "vgg16" in message


def test_timm_prefix_builds_any_timm_model():
    assert is_workload("timm:test_resnet")
    assert not is_workload("timm:no_such_net")


def test_size_rules_name_the_flag():
    with pytest.raises(UserError, match="--height.*multiple of 16"):
        get_workload("vit").shape(224, 100, 128)
    with pytest.raises(UserError, match="--width.*at least 32"):
        get_workload("resnet50").shape(16, 224, 128)
    assert get_workload("swin").shape(256, 192, 128).width == 256


@pytest.mark.parametrize("name", NAMED_VISION)
@pytest.mark.slow
def test_every_named_vision_workload_builds_and_runs_a_step(name):
    w = get_workload(name)
    shape = w.shape(64, 64, 128)
    torch.manual_seed(0)
    model = w.build(shape)
    batch = w.make_batch(2, shape, torch.Generator().manual_seed(0))
    loss = w.loss(model(batch.inputs), batch.targets)
    loss.backward()
    assert torch.isfinite(loss)
    assert w.pixels_per_sample(shape) == 64 * 64 and w.tokens_per_sample(shape) is None
