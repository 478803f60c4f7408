"""On a GPU (skipped elsewhere; run by the device script): a step replayed as a CUDA graph
computes what the eager step computes, a step that syncs with the host falls back to eager
(and still runs), and inference's weights held in the autocast dtype give the outputs autocast
gives from fp32 weights."""

from __future__ import annotations

import pytest
import torch

from dlbench.engine.acceleration.graphs import graphed_step
from dlbench.engine.acceleration.precision import hold_autocast_weights, plan_precision
from dlbench.workloads import get_workload


def replay_equals_eager(model_name: str, batch: int, dtype: torch.dtype) -> bool:
    workload = get_workload(model_name)
    shape = workload.shape(32 if model_name.startswith("timm:") else None, None, 128)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = workload.build(shape).eval().to(memory_format=torch.channels_last)
    batch_ = workload.make_batch(batch, shape, torch.Generator().manual_seed(1))
    inputs = batch_.inputs.cuda().to(dtype).contiguous(memory_format=torch.channels_last)
    out: dict[str, torch.Tensor] = {}

    def body(x: torch.Tensor, _y: torch.Tensor) -> None:
        with torch.autocast("cuda", dtype=dtype):
            out["y"] = model(x)

    with torch.inference_mode():
        body(inputs, batch_.targets)
        eager = out["y"].float().clone()
        step = graphed_step(
            lambda i: None,
            body,
            [(inputs, batch_.targets)],
            None,
            lambda: None,
            torch.device("cuda"),
        )
        out["y"].zero_()
        step.step(0)
        torch.cuda.synchronize()
        replayed = out["y"].float()
    diff = (replayed - eager).abs().max().item()
    ok = step.graphed and diff <= 1e-3 * max(1.0, eager.abs().max().item())
    print(
        f"{'ok  ' if ok else 'FAIL'} {model_name} bs{batch} {dtype}: graphed={step.graphed} "
        f"max |replay - eager| = {diff:.3g}"
    )
    return ok


def host_sync_falls_back() -> bool:
    x = torch.randn(4, 8, device="cuda")
    calls = []

    def body(inputs: torch.Tensor, _y: torch.Tensor) -> None:
        calls.append(float(inputs.abs().max().item()))  # a host sync: capture must refuse

    step = graphed_step(
        lambda i: body(x, x), body, [(x, x)], None, lambda: None, torch.device("cuda")
    )
    step.step(0)
    torch.cuda.synchronize()
    ok = not step.graphed and bool(step.fallback) and len(calls) > 0
    print(f"{'ok  ' if ok else 'FAIL'} host sync falls back to eager: {step.fallback}")
    return ok


def held_weights_equal_autocast(model_name: str, batch: int) -> bool:
    workload = get_workload(model_name)
    shape = workload.shape(None, None, 128)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = workload.build(shape).eval()
    data = workload.make_batch(batch, shape, torch.Generator().manual_seed(1)).inputs.cuda()
    if data.is_floating_point():
        data = data.to(torch.bfloat16)
    outputs = []
    for hold in (False, True):
        if hold:
            cast = hold_autocast_weights(model, plan_precision("bf16-mixed", "cuda"))
        with torch.inference_mode(), torch.autocast("cuda", dtype=torch.bfloat16):
            out = model(data)
        outputs.append(getattr(out, "logits", out).float())
    same = torch.equal(*outputs)
    diff = (outputs[0] - outputs[1]).abs().max().item()
    print(f"{'ok  ' if same else 'FAIL'} {model_name} held bf16 weights ({cast:,} cast): "
          f"outputs bit for bit equal={same}, max diff {diff:.3g}")  # fmt: skip
    return same


pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.parametrize(
    ("model_name", "batch", "dtype"),
    [("timm:test_resnet", 2, torch.float32), ("resnet50", 1, torch.bfloat16)],
)
def test_replay_equals_eager(model_name: str, batch: int, dtype: torch.dtype) -> None:
    assert replay_equals_eager(model_name, batch, dtype)


def test_host_sync_falls_back_then_graphs_still_capture() -> None:
    assert host_sync_falls_back()
    assert replay_equals_eager("timm:test_vit", 2, torch.bfloat16)


@pytest.mark.parametrize("model_name", ["resnet50", "vit", "distilbert"])
def test_held_weights_equal_autocast(model_name: str) -> None:
    assert held_weights_equal_autocast(model_name, 1)
