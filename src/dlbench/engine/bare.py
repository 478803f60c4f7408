"""A bare, hand-written PyTorch loop: the yardstick that `dlbench validate` holds the harness to.

Deliberately plain torch (no Lightning, no dlbench loop): what a careful user writes by hand.
Under DDP it wraps the model in torch's own DistributedDataParallel, on the process group that
is already up, with the same settings as the dlbench loop."""

from __future__ import annotations

import time

import torch
from torch.nn.parallel import DistributedDataParallel

from dlbench.config import RunConfig
from dlbench.engine.ddp import DdpSettings
from dlbench.engine.precision import PrecisionPlan
from dlbench.engine.session import cast_inputs, make_batches, make_optimizer, memory_format
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
    ) -> None:
        torch.manual_seed(config.seed)
        fmt = memory_format(config, workload)
        with torch.device(device):
            model = workload.build(shape)
        model = model.to(dtype=precision.param_dtype, memory_format=fmt)
        self.device = device
        self.batch_size = config.batch_size
        self.train = config.mode == "train"
        self.loss_fn = workload.loss
        self.optimizer = make_optimizer(config.optimizer, model.parameters())
        if ddp is not None:
            ids = [device.index] if device.type == "cuda" else None
            model = DistributedDataParallel(model, device_ids=ids, **ddp.kwargs())
        self.model = torch.compile(model) if config.compile else model
        self.model.train(self.train)
        self.batches = []
        for b in make_batches(workload, shape, config.batch_size, config.seed, fmt):
            b = cast_inputs(b.map(lambda t: t.to(device)), precision)
            self.batches.append((b.inputs, b.targets))
        dtype = precision.autocast_dtype
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
            loss = self.loss_fn(self.model(inputs), targets)
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()

    def window_s(self, warmup_steps: int, steps: int) -> float:
        """Seconds for `steps` timed steps (device clock) after `warmup_steps` untimed ones."""
        with torch.inference_mode(not self.train):
            for i in range(warmup_steps):
                self.step(i)
            if self.device.type == "cuda":
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(True)
                torch.cuda.synchronize(self.device)
                start.record()
                for i in range(steps):
                    self.step(i)
                end.record()
                end.synchronize()
                seconds = start.elapsed_time(end) / 1e3
            else:
                began = time.perf_counter()
                for i in range(steps):
                    self.step(i)
                seconds = time.perf_counter() - began
        return seconds
