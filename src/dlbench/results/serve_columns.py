"""The columns of a `dlbench serve` row (results.schema lists them in its order): the scenario,
the batcher, the load and what it achieved, the rate search, and the same model's offline and
batch-1 references (its latencies are the inference columns `latency_*`, from each query's
scheduled arrival)."""

from __future__ import annotations

SERVE_COLUMNS: dict[str, str] = {
    "serve_scenario": "serve: single-stream, server or offline (MLPerf's scenarios)",
    "serve_max_batch": "serve: the dynamic batcher's largest batch",
    "serve_batch_timeout_ms": "serve: how long the batcher holds its oldest query for company",
    "serve_slo_p99_ms": "serve: the p99 bound the server scenario is held to",
    "serve_min_duration_s": "serve: the least time a server load lasts",
    "serve_qps_target": "serve, server scenario: the arrival rate asked for (Poisson, seeded)",
    "serve_queries": "serve: queries answered in the load",
    "serve_achieved_qps": "serve: queries answered a second, first arrival to last answer",
    "serve_mean_batch": "serve: mean batch the batcher formed",
    "serve_generator_lag_p99_ms": "serve: p99 of how late the load generator issued a query "
    "while the server was idle (its own delay; invalid: generator_behind when too late)",
    "serve_slo_met": "serve, server scenario: p99 within the bound and the rate kept up",
    "serve_qps_found": "serve --find-qps: the highest rate found that met the bound",
    "serve_points_tried": "serve --find-qps: rates the search tried",
    "serve_points": "serve --find-qps: each rate tried as qps:p99_ms:ok (met the bound) or over",
    "serve_offline_samples_per_s": "serve: the same model's offline throughput at the largest "
    "batch, over at least a second (the search's upper end)",
    "serve_batch1_p50_ms": "serve: the same model's median latency one query at a time",
}
