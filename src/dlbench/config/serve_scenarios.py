"""MLPerf's scenarios as `dlbench serve` runs them: one record each, holding every fact of the
scenario (LoadGen's name for it, MLPerf's least queries, the rate its detail log reports, what a
load of it is sized by, which of serve's settings it takes, the figure a row of it is judged
on). The settings' checks, the LoadGen load, the row and the gate all read them from here."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

# offline: queries for this much longer than the least duration (MLPerf's)
OFFLINE_MARGIN = 1.1


@dataclass(frozen=True)
class ServeScenario:
    """One scenario: `name` is the flag's value and the row's `serve_scenario`."""

    name: str
    loadgen: str  # LoadGen's TestScenario member
    mlperf_min_queries: int  # MLPerf Inference's least queries (--mlperf-rules)
    completed_rate: str  # the detail log's key for the rate the load completed
    sized_by: str  # the reference column a load is sized from ("": its rate is given)
    loadgen_sizing: tuple[str, float]  # LoadGen's setting the load is sized by, and its factor
    figure: str  # the column its rows are compared on
    lower_is_better: bool
    takes_rate: bool = False  # --qps or --find-qps, --slo-p99-ms and --coalesce


SERVE_SCENARIOS = {
    s.name: s
    for s in (
        ServeScenario(
            "single-stream",
            "SingleStream",
            mlperf_min_queries=1024,
            completed_rate="result_qps_with_loadgen_overhead",
            sized_by="serve_batch1_p50_ms",  # the latency LoadGen expects of one query
            loadgen_sizing=("single_stream_expected_latency_ns", 1e6),
            figure="serve_latency_p90_ms",
            lower_is_better=True,
        ),
        ServeScenario(
            "server",
            "Server",
            mlperf_min_queries=270_336,
            completed_rate="result_completed_samples_per_sec",
            sized_by="",
            loadgen_sizing=("server_target_qps", 1.0),
            figure="serve_latency_p99_ms",
            lower_is_better=True,
            takes_rate=True,
        ),
        ServeScenario(
            "offline",
            "Offline",
            mlperf_min_queries=1,
            completed_rate="result_samples_per_second",
            sized_by="serve_offline_samples_per_s",  # the rate one query of many is sized for
            loadgen_sizing=("offline_expected_qps", OFFLINE_MARGIN),
            figure="serve_achieved_qps",
            lower_is_better=False,
        ),
    )
}
# the server's figure where it searched its rate (--find-qps) rather than holding one given
RATE_FOUND = "serve_qps_found"


def serve_scenario(name: str) -> ServeScenario:
    """The record of a scenario by its name (the settings refuse any other before this)."""
    return SERVE_SCENARIOS[name]


def serve_figure(row: Mapping[str, object]) -> tuple[str, bool]:
    """The column a serve row is compared on, and whether lower is better: the rate found
    (--find-qps), else its scenario's (the p99 latency at a rate given, a single stream's p90,
    offline's rate)."""
    if str(row.get("serve_find_qps")) == "True":
        return RATE_FOUND, False
    scenario = SERVE_SCENARIOS.get(str(row.get("serve_scenario")), SERVE_SCENARIOS["offline"])
    return scenario.figure, scenario.lower_is_better
