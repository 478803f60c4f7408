"""`dlbench serve`: one of MLPerf's scenarios, driven by MLPerf's LoadGen, against one model on
one device through the dynamic batcher; one row (`run_kind` serve) that says what LoadGen said.

Before any load the server is warmed (every bucket compiled and run) and two references of the
same model are measured by the server itself: its offline throughput at the largest batch, and
its batch-1 latency. `--find-qps` searches the highest rate LoadGen calls VALID (serve.search),
the offline throughput its upper end. A decoder LLM is served token by token, continuously
batched, and held to LoadGen's token latencies (serve.services)."""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn, TypeVar

from dlbench.config.fp8_recipes import resolve_recipe
from dlbench.config.serve_scenarios import serve_scenario
from dlbench.console import error_line, stderr
from dlbench.engine.acceleration.compile_cache import (
    compile_cache_column,
    compile_counts,
    open_caches,
)
from dlbench.engine.acceleration.precision import plan_precision
from dlbench.engine.distribution.devices import plan_devices
from dlbench.errors import EXIT_FAILED, UserError, exception_line
from dlbench.results.efficiency import energy_columns
from dlbench.results.environment import collect_environment
from dlbench.results.published import check_published_folder, published_columns
from dlbench.results.row import RowBuilder, failure_row, identity, new_run_id
from dlbench.results.store import CsvStore
from dlbench.serve.loadgen import (
    Load,
    LoadAbandoned,
    LoadGenResult,
    UnderTest,
    check_logs_folder,
    keep_logs,
    loadgen,
    loadgen_version,
    run_load,
)
from dlbench.serve.search import Point, behind_schedule, find_qps
from dlbench.serve.services import LlmService, QueryService, open_service, token_rates
from dlbench.serve.settings import ServeSettings, answering_limit_s
from dlbench.telemetry.monitor import TelemetryMonitor, open_monitor
from dlbench.workloads import InputShape, Workload, get_workload

Service = QueryService | LlmService
T = TypeVar("T")
SAMPLE_INTERVAL_S = 0.1  # the load's power and clocks, sampled this often
# a frontier point's least queries: its reference rate over this many times the least duration,
# and at least this many times its concurrency
FRONTIER_MARGIN = 1.5
FRONTIER_WAVES = 2


def _checked_store(s: ServeSettings) -> CsvStore:
    """The settings, LoadGen, the CSV, the published rows and the logs' folder checked before
    anything is built (each refusal one line); the CSV's store."""
    s.checked()
    loadgen()  # missing: one line before anything is built
    store = CsvStore(s.output)
    store.check_writable()
    check_published_folder()
    check_logs_folder(s.output)
    return store


def execute_serve(
    s: ServeSettings, shown: Callable[[dict[str, object]], None] = lambda row: None
) -> list[dict[str, object]]:
    """Warm, measure the references and the scenario's LoadGen load; append each row, show it
    (`shown`) and return them all: one, or with --sweep-concurrency one a concurrency, each
    its own offline load and reference, the warm-up shared."""
    store = _checked_store(s)
    workload = get_workload(s.model)
    shape = workload.shape(s.width, s.height, s.seq_len)
    devices = plan_devices(s.accelerator, "1")
    s = _as_resolved(s, devices.device_type)
    fp8 = resolve_recipe(None, "infer") if s.precision == "fp8" else None
    precision = plan_precision(s.precision, devices.device_type, "infer", fp8)
    precision.apply_matmul_settings()
    env = collect_environment(devices.device_type)
    cache = open_caches(s.run_config(), env)
    device = _device(devices.device_type)
    monitor = open_monitor(device, SAMPLE_INTERVAL_S, None, cache=cache)
    monitor.time_counter_steps = False  # a load lasts seconds: the counter's edges suffice
    monitor.measure_idle()  # before anything is built: the GPU's own idle power
    failed = {**s.columns(), "run_id": s.run_id or new_run_id(), "run_kind": "serve"}
    try:  # built, warmed and its references measured
        service = open_service(s, workload, shape, device, precision)
        compiled_before = compile_counts()
        references = _prepared(s, service)
        caches = {**compile_cache_column(compiled_before), "cache_dir": str(cache or "")}
    except UserError:
        raise
    except Exception as exc:  # the model failed before any load (or did not fit): the row says so
        why = f"the model server failed before the load ({exception_line(exc)})"
        _leave(LoadAbandoned(why, EXIT_FAILED), store, failed, env, None)
    what = _settings(s, workload, shape, devices.device_type)
    served = Served(s, store, service, monitor, env, what, references, caches, shown)
    if not s.sweep_concurrency:
        rows = [served.row(str(failed["run_id"]))]
    else:
        rows = [served.at_concurrency(c) for c in service.concurrencies()]  # type: ignore[union-attr]
    monitor.close()
    return rows


