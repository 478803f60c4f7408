"""On a GPU with FP8 tensor cores (skipped elsewhere): the native LLM's batch-1 decode reads
torchao's float8 weights in the GEMV and computes what torch computes from them; float8
training and inference run compiled end to end and record what ran in FP8."""

from __future__ import annotations

import csv

import pytest
import torch
from torch.nn import functional as F

from dlbench.config import RunConfig
from dlbench.config.fp8_recipes import recipe_named
from dlbench.engine.acceleration.float8 import quantize_for_inference
from dlbench.run import execute
from dlbench.workloads import InputShape, get_workload
from dlbench.workloads.float8_weights import float8_weight
from dlbench.workloads.llama import NativeLlama

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.get_device_capability() < (8, 9),
    reason="needs a GPU with FP8 tensor cores",
)


@pytest.mark.parametrize("recipe", ["rowwise_dynamic", "rowwise_dynamic_with_head"])
def test_batch1_decode_reads_float8_weights_and_agrees_with_torch_on_them(recipe) -> None:
    torch.manual_seed(0)
    with torch.device("cuda"):
        hf = get_workload("llm_125m").build(InputShape(0, 0, 64)).to(torch.bfloat16).eval()
    native = NativeLlama.from_transformers(hf).eval()
    layers = quantize_for_inference(native, recipe_named(recipe))
    head = recipe_named(recipe).with_head
    assert len(layers.names) == 4 * len(native.layers) + head
    data, scale = float8_weight(native.layers[0].wqkv.weight)
    assert data.dtype == torch.float8_e4m3fn and scale.shape == (data.shape[0],)
    assert (float8_weight(native.output.weight) is not None) == head  # bf16 by default
    ids = torch.randint(0, hf.config.vocab_size, (1, 17), device="cuda")
    position = torch.tensor([16], device="cuda")
    native.setup_cache(1, 64)
    with torch.inference_mode():
        native.logits(ids[:, :16], torch.arange(16, device="cuda"))
        assert native.path(1, torch.bfloat16, position, native.cache).gemv
        decoded = native.logits(ids[:, 16:], position).float().flatten()
        native.setup_cache(1, 64)  # all 17 through torch's ops (torchao's scaled matmul)
        expected = native.logits(ids, torch.arange(17, device="cuda")).float().flatten()
    assert F.cosine_similarity(decoded, expected, dim=0) > 0.99


@pytest.mark.parametrize(
    ("model", "mode"),
    [("llm_tiny", "train"), ("timm:test_vit", "train"), ("timm:test_vit", "infer")],
)
def test_fp8_runs_compiled_and_its_row_says_what_ran_in_fp8(tmp_path, model, mode) -> None:
    out = tmp_path / "rows.csv"
    shape = {"width": 64, "height": 64} if model.startswith("timm") else {"seq_len": 64}
    config = RunConfig.of(model=model, mode=mode, precision="fp8", batch_size=8, n_iters=10,
                          warmup_steps=2, output=out, **shape)  # fmt: skip
    assert execute(config) == 0
    [row] = list(csv.DictReader(out.read_text().splitlines()))
    assert row["precision"] == "fp8" and row["compile"] == "True"
    assert row["fp8_recipe"] == ("tensorwise" if mode == "train" else "rowwise_dynamic")
    assert int(row["fp8_linear_layers"]) > 0 and row["last_step_finite"] == "True"
    assert 0 < float(row["fp8_flops_share"]) <= 1


def test_training_with_the_head_in_float8_runs_compiled_and_counts_the_head(tmp_path) -> None:
    """llm_125m (a 32,000-token head FP8 can take): the loss's three GEMMs as scaled float8
    matmuls on the GPU, compiled; the row counts one layer more and a larger FP8 share."""
    out = tmp_path / "rows.csv"
    for recipe in ("tensorwise", "tensorwise_with_head"):
        config = RunConfig.of(model="llm_125m", mode="train", precision="fp8", batch_size=4,
                              seq_len=256, fp8_recipe=recipe, n_iters=10, warmup_steps=2,
                              output=out)  # fmt: skip
        assert execute(config) == 0
    body, with_head = list(csv.DictReader(out.read_text().splitlines()))
    assert with_head["fp8_recipe"] == "tensorwise_with_head"
    assert int(with_head["fp8_linear_layers"]) == int(body["fp8_linear_layers"]) + 1
    assert float(with_head["fp8_flops_share"]) > float(body["fp8_flops_share"])
    assert with_head["last_step_finite"] == "True" and with_head["status"] == "ok"
    assert float(with_head["final_loss"]) == pytest.approx(float(body["final_loss"]), rel=0.05)


def test_validate_holds_fp8_training_to_a_bare_torchao_loop(tmp_path) -> None:
    from dlbench.engine.validate import execute_validate

    out = tmp_path / "validate.csv"
    config = RunConfig.of(model="llm_tiny", mode="train", precision="fp8", batch_size=8,
                          seq_len=64, compile=True, n_iters=10, warmup_steps=2,
                          output=out)  # fmt: skip
    assert execute_validate(config, repeats=2) == 0
    [row] = list(csv.DictReader(out.read_text().splitlines()))
    assert row["precision"] == "fp8" and row["fp8_recipe"] == "tensorwise"
    ratios = [float(r) for r in row["harness_ratios"].split()]
    assert len(ratios) == 2 and all(0.5 < r < 2 for r in ratios)  # both loops ran, both timed


def test_decode_with_the_head_in_float8_reads_fewer_bytes_and_its_row_says_so(tmp_path) -> None:
    out = tmp_path / "rows.csv"
    for recipe in ("rowwise_dynamic", "rowwise_dynamic_with_head"):
        config = RunConfig.of(model="llm_125m", mode="infer", precision="fp8", batch_size=1,
                              fp8_recipe=recipe, prompt_len=16, new_tokens=16, n_iters=2,
                              warmup_steps=1, output=out)  # fmt: skip
        assert execute(config) == 0
    kept, quantized = list(csv.DictReader(out.read_text().splitlines()))
    assert quantized["fp8_recipe"] == "rowwise_dynamic_with_head"
    assert int(quantized["fp8_linear_layers"]) == int(kept["fp8_linear_layers"]) + 1
    head_bytes = 32000 * 768  # llm_125m's vocabulary x hidden: bf16 two bytes, float8 one
    saved = float(kept["decode_bytes_per_step"]) - float(quantized["decode_bytes_per_step"])
    assert abs(saved - head_bytes) < 0.01 * head_bytes  # plus its scales, a float a row
