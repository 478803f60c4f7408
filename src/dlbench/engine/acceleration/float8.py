"""`--precision fp8`: the model's Linear layers in float8 through torchao, the rest in bf16.

Training converts each Linear layer torchao can take (both dimensions multiples of 16, as its
scaled matmul needs) to torchao's Float8Linear under one of its recipes (`--fp8-recipe`), and
leaves the output head, embeddings, norms and convolutions in bf16, as torchtitan does; under
FSDP with the tensorwise recipe the weights are all-gathered in float8, with their scales
computed once per step for all of them (torchtitan's `enable_fsdp_float8_all_gather` and
`precompute_float8_dynamic_scale_for_fsdp`). Inference quantizes the same layers' weights to
float8 with a scale per output row and quantizes each activation dynamically, per row
(torchao's Float8DynamicActivationFloat8WeightConfig), the output head too under
`--fp8-recipe rowwise_dynamic_with_head`; batch-1 LLM decode reads those float8
weights and their scales in dlbench's own GEMV (workloads.decode_kernels). FP8 pays only in
large matmuls, compiled (its casts fuse into the neighbouring kernels): the row says how many
layers ran in FP8 and the share of the model's FLOPs they carry."""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import nn

from dlbench.config.fp8_recipes import Fp8Recipe
from dlbench.errors import invalid
from dlbench.workloads import InputShape, Workload
from dlbench.workloads.llm_loss import LogitsInLoss

MIN_CAPABILITY = (8, 9)  # FP8 tensor cores: Ada (8.9), Hopper (9.0) and newer
DIMENSION_MULTIPLE = 16  # torch._scaled_mm takes dimensions that are multiples of 16


@dataclass(frozen=True)
class Float8Layers:
    """The Linear layers that run in FP8 (their names in the model) and under which recipe."""

    names: tuple[str, ...]
    recipe: Fp8Recipe
    loss_head: str = ""  # a head whose logits the training loss forms, in float8 (native LLMs)


def check_fp8_device(device_type: str) -> None:
    """FP8 needs FP8 tensor cores and torchao: a UserError naming --precision otherwise."""
    if device_type != "cuda":
        raise invalid(
            "--precision",
            "fp8",
            "needs a GPU with FP8 tensor cores (compute capability 8.9 or newer); the CPU "
            "has none: use bf16-mixed",
        )
    if torch.version.hip:
        raise invalid("--precision", "fp8", "not run on ROCm by dlbench yet; use bf16-mixed")
    capability = torch.cuda.get_device_capability()
    if capability < MIN_CAPABILITY:
        raise invalid(
            "--precision",
            "fp8",
            f"this GPU's compute capability {capability[0]}.{capability[1]} has no FP8 tensor "
            "cores (8.9 or newer: Ada, Hopper, Blackwell); use bf16-mixed",
        )
    try:
        import torchao.float8  # noqa: F401
    except Exception:  # absent, or built for another torch
        raise invalid(
            "--precision",
            "fp8",
            "needs torchao (pip install 'dlbench[fp8]'); it cannot be imported here",
        ) from None


def output_head(model: nn.Module) -> nn.Module | None:
    """The layer that makes the outputs (an LLM's vocabulary projection, a classifier), kept
    in bf16: the precision of the logits matters more than its share of the FLOPs."""
    for getter in ("get_output_embeddings", "get_classifier"):
        get = getattr(model, getter, None)
        if callable(get):
            head = get()
            if isinstance(head, nn.Module):
                return head
    return None


def _fp8_sized(layer: nn.Linear) -> bool:
    return layer.in_features % DIMENSION_MULTIPLE == layer.out_features % DIMENSION_MULTIPLE == 0


def fp8_takes(model: nn.Module) -> list[tuple[str, bool]]:
    """Each Linear layer FP8 can take (both dimensions multiples of 16), in the model's order,
    and whether it is the output head (or shares its weight): one walk of the layers."""
    head = output_head(model)
    kept = {id(p) for p in head.parameters()} if head is not None else set()
    return [
        (name, module is head or id(module.weight) in kept)
        for name, module in model.named_modules()
        if isinstance(module, nn.Linear) and _fp8_sized(module)
    ]


def fp8_linears(model: nn.Module, with_head: bool = False) -> list[str]:
    """The names of the Linear layers FP8 takes: not the output head unless `with_head`."""
    return [name for name, is_head in fp8_takes(model) if with_head or not is_head]


def recipe_linears(model: nn.Module, recipe: Fp8Recipe) -> tuple[list[str], str]:
    """The layers `fp8_linears` names, and the output head's name where `recipe` takes it
    too ("" otherwise); a recipe with the head whose model has no head FP8 can take is refused
    (its rows would say the head ran in float8)."""
    taken = fp8_takes(model)
    body = [name for name, is_head in taken if not is_head]
    if not recipe.with_head:
        return body, ""
    head = next((name for name, is_head in taken if is_head), "")
    if not head:
        found = output_head(model)
        linear = isinstance(found, nn.Linear)
        size = f" ({found.in_features} x {found.out_features})" if linear else ""
        raise invalid(
            "--fp8-recipe",
            recipe.name,
            f"this model's output head{size} cannot run in FP8 (dimensions multiples of "
            f"{DIMENSION_MULTIPLE}): use {recipe.torchao}",
        )
    return body, head


def require_fp8_linears(model: nn.Module, name: str) -> list[str]:
    """`fp8_linears`, or a UserError where there are none (a CNN's only Linear is its head)."""
    found = fp8_linears(model)
    if not found:
        raise invalid(
            "--precision",
            "fp8",
            f"{name} has no Linear layer FP8 can take (dimensions multiples of "
            f"{DIMENSION_MULTIPLE}, not the output head): FP8 runs transformers' and LLMs' "
            "matmuls; use bf16-mixed",
        )
    return found


