"""`--precision fp8` (issue 64): the flag and its refusals, which layers run in FP8 and the share
of the FLOPs they carry, MFU against the peak of what ran, and the non-finite-loss verdict.
torchao's float8 training runs on the CPU here (its scaled matmul has a CPU kernel); FP8
tensor cores, inference quantization and timed runs are tests/gpu's."""

from __future__ import annotations

import contextlib

import pytest
import torch
from torch import nn

from dlbench.config import RunConfig
from dlbench.config.fp8_recipes import recipe_named
from dlbench.engine.acceleration.float8 import (
    Float8Layers,
    apply_float8,
    convert_for_training,
    fp8_columns,
    fp8_linears,
    fp8_sharded_recipe,
    quantize_for_inference,
    require_fp8_linears,
    step_tokens_aligned,
)
from dlbench.engine.scenarios.session import build_model
from dlbench.errors import UserError
from dlbench.results.efficiency import mfu_columns, mixed_peak
from dlbench.workloads import InputShape, get_workload
from dlbench.workloads.flops import FlopCount
from tests.conftest import refused

pytest.importorskip("torchao")
META = torch.device("meta")


def test_fp8_on_the_cpu_and_a_recipe_without_fp8_are_refused_naming_the_flag(dlbench, kept):
    train = ["train", "--accelerator", "cpu", "--model", "llm_tiny", "--output", kept]
    refused(dlbench(*train, "--precision", "fp8"), "--precision", "fp8", "FP8 tensor cores")
    refused(dlbench(*train, "--fp8-recipe", "rowwise"), "--fp8-recipe", "--precision fp8")
    refused(dlbench(*train, "--precision", "fp8", "--fp8-recipe", "blockwise"), "--fp8-recipe",
            "tensorwise, rowwise, rowwise_with_gw_hp")  # fmt: skip
    infer = ["infer", "--accelerator", "cpu", "--model", "vit", "--output", kept]
    refused(dlbench(*infer, "--precision", "fp8", "--fp8-recipe", "tensorwise"),
            "--fp8-recipe", "infer: rowwise_dynamic")  # fmt: skip
    train = ["train", "--accelerator", "cpu", "--model", "vit", "--output", kept]
    refused(dlbench(*train, "--precision", "fp8", "--fp8-recipe", "rowwise_dynamic"),
            "--fp8-recipe", "train: tensorwise")  # fmt: skip
    refused(dlbench(*train, "--precision", "fp8", "--fp8-recipe", "rowwise_dynamic_with_head"),
            "--fp8-recipe", "train: tensorwise")  # fmt: skip


@pytest.mark.parametrize("name", ["resnet50", "mobilenet_v3", "efficientnet_v2"])
def test_a_cnn_has_no_linear_layer_fp8_can_take_and_is_refused(name):
    workload = get_workload(name)
    model, _ = build_model(workload, workload.shape(224, 224, 0), None, META)
    assert fp8_linears(model) == []  # its only Linear is the classifier, kept in bf16
    with pytest.raises(UserError, match="--precision.*has no Linear layer FP8 can take"):
        require_fp8_linears(model, name)


def test_the_head_and_layers_of_odd_sizes_stay_out_of_fp8():
    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = nn.Linear(32, 64)
            self.odd = nn.Linear(64, 10)  # 10 outputs: no multiple of 16
            self.head = nn.Linear(64, 64)

        def get_classifier(self) -> nn.Module:
            return self.head

    assert fp8_linears(Net()) == ["body"]
    assert fp8_linears(Net(), with_head=True) == ["body", "head"]  # odd sizes stay out still


def test_an_llms_tied_head_joins_fp8_only_when_the_recipe_asks():
    """llm_1b's output head shares the token table's weight: inference's default recipe
    keeps it in bf16 (as servers do); `rowwise_dynamic_with_head` quantizes it too."""
    workload = get_workload("llm_1b")
    model, _ = build_model(workload, workload.shape(None, None, 64), "native", META)
    assert model.output.weight is model.embed.weight
    kept, all_of_them = fp8_linears(model), fp8_linears(model, with_head=True)
    assert "output" not in kept and len(kept) == 4 * len(model.layers)
    assert all_of_them == [*kept, "output"]


