"""A bare, hand-written PyTorch loop: the yardstick that `dlbench validate` holds the harness to.

Deliberately plain torch (no Lightning, no dlbench loop): what a careful user writes by hand. Under
DDP it wraps the model in torch's own DistributedDataParallel, on the process group that is already
up, with the same settings as the dlbench loop; under FSDP it builds the model on the meta device
and shards it with torch's fully_shard on a device mesh of its own, as the dlbench loop's model is
sharded (engine.distribution.sharding), with no autocast (the policy gathers half precision)."""

from __future__ import annotations

import torch
from torch.nn.parallel import DistributedDataParallel

from dlbench.config import DdpSettings, RunConfig
from dlbench.engine.acceleration.float8 import (
    apply_float8,
    fp8_sharded_recipe,
    precompute_scales,
    step_tokens_aligned,
)
from dlbench.engine.acceleration.precision import PrecisionPlan, hold_autocast_weights
from dlbench.engine.distribution.sharding import ShardingPlan, materialize, shard_model
from dlbench.engine.scenarios.session import (
    LossModule,
    build_model,
    build_sharded_model,
    cast_inputs,
    compiled,
    drawn_on,
    image_layout,
    make_batches,
    make_optimizer,
)
from dlbench.engine.timing.timer import seconds_of
from dlbench.workloads import InputShape, Workload


class BareLoop:
    """Model, optimizer and batches on the device; `rate(steps)` times steps between two events."""

    def __init__(
        self,
        workload: Workload,
        shape: InputShape,
        config: RunConfig,
        precision: PrecisionPlan,
        device: torch.device,
        ddp: DdpSettings | None = None,
        sharding: ShardingPlan | None = None,
    ) -> None:
        torch.manual_seed(config.measurement.seed)
        fmt = image_layout(bool(config.acceleration.channels_last), workload)
        if sharding is None:
            model, self.loss_fn = build_model(workload, shape, config.workload.llm_impl, device)
        else:
            meta = torch.device("meta")
            model, self.loss_fn = build_sharded_model(
                workload, shape, config.workload.llm_impl, meta, device
            )
        model = model.to(dtype=precision.param_dtype, memory_format=fmt)
        self.float8 = apply_float8(  # torchao's own calls, as a user of it writes them
            model,
            precision.fp8,
            sharding is not None,
            step_tokens_aligned(workload, shape, config.workload.batch_size),
        )
        self.precompute = fp8_sharded_recipe(self.float8, sharding is not None)
        if config.workload.mode != "train":
            hold_autocast_weights(model, precision)
        self.device = device
        self.batch_size = config.workload.batch_size
        self.train = config.workload.mode == "train"
        self.cuda_graphs = bool(config.acceleration.cuda_graphs)
        self.graphs: list[torch.cuda.CUDAGraph] = []
        if sharding is not None:
            if config.acceleration.compile:  # the blocks are compiled as they are sharded
                self.loss_fn = torch.compile(self.loss_fn)
            model = _sharded(LossModule(model, self.loss_fn), device, sharding)
        self.optimizer = make_optimizer(
            config.workload.optimizer, model.parameters(), self.cuda_graphs
        )
        if ddp is not None:
            ids = [device.index] if device.type == "cuda" else None
            model = DistributedDataParallel(model, device_ids=ids, **ddp.kwargs())
        if config.acceleration.compile and sharding is None:
            model, self.loss_fn = compiled(model, self.loss_fn)
        self.model = model
        self.model.train(self.train)
        self.batches = []
        on = drawn_on(config, device)
        for b in make_batches(
            workload, shape, config.workload.batch_size, config.measurement.seed, fmt, on
        ):
            b = cast_inputs(b.map(lambda t: t.to(device)), precision)
            self.batches.append((b.inputs, b.targets))
        dtype = None if sharding else precision.autocast_dtype
        self.autocast_dtype = dtype
        self.scaler = torch.amp.GradScaler(device.type, enabled=dtype is torch.float16)

    def step(self, i: int) -> None:
        """One training or inference step, written as in any tutorial."""
        inputs, targets = self.batches[i % len(self.batches)]
        with torch.autocast(
            self.device.type, dtype=self.autocast_dtype, enabled=self.autocast_dtype is not None
        ):
            if not self.train:
                self.model(inputs)
                return
            self.optimizer.zero_grad(set_to_none=True)
            if isinstance(self.model, LossModule):  # sharded: the loss inside the root's forward
                loss = self.model(inputs, targets)
            else:
                loss = self.loss_fn(self.model(inputs), targets)
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        if self.precompute:
            precompute_scales(self.model)

    def capture(self) -> None:
        """Each batch's step as a CUDA graph, by the recipe in torch's documentation: warm-up
        on a side stream, gradients set to None before capture, one pool for all graphs."""
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            for i in range(3):
                self.step(i)
        torch.cuda.current_stream(self.device).wait_stream(side)
        pool = None
        for k in range(len(self.batches)):
            self.optimizer.zero_grad(set_to_none=True)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=pool):
                self.step(k)
            pool = graph.pool()
            self.graphs.append(graph)

    def timed_step(self, i: int) -> None:
        """The step as timed: a graph replay once captured, else the step itself."""
        if self.graphs:
            self.graphs[i % len(self.graphs)].replay()
        else:
            self.step(i)

    def window_s(self, warmup_steps: int, steps: int, align=lambda values: values) -> float:
        """Seconds for `steps` timed steps (device clock) after `warmup_steps` untimed ones
        (and, for CUDA graphs, a capture the first time); under DDP every rank starts the
        window together (`align`: a collective), as a careful user's barrier would have it."""
        with torch.inference_mode(not self.train):
            for i in range(warmup_steps):
                self.timed_step(i)
            if self.cuda_graphs and not self.graphs:
                self.capture()
            align([0.0])
            return seconds_of(steps, self.timed_step, self.device)


def _sharded(root: LossModule, device: torch.device, sharding: ShardingPlan) -> LossModule:
    """The model with its loss (one root: the output layer's gathered weight, which an LLM's
    loss reads, stays gathered until backward), sharded over every rank of the process group
    that is up, its shards made and filled on `device` where it was built on the meta device."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    shard_model(root, mesh, sharding)
    materialize(root, device)
    return root
