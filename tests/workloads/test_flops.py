"""FLOP counts that match what the kernels do: a train step costs about three forwards for every
vision workload, grouped and depthwise convolutions included."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from dlbench.workloads import get_workload, list_workloads
from dlbench.workloads.flops import count_module_flops, flops_per_sample

# dlbench's own image workloads (other tests register toy ones in the same process)
VISION = [
    n
    for n in list_workloads()
    if get_workload(n).is_image and get_workload(n).build.__module__.startswith("dlbench.")
]


@pytest.mark.parametrize("name", VISION)
@pytest.mark.slow
def test_train_flops_are_about_three_forwards(name):
    workload = get_workload(name)
    shape = workload.shape(None, None, 0)
    infer = flops_per_sample(workload, shape, "infer")
    train = flops_per_sample(workload, shape, "train")
    assert infer is not None and train is not None
    assert 2.8 <= train.per_sample / infer.per_sample <= 3.2


def test_depthwise_conv_backward_by_hand():
    # 32 channels, 3x3 depthwise, 8x8 output, batch 2: one multiply-add per weight and pixel
    conv = nn.Conv2d(32, 32, 3, padding=1, groups=32, bias=False)
    x = torch.randn(2, 32, 8, 8, requires_grad=True)
    forward = 2 * 2 * 32 * 8 * 8 * 9  # 2 FLOPs x batch x channels x pixels x taps
    assert count_module_flops(lambda: conv(x).sum()) == forward
    # backward: grad-input (a transposed depthwise conv) + grad-weight, each one forward's worth
    assert count_module_flops(lambda: conv(x).sum().backward()) == 3 * forward


def test_grouped_conv_backward_by_hand():
    conv = nn.Conv2d(64, 128, 1, groups=4, bias=False)
    x = torch.randn(3, 64, 5, 5)  # no grad for the input: only grad-weight in backward
    forward = 2 * 3 * 128 * (64 // 4) * 25
    assert count_module_flops(lambda: conv(x).sum().backward()) == 2 * forward