@dataclasses.dataclass
class Served:
    """A warmed service and what a row of it needs beyond its load: the store, the telemetry,
    the environment, the settings, the references and the caches, and who is shown each row."""

    s: ServeSettings
    store: CsvStore
    service: Service
    monitor: TelemetryMonitor
    env: dict
    settings: dict
    references: dict
    caches: dict
    shown: Callable[[dict[str, object]], None]

    def at_concurrency(self, concurrency: int) -> dict[str, object]:
        """A frontier's point: an offline load of at most `concurrency` requests at once, with
        its own offline reference (the batch-1 one shared), its row a server of that many
        slots'. Its least queries, unless given, are what its own reference rate answers in
        FRONTIER_MARGIN times the least duration, and FRONTIER_WAVES times the concurrency at
        least (a thousand requests one at a time would keep an 8B a quarter of an hour; a
        reference a little slow would leave LoadGen too few for its least duration)."""
        service = self.service
        service.concurrency = concurrency  # type: ignore[union-attr]
        stderr.print(f"concurrency {concurrency}:")
        self.references |= on_thread(service.offline_reference)  # type: ignore[union-attr]
        rate = float(self.references["serve_offline_samples_per_s"])
        seconds, queries = self.s.minimums()
        if "queries" not in self.s.given() and not self.s.mlperf_rules:
            filled = math.ceil(FRONTIER_MARGIN * rate * seconds)
            queries = max(FRONTIER_WAVES * concurrency, filled)
        point = dataclasses.replace(self, s=dataclasses.replace(self.s, queries=queries))
        return point.row(new_run_id(), concurrency)

    def row(self, run_id: str, concurrency: int | None = None) -> dict[str, object]:
        """The scenario's load, its row appended and shown; a load abandoned ends the process
        with a failure row (`_leave`)."""
        s, service, env = self.s, self.service, self.env
        cap = {} if concurrency is None else {"batch_size": concurrency}
        cap |= {"serve_max_batch": concurrency} if cap else {}
        failed = {**s.columns(), **cap, "run_id": run_id, "run_kind": "serve"}
        _check_answerable(s, float(self.references["serve_offline_samples_per_s"]))
        scratch = Path(tempfile.mkdtemp(prefix="dlbench-loadgen-"))
        try:
            result, split, telemetry, parts, sut = _scenario_load(
                s, service, self.references, scratch, self.monitor
            )
        except LoadAbandoned as stop:
            _leave(stop, self.store, failed, env, scratch)
        log = keep_logs(result.log_dir, s.output, run_id)
        shutil.rmtree(scratch, ignore_errors=True)
        checked = service.token_check(sut)  # after the load's window: its time is no load's
        settings = {**s.columns(), **self.settings, **service.columns(), **cap}
        row = (
            RowBuilder()
            .add("identity", {**identity(run_id, "ok"), "run_kind": "serve"})
            .add("settings", settings)
            .add("LoadGen", {**result.columns(), "serve_loadgen": loadgen_version()})
            .add("LoadGen's logs", {"serve_loadgen_log": log})
            .include(parts)
            .add("where a query's time went", split)
            .add("the tokens", {**token_rates({**result.columns(), **split}), **checked})
            .add("the load's telemetry", _energy(telemetry, result, service, split))
            .add("the references", self.references)
            .add("the caches", self.caches)
            .add("environment", env)
            .add("tags", s.tag_columns())
        )
        row = row.add("the published rows", published_columns(row.columns())).row()
        self.store.append(row)
        self.shown(row)
        return row


def _prepared(s: ServeSettings, service: Service) -> dict[str, float]:
    """The service warmed, its references measured (on a thread, as a load runs), and the
    warm-up's time."""
    stderr.print(f"serving {s.model} ({s.scenario}): warming {service.warming}")
    began = time.perf_counter()
    service.warm()
    warmup_s = time.perf_counter() - began
    return {**on_thread(service.references), "serve_warmup_s": warmup_s}


def on_thread(fn: Callable[[], T]) -> T:
    """`fn` run on a thread of its own, as a load's queries are served (on the CPU, torch's
    threads answer a thread that is not the main one more slowly: a reference measured on the
    main thread would be one no load can reach)."""
    done: list = []

    def run() -> None:
        try:
            done.append((True, fn()))
        except BaseException as exc:  # raised again on the calling thread
            done.append((False, exc))

    thread = threading.Thread(target=run, name="dlbench-references", daemon=True)
    thread.start()
    thread.join()
    ok, value = done[0]
    if not ok:
        raise value
    return value


def _energy(telemetry: dict, result: LoadGenResult, service: Service, split: dict) -> dict:
    """The load's telemetry with its energy per query, and per output token for an LLM."""
    return energy_columns(telemetry, result.queries, service.tokens_per_query(split))


