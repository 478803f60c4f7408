"""Set a workload up through Lightning Fabric and hand back one step function to time."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from dlbench.config import RunConfig
from dlbench.data.feed import DataFeed
from dlbench.data.on_device import OnDevice
from dlbench.data.pipeline import open_pipeline
from dlbench.engine.acceleration.float8 import (
    Float8Layers,
    apply_float8,
    fp8_sharded_recipe,
    precompute_scales,
    step_tokens_aligned,
)
from dlbench.engine.acceleration.graphs import GraphedStep, graphed_step
from dlbench.engine.acceleration.precision import PrecisionPlan, hold_autocast_weights
from dlbench.engine.distribution.sharding import resettable
from dlbench.engine.scenarios.outputs import OutputWatch
from dlbench.engine.scenarios.streams import needs_own_stream, with_own_stream
from dlbench.workloads import Batch, InputShape, Workload

DISTINCT_BATCHES = 2  # rotate so that no step reads exactly what the previous one cached


class LossModule(nn.Module):
    """Forward and loss in one module, so autocast and DDP cover both as in a hand-written loop."""

    def __init__(self, model: nn.Module, loss: Callable[[Any, torch.Tensor], torch.Tensor]):
        super().__init__()
        self.model = model
        self.loss = loss

    def forward(self, inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return self.loss(self.model(inputs), targets)


@dataclass(frozen=True)
class Phases:
    """The parts of one step, kept apart so that `--breakdown` can time each one."""

    fetch: Callable[[int], tuple[torch.Tensor, torch.Tensor]]
    forward: Callable[[torch.Tensor, torch.Tensor], Any]
    backward: Callable[[torch.Tensor], None] | None
    update: Callable[[], None] | None


@dataclass
class Session:
    """A ready-to-time run: the step, where it runs, and what it holds."""

    fabric: Any
    device: torch.device
    phases: Phases
    context: Callable[[], AbstractContextManager]
    param_count: int
    batches: list[Batch]
    optimizer: torch.optim.Optimizer | None = None
    feed: DataFeed | None = None  # --data folder/text: the loader behind `fetch`
    convolutions: bool = False  # cuDNN chooses algorithms for this model (cudnn_search)
    float8: Float8Layers | None = None  # --precision fp8: the layers that run in FP8
    outputs: OutputWatch | None = None  # the last step's loss or output, read after the window

    def __post_init__(self) -> None:
        self.step = _compose(self.phases)

    def graphed(self) -> GraphedStep:
        """The step captured as CUDA graphs (one per resident batch, or one buffer that each
        loaded batch is copied into), or the eager step with a warning if capture fails."""
        p = self.phases
        if p.backward is None:

            def body(inputs: torch.Tensor, targets: torch.Tensor) -> None:
                p.forward(inputs, targets)

            def before_capture() -> None:
                return None
        else:

            def body(inputs: torch.Tensor, targets: torch.Tensor) -> None:
                p.backward(p.forward(inputs, targets))
                p.update()

            def before_capture() -> None:  # gradients are allocated inside the graph
                self.optimizer.zero_grad(set_to_none=True)

        resident = self.feed is None and all(b.inputs.device == self.device for b in self.batches)
        if resident:
            slots = [(b.inputs, b.targets) for b in self.batches]
        else:
            first = p.fetch(0)
            slots = [(first[0].clone(), first[1].clone())]
        fetch = None if resident else p.fetch
        return graphed_step(self.step, body, slots, fetch, before_capture, self.device)


def _compose(p: Phases) -> Callable[[int], None]:
    """One step from its phases; no host sync, nothing read back."""
    if p.backward is None:

        def infer_step(i: int) -> None:
            p.forward(*p.fetch(i))

        return infer_step

    def train_step(i: int) -> None:
        p.backward(p.forward(*p.fetch(i)))
        p.update()

    return train_step


def make_optimizer(name: str, params, capturable: bool = False) -> torch.optim.Optimizer:
    """The optimizer named by `--optimizer`, with ordinary hyper-parameters and the fastest
    implementation torch has for it: fused Adam(W) (one kernel for all parameters), SGD over
    tensor lists (foreach). `capturable`: Adam's step count stays on the device, so that the
    step can be captured in a CUDA graph (SGD keeps no host state)."""
    if name == "sgd":
        return torch.optim.SGD(params, lr=0.01, momentum=0.9, foreach=True)
    kind = torch.optim.AdamW if name == "adamw" else torch.optim.Adam
    return kind(params, lr=1e-4, fused=True, **({"capturable": True} if capturable else {}))


def optimizer_impl(optimizer: torch.optim.Optimizer | None) -> str:
    """fused, foreach or for-loop: the implementation moves the optimizer's cost a lot."""
    if optimizer is None:
        return ""
    group = optimizer.param_groups[0]
    return "fused" if group.get("fused") else "foreach" if group.get("foreach") else "for-loop"