def _tiny_llm(mode: str = "train"):
    workload = get_workload("llm_tiny")
    shape = InputShape(None, None, 64)
    return workload, shape


def test_the_native_llms_projections_convert_and_carry_their_share_of_the_flops():
    """llm_tiny: four projections a layer (fused q/k/v, output, fused gate/up, down) of its two
    layers in FP8, the tied output head not; their FLOPs are 2 x in x out per token in each of
    the step's three GEMMs, against the model's analytic count."""
    workload, shape = _tiny_llm()
    model, _ = build_model(workload, shape, "native", torch.device("cpu"))
    layers = convert_for_training(model, recipe_named("tensorwise"), sharded=False)
    assert len(layers.names) == 8 and not any("output" in n for n in layers.names)
    from torchao.float8.float8_linear import Float8Linear

    assert all(isinstance(model.get_submodule(n), Float8Linear) for n in layers.names)
    meta, _ = build_model(workload, shape, "native", META)
    ids = torch.zeros(2, 64, dtype=torch.long, device=META)
    columns = fp8_columns(layers, meta, ids)
    hidden, inter, kv = 64, 128, 2 * 16  # llm_tiny: 4 heads of 16, 2 kv heads
    per_token = 2 * 2 * (hidden * (hidden + 2 * kv) + hidden * hidden + hidden * 2 * inter
                         + inter * hidden)  # fmt: skip
    assert columns == {"fp8_linear_layers": 8, "fp8_flops_per_sample": 3 * 64 * per_token}
    total = workload.analytic_flops(shape, "train").per_sample
    assert 0.3 < columns["fp8_flops_per_sample"] / total < 1.0  # a tiny vocabulary head
    keeps_gw = Float8Layers(layers.names, recipe_named("rowwise_with_gw_hp"))
    assert fp8_columns(keeps_gw, meta, ids)["fp8_flops_per_sample"] == 2 * 64 * per_token


def _tiny_tied_llm() -> nn.Module:
    """llm_tiny's shape with llm_1b's tied head and a vocabulary FP8 can take (1,024)."""
    from transformers import LlamaConfig

    from dlbench.workloads.llama import NativeLlama

    config = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, vocab_size=1024,
                         tie_word_embeddings=True)  # fmt: skip
    return NativeLlama(config)


def test_training_with_the_head_puts_the_native_llms_loss_in_float8_and_counts_it():
    """`tensorwise_with_head` on the native LLM: its loss forms the logits from the head's
    weight (workloads.llm_loss), so the loss runs in float8 and the head layer stays as it
    is, tied to the token table; the row counts the head's three GEMMs among FP8's FLOPs.
    Sharded, the body's weights are all-gathered in float8 and their scales precomputed."""
    for sharded in (False, True):
        model = _tiny_tied_llm()
        layers = convert_for_training(model, recipe_named("tensorwise_with_head"), sharded=sharded)
        assert len(layers.names) == 9 and layers.loss_head == "output" and model.head_float8
        assert type(model.output) is nn.Linear and model.output.weight is model.embed.weight
        body = model.get_submodule(layers.names[0])
        assert body.config.enable_fsdp_float8_all_gather is sharded
        assert fp8_sharded_recipe(layers, sharded) is sharded
    ids = torch.randint(0, 1024, (2, 64))
    outputs = model(ids)
    assert outputs.float8 and outputs.head is model.embed.weight
    meta, on_meta = _tiny_tied_llm().to(META), ids.to(META)
    body_only = Float8Layers(layers.names[:-1], recipe_named("tensorwise"))
    body_only = fp8_columns(body_only, meta, on_meta)
    columns = fp8_columns(layers, meta, on_meta)
    head_gemms = 3 * 2 * 64 * 64 * 1024  # three GEMMs of 2 x hidden x vocabulary a token
    assert columns["fp8_flops_per_sample"] == body_only["fp8_flops_per_sample"] + head_gemms