def _scenario_load(
    s: ServeSettings,
    service: Service,
    references: dict,
    scratch: Path,
    monitor: TelemetryMonitor,
) -> tuple[LoadGenResult, dict, dict, RowBuilder, UnderTest]:
    """The scenario's LoadGen load (the search's best, with --find-qps), where its queries' time
    went, what the hardware did during it (the telemetry window of every row), its own parts of
    the row (the search) and the system that served it."""
    seconds, queries = s.minimums()
    common = {"min_duration_s": seconds, "min_queries": queries, "seed": s.seed}
    scenario = serve_scenario(s.scenario)
    splits: dict[float, dict] = {}
    windows: dict[float, dict] = {}
    served: dict[float, UnderTest] = {}

    def load(qps: float | None = None) -> Point:
        rate = scenario.takes_rate
        expected = float(qps if rate else references[scenario.sized_by])  # type: ignore[arg-type]
        own = service.load_settings(rate)
        spec = Load(
            s.scenario, **common, **own, expected=expected, coalesce=s.coalesce is not False
        )
        folder = scratch / f"load-{len(splits)}"
        at = f" at {qps:,.1f} queries/s" if qps else ""
        article = "an" if s.scenario[0] in "aeiou" else "a"
        stderr.print(f"LoadGen: {article} {s.scenario} load{at}, at least {seconds:g} s")
        monitor.begin_window()
        made = service.system_under_test
        result, sut = run_load(made, spec, service.samples, folder)
        monitor.end_window()
        key = qps or 0.0
        served[key], splits[key], windows[key] = sut, sut.columns(), monitor.summary()
        return Point(key, result, behind_schedule(result, sut.ttft_growth()))

    parts = RowBuilder()
    if not s.find_qps:
        result = load(s.qps).result
        key = s.qps or 0.0
        return result, splits[key], windows[key], parts, served[key]
    reference = float(references["serve_offline_samples_per_s"])
    search = find_qps(load, reference, s.search_budget)
    parts.add("the search", search.columns())
    reported = search.reported
    qps = reported.qps
    return reported.result, splits[qps], windows[qps], parts, served[qps]


def _check_answerable(s: ServeSettings, offline_rate: float) -> None:
    """A UserError before the load where this server, at its best (its offline rate), could
    not answer what the rate issues within the load's answering time (serve.settings.
    answering_limit_s): LoadGen schedules every query up front and waits for each answer, so
    such a load runs on long past its duration while its queue grows (minutes, gigabytes)."""
    if s.qps is None or offline_rate <= 0:
        return
    seconds, queries = s.minimums()
    issued = max(float(queries), s.qps * seconds)
    needed, limit = issued / offline_rate, answering_limit_s(seconds)
    if needed > limit:
        raise UserError(
            f"--qps {s.qps:g}: this server answers at most about {offline_rate:,.1f} queries/s "
            f"(its offline rate), so the load's {issued:,.0f} queries would take {needed:,.0f} s "
            f"to answer, past the {limit:g} s a load of {seconds:g} s may take (a --qps near "
            "the offline rate, or --find-qps)"
        )


def _leave(
    stop: LoadAbandoned, store: CsvStore, columns: dict, env: dict, scratch: Path | None
) -> NoReturn:
    """A load abandoned while LoadGen still runs on its own thread: the run's row says why,
    one error line says it too, and the process ends now with the stop's exit code (LoadGen
    cannot be stopped, and an interpreter that shuts down under it crashes)."""
    status = "interrupted" if stop.exit_code > 128 else "error"
    store.append(failure_row(columns, status, str(stop), env))
    error_line(str(stop))
    if scratch is not None:
        shutil.rmtree(scratch, ignore_errors=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(stop.exit_code)


def _device(device_type: str):
    import torch

    return (
        torch.device("cuda", torch.cuda.current_device())
        if device_type == "cuda"
        else (torch.device("cpu"))
    )


def _as_resolved(s: ServeSettings, device_type: str) -> ServeSettings:
    """The settings as the device decides them: compiled where it pays (on a GPU), and a CPU
    named as such, whose LLM loads are not sized by memory (ServeSettings.sized_by_memory)."""
    if s.compile is None:
        s = dataclasses.replace(s, compile=device_type == "cuda")
    return dataclasses.replace(s, accelerator="cpu") if device_type == "cpu" else s


def _settings(
    s: ServeSettings, workload: Workload, shape: InputShape, accelerator: str
) -> dict[str, object]:
    """What was served, as the row's settings beyond the command's own (a frontier's point has
    its own: Served.row): the workload, its shape and the device (what the server ran, its
    buckets, graphs and layout, is the service's)."""
    return {
        "mode": "infer",
        "family": workload.family,
        "sample_unit": workload.sample_unit,
        "accelerator": accelerator,
        "devices": 1,
        **({} if s.is_llm() else workload.shape_columns(shape)),
    }