def cast_inputs(batch: Batch, precision: PrecisionPlan) -> Batch:
    """Floating-point inputs in the precision's input dtype, once, before anything is timed
    (token ids and targets stay integers). The bare loop of `validate` uses this too."""
    inputs = batch.inputs
    if inputs.is_floating_point():
        inputs = inputs.to(precision.input_dtype)
    return Batch(inputs, batch.targets)


def image_layout(channels_last: bool, workload: Workload) -> torch.memory_format:
    """channels_last applies to image models only."""
    use = channels_last and workload.is_image
    return torch.channels_last if use else torch.contiguous_format


def make_batches(
    workload: Workload,
    shape: InputShape,
    batch_size: int,
    seed: int,
    fmt: torch.memory_format,
    device: torch.device | None = None,
) -> list[Batch]:
    """The synthetic batches, made once before anything is timed, on `device` (default: the
    host) where the workload's batch honours its generator's device: a large batch made on
    the host took longer than the steps of a --batch-size auto probe
    (docs/decisions.md#synthetic-on-device)."""
    gen = torch.Generator(device or "cpu").manual_seed(seed)
    batches = [workload.make_batch(batch_size, shape, gen) for _ in range(DISTINCT_BATCHES)]
    if fmt is torch.channels_last:
        batches = [Batch(b.inputs.contiguous(memory_format=fmt), b.targets) for b in batches]
    return batches


def open_session(
    config: RunConfig,
    workload: Workload,
    shape: InputShape,
    precision: PrecisionPlan,
    fabric: Any,
    autotune: bool = True,
) -> Session:
    """Build model, optimizer and data on the device; return the step closure for the loop.
    `autotune=False` keeps cuDNN on its heuristics (fast batch-size probes skip benchmarking)."""
    precision.apply_matmul_settings()
    torch.backends.cudnn.benchmark = autotune
    torch.manual_seed(config.measurement.seed + fabric.global_rank)
    sharded = config.devices.strategy == "fsdp"
    impl = config.workload.llm_impl
    if sharded:
        model, loss = build_sharded_model(
            workload, shape, impl, fabric.init_module(empty_init=True), "cpu"
        )
    else:
        model, loss = build_model(workload, shape, impl, fabric.init_module())
    fmt = image_layout(bool(config.acceleration.channels_last), workload)
    model = model.to(memory_format=fmt)
    param_count = sum(p.numel() for p in model.parameters())
    convolutions = any(isinstance(m, nn.modules.conv._ConvNd) for m in model.modules())
    aligned = step_tokens_aligned(workload, shape, config.workload.batch_size)
    float8 = apply_float8(model, precision.fp8, sharded, aligned)
    if config.workload.mode != "train":
        hold_autocast_weights(model, precision)
    if config.acceleration.compile:  # under FSDP each block is compiled as it is sharded
        model, loss = (model, torch.compile(loss)) if sharded else compiled(model, loss)
    batches, feed, fetch = _inputs(config, workload, shape, precision, fmt, fabric)
    outputs = OutputWatch()
    if config.workload.mode == "train":
        phases, built = _training_phases(config, model, loss, fetch, fabric, float8, outputs)
        context = nullcontext
    else:
        built = None
        module = fabric.setup_module(model)
        module.eval()
        phases = Phases(fetch, outputs.watching(lambda x, y: module(x)), None, None)
        context = torch.inference_mode
    if needs_own_stream(feed, fabric.device):
        context = with_own_stream(context, fabric.device)
    return Session(
        fabric,
        fabric.device,
        phases,
        context,
        param_count,
        batches or [],
        built,
        feed,
        convolutions,
        float8,
        outputs,
    )


def _inputs(config: RunConfig, workload: Workload, shape: InputShape, precision, fmt, fabric):
    """The step's inputs: synthetic batches made once (and how a step fetches one), or a
    loader's feed."""
    if config.data.parsed().synthetic:
        batches = synthetic_batches(config, workload, shape, precision, fmt, fabric)
        on_device = config.data.location == "device"
        return batches, None, _fetcher(batches, fabric.device, on_device=on_device)
    feed = open_feed(config, workload, shape, precision.input_dtype, fmt, fabric.device)
    return None, feed, feed.fetch


