"""Run one benchmark from a config to a stored row: the path `dlbench train` and `infer` take,
and a sweep worker's points too."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import io
import re
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch

from dlbench.config import RunConfig
from dlbench.console import show_result, stderr
from dlbench.engine.acceleration.compile_cache import open_caches
from dlbench.engine.acceleration.compile_choice import choose_compile
from dlbench.engine.autobatch import choose_batch_size
from dlbench.engine.benchmark import run_benchmark
from dlbench.engine.distribution.lost_ranks import RankLost
from dlbench.engine.plan import make_plan
from dlbench.engine.rows import measurement_row, per_rank_rows
from dlbench.errors import (
    EXIT_FAILED,
    EXIT_INVALID,
    EXIT_OK,
    EXIT_OOM,
    UserError,
    exception_line,
)
from dlbench.guard import guarded, report
from dlbench.results.advice import advice
from dlbench.results.environment import collect_environment
from dlbench.results.pairing import figure_of
from dlbench.results.processes import ProcessWithoutFigure, combined_row, process_figures
from dlbench.results.published import check_published_folder, published_line
from dlbench.results.row import config_columns, failure_row, new_run_id
from dlbench.results.store import CsvStore, check_side_file
from dlbench.signals import came_while_held
from dlbench.startup import CommandClock, command_clock, mark_command_start
from dlbench.subprocesses import ChildResult, last_line_of, run_forked
from dlbench.telemetry.gpu_facts import PROCESS_GPU_FACTS

# The host allocator's refusal: torch raises a plain RuntimeError there, not OutOfMemoryError.
HOST_OOM_MESSAGE = "can't allocate memory"


def out_of_memory(exc: BaseException) -> bool:
    """Whether `exc` says the run did not fit, on the GPU or in host memory (a batch of a
    billion images on the CPU): a status=oom row, not a traceback."""
    if isinstance(exc, (torch.OutOfMemoryError, MemoryError)):
        return True
    return isinstance(exc, RuntimeError) and HOST_OOM_MESSAGE in str(exc)


_UNITS_MB = {"GiB": 1024.0, "MiB": 1.0, "KiB": 1 / 1024, "B": 1 / 2**20}


def oom_columns(exc: BaseException) -> dict[str, float]:
    """What a GPU that ran out was asked for: the most this rank had allocated since the
    build, the allocation refused, and their sum (at least that much was needed)."""
    columns: dict[str, float] = {}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        # the rank's own GPU: Lightning made it the current device when the run began
        device = torch.cuda.current_device()
        columns["peak_memory_allocated_mb"] = torch.cuda.max_memory_allocated(device) / 2**20
    found = re.search(r"Tried to allocate ([\d.]+) (GiB|MiB|KiB|B)", str(exc))
    if found:
        columns["oom_request_mb"] = float(found[1]) * _UNITS_MB[found[2]]
    if "peak_memory_allocated_mb" in columns and "oom_request_mb" in columns:
        columns["oom_needed_mb"] = columns["peak_memory_allocated_mb"] + columns["oom_request_mb"]
    return columns


def own_rank() -> int:
    """This process's rank in the job's process group (0 where there is none)."""
    import torch.distributed as dist

    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


def _record_lost_rank(lost: RankLost, config: RunConfig, store: CsvStore, env: dict) -> int:
    """Rank 0 records the run as failed, naming the lost rank: one row, written whole (a
    launcher's SIGTERM waits, held until the command returns, and gives the exit code); every
    surviving rank exits non-zero."""
    if lost.global_rank == 0:
        columns = {**config_columns(config), "run_id": config.output.run_id}
        columns["world_size"] = lost.world_size
        store.append(failure_row(columns, "failed", str(lost), env))
    lost.end_started_ranks()
    report(str(lost), lost.exit_code)
    stopped = came_while_held()
    return stopped.exit_code if stopped else lost.exit_code


def per_rank_path(output: Path) -> Path:
    """The side file beside the results CSV: `bench.csv` -> `bench.per_rank.csv`."""
    return output.with_name(f"{output.stem}.per_rank.csv")


def execute(config: RunConfig, auto_batch: bool = False) -> int:
    """Validate, run, append the row (rank 0 only) and print it; returns the exit code.
    With `auto_batch` the batch size is searched first (engine.autobatch); with --processes
    N, the run is measured in N fresh processes (`execute_in_processes`)."""
    if config.measurement.processes > 1:
        return execute_in_processes(config, auto_batch)
    clock = command_clock()
    clock.lap("startup_s")
    gc.freeze()  # the imports' objects live as long as the process: no collection walks them
    store = _checked_store(config)
    if auto_batch:
        config = config.replace(tags=config.output.tags.with_facts(batch_size_mode="auto"))
    plan = make_plan(config)
    env = collect_environment(plan.devices.device_type)
    cache = open_caches(config, env)
    fabric = search = None
    try:
        if auto_batch:
            clock.lap("setup_s")
            plan, fabric, search = choose_batch_size(plan)
            clock.lap("auto_batch_s")  # the search's own column says it
            config = plan.config
        choice = choose_compile(plan.config, plan.latency_point, plan.compile_measured, cache)
        plan = dataclasses.replace(plan, config=choice.config)
        measurement = run_benchmark(plan, fabric, cache)
    except RankLost as lost:
        return _record_lost_rank(lost, config, store, env)
    except (MemoryError, RuntimeError) as exc:  # torch.OutOfMemoryError is a RuntimeError
        if not out_of_memory(exc):
            raise
        columns = {**config_columns(config), "run_id": config.output.run_id, **oom_columns(exc)}
        if own_rank() != 0:  # every rank ran out alike; rank 0 records it
            return EXIT_OOM
        store.append(failure_row(columns, "oom", exception_line(exc), env))
        work = config.workload
        stderr.print(
            f"[red]out of memory:[/red] {work.model} {work.mode} batch {work.batch_size} "
            f"at {config.acceleration.precision} does not fit; recorded as status=oom in "
            f"{config.output.path}"
        )
        return EXIT_OOM
    if measurement.global_rank != 0:
        return EXIT_OK
    parts = measurement.parts
    parts.add("the processes", {"processes": 1})
    parts.add("the caches", {"cache_dir": str(cache or "")})
    parts.add("the compile choice", choice.finish(measurement.loop.stats.median_s, cache))
    if search is not None:
        parts.add("the batch-size search", search.columns())
    side = per_rank_path(config.output.path) if measurement.world_size > 1 else None
    parts.add("the command's clock", phase_columns(clock))
    row = measurement_row(measurement, env, side_file=side.name if side else None)
    if side is not None:
        CsvStore(side).append_many(per_rank_rows(measurement, str(row["run_id"])))
    return _kept_and_shown(row, store, config)


# The phases of a run's seconds a row states beside build_s, warmup_s, wall_window_s and
# profile_s (each phase's meaning: results.schema); `measure` is the loop and the profiled pass,
# which those columns divide, and `auto_batch_s` the search's own column.
CLOCK_PHASES = ("startup_s", "setup_s", "baseline_s", "finish_s")


def phase_columns(clock: CommandClock) -> dict[str, object]:
    """The command's phases as columns, the last (`finish_s`: the passes after the profiled
    one, the ranks' facts, the row made) lapped now, and `process_wall_s`, their sum with the
    columns that divide the rest: the process's seconds to its row."""
    clock.lap("finish_s")
    return {
        **{phase: clock.laps.get(phase) for phase in CLOCK_PHASES},
        "process_wall_s": clock.elapsed_s(clock.last),
    }


def _checked_store(config: RunConfig) -> CsvStore:
    """Before anything is measured: the CSV, the telemetry log and the published rows' folder
    can be used; the CSV's store."""
    store = CsvStore(config.output.path)
    store.check_writable()
    check_side_file(config.telemetry.log, "--telemetry-log")
    check_published_folder()
    return store


def _kept_and_shown(row: dict[str, object], store: CsvStore, config: RunConfig) -> int:
    """The row appended and printed under its verdict; the exit (--strict: 4 where invalid)."""
    store.append(row)
    headline = "\n".join(line for line in (advice(row), published_line(row)) if line)
    show_result(row, config.output.json, headline)
    return EXIT_INVALID if config.measurement.strict and row["verdict"] == "invalid" else EXIT_OK


def execute_in_processes(config: RunConfig, auto_batch: bool) -> int:
    """The run in `--processes` fresh processes forked one after another from this one (which
    never starts CUDA), each writing its row aside; one row for them all
    (results.processes.combined_row). A process that fails ends the run with its own row."""
    if auto_batch or config.devices.per_node != "1" or config.devices.num_nodes > 1:
        raise UserError(
            "--processes: runs one device per process with a given batch size (not "
            "--batch-size auto, not several devices)"
        )
    store = _checked_store(config)
    config = config.replace(run_id=config.output.run_id or new_run_id())
    count, run_id = config.measurement.processes, config.output.run_id
    with tempfile.TemporaryDirectory(prefix="dlbench-processes-") as folder:
        aside = CsvStore(Path(folder) / "processes.csv")
        for k in range(1, count + 1):
            name = f"{run_id}-{k}"
            one = config.replace(processes=1, output=aside.path, run_id=name, strict=False)
            result = run_in_fork(one)
            rows = [r for r in aside.rows() if r.get("run_id") == name]
            if not rows or rows[0].get("status") != "ok" or not _has_figure(rows[0]):
                return _process_failed(config, store, rows, result, k)
            stderr.print(f"process {k} of {count}: {_figure_text(rows[0])}")
        row = combined_row(aside.rows(), run_id)
    return _kept_and_shown(row, store, config)


def run_in_fork(
    config: RunConfig, auto_batch: bool = False, log: Path | None = None
) -> ChildResult:
    """`config` run in a child forked from this process (which never starts CUDA), its clock
    started at the fork, and the GPU facts it learned kept for the next child (an idle
    baseline, the counter's period). What the child prints to stdout is held back (a sweep's
    point or a --processes child: the row is the parent's to show); its stderr goes to `log`
    where given (a sweep's point: kept, the table too), else to this process's stderr once it
    ends (subprocesses.run_forked)."""
    child = functools.partial(_in_child, config, auto_batch, log is not None)
    result = run_forked(child, PROCESS_GPU_FACTS.as_record, log)
    PROCESS_GPU_FACTS.adopt(result.learned)
    return result


def run_command_in_fork(command: Callable[[], int], log: Path | None) -> ChildResult:
    """A whole command line (`command`: the CLI's own entry, which parses it in the child and
    starts its clock there) run in a child forked from this process, as a fresh process would
    run it; its output into `log`, the GPU facts it learned kept for the next (`run_in_fork`)."""

    def child() -> tuple[int, str]:
        return command(), ""

    result = run_forked(child, PROCESS_GPU_FACTS.as_record, log)
    PROCESS_GPU_FACTS.adopt(result.learned)
    return result


def _in_child(config: RunConfig, auto_batch: bool, log: bool) -> tuple[int, str]:
    """The forked child's run: its exit code and the last line it printed (its table kept in
    the log where there is one)."""
    mark_command_start(fresh_process=False)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = guarded(lambda: execute(config, auto_batch))
    if log:
        sys.stderr.write(printed.getvalue())
    return code, last_line_of(printed.getvalue())


def _has_figure(row: dict[str, str]) -> bool:
    """Whether a process's finished row holds a figure the pooled row can use."""
    try:
        process_figures([row])
    except ProcessWithoutFigure:
        return False
    return True


def _figure_text(row: dict[str, str]) -> str:
    column = figure_of(row)[0]
    median = float(row["step_time_median_ms"])
    return f"{column} {float(row[column]):,.2f}, median step {median:.4f} ms"


def _process_failed(
    config: RunConfig, store: CsvStore, rows: list[dict[str, str]], result: ChildResult, k: int
) -> int:
    """The run's row where process `k` failed: the row it wrote (oom, error), under the run's
    id, and its exit; where it wrote none (killed, crashed) or one without a figure, an error
    row and a line saying why (a process that measured nothing is never a figure of 0)."""
    count = config.measurement.processes
    if rows and rows[0].get("status") != "ok":
        store.append({**rows[0], "run_id": config.output.run_id})
        return result.returncode or EXIT_FAILED
    why = f"process {k} of {count} " + (
        "measured no figure" if rows else f"ended without a row: {result.last_line}"
    )
    columns = {**config_columns(config), "run_id": config.output.run_id}
    store.append(failure_row(columns, "error", why, collect_environment("cpu")))
    return report(why, EXIT_FAILED)
