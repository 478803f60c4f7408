"""MLPerf's LoadGen drives every `dlbench serve` load: it owns time, arrivals, percentiles and
validity; dlbench's model server only answers (serve.sut, serve.token_sut). A load is LoadGen's
test in its performance mode with the scenario's settings; what LoadGen says is read back from
its detail log (`:::MLLOG` lines) and kept: its result and each reason a run is INVALID, the
scheduled and completed rates, its percentiles and early-stopping estimate, and for an LLM
(LoadGen's token latencies) its time to first token, time per output token and tokens a second.
Its summary and detail logs stay beside the CSV, named by the row's run id."""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Protocol

import numpy as np

from dlbench.config.serve_scenarios import serve_scenario
from dlbench.errors import EXIT_FAILED, UserError, exception_line
from dlbench.results.store import writable_folder
from dlbench.signals import Interrupted

# the detail log's verdict on each constraint, and the reason a row names when it failed
CONSTRAINTS = {
    "result_perf_constraints_met": "latency_bound",
    "early_stopping_met": "early_stopping",
    "result_min_duration_met": "min_duration",
    "result_min_queries_met": "min_queries",
}
PERCENTILES = (50, 90, 99)
# what LoadGen's summary says where an LLM's load passed one of its token bounds, and the reason
TOKEN_BOUNDS = {"TTFT constrain not met": "ttft_bound", "TPOT constrain not met": "tpot_bound"}
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
    token_bounds_ms: tuple[float, float] | None = None  # an LLM's: TTFT and TPOT (server's p99)


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
    tokens: dict[str, float | None] = field(default_factory=dict)  # an LLM's (token_columns)

    @property
    def p99_ms(self) -> float:
        return self.latency_ms[99]

    def bound_figures(self) -> tuple[float, ...]:
        """The p99 figures the load was held to, in ms: the query's latency, or an LLM's TTFT
        and TPOT."""
        ttft, tpot = self.tokens.get("serve_ttft_p99_ms"), self.tokens.get("serve_tpot_p99_ms")
        if ttft is None or tpot is None:
            return (self.p99_ms,)
        return ttft, tpot

    def columns(self) -> dict[str, object]:
        """The row's columns of the load."""
        return {
            **self.tokens,
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
    tokens = "requested_use_token_latencies" in entries
    if tokens and "latency_bound" in reasons:  # which of the two bounds LoadGen names
        said = str(entries.get("result_invalid_reason") or "")
        named = tuple(name for text, name in TOKEN_BOUNDS.items() if text in said)
        reasons = tuple(r for r in reasons if r != "latency_bound") + (named or ("latency_bound",))
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
        tokens=token_columns(entries) if tokens else {},
    )


def token_columns(entries: dict[str, object]) -> dict[str, float | None]:
    """An LLM load's token figures as LoadGen gives them: time to first token and time per
    output token at each percentile (none in offline, where LoadGen measures neither: the
    server's clock gives them there, serve.token_latencies) and output tokens a second."""

    def ms(key: str) -> float | None:
        value = entries.get(key)
        return float(value) / 1e6 if value is not None else None  # type: ignore[arg-type]

    rate = entries.get(
        "result_completed_tokens_per_second", entries.get("result_tokens_per_second")
    )
    columns: dict[str, float | None] = {
        "serve_output_tokens_per_s": float(rate) if rate is not None else None,  # type: ignore[arg-type]
    }
    for q in PERCENTILES:
        ttft = ms(f"result_first_token_{q:.2f}_percentile_latency_ns")
        tpot = ms(f"result_time_per_output_token_{q:.2f}_percentile_ns")
        if ttft is not None and tpot is not None:
            columns |= {f"serve_ttft_p{q}_ms": ttft, f"serve_tpot_p{q}_ms": tpot}
    return columns


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
    if scenario.takes_rate:  # an LLM's is held to its token bounds, as MLPerf's (none: 0)
        settings.server_target_latency_ns = int((load.bound_ms or 0.0) * 1e6)
        settings.server_coalesce_queries = load.coalesce
    if load.token_bounds_ms is not None:
        settings.use_token_latencies = True
        ttft, tpot = load.token_bounds_ms
        settings.ttft_latency, settings.tpot_latency = int(ttft * 1e6), int(tpot * 1e6)
    return settings


class UnderTest(Protocol):
    """What LoadGen drives (serve.sut for whole queries, serve.token_sut for an LLM's)."""

    failure: BaseException | None

    def issue_queries(self, samples: Sequence) -> None: ...

    def flush_queries(self) -> None: ...

    def abandon(self) -> None: ...

    def close(self) -> None: ...

    def columns(self) -> dict[str, float | None]: ...

    def ttft_growth(self) -> tuple[float, float] | None:
        """The load's first and last third's median time to first token (serve.search)."""
        ...


class Answers:
    """How a system under test answers LoadGen: whole queries (no data), or an LLM's first
    tokens and finished requests (their tokens and count, as LoadGen's token latencies need)."""

    def __init__(self, lg: ModuleType) -> None:
        self.lg = lg

    def queries(self, queries: Sequence[int]) -> None:
        self.lg.QuerySamplesComplete([self.lg.QuerySampleResponse(q, 0, 0) for q in queries])

    def first(self, requests: Sequence) -> None:
        """Each request's first token (`tokens[0]`), as LoadGen's time to first token."""
        tokens = np.array([r.tokens[0] for r in requests], dtype=np.int32)
        address, size = tokens.ctypes.data, tokens.itemsize
        responses = [
            self.lg.QuerySampleResponse(r.query, address + i * size, size, 1)
            for i, r in enumerate(requests)
        ]
        self.lg.FirstTokenComplete(responses)

    def finished(self, requests: Sequence) -> None:
        """Each request's tokens and their count (a request answered unfinished, as a load
        abandoned answers it, is given two: LoadGen takes no fewer)."""
        kept = [np.array(r.tokens or [0], dtype=np.int32) for r in requests]
        responses = [
            self.lg.QuerySampleResponse(r.query, t.ctypes.data, t.nbytes, max(2, len(r.tokens)))
            for r, t in zip(requests, kept)
        ]
        self.lg.QuerySamplesComplete(responses)


def run_load(
    make_sut: Callable[[Answers], UnderTest], load: Load, samples: int, log_dir: Path
) -> tuple[LoadGenResult, UnderTest]:
    """One LoadGen test of the system under test `make_sut` makes (given how to answer) over
    `samples` query samples; its result, and the system once closed (its own columns of the
    load, what it served)."""
    lg = loadgen()
    log_dir.mkdir(parents=True, exist_ok=True)
    sut = make_sut(Answers(lg))
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
    return result_of(entries, load.scenario, log_dir), sut


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
