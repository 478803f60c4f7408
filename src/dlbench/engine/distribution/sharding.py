"""Sharded data parallel (`--strategy fsdp`): FSDP2's `fully_shard` on each repeated block,
then on the root, as torchtitan applies it. Lightning Fabric gives FSDP2 through its
ModelParallelStrategy, which hands the model and the device mesh to `shard_model`; `validate`'s
bare loop calls `shard_model` on a mesh of its own, so both loops train the same sharded model.

Parameters live in fp32 shards and are gathered in the run's half precision; gradients are
reduced in fp32 (the mixed-precision policy stands in for autocast). Per block, before it is
sharded: activation checkpointing, then torch.compile (`--compile`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from dlbench.engine.acceleration.precision import PrecisionPlan
from dlbench.engine.distribution.lightning_import import import_fabric

# The ops whose outputs selective checkpointing keeps, as torchtitan's op-level policy keeps
# them: the attention and the matmuls, but every second matmul is recomputed (half their memory
# for a fraction of their time); the norms, RoPE and activations between them are recomputed.
# `max` is FP8's absolute maximum per tensor (its scale): kept, so that a recomputed cast
# neither reduces its input again nor scales it otherwise than the forward did.
KEPT_OPS = (
    "mm",
    "max",
    "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention",
    "_scaled_dot_product_flash_attention_for_cpu",
)

# Fabric's precision under FSDP: the gathered dtype comes from the policy, not from autocast.
FABRIC_PRECISION = {
    "32": "32-true",
    "tf32": "32-true",
    "bf16-mixed": "32-true",
    "bf16-true": "bf16-true",
    "16-true": "16-true",
    "fp8": "32-true",  # fp32 shards, its Linear layers' weights gathered in float8
}


@dataclass(frozen=True)
class ShardingPlan:
    """How the model is sharded: the gathered parameters' dtype (None: their own), what is
    recomputed in backward, and whether each block is compiled."""

    param_dtype: torch.dtype | None
    checkpointing: str
    compile_blocks: bool

    @classmethod
    def of(cls, precision: PrecisionPlan, checkpointing: str | None, compile: bool | None):
        """The plan for a run's precision and flags; bf16-mixed gathers bf16 (fp32 shards)."""
        mixed = precision.base_name == "bf16-mixed"
        return cls(torch.bfloat16 if mixed else None, checkpointing or "none", bool(compile))

    @staticmethod
    def columns(degree: int) -> dict[str, object]:
        """What the row says of the sharding beyond its flags: over how many devices."""
        return {"sharding_degree": degree}


def repeated_blocks(model: nn.Module) -> tuple[nn.Module | None, list[str]]:
    """The container of the model's repeated blocks (a transformer's layers, a ViT's blocks):
    the longest ModuleList or Sequential whose children are all of one class, and their names.
    (None, []) where the model has none: then only the root is sharded."""
    best: tuple[nn.Module | None, list[str]] = (None, [])
    for module in model.modules():
        if not isinstance(module, (nn.ModuleList, nn.Sequential)):
            continue
        children = list(module.named_children())
        kinds = {type(child) for _, child in children}
        if len(children) > max(1, len(best[1])) and len(kinds) == 1:
            best = (module, [name for name, _ in children])
    return best


def selective_policy():
    """The policy of one checkpointed forward and its recompute: what `KEPT_OPS` names is
    saved, but of the matmuls only every second one (each phase counts its own)."""
    from torch.utils.checkpoint import CheckpointPolicy

    aten = torch.ops.aten
    kept = {getattr(aten, name).default for name in KEPT_OPS if hasattr(aten, name)}
    matmuls = {"forward": 0, "recompute": 0}

    def policy(ctx, op, *args, **kwargs):
        if op == aten.mm.default:
            phase = "recompute" if ctx.is_recompute else "forward"
            matmuls[phase] += 1
            if matmuls[phase] % 2 == 0:
                return CheckpointPolicy.PREFER_RECOMPUTE
        return CheckpointPolicy.MUST_SAVE if op in kept else CheckpointPolicy.PREFER_RECOMPUTE

    return policy


def _selective_context():
    from torch.utils.checkpoint import create_selective_checkpoint_contexts

    return create_selective_checkpoint_contexts(selective_policy())


def _checkpointed(block: nn.Module, checkpointing: str) -> nn.Module:
    if checkpointing == "none":
        return block
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

    if checkpointing == "full":
        return checkpoint_wrapper(block, preserve_rng_state=False)
    return checkpoint_wrapper(block, context_fn=_selective_context, preserve_rng_state=False)


def shard_model(model: nn.Module, mesh: Any, plan: ShardingPlan) -> nn.Module:
    """Each repeated block checkpointed, compiled and sharded, then the root sharded (its
    parameters stay gathered from forward to backward, which needs them first)."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    policy = MixedPrecisionPolicy(param_dtype=plan.param_dtype, reduce_dtype=torch.float32)
    container, names = repeated_blocks(model)
    for name in names:
        block = _checkpointed(getattr(container, name), plan.checkpointing)
        if plan.compile_blocks:
            block = torch.compile(block)
        fully_shard(block, mesh=mesh, mp_policy=policy)
        container.register_module(name, block)
    fully_shard(model, mesh=mesh, mp_policy=policy, reshard_after_forward=False)
    return model


def materialize(model: nn.Module, device: torch.device) -> None:
    """A model built on the meta device, sharded: its shards made on `device` and filled by
    each module's own `reset_parameters` (each rank builds nothing whole)."""
    import_fabric()
    from lightning.fabric.utilities.init import _materialize_distributed_module

    _materialize_distributed_module(model, device)


def resettable(model: nn.Module) -> bool:
    """Whether every module holding parameters or buffers can fill them again
    (`reset_parameters`): then the model may be built on the meta device and made in shards."""
    for module in model.modules():
        own = [*module.parameters(recurse=False), *module.buffers(recurse=False)]
        if own and not callable(getattr(module, "reset_parameters", None)):
            return False
    return True