def _training_phases(config: RunConfig, model, loss, fetch, fabric, float8, outputs):
    """A training step's phases through Fabric, and the optimizer as built (under FSDP made
    for the shards; under FSDP's float8 all-gather every weight's scale after each update)."""
    sharded = config.devices.strategy == "fsdp"
    if sharded:
        module = fabric.setup_module(LossModule(model, loss))
        built = make_optimizer(config.workload.optimizer, module.parameters())
        optimizer = fabric.setup_optimizers(built)
    else:
        graphs = bool(config.acceleration.cuda_graphs)
        built = make_optimizer(config.workload.optimizer, model.parameters(), graphs)
        module, optimizer = fabric.setup(LossModule(model, loss), built)
    module.train()
    precompute = fp8_sharded_recipe(float8, sharded)

    def update() -> None:
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if precompute:
            precompute_scales(module)

    forward = lambda x, y: module(x, y)  # noqa: E731
    if not config.acceleration.cuda_graphs:  # a captured training step failed, watched
        forward = outputs.watching(forward)
    return Phases(fetch, forward, fabric.backward, update), built


def compiled(model: nn.Module, loss: Callable) -> tuple[nn.Module, Callable]:
    """`--compile`: the model and its loss, each compiled. The loss counts: an LLM's over a
    large vocabulary is its largest pointwise work (docs/decisions.md#compile-loss)."""
    return torch.compile(model), torch.compile(loss)


def build_model(workload: Workload, shape: InputShape, llm_impl: str | None, where):
    """The workload's model built inside `where` (a device context), and its loss; with
    `--llm-impl native` the transformers model's weights move into the native one."""
    with where:
        model = workload.build(shape)
        if llm_impl == "native" and workload.native is not None:
            return workload.native(model), workload.native_loss
    return model, workload.loss


def build_sharded_model(
    workload: Workload, shape: InputShape, llm_impl: str | None, empty, whole: str | torch.device
):
    """The model for FSDP: inside `empty` (a meta-device context) where each module can fill
    its own parameters again (the shards are then made on the device, nothing whole on any
    rank), else built whole on `whole` and moved as it is sharded. The bare loop of `validate`
    builds its own the same way."""
    model, loss = build_model(workload, shape, llm_impl, empty)
    if resettable(model):
        return model, loss
    return build_model(workload, shape, llm_impl, torch.device(whole))


def drawn_on(config: RunConfig, device: torch.device) -> torch.device | None:
    """Where the synthetic batches are drawn: on the device that holds them, or (None) on the
    host where they stay pinned there (--data-on host). The bare loop asks the same, so that
    `validate` gives both loops the same inputs."""
    return device if config.data.location == "device" else None


def synthetic_batches(config, workload, shape, precision, fmt, fabric) -> list[Batch]:
    """The in-memory batches in the input dtype: resident on the device, or pinned on the host
    (`--data-on host`) to be copied inside each step."""
    on = drawn_on(config, fabric.device)
    made = make_batches(
        workload, shape, config.workload.batch_size, config.measurement.seed, fmt, on
    )
    batches = [cast_inputs(b, precision) for b in made]
    if on is not None:
        return [b.map(fabric.to_device) for b in batches]
    if fabric.device.type == "cuda":
        return [b.map(torch.Tensor.pin_memory) for b in batches]
    return batches


def open_feed(config, workload, shape, dtype, fmt, device: torch.device) -> DataFeed:
    """A loader over `--data`, its batches made ready on the device inside the step."""
    pipeline = open_pipeline(
        config.data.parsed(),
        workload,
        shape,
        config.workload.batch_size,
        config.data.workers or 0,
        config.data.decode,
        config.measurement.seed,
        pin_memory=device.type == "cuda",
    )
    return DataFeed(pipeline, OnDevice(pipeline, shape, device, dtype, fmt))


def _fetcher(batches: list[Batch], device: torch.device, on_device: bool):
    """Batch i: resident on the device, or copied from pinned host memory inside the step."""
    if on_device:
        return lambda i: (batches[i % len(batches)].inputs, batches[i % len(batches)].targets)

    def copy(i: int) -> tuple[torch.Tensor, torch.Tensor]:
        b = batches[i % len(batches)]
        return b.inputs.to(device, non_blocking=True), b.targets.to(device, non_blocking=True)

    return copy
