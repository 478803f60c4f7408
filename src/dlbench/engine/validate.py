"""`dlbench validate`: the bare loop and the dlbench loop back to back in the same processes.

On one device the bare loop is plain torch; on several (DDP, one process per device) it is
plain torch.distributed with torch's DistributedDataParallel, the same model, inputs, dtype,
layout, optimizer and DDP settings. Both alternate window by window; each window's global rate
uses the slowest rank's window, as benchmark rows do, and the row holds the ratio per repeat."""

from __future__ import annotations

import statistics

from dlbench.config import RunConfig
from dlbench.console import show_result
from dlbench.engine.acceleration.attention import attention_kernel
from dlbench.engine.acceleration.compile_cache import open_caches
from dlbench.engine.acceleration.graph_policy import prepare_step
from dlbench.engine.benchmark import Measurement
from dlbench.engine.distribution.devices import plan_devices
from dlbench.engine.distribution.fabric import fabric_for
from dlbench.engine.distribution.ranks import agree_max, gather_ranks, rank_facts
from dlbench.engine.plan import make_plan
from dlbench.engine.rows import measurement_row
from dlbench.engine.scenarios.bare import BareLoop
from dlbench.engine.scenarios.session import open_session
from dlbench.engine.timing.loop import LoopResult, loop_settings, run_measured_loop
from dlbench.results.advice import advice
from dlbench.results.environment import collect_environment
from dlbench.results.store import CsvStore


def compare_loops(config: RunConfig, repeats: int) -> tuple[Measurement, list[float], list[float]]:
    """Alternate bare and dlbench windows `repeats` times; dlbench's median run and both
    loops' global rates (samples over all ranks / slowest rank's window); both loops under
    the same --attention."""
    with attention_kernel(config.acceleration.attention):
        return _compare_loops(config, repeats)


def _compare_loops(config: RunConfig, repeats: int) -> tuple[Measurement, list[float], list[float]]:
    plan = make_plan(config.replace(min_time=0.0, telemetry=False))
    fabric = fabric_for(plan)
    session = open_session(plan.config, plan.workload, plan.shape, plan.precision, fabric)
    ddp = plan.ddp if plan.config.devices.strategy == "ddp" else None
    bare = BareLoop(
        plan.workload, plan.shape, plan.config, plan.precision, session.device, ddp, plan.sharding
    )
    agree = agree_max(fabric)
    settings = loop_settings(plan.config, session.device.type)
    with session.context():  # graphs captured as the benchmark captures them
        step, settings, graph = prepare_step(  # checked every time: the harness check's own
            session, settings, bool(plan.config.acceleration.cuda_graphs), None
        )
    bare.cuda_graphs = bare.cuda_graphs and graph.graphed is not False  # like with like
    per_step = config.workload.batch_size * fabric.world_size  # samples of one step, all ranks
    bare_steps = config.measurement.n_iters
    bare_rates: list[float] = []
    loops: list[LoopResult] = []
    for r in range(repeats):
        for variant in ("bare", "dlbench") if r % 2 == 0 else ("dlbench", "bare"):
            if variant == "bare":
                seconds = bare.window_s(config.measurement.warmup_steps, bare_steps, align=agree)
                [slowest] = agree([seconds])
                bare_rates.append(per_step * bare_steps / slowest)
                continue
            with session.context():
                loops.append(run_measured_loop(step, session.device, settings, None, agree))
    # the measured loop runs on until its noise settles: each rate counts the steps it ran
    rates = [per_step * lp.steps / agree([lp.window_s])[0] for lp in loops]
    chosen = graph.merge(loops[sorted(zip(rates, range(len(loops))))[len(loops) // 2][1]])
    index = fabric.device.index if fabric.device.index is not None else fabric.local_rank
    measurement = Measurement(
        plan=plan,
        loop=chosen,
        param_count=session.param_count,
        world_size=fabric.world_size,
        global_rank=fabric.global_rank,
        per_rank=gather_ranks(fabric, rank_facts(chosen, {}, fabric.device, index)),
        peak_allocated_mb=None,
        peak_reserved_mb=None,
    )
    measurement.parts.add("the graphs", graph.columns())
    measurement.parts.add("DDP", ddp.columns() if ddp is not None else {})
    if plan.sharding is not None:
        measurement.parts.add("the sharding", plan.sharding.columns(fabric.world_size))
    return measurement, rates, bare_rates


def execute_validate(config: RunConfig, repeats: int) -> int:
    """Run the comparison; rank 0 records one row with the ratios and prints it."""
    store = CsvStore(config.output.path)
    store.check_writable()
    devices = plan_devices(
        config.devices.accelerator, config.devices.per_node, config.devices.num_nodes
    )
    env = collect_environment(devices.device_type)
    open_caches(config, env)
    measurement, rates, bare_rates = compare_loops(config, repeats)
    if measurement.global_rank != 0:
        return 0
    ratios = [d / b for d, b in zip(rates, bare_rates)]
    bare = {
        "bare_samples_per_s": statistics.median(bare_rates),
        "harness_ratio": statistics.median(ratios),
        "harness_ratios": " ".join(f"{r:.4f}" for r in ratios),
    }
    measurement.parts.add("the bare loop", bare)
    row = measurement_row(measurement, env, run_kind="validate")
    store.append(row)
    show_result(row, config.output.json, advice(row))  # the verdict first, in words
    return 0
