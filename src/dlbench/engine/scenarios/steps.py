"""The step scenarios, train and infer: a session's steps timed in a window (engine.timing),
then the passes after it. They differ in what their window's steps say beyond the rate: an
inference step is one query's latency."""

from __future__ import annotations

import time
from pathlib import Path

import torch

from dlbench.engine.acceleration.cudnn_search import plan_cudnn_search
from dlbench.engine.acceleration.float8 import fp8_columns
from dlbench.engine.acceleration.graph_policy import GraphRecord, prepare_step
from dlbench.engine.distribution.ranks import agree_max
from dlbench.engine.scenarios.base import (
    Measured,
    Planned,
    counted_energy,
    quiet_baseline,
)
from dlbench.engine.scenarios.breakdown import run_breakdown
from dlbench.engine.scenarios.session import build_model, open_session, optimizer_impl
from dlbench.engine.timing.loop import (
    LoopResult,
    WindowObservers,
    loop_settings,
    run_measured_loop,
)
from dlbench.engine.timing.profiled_pass import (
    HOST_BOUND_BUSY_PCT,
    issue_columns,
    pass_steps,
    profile_after_window,
    window_busy_pct,
)
from dlbench.results.row import RowBuilder
from dlbench.results.stats import latency_columns
from dlbench.startup import lap
from dlbench.telemetry.host_load import HostLoad
from dlbench.workloads.flops import COUNT_BATCH


class StepScenario:
    """Steps of a session (engine.scenarios.session), timed in one window."""

    name = ""
    samples_are_inputs = True

    def measure(self, plan: Planned, fabric, monitor, cache: Path | None) -> Measured:
        """Build the session, warm up, measure the window; then the profiled pass, the graph's
        launches, the breakdown and the loader's columns."""
        config = plan.config
        agree = agree_max(fabric)
        lap("setup_s")
        session = open_session(config, plan.workload, plan.shape, plan.precision, fabric)
        build_s = lap("build_s")
        cudnn = plan_cudnn_search(
            config, session.device, session.convolutions, cache, fabric.global_rank
        )
        cudnn.apply()
        quiet_baseline(fabric.device, monitor)
        fabric.barrier()
        lap("baseline_s")
        host = HostLoad()  # what else the host ran in the window: a CPU row's verdict reads it
        observer = WindowObservers([o for o in (host, session.feed, monitor) if o is not None])
        parts = RowBuilder()
        try:
            with session.context():
                settings = loop_settings(
                    config, session.device.type, counted_energy(monitor, agree)
                )
                record = GraphRecord.of(config, cache, fabric.global_rank)
                step, settings, graph = prepare_step(
                    session, settings, bool(config.acceleration.cuda_graphs), record
                )
                loop = run_measured_loop(step, session.device, settings, observer, agree)
                loop = graph.merge(loop)
                outputs = session.outputs.columns() if session.outputs else {}  # after the window
                parts.add("the outputs", outputs)
                began = time.perf_counter()
                _profiled(parts, step, session.device, loop, agree, graph.graphed)
                parts.add("the graphs", graph.columns())
                parts.add("the step times", self.window_columns(loop))
                parts.add("the host's load", host.columns())
                parts.add("the profiled pass", {"profile_s": time.perf_counter() - began})
                lap("measure")  # warmup_s, the window and profile_s say how it divides
                if config.telemetry.breakdown:
                    parts.add("the breakdown", run_breakdown(session, parts.get("gpu_busy_pct")))
        finally:
            if session.feed:
                session.feed.close()
        if session.feed:
            loader_parts(parts, session.feed, loop)
        parts.add(
            "the build", {"build_s": build_s, "optimizer_impl": optimizer_impl(session.optimizer)}
        )
        if session.float8 is not None:
            parts.add("fp8", fp8_parts(plan, session.float8))
        parts.add("cuDNN's search", cudnn.finish(loop.stats.median_s))
        as_run = {**graph.as_run(), **(session.feed.as_run() if session.feed else {})}
        return Measured(loop, session.param_count, parts, as_run)

    def window_columns(self, loop: LoopResult) -> dict[str, object]:
        """What the window's steps say beyond the rate (none for training)."""
        return {}

    def tokens_per_sample(self, plan: Planned, parts: RowBuilder) -> int | None:
        """The sequence's tokens (none for images)."""
        return plan.workload.tokens_per_sample(plan.shape)


class TrainScenario(StepScenario):
    """Training steps: forward, backward and the optimizer."""

    name = "train"


class InferScenario(StepScenario):
    """Inference steps: each step's time is one batch's latency."""

    name = "infer"

    def window_columns(self, loop: LoopResult) -> dict[str, object]:
        """The latency percentiles of the window's steps."""
        return latency_columns(loop.step_times_s)


def _profiled(parts: RowBuilder, step, device, loop: LoopResult, agree, graphed: bool) -> None:
    """The passes after the window: the profiled one, and a graph's launches (one a step:
    could the host keep ahead of the GPU? they decide `host_bound`)."""
    after = loop.warmup_steps + loop.steps
    parts.add("the profiled pass", profile_after_window(step, device, after, loop, agree))
    if graphed:
        units = range(after, after + pass_steps(loop.stats.median_s))
        issue = issue_columns(step, device, units, loop.stats.median_s)
        bound = {"host_bound": issue.pop("host_bound")}
        parts.add("the graph's launches", issue).decide("the graph's launches", bound)


def loader_parts(parts: RowBuilder, feed, loop: LoopResult) -> None:
    """The loader's columns; the run is host-bound where the GPU waited for the host or for
    its input (the loader decides `host_bound` from both)."""
    busy = parts.get("gpu_busy_pct")
    if busy is not None:
        busy = window_busy_pct(float(busy), loop.stats.median_s, loop.steps, loop.window_s)
    gpu_idle = None if busy is None else busy < HOST_BOUND_BUSY_PCT
    loader = feed.columns(gpu_idle)
    parts.add("the loader", loader)
    bound = bool(parts.get("host_bound") or loader.get("input_bound"))
    parts.decide("the loader", {"host_bound": bound})


def fp8_parts(plan: Planned, layers) -> dict[str, object]:
    """FP8's layers and FLOPs per sample, counted on the same model on the meta device."""
    model, _ = build_model(
        plan.workload, plan.shape, plan.config.workload.llm_impl, torch.device("meta")
    )
    batch = plan.workload.make_batch(COUNT_BATCH, plan.shape, torch.Generator().manual_seed(0))
    return fp8_columns(layers, model, batch.inputs.to("meta"))
