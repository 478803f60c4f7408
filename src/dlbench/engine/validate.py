"""`dlbench validate`: the bare loop and the dlbench loop back to back in one process."""

from __future__ import annotations

import statistics

from dlbench.config import RunConfig
from dlbench.console import show_result
from dlbench.engine.bare import BareLoop
from dlbench.engine.benchmark import Measurement, loop_settings, make_plan
from dlbench.engine.loop import LoopResult, run_measured_loop
from dlbench.engine.ranks import RANK_FIELDS, rank_values
from dlbench.engine.session import create_fabric, open_session
from dlbench.results.environment import collect_environment
from dlbench.results.row import measurement_row
from dlbench.results.store import CsvStore


def compare_loops(config: RunConfig, repeats: int) -> tuple[Measurement, list[float], list[float]]:
    """Alternate bare and dlbench windows `repeats` times; dlbench's median run and both rates."""
    plan = make_plan(config.replace(devices="1"))
    fabric = create_fabric(plan.devices, plan.precision)
    session = open_session(plan.config, plan.workload, plan.shape, plan.precision, fabric)
    bare = BareLoop(plan.workload, plan.shape, plan.config, plan.precision, session.device)
    settings = loop_settings(plan.config.replace(min_time=0.0), session.device.type)
    bare_rates: list[float] = []
    loops: list[LoopResult] = []
    for r in range(repeats):
        order = ("bare", "dlbench") if r % 2 == 0 else ("dlbench", "bare")
        for variant in order:
            if variant == "bare":
                bare_rates.append(bare.rate(config.warmup_steps, config.n_iters))
                continue
            with session.context():
                loops.append(run_measured_loop(session.step, session.device, settings))
    rates = [config.batch_size * lp.steps / lp.window_s for lp in loops]
    median_loop = sorted(zip(rates, range(len(loops))))[len(loops) // 2][1]
    chosen = loops[median_loop]
    measurement = Measurement(
        plan=plan,
        loop=chosen,
        param_count=session.param_count,
        world_size=1,
        global_rank=0,
        per_rank=[dict(zip(RANK_FIELDS, rank_values(chosen, {}, 0)))],
        peak_allocated_mb=None,
        peak_reserved_mb=None,
    )
    return measurement, rates, bare_rates


def execute_validate(config: RunConfig, repeats: int) -> int:
    """Run the comparison, record one row with the ratio, print it."""
    store = CsvStore(config.output)
    store.check_writable()
    measurement, rates, bare_rates = compare_loops(config, repeats)
    ratios = [d / b for d, b in zip(rates, bare_rates)]
    row = measurement_row(
        measurement,
        collect_environment(measurement.plan.devices.device_type),
        {
            "run_kind": "validate",
            "bare_samples_per_s": statistics.median(bare_rates),
            "harness_ratio": statistics.median(ratios),
            "harness_ratios": " ".join(f"{r:.4f}" for r in ratios),
        },
    )
    store.append(row)
    show_result(row, config.json)
    return 0
