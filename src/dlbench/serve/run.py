"""`dlbench serve`: one of MLPerf's scenarios, driven by MLPerf's LoadGen, against one model on
one device through the dynamic batcher; one row (`run_kind` serve) that says what LoadGen said.

Before any load the server is warmed (every bucket compiled and run) and two references of the
same model are measured by the server itself: its offline throughput at the largest batch, and
its batch-1 latency. `--find-qps` searches the highest rate LoadGen calls VALID (serve.search),
the offline throughput its upper end. A decoder LLM is served token by token, continuously
batched, and held to LoadGen's token latencies (serve.services)."""

from __future__ import annotations

import dataclasses
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
from dlbench.results.advice import advice
from dlbench.results.efficiency import energy_columns
from dlbench.results.environment import collect_environment
from dlbench.results.published import check_published_folder, published_columns, published_line
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


def execute_serve(s: ServeSettings) -> dict[str, object]:
    """Warm, measure the references and the scenario's LoadGen load; append and return the
    row."""
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
    run_id = s.run_id or new_run_id()
    failed = {**s.columns(), "run_id": run_id, "run_kind": "serve"}
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
    _check_answerable(s, float(references["serve_offline_samples_per_s"]))
    scratch = Path(tempfile.mkdtemp(prefix="dlbench-loadgen-"))
    try:
        result, split, telemetry, parts, sut = _scenario_load(
            s, service, references, scratch, monitor
        )
    except LoadAbandoned as stop:
        _leave(stop, store, failed, env, scratch)
    log = keep_logs(result.log_dir, s.output, run_id)
    shutil.rmtree(scratch, ignore_errors=True)
    monitor.close()
    checked = service.token_check(sut)  # after the load's window: its time is no load's
    row = (
        RowBuilder()
        .add("identity", {**identity(run_id, "ok"), "run_kind": "serve"})
        .add("settings", _settings(s, workload, shape, service, devices.device_type))
        .add("LoadGen", {**result.columns(), "serve_loadgen": loadgen_version()})
        .add("LoadGen's logs", {"serve_loadgen_log": log})
        .include(parts)
        .add("where a query's time went", split)
        .add("the tokens", {**token_rates({**result.columns(), **split}), **checked})
        .add("the load's telemetry", _energy(telemetry, result, service, split))
        .add("the references", references)
        .add("the caches", caches)
        .add("environment", env)
        .add("tags", s.tag_columns())
    )
    row = row.add("the published rows", published_columns(row.columns())).row()
    store.append(row)
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


def show_serve(row: dict[str, object], output: Path | None = None) -> None:
    """The row's serving figures, a line each (LoadGen's logs named from where the user stands:
    the row keeps them relative to its CSV, `output`)."""

    def n(key: str) -> float:
        return float(row[key])  # type: ignore[arg-type]

    lines = [
        advice(row),  # the verdict first, in words (LoadGen's among its reasons): once
        f"{row['model']} {row['serve_scenario']} under LoadGen: {_queries(row)}, "
        f"{n('serve_achieved_qps'):,.1f}/s answered, mean batch {n('serve_mean_batch'):.1f}",
        f"latency p50 {n('serve_latency_p50_ms'):.3f} ms, p90 {n('serve_latency_p90_ms'):.3f} ms, "
        f"p99 {n('serve_latency_p99_ms'):.3f} ms",
        f"offline {n('serve_offline_samples_per_s'):,.1f}/s, batch-1 p50 "
        f"{n('serve_batch1_p50_ms'):.3f} ms",
    ]
    lines += _token_lines(row)
    if row.get("serve_points_tried"):
        found, tried = row.get("serve_qps_found"), row["serve_points_tried"]
        what = f"found {float(found):,.1f}/s" if found else "found no rate LoadGen called VALID"  # type: ignore[arg-type]
        lines.append(f"{what} in {tried} points")
    log = Path(str(row["serve_loadgen_log"]))
    lines.append(f"LoadGen's logs: {output.parent / log if output is not None else log}")
    lines.append(published_line(row))
    print("\n".join(lines))


def _as_resolved(s: ServeSettings, device_type: str) -> ServeSettings:
    """The settings as the device decides them: compiled where it pays (on a GPU), and a CPU
    named as such, whose LLM loads are not sized by memory (ServeSettings.sized_by_memory)."""
    if s.compile is None:
        s = dataclasses.replace(s, compile=device_type == "cuda")
    return dataclasses.replace(s, accelerator="cpu") if device_type == "cpu" else s


def _queries(row: dict[str, object]) -> str:
    """The queries the load answered, and why where they are more than asked: LoadGen issues
    enough to last --min-duration at the rate it expects (an offline query's samples too)."""
    answered = int(float(str(row["serve_queries"])))
    asked, seconds = row.get("serve_min_queries"), row.get("serve_min_duration_s")
    if asked in (None, "") or answered <= int(float(str(asked))):
        return f"{answered:,} queries"
    return (
        f"{answered:,} queries ({int(float(str(asked))):,} asked: LoadGen issues as many as last "
        f"{float(str(seconds)):g} s at the rate it expects)"
    )


def _settings(
    s: ServeSettings, workload: Workload, shape: InputShape, service: Service, accelerator: str
) -> dict[str, object]:
    """What was served and how, as the row's settings: the command's, the workload's shape and
    what the server ran (its buckets, graphs and layout)."""
    return {
        **s.columns(),
        "mode": "infer",
        "family": workload.family,
        "sample_unit": workload.sample_unit,
        "accelerator": accelerator,
        "devices": 1,
        **({} if s.is_llm() else workload.shape_columns(shape)),
        **service.columns(),
    }


def _token_lines(row: dict[str, object]) -> list[str]:
    """An LLM row's token figures, as LoadGen gave them (no latencies in offline)."""
    if not row.get("serve_output_tokens_per_s"):
        return []
    lines = [f"output {float(row['serve_output_tokens_per_s']):,.1f} tokens/s"]  # type: ignore[arg-type]
    if row.get("serve_ttft_p99_ms"):
        ms = {
            f"{f}{q}": float(row[f"serve_{f}_p{q}_ms"]) for f in ("ttft", "tpot") for q in (50, 99)
        }  # type: ignore[arg-type]
        lines.append(
            f"time to first token p50 {ms['ttft50']:.3f} ms, p99 {ms['ttft99']:.3f} ms; per "
            f"output token p50 {ms['tpot50']:.3f} ms, p99 {ms['tpot99']:.3f} ms"
        )
    return lines
