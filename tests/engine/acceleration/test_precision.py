"""Inference under autocast holds Linear and Conv weights in the autocast dtype, cast once: the
outputs must be bit for bit those of autocast casting fp32 weights on every call."""

from __future__ import annotations

import copy

import pytest
import timm
import torch
from torch import nn

from dlbench.engine.acceleration.precision import hold_autocast_weights, plan_precision
from dlbench.workloads import InputShape, get_workload

BF16_MIXED = plan_precision("bf16-mixed", "cpu")


def _outputs(model: nn.Module, inputs: torch.Tensor) -> torch.Tensor:
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(inputs)
    return getattr(out, "logits", out)


@pytest.mark.parametrize("name", ["test_resnet", "test_vit", "test_efficientnet", "test_nfnet"])
def test_held_weights_give_the_outputs_autocast_gives(name):
    torch.manual_seed(0)
    model = timm.create_model(name, num_classes=10).eval()
    inputs = torch.randn(2, 3, 64, 64).to(torch.bfloat16)
    held = copy.deepcopy(model)
    assert hold_autocast_weights(held, BF16_MIXED) > 0
    assert torch.equal(_outputs(model, inputs), _outputs(held, inputs))


def test_distilbert_held_weights_give_the_same_logits():
    torch.manual_seed(0)
    workload = get_workload("distilbert")
    model = workload.build(InputShape(width=0, height=0, seq_len=16)).eval()
    tokens = torch.randint(0, 1000, (2, 16))
    held = copy.deepcopy(model)
    cast = hold_autocast_weights(held, BF16_MIXED)
    linear = sum(p.numel() for m in model.modules() if type(m) is nn.Linear for p in m.parameters())
    assert cast == linear  # every Linear, never the embeddings or the norms
    assert held.distilbert.embeddings.word_embeddings.weight.dtype == torch.float32
    assert torch.equal(_outputs(model, tokens), _outputs(held, tokens))


def test_a_weight_another_module_holds_and_a_layer_with_its_own_forward_stay_fp32():
    class Standardised(nn.Conv2d):
        def forward(self, x):
            return super().forward(x) * 2

    embed = nn.Embedding(10, 4)
    head = nn.Linear(4, 10, bias=False)
    head.weight = embed.weight  # tied, as LLM output layers are
    model = nn.ModuleDict({"embed": embed, "head": head, "conv": Standardised(3, 3, 1)})
    assert hold_autocast_weights(model, BF16_MIXED) == 0
    assert all(p.dtype == torch.float32 for p in model.parameters())


def _called_module(function) -> nn.Module:
    """The module a step's forward closure calls (through the wrappers around it)."""
    for cell in function.__closure__ or ():
        inner = cell.cell_contents
        if isinstance(inner, nn.Module):
            return inner
        if callable(inner) and getattr(inner, "__closure__", None):
            return _called_module(inner)
    raise AssertionError("no module in the closure")


@pytest.mark.parametrize("mode", ["infer", "train"])
def test_inference_holds_autocast_weights_and_training_keeps_fp32_masters(mode):
    """The dlbench session and validate's bare loop hold the same weights, so that validate
    compares like with like; training keeps fp32 weights for its optimizer."""
    from dlbench.config import RunConfig
    from dlbench.engine.distribution.fabric import create_fabric
    from dlbench.engine.plan import make_plan
    from dlbench.engine.scenarios.bare import BareLoop
    from dlbench.engine.scenarios.session import open_session

    config = RunConfig.of(model="timm:test_resnet", mode=mode, accelerator="cpu", batch_size=2,
                       precision="bf16-mixed", width=32, height=32)  # fmt: skip
    plan = make_plan(config)
    fabric = create_fabric(plan.devices, plan.fabric_precision)
    session = open_session(plan.config, plan.workload, plan.shape, plan.precision, fabric)
    bare = BareLoop(plan.workload, plan.shape, plan.config, plan.precision, torch.device("cpu"))
    want = torch.bfloat16 if mode == "infer" else torch.float32
    step_module = _called_module(session.phases.forward)  # what the step calls
    for model in (step_module, bare.model):
        convs = [m.weight for m in model.modules() if type(m) is nn.Conv2d]
        norms = [m.weight for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
        assert convs and all(w.dtype == want for w in convs)
        assert norms and all(w.dtype == torch.float32 for w in norms)
