"""Run one benchmark from a config to a stored row: the path `dlbench train` and `infer` take."""

from __future__ import annotations

from pathlib import Path

import torch

from dlbench.config import RunConfig
from dlbench.console import show_result, stderr
from dlbench.engine.benchmark import make_plan, run_benchmark
from dlbench.results.environment import collect_environment
from dlbench.results.row import config_columns, failure_row, measurement_row, per_rank_rows
from dlbench.results.store import CsvStore

EXIT_OK = 0
EXIT_OOM = 3


def last_line(exc: BaseException) -> str:
    """The first line of an exception message, for the `error` column."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


def per_rank_path(output: Path) -> Path:
    """The side file beside the results CSV: `bench.csv` -> `bench.per_rank.csv`."""
    return output.with_name(f"{output.stem}.per_rank.csv")


def execute(config: RunConfig) -> int:
    """Validate, run, append the row (rank 0 only) and print it; returns the exit code."""
    store = CsvStore(config.output)
    store.check_writable()
    plan = make_plan(config)
    env = collect_environment(plan.devices.device_type)
    try:
        measurement = run_benchmark(plan)
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
    row = measurement_row(measurement, env)
    if measurement.world_size > 1:
        side = per_rank_path(config.output)
        row["per_rank_file"] = side.name
        CsvStore(side).append_many(per_rank_rows(measurement, str(row["run_id"])))
    store.append(row)
    show_result(row, config.json)
    return EXIT_OK
