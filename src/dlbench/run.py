"""Run one benchmark from a config to a stored row: the path `dlbench train` and `infer` take."""

from __future__ import annotations

from pathlib import Path

import torch

from dlbench.config import RunConfig
from dlbench.console import show_result, stderr
from dlbench.engine.batch_probe import in_process_probe, memory_budget
from dlbench.engine.benchmark import Plan, make_plan, run_benchmark
from dlbench.engine.session import create_fabric
from dlbench.errors import EXIT_OK, EXIT_OOM, UserError
from dlbench.results.environment import collect_environment
from dlbench.results.row import config_columns, failure_row, measurement_row, per_rank_rows
from dlbench.results.store import CsvStore
from dlbench.startup import since_command_start
from dlbench.sweep.autobatch import confirm_batch_size, search_batch_size


def last_line(exc: BaseException) -> str:
    """The first line of an exception message, for the `error` column."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


def auto_batch_in_process(config: RunConfig) -> bool:
    """Whether `--batch-size auto` can search inside this process: one process (DDP ranks
    would disagree on an OOM) and a step workload (generation probes go to subprocesses)."""
    plan = make_plan(config)
    if plan.devices.device_type != "cuda":
        raise UserError(
            "--batch-size auto: needs a GPU (the CPU's memory has no fixed budget to fill, so "
            "every size up to the limit fits); give a number"
        )
    return plan.devices.world_size == 1 and not (
        plan.workload.generative and plan.config.mode == "infer"
    )


def _search_batch_size(plan: Plan):
    """The largest batch that fits, probed in this process; the plan at that size."""
    fabric = create_fabric(plan.devices, plan.precision, plan.config.strategy, plan.ddp)
    budget = memory_budget(fabric.device)
    search = search_batch_size(in_process_probe(plan, fabric), budget)
    if search.batch_size and fabric.device.type == "cuda":
        search = confirm_batch_size(search, in_process_probe(plan, fabric, autotune=True), budget)
    if search.batch_size == 0:
        raise UserError("--batch-size auto: even batch size 1 does not fit on this device")
    stderr.print(
        f"--batch-size auto: {search.batch_size} is the largest batch that fits "
        f"({len(search.probes)} probes, {search.seconds:.0f} s)"
    )
    return make_plan(plan.config.replace(batch_size=search.batch_size)), fabric, search


def per_rank_path(output: Path) -> Path:
    """The side file beside the results CSV: `bench.csv` -> `bench.per_rank.csv`."""
    return output.with_name(f"{output.stem}.per_rank.csv")


def execute(config: RunConfig, auto_batch: bool = False) -> int:
    """Validate, run, append the row (rank 0 only) and print it; returns the exit code.
    With `auto_batch` the batch size is searched first, in this process and Fabric."""
    startup_s = since_command_start()
    store = CsvStore(config.output)
    store.check_writable()
    plan = make_plan(config)
    env = collect_environment(plan.devices.device_type)
    fabric = search = None
    try:
        if auto_batch:
            plan, fabric, search = _search_batch_size(plan)
            config = plan.config
        measurement = run_benchmark(plan, fabric)
    except torch.OutOfMemoryError as exc:
        columns = {**config_columns(config), "run_id": config.run_id}
        store.append(failure_row(columns, "oom", last_line(exc), env))
        stderr.print(
            f"[red]out of memory:[/red] {config.model} {config.mode} batch {config.batch_size} "
            f"at {config.precision} does not fit; recorded as status=oom in {config.output}"
        )
        return EXIT_OOM
    if measurement.global_rank != 0:
        return EXIT_OK
    measurement.extra["startup_s"] = startup_s
    if search is not None:
        measurement.extra.update(search.columns())
    row = measurement_row(measurement, env)
    if measurement.world_size > 1:
        side = per_rank_path(config.output)
        row["per_rank_file"] = side.name
        CsvStore(side).append_many(per_rank_rows(measurement, str(row["run_id"])))
    store.append(row)
    show_result(row, config.json)
    return EXIT_OK
