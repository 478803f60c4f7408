"""One benchmark run end to end from a plan: set up, warm up, measure, aggregate across ranks."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from dlbench.engine.acceleration.attention import attention_kernel
from dlbench.engine.acceleration.compile_cache import compile_cache_column, compile_counts
from dlbench.engine.distribution.fabric import fabric_for, launcher, started_ranks
from dlbench.engine.distribution.lost_ranks import RankWatch
from dlbench.engine.distribution.ranks import (
    gather_ranks,
    job_process_ids,
    largest_of_ranks,
    rank_facts,
    rank_log_path,
)
from dlbench.engine.plan import Plan
from dlbench.engine.scenarios.kinds import scenario_for
from dlbench.engine.timing.loop import LoopResult
from dlbench.results.efficiency import (
    attained_columns,
    energy_columns,
    mfu_columns,
)
from dlbench.results.job import job_gpus, job_telemetry
from dlbench.results.peaks.attained import attained_peaks, job_peaks
from dlbench.results.row import RowBuilder
from dlbench.results.telemetry_columns import decoder_column
from dlbench.signals import Interrupted
from dlbench.telemetry.monitor import open_monitor
from dlbench.workloads.flops import recorded_flops_per_sample


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


def run_benchmark(plan: Plan, fabric=None, cache: Path | None = None) -> Measurement:
    """Run the plan; every rank measures, and the slowest rank decides the global throughput. A rank
    lost on the way ends the run with RankLost (engine.distribution.lost_ranks). `cache` is the
    folder that outlives the run (dlbench.caches), None for a cold run."""
    fabric = fabric or fabric_for(plan)
    watch = RankWatch.open(fabric.world_size, started_ranks(fabric))
    try:
        return _run_on(plan, fabric, cache)
    except (Exception, Interrupted) as exc:  # a failed collective, or a launcher's SIGTERM
        try:
            watch.check(exc)
        except Interrupted as late:  # the launcher's SIGTERM, come before the check held it
            watch.check(late)
            raise
        raise


def _rank_monitor(config, fabric, device_index: int, cache: Path | None):
    """This rank's telemetry on its own GPU (its own log file), or None without telemetry; the
    GPU's facts kept in the cache folder."""
    if not config.telemetry.enabled:
        return None
    log = rank_log_path(config.telemetry.log, fabric.global_rank, fabric.world_size)
    interval = config.telemetry.sample_interval
    monitor = open_monitor(fabric.device, interval, log, device_index, cache)
    monitor.isolation.job_pids = job_process_ids(fabric)
    return monitor


def _run_on(plan: Plan, fabric, cache: Path | None) -> Measurement:
    config = plan.config
    # The GPU this rank uses; CPU ranks (tests against the fake NVML) count by local rank.
    device_index = fabric.device.index if fabric.device.index is not None else fabric.local_rank
    monitor = _rank_monitor(config, fabric, device_index, cache)
    compiled_before = compile_counts()
    scenario = scenario_for(plan.scenario)
    try:
        with attention_kernel(config.acceleration.attention):
            measured = scenario.measure(plan, fabric, monitor, cache)
        telemetry = monitor.summary() if monitor else {}
    finally:
        if monitor:
            monitor.close()
    loop, parts, as_run = measured.loop, measured.parts, measured.as_run
    mine = rank_facts(loop, telemetry, fabric.device, device_index)
    mine["attained"] = attained_peaks(cache, str(mine["gpu_uuid"]), str(mine["gpu_name"]))
    per_rank = gather_ranks(fabric, mine)
    several = fabric.world_size > 1
    if several and telemetry:
        telemetry = {**telemetry, **job_telemetry(per_rank)}
    measurement = Measurement(
        plan=plan,
        loop=loop,
        param_count=measured.param_count,
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
    tokens = scenario.tokens_per_sample(plan, parts)
    energy = energy_columns(telemetry, measurement.samples, tokens)
    decoder = decoder_column(as_run.get("data_decode"), telemetry.get("jpeg_decoder_busy_pct"))
    fp8 = parts.get("fp8_flops_per_sample")
    mfu = _mfu(measurement, gpu_name, cache, fp8) if scenario.samples_are_inputs else {}
    measurement.parts = (
        RowBuilder()
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
    """MFU on the job's GPU model (none on a host of mixed GPUs, `gpu` empty), where a sample
    is the model's input (generation is bandwidth-bound and gets none). The FLOP count is kept
    in the cache folder."""
    plan = m.plan
    per_device = m.samples / m.slowest_window_s / m.world_size
    flops = recorded_flops_per_sample(plan.workload, plan.shape, plan.config.workload.mode, cache)
    precision = plan.config.acceleration.precision
    return mfu_columns(flops, per_device, gpu, precision, fp8 if isinstance(fp8, float) else None)
