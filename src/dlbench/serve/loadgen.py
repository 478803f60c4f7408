"""MLPerf's LoadGen drives every `dlbench serve` load: it owns time, arrivals, percentiles and
validity; dlbench's model server only answers (serve.sut). A load is LoadGen's test in its
performance mode with the scenario's settings; what LoadGen says is read back from its detail
log (`:::MLLOG` lines) and kept: its result and each reason a run is INVALID, the scheduled and
completed rates, its percentiles and early-stopping estimate. Its summary and detail logs stay
beside the CSV, named by the row's run id."""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from dlbench.config.serve_scenarios import serve_scenario
from dlbench.errors import EXIT_FAILED, UserError, exception_line
from dlbench.results.store import writable_folder
from dlbench.serve.batching import BatchPolicy
from dlbench.serve.sut import SystemUnderTest
from dlbench.signals import Interrupted

# the detail log's verdict on each constraint, and the reason a row names when it failed
CONSTRAINTS = {
    "result_perf_constraints_met": "latency_bound",
    "early_stopping_met": "early_stopping",
    "result_min_duration_met": "min_duration",
    "result_min_queries_met": "min_queries",
}
PERCENTILES = (50, 90, 99)
KEPT_LOGS = ("mlperf_log_summary.txt", "mlperf_log_detail.txt")


def loadgen() -> ModuleType:
    """The `mlperf_loadgen` module, or a UserError saying how to get it."""
    try:
        import mlperf_loadgen
    except ImportError:
        raise UserError(
            "dlbench serve needs MLPerf's LoadGen: pip install mlcommons-loadgen (where no wheel "
            "exists for this platform, build it from mlcommons/inference's loadgen folder)"
        ) from None
    return mlperf_loadgen


def loadgen_version() -> str:
    """LoadGen and its release, as its package gives it: `mlcommons-loadgen 6.0.17`."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"mlcommons-loadgen {version('mlcommons-loadgen')}"
    except PackageNotFoundError:
        return "mlcommons-loadgen (release unknown)"


@dataclass(frozen=True)
class Load:
    """One LoadGen test: its scenario, least duration and queries, what its scenario is sized
    by (ServeScenario.sized_by: the server's rate, the rate an offline query is sized for, the
    latency in ms a single stream expects), and the server's bound and coalescing."""

    scenario: str
    min_duration_s: float
    min_queries: int
    expected: float
    bound_ms: float | None = None  # the server's
    coalesce: bool = True  # the server's
    seed: int = 0


@dataclass(frozen=True)
class LoadGenResult:
    """What LoadGen said of one load."""

    valid: bool
    reasons: tuple[str, ...]
    queries: int
    scheduled_qps: float | None
    completed_qps: float
    latency_ms: dict[int, float]  # by percentile
    early_stopping: str
    log_dir: Path

    @property
    def p99_ms(self) -> float:
        return self.latency_ms[99]

    def columns(self) -> dict[str, object]:
        """The row's columns of the load."""
        return {
            "serve_result": "VALID" if self.valid else "INVALID",
            "serve_invalid_reasons": ";".join(self.reasons),
            "serve_queries": self.queries,
            "serve_scheduled_qps": self.scheduled_qps,
            "serve_achieved_qps": self.completed_qps,
            **{f"serve_latency_p{q}_ms": self.latency_ms[q] for q in PERCENTILES},
            "serve_early_stopping": self.early_stopping,
        }


def read_detail(path: Path) -> dict[str, object]:
    """Every `:::MLLOG {...}` entry of LoadGen's detail log, by key (the last of each)."""
    entries: dict[str, object] = {}
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith(":::MLLOG "):
            entry = json.loads(line[len(":::MLLOG ") :])
            entries[entry["key"]] = entry.get("value")
    return entries


def result_of(entries: dict[str, object], scenario: str, log_dir: Path) -> LoadGenResult:
    """A load's result from its detail log's entries."""
    if "result_validity" not in entries:
        raise RuntimeError(f"LoadGen wrote no result to {log_dir}")
    reasons = tuple(name for key, name in CONSTRAINTS.items() if entries.get(key) is False)
    scheduled = entries.get("result_scheduled_samples_per_sec")
    text = " ".join(str(entries.get("early_stopping_result") or "").split())
    return LoadGenResult(
        valid=entries["result_validity"] == "VALID",
        reasons=reasons,
        queries=int(entries.get("result_query_count") or 0)  # offline: one query of many
        * int(entries.get("effective_samples_per_query") or 1),
        scheduled_qps=float(scheduled) if scheduled is not None else None,
        completed_qps=float(entries[serve_scenario(scenario).completed_rate]),  # type: ignore[arg-type]
        latency_ms={
            q: float(entries[f"result_{q:.2f}_percentile_latency_ns"]) / 1e6  # type: ignore[arg-type]
            for q in PERCENTILES
        },
        early_stopping=text.replace("* ", "").strip(),
        log_dir=log_dir,
    )


