"""One benchmark run end to end from a plan: set up, warm up, measure, aggregate across ranks."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from dlbench.console import stderr
from dlbench.engine.acceleration.attention import attention_kernel
from dlbench.engine.acceleration.compile_cache import compile_cache_column, compile_counts
from dlbench.engine.acceleration.cudnn_search import plan_cudnn_search
from dlbench.engine.acceleration.float8 import fp8_columns
from dlbench.engine.acceleration.graph_policy import prepare_step
from dlbench.engine.distribution.fabric import fabric_for, launcher, started_ranks
from dlbench.engine.distribution.lost_ranks import RankWatch
from dlbench.engine.distribution.ranks import (
    agree_max,
    gather_ranks,
    job_process_ids,
    largest_of_ranks,
    rank_facts,
    rank_log_path,
)
from dlbench.engine.plan import Plan, loop_settings
from dlbench.engine.scenarios.breakdown import run_breakdown
from dlbench.engine.scenarios.generation import (
    decode_bytes_per_step,
    kv_bytes_per_token,
    measure_generation,
    open_generator,
)
from dlbench.engine.scenarios.session import build_model, open_session, optimizer_impl
from dlbench.engine.timing.loop import LoopResult, WindowObservers, run_measured_loop
from dlbench.engine.timing.profiled_pass import (
    HOST_BOUND_BUSY_PCT,
    issue_columns,
    pass_steps,
    run_profiled_pass,
    window_busy_pct,
)
from dlbench.results.efficiency import (
    attained_columns,
    bandwidth_columns,
    energy_columns,
    mfu_columns,
)
from dlbench.results.job import job_gpus, job_telemetry
from dlbench.results.peaks.attained import attained_peaks, job_peaks
from dlbench.results.row import RowBuilder
from dlbench.results.stats import latency_columns
from dlbench.results.telemetry_columns import decoder_column
from dlbench.signals import Interrupted
from dlbench.telemetry.monitor import open_monitor
from dlbench.workloads.flops import COUNT_BATCH, recorded_flops_per_sample


@dataclass
class Measurement:
    """What one run measured, before it becomes a row."""

    plan: Plan
    loop: LoopResult
    param_count: int
    world_size: int
    global_rank: int
    per_rank: list[dict[str, object]]  # each rank's facts (distribution.ranks), in rank order
    peak_allocated_mb: float | None
    peak_reserved_mb: float | None
    launcher: str = ""
    gpus: dict[str, object] = field(default_factory=dict)  # several ranks: the job's GPUs
    parts: RowBuilder = field(default_factory=RowBuilder)  # the run's own columns, by source
    as_run: dict[str, object] = field(default_factory=dict)  # settings the run changed

    @property
    def slowest_rank(self) -> int:
        """The rank whose window was longest: it sets the global throughput."""
        return max(range(len(self.per_rank)), key=lambda r: self.per_rank[r]["window_s"])

    @property
    def slowest_window_s(self) -> float:
        """The longest window over all ranks."""
        return self.per_rank[self.slowest_rank]["window_s"]

    @property
    def slowest_median_step_s(self) -> float:
        """The largest median step time over all ranks."""
        return max(r["median_step_s"] for r in self.per_rank)

    @property
    def samples(self) -> int:
        """Samples processed in the window, over all ranks."""
        return self.plan.config.workload.batch_size * self.loop.steps * self.world_size


def _measure(
    plan: Plan, fabric, monitor, cache: Path | None
) -> tuple[LoopResult, int, RowBuilder, dict[str, object]]:
    """Run the scenario the plan asks for: generation for decoder LLM inference, else steps.
    Returns the loop, the parameter count, the run's own columns (each part named by what gave
    it) and the settings as they ran where the run changed them."""
    config = plan.config
    agree = agree_max(fabric)
    if plan.scenario == "generate":
        return (*_measure_generation(plan, fabric, monitor, agree), {})
    began = time.perf_counter()
    session = open_session(config, plan.workload, plan.shape, plan.precision, fabric)
    build_s = time.perf_counter() - began
    cudnn = plan_cudnn_search(
        config, session.device, session.convolutions, cache, fabric.global_rank
    )
    cudnn.apply()
    _quiet_baseline(fabric.device, monitor)
    fabric.barrier()
    observer = WindowObservers([o for o in (session.feed, monitor) if o is not None])
    parts = RowBuilder()
    try:
        with session.context():
            settings = loop_settings(config, session.device.type, _counted(monitor, agree))
            step, settings, graph = prepare_step(
                session, settings, bool(config.acceleration.cuda_graphs)
            )
            loop = run_measured_loop(step, session.device, settings, observer, agree)
            loop = graph.merge(loop)
            outputs = session.outputs.columns() if session.outputs else {}  # after the window
            parts.add("the outputs", outputs)
            after = loop.warmup_steps + loop.steps
            began = time.perf_counter()
            parts.add(
                "the profiled pass", profile_after_window(step, session.device, after, loop, agree)
            )
            if graph.graphed:  # one launch a step: could the host keep ahead of the GPU?
                units = range(after, after + pass_steps(loop.stats.median_s))
                issue = issue_columns(step, session.device, units, loop.stats.median_s)
                bound = {"host_bound": issue.pop("host_bound")}  # the launches decide it
                parts.add("the graph's launches", issue).decide("the graph's launches", bound)
            parts.add("the graphs", graph.columns())
            if plan.scenario == "infer":
                parts.add("the latencies", latency_columns(loop.step_times_s))
            parts.add("the profiled pass", {"profile_s": time.perf_counter() - began})
            if config.telemetry.breakdown:
                parts.add("the breakdown", run_breakdown(session, parts.get("gpu_busy_pct")))
    finally:
        if session.feed:
            session.feed.close()
    if session.feed:
        _loader_parts(parts, session.feed, loop)
    parts.add(
        "the build", {"build_s": build_s, "optimizer_impl": optimizer_impl(session.optimizer)}
    )
    if session.float8 is not None:
        parts.add("fp8", _fp8_columns(plan, session.float8))
    parts.add("cuDNN's search", cudnn.finish(loop.stats.median_s))
    as_run = {**graph.as_run(), **(session.feed.as_run() if session.feed else {})}
    return loop, session.param_count, parts, as_run


def _loader_parts(parts: RowBuilder, feed, loop: LoopResult) -> None:
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


def _measure_generation(plan: Plan, fabric, monitor, agree) -> tuple[LoopResult, int, RowBuilder]:
    """Generation rounds, then the profiled pass over whole rounds and the decode roofline."""
    config = plan.config
    began = time.perf_counter()
    generator, params = open_generator(config, plan.workload, plan.shape, plan.precision, fabric)
    build_s = time.perf_counter() - began
    _quiet_baseline(fabric.device, monitor)
    fabric.barrier()
    settings = loop_settings(config, fabric.device.type, _counted(monitor, agree))
    loop, steps, columns = measure_generation(
        generator, fabric.device, config, settings, monitor, agree
    )
    parts = RowBuilder().add("the generation", columns)
    per_round = generator.steps_per_round
    with torch.inference_mode():
        after = (loop.warmup_steps + loop.steps) * per_round
        began = time.perf_counter()
        round_step = steps.round_step(per_round)
        parts.add(
            "the profiled pass", profile_after_window(round_step, fabric.device, after, loop, agree)
        )
        parts.add("the profiled pass", {"profile_s": time.perf_counter() - began})
    parts.add("the build", {"build_s": build_s})
    if generator.float8 is not None:
        parts.add("fp8", {"fp8_linear_layers": len(generator.float8.names)})
    work = config.workload
    context = work.prompt_len + work.new_tokens / 2  # mean context of the decode steps
    itl = columns.get("itl_mean_ms")
    bandwidth = bandwidth_columns(
        decode_bytes_per_step(generator, context),
        kv_bytes_per_token(generator),
        itl / 1e3 if itl else None,
        _gpu_name(fabric.device),
    )
    parts.add("the decode's bandwidth", bandwidth)
    return loop, params, parts


def _fp8_columns(plan: Plan, layers) -> dict[str, object]:
    """FP8's layers and FLOPs per sample, counted on the same model on the meta device."""
    model, _ = build_model(
        plan.workload, plan.shape, plan.config.workload.llm_impl, torch.device("meta")
    )
    batch = plan.workload.make_batch(COUNT_BATCH, plan.shape, torch.Generator().manual_seed(0))
    return fp8_columns(layers, plan.config.workload.mode, model, batch.inputs.to("meta"))


