"""The server side of `dlbench serve`: one model on one device and a pool of single queries in
pinned host memory, where a server receives them. A batch of n queries is padded to its
bucket (the next power of two up to the batcher's largest), copied to the device, run, and
its outputs copied back to the host (into one buffer, pinned on a GPU); the copies are inside
each query's latency. Buckets keep the shapes a compiled model sees to a few, each compiled and
warmed before any load, then captured as a CUDA graph (on a GPU) with both copies inside it: a
batch costs the host one launch and one wait, not one a kernel and one a copy, as a serving
stack's graph per batch size does (docs/serving.md#the-batch-1-path)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch

from dlbench.engine.acceleration.graphs import can_capture, capture_each
from dlbench.engine.acceleration.precision import PrecisionPlan, hold_autocast_weights
from dlbench.engine.scenarios.session import build_model, image_layout
from dlbench.workloads import InputShape, Workload

WARM_RUNS = 3  # per bucket or step, before any load (the LLM server's too): compilation, allocator


def buckets(max_batch: int) -> list[int]:
    """1, 2, 4 ... up to max_batch (itself included when it is no power of two)."""
    sizes = [1]
    while sizes[-1] * 2 <= max_batch:
        sizes.append(sizes[-1] * 2)
    return sizes if sizes[-1] == max_batch else [*sizes, max_batch]


def bucket_of(sizes: list[int], n: int) -> int:
    """The smallest of `sizes` (ascending) that holds n: the size n rows run at."""
    return next(b for b in sizes if b >= n)


class ModelServer:
    """`run_batch(n)`: the n waiting queries through the model, outputs on the host."""

    def __init__(
        self,
        workload: Workload,
        shape: InputShape,
        device: torch.device,
        precision: PrecisionPlan,
        max_batch: int,
        compile: bool,
        seed: int,
        graphs: bool = True,
        channels_last: bool = True,
    ) -> None:
        torch.manual_seed(seed)
        model, _ = build_model(workload, shape, None, device)
        # an image model in the layout its inference rows run in (their --channels-last default)
        fmt = image_layout(channels_last, workload)
        self.channels_last = fmt == torch.channels_last
        model = model.eval().to(dtype=precision.param_dtype, memory_format=fmt)
        hold_autocast_weights(model, precision)
        # one static graph per bucket (dynamic shapes would trade every bucket's kernels for one)
        self.model = torch.compile(model, dynamic=False) if compile else model
        self.device, self.precision = device, precision
        self.buckets = buckets(max_batch)
        generator = torch.Generator().manual_seed(seed)
        inputs = workload.make_batch(max_batch, shape, generator).inputs
        if inputs.is_floating_point():
            inputs = inputs.to(precision.input_dtype).contiguous(memory_format=fmt)
        self.queries = inputs.pin_memory() if device.type == "cuda" else inputs
        self.graphs = graphs and can_capture(device.type)
        self.replays: dict[int, Callable[[], None]] = {}
        self.outputs: dict[int, torch.Tensor] = {}  # each graph's output, written by its replay
        self.fallback = ""  # why capture failed
        self.answers: torch.Tensor | None = None  # the last batch's outputs, on the host

    def bucket(self, n: int) -> int:
        """The batch size n queries run at."""
        return bucket_of(self.buckets, n)

    def run_batch(self, n: int) -> None:
        """Copy in, run, copy out; returns when the outputs are on the host (`answers[:n]`)."""
        size = self.bucket(n)
        if self.replays:  # both copies are in the graph
            self.replays[size]()
            if self.device.type == "cuda":
                torch.cuda.current_stream(self.device).synchronize()
            return
        logits = self._forward(self.queries[:size].to(self.device, non_blocking=True))
        self._answer(logits[:n])

    def _answer(self, logits: torch.Tensor) -> None:
        """The outputs copied into the host buffer the answers go out from, made once (pinned
        on a GPU, as a server's response buffers are: a copy to pageable memory is staged
        through one the driver pins), then the wait for the device's work."""
        if self.answers is None:
            shape = (self.buckets[-1], *logits.shape[1:])
            pinned = self.device.type == "cuda"
            self.answers = torch.empty(shape, dtype=logits.dtype, pin_memory=pinned)
        self.answers[: len(logits)].copy_(logits, non_blocking=True)
        if self.device.type == "cuda":
            torch.cuda.current_stream(self.device).synchronize()

    def _forward(self, batch: torch.Tensor) -> torch.Tensor:
        dtype = self.precision.autocast_dtype
        with (
            torch.inference_mode(),
            torch.autocast(
                self.device.type, dtype=dtype or torch.float32, enabled=dtype is not None
            ),
        ):
            out = self.model(batch)
        return out if isinstance(out, torch.Tensor) else out[0]

    def warm(self) -> None:
        """Every bucket a few times (each compiles once), before any load is timed; dynamo may
        compile one graph per bucket here, past its default limit of recompilations. Then
        each bucket's graph: the queries copied into one static buffer, the model, its
        outputs copied into the pinned answers; a capture that fails leaves every bucket
        uncaptured (`cuda_graphs` False)."""
        limit = max(torch._dynamo.config.recompile_limit, len(self.buckets) + 1)
        with torch._dynamo.config.patch(recompile_limit=limit):
            for size in self.buckets:
                for _ in range(WARM_RUNS):
                    self.run_batch(size)
        if not self.graphs:
            return
        self.static_queries = torch.empty_like(self.queries, device=self.device)

        def forward(size: int) -> Callable[[], None]:
            def run() -> None:  # the queries in, the model, the answers out: one launch
                self.static_queries[:size].copy_(self.queries[:size], non_blocking=True)
                self.outputs[size] = self._forward(self.static_queries[:size])
                self.answers[:size].copy_(self.outputs[size], non_blocking=True)

            return run

        self.replays, self.fallback = capture_each(
            {size: forward(size) for size in self.buckets}, self.device, "a bucket"
        )

    def offline_rate(self, min_s: float, clock: Callable[[], float] = time.perf_counter) -> float:
        """Queries a second at the largest batch, over whole batches lasting at least `min_s`:
        the server's own throughput (what LoadGen's offline query is sized for, and the upper
        end of the server scenario's search)."""
        size, batches, began = self.buckets[-1], 0, clock()
        while (elapsed := clock() - began) < min_s or not batches:
            self.run_batch(size)
            batches += 1
        return batches * size / elapsed

    def batch1_median_ms(self, count: int, clock: Callable[[], float] = time.perf_counter) -> float:
        """The median of `count` single queries' times through the server, in ms (what a
        single stream expects)."""
        times = []
        for _ in range(count):
            began = clock()
            self.run_batch(1)
            times.append(clock() - began)
        return 1e3 * statistics.median(times)

    def columns(self) -> dict[str, object]:
        """The layout served, whether the buckets ran as graphs, and why not where capture
        failed."""
        layout = {"channels_last": self.channels_last, "cuda_graphs": bool(self.replays)}
        if not self.graphs:
            return layout  # as run: no graphs on a CPU
        return {**layout, "graph_fallback": self.fallback}