def loadgen_settings(lg: ModuleType, load: Load) -> object:
    """LoadGen's settings for one load, in its performance mode."""
    settings = lg.TestSettings()
    scenario = serve_scenario(load.scenario)
    settings.scenario = getattr(lg.TestScenario, scenario.loadgen)
    settings.mode = lg.TestMode.PerformanceOnly
    settings.min_duration_ms = int(load.min_duration_s * 1e3)
    settings.min_query_count = load.min_queries
    settings.qsl_rng_seed = settings.sample_index_rng_seed = load.seed
    settings.schedule_rng_seed = load.seed
    name, factor = scenario.loadgen_sizing
    sized = load.expected * factor
    setattr(settings, name, int(sized) if name.endswith("_ns") else sized)
    if scenario.takes_rate:
        settings.server_target_latency_ns = int(load.bound_ms * 1e6)  # type: ignore[operator]
        settings.server_coalesce_queries = load.coalesce
    return settings


def run_load(
    run_batch: Callable[[int], None],
    policy: BatchPolicy,
    load: Load,
    samples: int,
    log_dir: Path,
) -> tuple[LoadGenResult, dict[str, float | None]]:
    """One LoadGen test of the model server (`run_batch`, through the batcher's `policy`) over
    `samples` query samples; its result, and where the queries' time went (serve.sut.Split)."""
    lg = loadgen()

    def complete(queries: Sequence[int]) -> None:
        lg.QuerySamplesComplete([lg.QuerySampleResponse(q, 0, 0) for q in queries])

    log_dir.mkdir(parents=True, exist_ok=True)
    sut = SystemUnderTest(run_batch, complete, policy, inline=load.scenario == "single-stream")
    log = lg.LogSettings()
    log.log_output.outdir = str(log_dir)
    log.log_output.copy_summary_to_stdout = False
    log.enable_trace = False
    handle = lg.ConstructSUT(sut.issue_queries, sut.flush_queries)
    pool = lg.ConstructQSL(samples, samples, lambda _: None, lambda _: None)
    settings = loadgen_settings(lg, load)
    finished = threading.Event()

    def test() -> None:
        try:
            lg.StartTestWithLogSettings(handle, pool, settings, log)
        finally:
            finished.set()

    threading.Thread(target=test, name="dlbench-loadgen", daemon=True).start()
    try:
        while not finished.wait(WATCH_S):  # this thread stays free for signals
            if sut.failure is not None:
                why = exception_line(sut.failure)
                raise LoadAbandoned(f"the model server failed mid-load ({why})", EXIT_FAILED)
    except Interrupted as exc:
        sut.abandon()  # every query answered, unrun; LoadGen finishes on its own thread
        raise LoadAbandoned(f"{exc}; the load in flight has no result", exc.exit_code) from exc
    except BaseException:
        sut.abandon()
        raise
    sut.close()
    lg.DestroyQSL(pool)
    lg.DestroySUT(handle)
    entries = read_detail(log_dir / "mlperf_log_detail.txt")
    return result_of(entries, load.scenario, log_dir), sut.split.columns()


WATCH_S = 0.1  # how often the load's thread is looked at (a failure, a signal)


class LoadAbandoned(Exception):
    """A load ended before LoadGen did (the model server failed, a signal came): every query
    was answered, and LoadGen still runs on its own thread, so the process ends without
    waiting for it (serve.run), with `exit_code`."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def logs_folder(csv: Path) -> Path:
    """Where a CSV's loads keep LoadGen's logs: `<csv's stem>.loadgen/` beside it."""
    return csv.parent / f"{csv.stem}.loadgen"


def check_logs_folder(csv: Path) -> None:
    """A UserError before anything warms up where the logs could not be kept after the load
    (a file of that name, a folder not writable): the whole load would be lost."""
    writable_folder(logs_folder(csv), "--output (LoadGen's logs)")


def keep_logs(log_dir: Path, csv: Path, run_id: str) -> str:
    """The load's summary and detail logs beside the CSV (`<csv's stem>.loadgen/<run id>/`);
    the summary's path from the CSV's folder."""
    kept = logs_folder(csv) / run_id
    kept.mkdir(parents=True, exist_ok=True)
    for name in KEPT_LOGS:
        shutil.copyfile(log_dir / name, kept / name)
    return str((kept / KEPT_LOGS[0]).relative_to(csv.parent))