def _counted(monitor, agree) -> bool:
    """Whether every rank's GPU has an energy counter (the same answer on every rank)."""
    [missing] = agree([float(monitor is None or monitor.counter_period_s is None)])
    return not missing


def _gpu_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else ""


def profile_after_window(step, device, first_step: int, loop: LoopResult, agree) -> dict:
    """The profiled pass (GPU busy share, attention backend) over whole units (steps, or
    generation rounds), the same ones on every rank; a profiler that cannot start costs a
    warning and empty columns, never the run."""
    [median] = agree([loop.stats.median_s])
    units = pass_steps(median)
    steps = range(first_step, first_step + units * loop.steps_per_unit)
    try:
        return run_profiled_pass(step, device, steps, loop.stats.median_s, units)
    except RuntimeError as exc:
        stderr.print(f"[yellow]warning:[/yellow] profiled pass failed ({exc}); no gpu_busy_pct")
        return {}


def _quiet_baseline(device: torch.device, monitor) -> None:
    """After the build, before warm-up: peak memory counted from here, and the GPU's idle
    power read while nothing runs (the baseline of energy above idle)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
    if monitor:
        monitor.measure_idle()


def run_benchmark(plan: Plan, fabric=None, cache: Path | None = None) -> Measurement:
    """Run the plan; every rank measures, and the slowest rank decides the global throughput. A rank
    lost on the way ends the run with RankLost (engine.distribution.lost_ranks). `cache` is the
    folder that outlives the run (dlbench.caches), None for a cold run."""
    began = time.perf_counter()
    fabric = fabric or fabric_for(plan)
    watch = RankWatch.open(fabric.world_size, started_ranks(fabric))
    try:
        return _run_on(plan, fabric, began, cache)
    except (Exception, Interrupted) as exc:  # a failed collective, or a launcher's SIGTERM
        watch.check(exc)
        raise


def _run_on(plan: Plan, fabric, began: float, cache: Path | None) -> Measurement:
    config = plan.config
    # The GPU this rank uses; CPU ranks (tests against the fake NVML) count by local rank.
    device_index = fabric.device.index if fabric.device.index is not None else fabric.local_rank
    monitor = None
    if config.telemetry.enabled:
        log = rank_log_path(config.telemetry.log, fabric.global_rank, fabric.world_size)
        monitor = open_monitor(fabric.device, config.telemetry.sample_interval, log, device_index)
        monitor.isolation.job_pids = job_process_ids(fabric)
    setup_s = time.perf_counter() - began
    compiled_before = compile_counts()
    try:
        with attention_kernel(config.acceleration.attention):
            loop, param_count, parts, as_run = _measure(plan, fabric, monitor, cache)
        telemetry = monitor.summary() if monitor else {}
    finally:
        if monitor:
            monitor.close()
    mine = rank_facts(loop, telemetry, fabric.device, device_index)
    mine["attained"] = attained_peaks(cache, str(mine["gpu_uuid"]), str(mine["gpu_name"]))
    per_rank = gather_ranks(fabric, mine)
    several = fabric.world_size > 1
    if several and telemetry:
        telemetry = {**telemetry, **job_telemetry(per_rank)}
    measurement = Measurement(
        plan=plan,
        loop=loop,
        param_count=param_count,
        world_size=fabric.world_size,
        global_rank=fabric.global_rank,
        per_rank=per_rank,
        peak_allocated_mb=largest_of_ranks(per_rank, "peak_memory_allocated_mb"),
        peak_reserved_mb=largest_of_ranks(per_rank, "peak_memory_reserved_mb"),
        launcher=launcher(fabric),
        gpus=job_gpus(per_rank) if several else {},
        as_run=as_run,
    )
    gpu_name = "" if measurement.gpus.get("gpu_mixed") else str(mine["gpu_name"])
    energy = energy_columns(telemetry, measurement.samples, _tokens_per_sample(plan, parts))
    decoder = decoder_column(as_run.get("data_decode"), telemetry.get("jpeg_decoder_busy_pct"))
    mfu = _mfu(measurement, gpu_name, cache, parts.get("fp8_flops_per_sample"))
    measurement.parts = (
        RowBuilder()
        .add("the set-up", {"setup_s": setup_s})
        .add("the compile cache", compile_cache_column(compiled_before))
        .include(parts)
        .add("the energy", energy)
        .add("the decoder", decoder)
        .add("the efficiency", mfu)
        .add("DDP", plan.ddp.columns() if plan.config.devices.strategy == "ddp" else {})
        .add("the sharding", plan.sharding.columns(fabric.world_size) if plan.sharding else {})
        .add("the GPU", {"gpu_uuid": mine["gpu_uuid"]})
    )
    peaks = job_peaks([r.get("attained") for r in per_rank])
    attained = attained_columns(measurement.parts.columns(), config.acceleration.precision, peaks)
    measurement.parts.add("the attained peaks", attained)
    return measurement


def _mfu(m: Measurement, gpu: str, cache: Path | None, fp8: object) -> dict[str, object]:
    """MFU for step scenarios on the job's GPU model (none on a host of mixed GPUs, `gpu`
    empty); generation is bandwidth-bound and gets none. The FLOP count is kept in the cache
    folder."""
    plan = m.plan
    if plan.scenario == "generate":
        return {}
    per_device = m.samples / m.slowest_window_s / m.world_size
    flops = recorded_flops_per_sample(plan.workload, plan.shape, plan.config.workload.mode, cache)
    precision = plan.config.acceleration.precision
    return mfu_columns(flops, per_device, gpu, precision, fp8 if isinstance(fp8, float) else None)


def _tokens_per_sample(plan: Plan, columns: RowBuilder) -> int | None:
    """The tokens a sample counts for energy per token: those generated in generation, the
    sequence's otherwise; none for images."""
    generated = columns.get("new_tokens")
    if isinstance(generated, int) and generated:
        return generated
    return plan.workload.tokens_per_sample(plan.shape)
