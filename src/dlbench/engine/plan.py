"""A config resolved against this machine and its workload: the plan a run follows. Raising
here means nothing ran. The scenario (train, infer or generate) is decided here, once."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from dlbench.config import DdpSettings, RunConfig, resolved_strategy
from dlbench.config.flags import flag_name
from dlbench.config.fp8_recipes import Fp8Recipe, resolve_recipe
from dlbench.console import stderr
from dlbench.data.loader_workers import default_workers
from dlbench.data.pipeline import check_data
from dlbench.engine.acceleration.float8 import recipe_linears, require_fp8_linears
from dlbench.engine.acceleration.graphs import can_capture
from dlbench.engine.acceleration.precision import PrecisionPlan, plan_precision
from dlbench.engine.distribution.devices import DevicePlan, plan_devices
from dlbench.engine.distribution.sharding import FABRIC_PRECISION, ShardingPlan
from dlbench.engine.scenarios.session import build_model
from dlbench.errors import invalid
from dlbench.workloads import InputShape, Workload, get_workload


def scenario_of(workload: Workload, mode: str) -> str:
    """train, infer, or generate (a decoder LLM's inference: prefill and decode rounds)."""
    if mode == "infer" and workload.generative:
        return "generate"
    return mode


def is_latency_point(scenario: str, batch_size: int, devices: DevicePlan) -> bool:
    """Inference of batch 1 on one GPU (generation has its own defaults)."""
    one_gpu = devices.device_type == "cuda" and devices.world_size == 1
    return scenario == "infer" and batch_size == 1 and one_gpu


@dataclass(frozen=True)
class Plan:
    """A config resolved against this machine; raising here means nothing ran."""

    config: RunConfig
    workload: Workload
    shape: InputShape
    devices: DevicePlan
    precision: PrecisionPlan
    ddp: DdpSettings
    sharding: ShardingPlan | None = None  # --strategy fsdp
    compile_measured: bool = False  # a latency point left to the record (compile_choice)

    @property
    def fabric_precision(self) -> str:
        """Lightning's precision: under FSDP the policy gathers half precision, not autocast."""
        if self.sharding is None:
            return self.precision.lightning
        return FABRIC_PRECISION[self.precision.name]

    @property
    def latency_point(self) -> bool:
        """One GPU answering one query at a time: compiled or eager is measured there."""
        return is_latency_point(self.scenario, self.config.workload.batch_size, self.devices)

    @property
    def scenario(self) -> str:
        """What the run measures: train, infer or generate."""
        return scenario_of(self.workload, self.config.workload.mode)


def make_plan(config: RunConfig) -> Plan:
    """Check the config against the workload and the device; every UserError comes from here.
    Flags the run would ignore are named in one warning line."""
    workload = get_workload(config.workload.model)
    where = config.devices
    devices = plan_devices(where.accelerator, where.per_node, where.num_nodes)
    ignored = ignored_flags(config, workload)
    fp8 = None  # the recipe, resolved once here (the mode's default where none is named)
    if config.acceleration.precision == "fp8":
        fp8 = resolve_recipe(config.acceleration.fp8_recipe, config.workload.mode)
    resolved = _resolve_defaults(config, workload, devices, fp8)
    work, acceleration = resolved.workload, resolved.acceleration
    shape = workload.shape(work.width, work.height, work.seq_len)
    precision = plan_precision(acceleration.precision, devices.device_type, work.mode, fp8)
    if precision.fp8:  # refused before anything starts, on the meta device: a CNN (its only
        # Linear is its head), and a recipe with the head where FP8 cannot take the head
        model, _ = build_model(workload, shape, work.llm_impl, torch.device("meta"))
        require_fp8_linears(model, workload.name)
        recipe_linears(model, precision.fp8)
    ddp = DdpSettings.parse(resolved.devices.ddp)
    sharding = None
    if resolved.devices.strategy == "fsdp":
        checkpointing = resolved.devices.activation_checkpointing
        sharding = ShardingPlan.of(precision, checkpointing, acceleration.compile)
    if ignored:  # once the config is known to run: a refused one gets its one error line only
        stderr.print(f"[yellow]warning:[/yellow] this run ignores {'; '.join(ignored)}")
    latency = is_latency_point(scenario_of(workload, work.mode), work.batch_size, devices)
    # a latency point left to the record chooses compiled or eager (compile_choice)
    measured = config.acceleration.compile is None and latency and not precision.float8
    return Plan(resolved, workload, shape, devices, precision, ddp, sharding, measured)


def ignored_flags(config: RunConfig, workload: Workload) -> list[str]:
    """`--flag value (why)` for each flag given away from its default that this run does not
    use: a flag that changes nothing must not pass for one that did."""
    default = RunConfig()
    mode, synthetic = config.workload.mode, config.data.source == "synthetic"
    generation = scenario_of(workload, mode) == "generate"
    unused = {
        "data_decode": (synthetic, "synthetic data is made on the device"),
        "data_workers": (synthetic, "synthetic data needs no loader"),
        "prompt_len": (not generation, "not LLM generation"),
        "new_tokens": (not generation, "not LLM generation"),
        "seq_len": (workload.is_image or generation, "images, or generation's prompt + new"),
        "width": (not workload.is_image, f"{workload.name} takes text"),
        "height": (not workload.is_image, f"{workload.name} takes text"),
        "channels_last": (not workload.is_image, f"{workload.name} takes text"),
        "optimizer": (mode == "infer", "inference"),
        "breakdown": (generation, "generation has no training step"),
        "activation_checkpointing": (
            config.devices.strategy != "fsdp",
            "only with --strategy fsdp",
        ),
    }
    return [
        f"{flag_name(name)} {config.setting(name)} ({why})"
        for name, (ignored, why) in unused.items()
        if ignored and config.setting(name) not in (default.setting(name), None)
    ]


def _resolve_defaults(
    config: RunConfig, workload: Workload, devices: DevicePlan, fp8: Fp8Recipe | None
) -> RunConfig:
    """Fill the defaults that depend on the workload and the device: the optimizer its family
    trains with; for LLM generation on a GPU, compiled steps replayed as CUDA graphs and the
    real context length (prompt + new tokens) as seq_len; a latency point compiled."""
    work, acceleration, strategy = config.workload, config.acceleration, config.devices.strategy
    scenario = scenario_of(workload, work.mode)
    generation = scenario == "generate"
    on_gpu = devices.device_type == "cuda"
    if strategy == "fsdp":
        check_sharding(config, devices)
    if acceleration.cuda_graphs and not can_capture(devices.device_type):
        raise invalid("--cuda-graphs", True, "CUDA graphs need a CUDA GPU")
    ddp = strategy == "ddp" or devices.world_size > 1
    if acceleration.cuda_graphs and ddp and not generation:
        raise invalid(
            "--cuda-graphs",
            True,
            "not under DDP: its gradient hooks launch NCCL collectives from the host as "
            "buckets fill, which a captured step would replay without them; use one device",
        )
    if strategy == "single" and devices.world_size > 1:
        raise invalid("--strategy", "single", "several processes need ddp (or auto)")
    changes: dict[str, object] = {"strategy": resolved_strategy(strategy, devices.world_size)}
    if strategy == "fsdp":  # FSDP shards contiguous parameters only
        changes["activation_checkpointing"] = config.devices.activation_checkpointing or "none"
        changes["channels_last"] = acceleration.channels_last and not workload.is_image
    if work.optimizer is None:
        changes["optimizer"] = workload.default_optimizer
    if acceleration.attention in ("efficient", "cudnn") and not on_gpu:
        raise invalid("--attention", acceleration.attention, "that kernel needs a CUDA GPU")
    if work.llm_impl is not None and workload.native is None:
        raise invalid("--llm-impl", work.llm_impl, f"{workload.name} is no LLM workload")
    if workload.native is not None and work.llm_impl is None:
        changes["llm_impl"] = "native"
    if fp8 is not None:
        changes.update(_fp8_defaults(config, fp8, on_gpu))
    if acceleration.compile is None and "compile" not in changes:
        # a latency point runs compiled until measured otherwise
        latency = is_latency_point(scenario, work.batch_size, devices)
        changes["compile"] = (generation and on_gpu) or latency
    if acceleration.cuda_graphs is None:  # inference replays short steps; training when asked
        changes["cuda_graphs"] = on_gpu and work.mode == "infer" and not ddp
    if generation:
        changes["seq_len"] = work.prompt_len + work.new_tokens
    data = config.data
    if data.source != "synthetic":
        check_data(data.parsed(), workload, data.decode)
        if generation:
            raise invalid("--data", data.source, "generation feeds random prompts; train or infer")
        changes["data_on"] = "host"  # a loader's batches always come from the host
        if data.workers is None:
            changes["data_workers"] = default_workers()
    return config.replace(**changes)


def _fp8_defaults(config: RunConfig, fp8: Fp8Recipe, on_gpu: bool) -> dict[str, object]:
    """fp8's recipe as resolved, named in the row; and compiled unless --no-compile (FP8 pays
    only where its casts fuse into the matmuls' neighbours)."""
    changes: dict[str, object] = {"fp8_recipe": fp8.name}
    if config.acceleration.compile is None:
        changes["compile"] = on_gpu
    return changes


def check_sharding(config: RunConfig, devices: DevicePlan) -> None:
    """What FSDP cannot run, refused before anything starts."""
    if devices.world_size < 2:
        raise invalid("--strategy", "fsdp", "sharding needs several devices (--devices N)")
    if config.workload.mode != "train":
        raise invalid("--strategy", "fsdp", "training only; inference keeps a replica a device")
    if config.acceleration.cuda_graphs:
        raise invalid(
            "--cuda-graphs",
            True,
            "not under FSDP: its all-gathers and reduce-scatters are issued from the host as "
            "blocks run, which a captured step would replay without them",
        )
    if config.acceleration.precision not in FABRIC_PRECISION:
        raise invalid(
            "--precision",
            config.acceleration.precision,
            "FSDP runs 32, tf32, bf16-mixed, bf16-true, 16-true or fp8",
        )
