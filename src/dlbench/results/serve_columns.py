"""The columns of a `dlbench serve` row (results.schema lists them in its order): what was
served (the scenario, the batcher, the bound, the least duration and queries), what MLPerf's
LoadGen said of the load (its result and reasons, rates, percentiles, early stopping, its logs),
where a query's time went in the server, the rate search, and the same model's offline and
batch-1 references."""

from __future__ import annotations

SERVE_COLUMNS: dict[str, str] = {
    "serve_scenario": "serve: single-stream, server or offline (MLPerf's scenarios, by LoadGen)",
    "serve_max_batch": "serve: the dynamic batcher's largest batch",
    "serve_batch_timeout_ms": "serve: how long the batcher holds its oldest query for company",
    "serve_slo_p99_ms": "serve, server scenario: the p99 bound LoadGen holds the load to",
    "serve_qps": "serve, server scenario: the rate asked for (--qps; empty with --find-qps)",
    "serve_find_qps": "serve: whether the rate was searched (--find-qps)",
    "serve_coalesce": "serve, server scenario: LoadGen handed over queries due together at once",
    "serve_mlperf_rules": "serve: MLPerf's own least duration and queries applied",
    "serve_min_duration_s": "serve: the least time a load lasts (LoadGen's min_duration)",
    "serve_min_queries": "serve: the least queries a load answers (LoadGen's min_query_count)",
    "serve_loadgen": "serve: the load generator and its release (MLPerf's LoadGen)",
    "serve_result": "serve: LoadGen's result, VALID or INVALID",
    "serve_invalid_reasons": "serve: why LoadGen called it INVALID, ;-separated: latency_bound "
    "(p99 over the bound), early_stopping, min_duration, min_queries",
    "serve_queries": "serve: queries LoadGen counted (offline: the samples of its one query)",
    "serve_scheduled_qps": "serve, server scenario: queries a second LoadGen scheduled",
    "serve_achieved_qps": "serve: queries a second LoadGen saw answered (server: completed; "
    "offline: samples; single stream: with LoadGen's overhead)",
    "serve_latency_p50_ms": "serve: LoadGen's median latency, each query from its scheduled "
    "issue to its answer",
    "serve_latency_p90_ms": "serve: LoadGen's 90th percentile latency (single stream's metric)",
    "serve_latency_p99_ms": "serve: LoadGen's 99th percentile latency (the server's bound's)",
    "serve_early_stopping": "serve: LoadGen's early-stopping verdict and estimates",
    "serve_loadgen_log": "serve: LoadGen's summary log beside the CSV (its detail log beside it)",
    "serve_mean_batch": "serve: mean batch the batcher formed",
    "serve_queue_ms": "serve: a query's mean wait from LoadGen's hand-over to its batch's start",
    "serve_batch_ms": "serve: a query's mean time in its batch through the model server (copy "
    "in, run, copy out)",
    "serve_complete_ms": "serve: a query's mean time returning its batch to LoadGen",
    "serve_issue_us": "serve: the mean time LoadGen's hand-over spent in dlbench, a call",
    "serve_qps_found": "serve --find-qps: the highest rate LoadGen called VALID",
    "serve_points_tried": "serve --find-qps: rates the search tried",
    "serve_points": "serve --find-qps: each rate tried as qps:p99_ms:ok (VALID) or over",
    "serve_offline_samples_per_s": "serve: the same model's offline throughput at the largest "
    "batch, over at least a second (the search's upper end)",
    "serve_batch1_p50_ms": "serve: the same model's median latency one query at a time",
}

# The settings a serve row was measured with, beside the workload's (dlbench.serve.settings
# .ServeSettings.columns gives them): `compare` pairs serve rows on them too.
SERVE_KEY = (
    "serve_scenario",
    "serve_max_batch",
    "serve_batch_timeout_ms",
    "serve_slo_p99_ms",
    "serve_qps",
    "serve_find_qps",
    "serve_coalesce",
    "serve_mlperf_rules",
    "serve_min_duration_s",
    "serve_min_queries",
)