@pytest.mark.parametrize("recipe", ["tensorwise_with_head", "rowwise_dynamic_with_head"])
def test_a_with_head_recipe_whose_head_fp8_cannot_take_is_refused_naming_the_flag(recipe):
    """llm_tiny's head (64 x 1,000) is no multiple of 16: a row saying the head ran in FP8
    while it ran in bf16 would be false, so the recipe is refused before anything converts."""
    workload, shape = _tiny_llm()
    model, _ = build_model(workload, shape, "native", torch.device("cpu"))
    convert = convert_for_training if recipe.startswith("tensorwise") else quantize_for_inference
    args = (False,) if convert is convert_for_training else ()
    with pytest.raises(UserError, match=r"--fp8-recipe.*64 x 1000.*multiples of 16") as refused:
        convert(model, recipe_named(recipe), *args)
    assert f"invalid value '{recipe}';" in str(refused.value)  # its name, not the record's repr
    assert not any(type(m).__name__ == "Float8Linear" for m in model.modules())


def test_training_with_the_head_converts_a_head_the_model_calls_and_keeps_its_tie():
    """A model whose forward calls its head (not the native LLM): the head becomes a
    Float8Linear, its weight still the token table's, gathered in bf16 when sharded."""
    from torchao.float8.float8_linear import Float8Linear

    class Tied(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed, self.body = nn.Embedding(1024, 64), nn.Linear(64, 64)
            self.head = nn.Linear(64, 1024, bias=False)
            self.head.weight = self.embed.weight

        def get_output_embeddings(self) -> nn.Module:
            return self.head

        def forward(self, ids):
            return self.head(self.body(self.embed(ids)))

    model = Tied()
    layers = convert_for_training(model, recipe_named("tensorwise_with_head"), sharded=True)
    assert layers.names == ("body", "head") and not layers.loss_head
    assert isinstance(model.head, Float8Linear) and model.head.weight is model.embed.weight
    assert not model.head.config.enable_fsdp_float8_all_gather
    assert model.body.config.enable_fsdp_float8_all_gather
    model(torch.randint(0, 1024, (2, 16))).float().sum().backward()
    assert model.embed.weight.grad is not None


@pytest.mark.parametrize(
    ("model", "batch", "seq_len", "pads"),
    [("timm:test_vit", 8, None, True), ("timm:test_vit", 16, None, False),
     ("llm_tiny", 4, 2048, False), ("llm_tiny", 3, 9, True)],
)  # fmt: skip
def test_rows_not_a_multiple_of_16_are_padded_for_the_weight_gradient(model, batch, seq_len, pads):
    """The weight gradient's scaled matmul sums over the step's rows (batch x tokens): a
    test_vit batch of 8 at 64 x 64 (136 tokens) failed on an H100 unpadded, also after the
    first fix, which counted an image's shape as 128 tokens (the shape's unused seq_len). A
    batch that is a multiple of 16, or a known row count that is, keeps torchao's unpadded
    matmul."""
    workload = get_workload(model)
    shape = workload.shape(64, 64, seq_len or 128)
    linears = nn.Sequential(nn.Linear(32, 32), nn.Linear(32, 16))
    aligned = step_tokens_aligned(workload, shape, batch)
    layers = apply_float8(linears, recipe_named("tensorwise"), sharded=False, aligned=aligned)
    assert len(layers.names) == 2
    assert linears[0].config.pad_inner_dim is pads


def test_quantizing_for_inference_leaves_the_compilers_settings_as_they_were():
    """torchao's inference config turns inductor's coordinate-descent tuning on for the whole
    process unless told not to: in a sweep's worker every later point, bf16 too, then compiled
    that way (slower to compile, other kernels than its own run would get). On the CPU the
    quantization itself is refused after the settings are read."""
    from torch._inductor import config as inductor

    model = nn.Sequential(nn.Linear(32, 32), nn.Linear(32, 16)).to(torch.bfloat16)
    with inductor.patch(coordinate_descent_tuning=False):
        with contextlib.suppress(AssertionError):  # no FP8 on the CPU
            quantize_for_inference(model, recipe_named("rowwise_dynamic"))
        assert inductor.coordinate_descent_tuning is False


def test_a_converted_native_llm_trains_a_step_through_its_fp8_layers():
    workload, shape = _tiny_llm()
    model, loss_fn = build_model(workload, shape, "native", torch.device("cpu"))
    convert_for_training(model, recipe_named("tensorwise"), sharded=False)
    calls = []
    for name, module in model.named_modules():
        if type(module).__name__ == "Float8Linear":
            module.register_forward_hook(lambda m, i, o, name=name: calls.append(name))
    ids = torch.randint(0, 1000, (2, 64))
    loss = loss_fn(model(ids), ids)
    loss.backward()
    assert torch.isfinite(loss) and len(calls) == 8  # the step called every converted layer


def test_mfu_divides_the_fp8_share_by_the_fp8_peak_and_mfu_bf16_all_by_bf16():
    flops = FlopCount(per_sample=1e12, method="analytic_palm")
    row = mfu_columns(flops, 400.0, "NVIDIA H100 80GB HBM3", "fp8", fp8_flops_per_sample=7e11)
    achieved = 1e12 * 400.0 / 1e12
    assert row["achieved_tflops"] == pytest.approx(achieved)
    assert row["fp8_flops_share"] == pytest.approx(0.7)
    peak = 1.0 / (0.7 / 1978.9 + 0.3 / 989.4)
    assert row["peak_tflops"] == pytest.approx(peak) == mixed_peak(0.7, 1978.9, 989.4)
    assert row["mfu"] == pytest.approx(achieved / peak)
    assert row["mfu_bf16"] == pytest.approx(achieved / 989.4)
    bf16 = mfu_columns(flops, 400.0, "NVIDIA H100 80GB HBM3", "bf16-mixed")
    assert bf16["mfu"] == bf16["mfu_bf16"] == pytest.approx(achieved / 989.4)
    assert "mfu" not in mfu_columns(flops, 4.0, "NVIDIA A100-SXM4-80GB", "fp8", 7e11)


def test_mfu_attained_divides_the_same_mix_by_what_the_gpu_attained():
    from dlbench.results.efficiency import attained_columns

    row = {"achieved_tflops": 500.0, "fp8_flops_share": 0.5}
    out = attained_columns(row, "fp8", {"run_id": "p", "fp8": 1356.0, "bf16": 736.0})
    assert out["attained_tflops"] == pytest.approx(mixed_peak(0.5, 1356.0, 736.0))
    assert out["mfu_attained"] == pytest.approx(500.0 / out["attained_tflops"])


def test_fp8_rows_compile_unless_told_not_and_then_say_so():
    from dlbench.results.verdict import verdict_columns

    config = RunConfig.of(model="vit", precision="fp8", fp8_recipe="rowwise")
    assert config.acceleration.fp8_recipe == "rowwise"
    row = {"status": "ok", "precision": "fp8", "compile": False}
    assert verdict_columns(row)["verdict_notes"] == "fp8_uncompiled"
    assert verdict_columns({**row, "compile": True})["verdict_notes"] == ""


def test_a_head_fp8_cannot_take_is_refused_by_the_plan_before_anything_is_measured(
    monkeypatch, tmp_path, capsys
):
    """The refusal comes from the plan, on the meta model, as every user error does: one
    line naming --fp8-recipe, exit 2, no CSV, no measurement begun (the device check is faked:
    this machine has no FP8 tensor cores)."""
    import dlbench.guard
    import dlbench.run
    from dlbench.engine.acceleration import precision

    monkeypatch.setattr(precision, "check_fp8_device", lambda device_type: None)
    began = []
    monkeypatch.setattr(dlbench.run, "run_benchmark", lambda *a, **k: began.append(a))
    out = tmp_path / "rows.csv"
    config = RunConfig.of(model="llm_tiny", accelerator="cpu", precision="fp8",
                          fp8_recipe="tensorwise_with_head", output=out)  # fmt: skip
    assert dlbench.guard.guarded(lambda: dlbench.run.execute(config)) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "--fp8-recipe" in error and "64 x 1000" in error
    assert not out.exists() and began == []


def test_each_commands_help_names_its_own_modes_default_recipe(dlbench):
    """infer's help names inference's default recipe, not training's tensorwise."""
    from dlbench.config.fp8_recipes import default_recipe

    for mode in ("train", "infer"):
        _, out, _ = dlbench(mode, "--help")
        shown = out.split("--fp8-recipe", 1)[1].split("--", 1)[0]
        shown = " ".join(shown.replace("│", " ").split())
        assert f"(default: {default_recipe(mode).name})" in shown, shown
