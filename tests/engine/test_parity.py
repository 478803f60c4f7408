"""`validate` compares loops, not inputs: the bare loop and the dlbench loop get the same input
dtype, memory layout and optimizer (type, hyper-parameters, implementation)."""

from __future__ import annotations

import pytest
import torch

from dlbench.config import RunConfig
from dlbench.engine.distribution.fabric import create_fabric
from dlbench.engine.plan import make_plan
from dlbench.engine.scenarios.bare import BareLoop
from dlbench.engine.scenarios.session import open_session


def _optimizer_settings(optimizer: torch.optim.Optimizer) -> tuple:
    group = {k: v for k, v in optimizer.param_groups[0].items() if k != "params"}
    return type(optimizer).__name__, sorted(group.items())


@pytest.mark.parametrize(
    ("model", "precision"),
    [("timm:test_resnet", "bf16-mixed"), ("timm:test_vit", "bf16-true"), ("llm_tiny", "32")],
)
def test_bare_and_dlbench_loops_get_identical_inputs_and_optimizer(model, precision):
    config = RunConfig.of(
        model=model, accelerator="cpu", precision=precision, batch_size=2, width=32, height=32
    )
    if model == "timm:test_vit":
        config = config.replace(optimizer="adamw")
    plan = make_plan(config)
    fabric = create_fabric(plan.devices, plan.fabric_precision)
    session = open_session(plan.config, plan.workload, plan.shape, plan.precision, fabric)
    bare = BareLoop(plan.workload, plan.shape, plan.config, plan.precision, session.device)
    for ours, theirs in zip(session.batches, bare.batches):
        assert ours.inputs.dtype == theirs[0].dtype
        assert ours.inputs.stride() == theirs[0].stride()  # same layout (channels_last)
        assert ours.targets.dtype == theirs[1].dtype
    assert _optimizer_settings(session.optimizer) == _optimizer_settings(bare.optimizer)


def test_mixed_precision_inputs_are_cast_once_at_setup_for_both_loops():
    plan = make_plan(
        RunConfig.of(model="timm:test_resnet", accelerator="cpu", precision="bf16-mixed", width=32)
    )
    assert plan.precision.input_dtype is torch.bfloat16


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("vit", "adamw"),
        ("swin", "adamw"),
        ("convnext", "adamw"),
        ("distilbert", "adamw"),
        ("llm_1b", "adamw"),
        ("resnet50", "sgd"),
        ("mobilenet_v3", "sgd"),
        ("unet_resnet50", "sgd"),
    ],
)
def test_transformers_train_with_adamw_and_cnns_with_sgd_by_default(model, expected):
    plan = make_plan(RunConfig.of(model=model, accelerator="cpu"))
    assert plan.config.workload.optimizer == expected
    chosen = make_plan(RunConfig.of(model=model, accelerator="cpu", optimizer="adam"))
    assert chosen.config.workload.optimizer == "adam"