def step_tokens_aligned(workload: Workload, shape: InputShape, batch_size: int) -> bool:
    """Whether the tokens every Linear layer sees in a step (batch x tokens a sample) are sure
    to be a multiple of 16, the weight gradient's inner dimension in its scaled matmul. A vision
    model's tokens per image are not known here (an image's shape carries an unused seq_len):
    only a batch that is a multiple makes sure."""
    tokens = workload.tokens_per_sample(shape) or 1
    return batch_size * tokens % DIMENSION_MULTIPLE == 0


def convert_for_training(
    model: nn.Module, recipe: Fp8Recipe, sharded: bool, aligned: bool = True
) -> Float8Layers:
    """Swap the layers `fp8_linears` names for torchao's Float8Linear under `recipe`; sharded
    (FSDP) with tensorwise scaling, their weights are all-gathered in float8. Tokens not
    `aligned` (`step_tokens_aligned`) are padded with zeros to a multiple of 16 inside the
    matmul. A recipe with the head trains the output head in float8 too: where the model's
    loss forms the logits from the head's weight (LogitsInLoss: the native LLM), that loss runs
    its GEMMs in float8; elsewhere the head becomes a Float8Linear whose weight is gathered in
    bf16 (a float8 all-gather gives the layer a parameter of its own, and a head tied to the
    token table would lose the tie)."""
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training

    body, head = recipe_linears(model, recipe)
    names = tuple(sorted([*body, head] if head else body))
    config = Float8LinearConfig.from_recipe_name(recipe.torchao)
    if not aligned:
        config = replace(config, pad_inner_dim=True)
    gathered = replace(config, enable_fsdp_float8_all_gather=float8_all_gather(recipe, sharded))
    wanted = set(body)
    convert_to_float8_training(model, module_filter_fn=lambda _, f: f in wanted, config=gathered)
    if head and isinstance(model, LogitsInLoss):  # its loss forms the logits, not the head
        model.head_float8 = True
        return Float8Layers(names, recipe, loss_head=head)
    if head:
        convert_to_float8_training(model, module_filter_fn=lambda _, f: f == head, config=config)
    return Float8Layers(names, recipe)


def quantize_for_inference(model: nn.Module, recipe: Fp8Recipe) -> Float8Layers:
    """Quantize the weights of the layers `fp8_linears` names to float8 with a scale per output
    row (the output head's too under a recipe with the head: a head that shares the token
    table's weight gets a float8 copy of its own, the table stays for the lookup); their
    activations are quantized per row as they arrive."""
    from torchao.quantization import (
        Float8DynamicActivationFloat8WeightConfig,
        PerRow,
        quantize_,
    )

    body, head = recipe_linears(model, recipe)
    names = set([*body, head] if head else body)
    # torchao would otherwise set inductor's tuning for the whole process, never restored: a
    # sweep worker's later points would compile (bf16 too) other than their own runs do
    config = Float8DynamicActivationFloat8WeightConfig(
        granularity=PerRow(), set_inductor_config=False
    )
    quantize_(model, config, filter_fn=lambda _, fqn: fqn in names)
    return Float8Layers(tuple(sorted(names)), recipe)


def apply_float8(
    model: nn.Module, recipe: Fp8Recipe | None, sharded: bool, aligned: bool = True
) -> Float8Layers | None:
    """The model's Linear layers in float8 under the plan's `recipe` (None where the precision
    is not fp8): converted for training (`aligned`: see `convert_for_training`), quantized for
    inference, as the recipe's mode says."""
    if recipe is None:
        return None
    if recipe.mode == "train":
        return convert_for_training(model, recipe, sharded, aligned)
    return quantize_for_inference(model, recipe)


def precompute_scales(model: nn.Module) -> None:
    """After each optimizer step under FSDP's float8 all-gather: every weight's scale in one
    reduction, instead of one per layer as each is gathered."""
    from torchao.float8 import precompute_float8_dynamic_scale_for_fsdp

    precompute_float8_dynamic_scale_for_fsdp(model)


def fp8_columns(layers: Float8Layers, meta_model, inputs) -> dict[str, object]:
    """The row's word on FP8: how many Linear layers ran in it, and the FLOPs per sample they
    carry (`meta_model` the same model on the meta device, `inputs` a batch there; MFU divides
    this share by the FP8 peak, results.efficiency)."""
    from dlbench.workloads.flops import linear_flops_per_sample

    per_sample = linear_flops_per_sample(meta_model, inputs, layers.names)
    if layers.loss_head:  # the loss's logits, never a call of the layer in the model's forward
        head = meta_model.get_submodule(layers.loss_head)
        tokens = inputs[0].numel()
        per_sample += 2 * tokens * head.in_features * head.out_features
    return {
        "fp8_linear_layers": len(layers.names),
        "fp8_flops_per_sample": per_sample * layers.recipe.fp8_gemms,
    }


def float8_all_gather(recipe: Fp8Recipe, sharded: bool) -> bool:
    """Whether FSDP all-gathers the weights in float8, their scales precomputed after each
    step: sharded, under a recipe of one scale a weight."""
    return sharded and recipe.float8_all_gather


def fp8_sharded_recipe(layers: Float8Layers | None, sharded: bool) -> bool:
    """Whether the weights' scales are precomputed after each step (`float8_all_gather`)."""
    return layers is not None and float8_all_gather(layers.recipe, sharded)
