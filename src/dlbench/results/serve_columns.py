"""The columns of a `dlbench serve` row (results.schema lists them in its order): what was
served (the scenario, the batcher, the bound, the least duration and queries; an LLM's
batching, lengths and token bounds), what MLPerf's LoadGen said of the load (its result and
reasons, rates, percentiles, early stopping, its logs; an LLM's token latencies and rates),
where a query's time went in the server, the rate search, and the same model's offline and
batch-1 references."""

from __future__ import annotations

SERVE_COLUMNS: dict[str, str] = {
    "serve_scenario": "serve: single-stream, server or offline (MLPerf's scenarios, by LoadGen)",
    "serve_max_batch": "serve: the dynamic batcher's largest batch (LLM: the most KV cache slots "
    "asked for; empty: an offline or --find-qps run sized by memory, serve_kv_slots says what it "
    "got)",
    "serve_batch_timeout_ms": "serve: how long the batcher holds its oldest query for company",
    "serve_slo_p99_ms": "serve, server scenario: the p99 bound LoadGen holds the load to",
    "serve_qps": "serve, server scenario: the rate asked for (--qps; empty with --find-qps)",
    "serve_find_qps": "serve: whether the rate was searched (--find-qps)",
    "serve_coalesce": "serve, server scenario: LoadGen handed over queries due together at once",
    "serve_mlperf_rules": "serve: MLPerf's own least duration and queries applied",
    "serve_min_duration_s": "serve: the least time a load lasts (LoadGen's min_duration)",
    "serve_min_queries": "serve: the least queries a load answers (LoadGen's min_query_count)",
    "serve_batching": "serve, LLM: continuous (a request joins the running batch at the next "
    "decode step and leaves when done) or static (whole batches of the next requests)",
    "serve_lengths": "serve, LLM: request lengths, fixed (prompt_len and new_tokens), uniform "
    "(each drawn from half to 1.5x of them, seeded) or chat (the Azure chat trace's, scaled to "
    "them: serve.chat_traffic)",
    "serve_token_bounds": "serve, LLM: the named set of TTFT and TPOT bounds, mlperf (2,000 / "
    "100 ms) or interactive (500 / 30 ms)",
    "serve_ttft_p99_bound_ms": "serve, LLM: the p99 time to first token bound (LoadGen holds a "
    "server load to it; every scenario's goodput)",
    "serve_tpot_p99_bound_ms": "serve, LLM: the p99 time per output token bound (likewise)",
    "serve_kv_cache_cap_gb": "serve, LLM: the most the KV cache was allowed (--kv-cache-gb; "
    "empty: half the free memory)",
    "serve_kv_slots": "serve, LLM: requests the KV cache holds at once (the batch's most)",
    "serve_kv_cache_gb": "serve, LLM: the KV cache's memory, every slot at the longest request, "
    "in the dtype it is kept in (the served weights': bf16 under fp8)",
    "serve_prefill_rows": "serve, LLM: the most newcomers one prefill step takes (as many of "
    "the longest prompts as serve.kv_budget.PREFILL_TOKENS holds)",
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
    "serve_output_tokens_per_s": "serve, LLM: output tokens a second LoadGen counted (server "
    "and single stream: as completed; offline: over the load)",
    "serve_token_clock": "serve, LLM: whose clock the TTFT and TPOT columns are: loadgen (from "
    "each query's scheduled issue; server and single stream) or server (from its hand-over; "
    "offline, where LoadGen measures neither)",
    "serve_ttft_p50_ms": "serve, LLM: median time to first token (serve_token_clock's)",
    "serve_ttft_p90_ms": "serve, LLM: 90th percentile time to first token",
    "serve_ttft_p99_ms": "serve, LLM: 99th percentile time to first token (the bound's)",
    "serve_tpot_p50_ms": "serve, LLM: median time per output token after the first",
    "serve_tpot_p90_ms": "serve, LLM: 90th percentile time per output token",
    "serve_tpot_p99_ms": "serve, LLM: 99th percentile time per output token (the bound's)",
    "serve_tokens_per_s_per_user": "serve, LLM: a request's own output tokens a second after "
    "its first (1 / the median time per output token, the server's clock): the frontier's "
    "interactivity, against serve_output_tokens_per_s per GPU",
    "serve_itl_mean_ms": "serve, LLM: mean gap between two tokens of a request (the server's "
    "clock, every gap of every request)",
    "serve_itl_p50_ms": "serve, LLM: median gap between two tokens",
    "serve_itl_p90_ms": "serve, LLM: 90th percentile gap between two tokens",
    "serve_itl_p99_ms": "serve, LLM: 99th percentile gap between two tokens (a prefill that "
    "stalls the running requests shows here)",
    "serve_e2el_p50_ms": "serve, LLM: median whole latency of a request, its hand-over to its "
    "last token (the server's clock; LoadGen's, from the scheduled issue: serve_latency_*)",
    "serve_e2el_p90_ms": "serve, LLM: 90th percentile whole latency of a request",
    "serve_e2el_p99_ms": "serve, LLM: 99th percentile whole latency of a request",
    "serve_goodput_qps": "serve, LLM: requests a second that met both bounds (their own TTFT and "
    "TPOT on the server's clock; DistServe's goodput)",
    "serve_goodput_tokens_per_s": "serve, LLM: output tokens a second of those requests",
    "serve_goodput_pct": "serve, LLM: share of the requests that met both bounds, %",
    "serve_tokens_checked": "serve, LLM: requests of the load generated again without a cache "
    "and held token for token against what was served (serve.token_check)",
    "serve_tokens_near_ties": "serve, LLM: of those, requests whose first difference was a near "
    "tie (the served token among the reference's best 5: rounding, not a fault)",
    "serve_tokens_wrong": "serve, LLM: of those, requests served a wrong token (the row is "
    "invalid: wrong_tokens)",
    "serve_loadgen_log": "serve: LoadGen's summary log beside the CSV (its detail log beside it)",
    "serve_mean_batch": "serve: mean batch the batcher formed (LLM: requests a decode step ran)",
    "serve_prompt_tokens_mean": "serve, LLM: prompt tokens of a request answered, mean",
    "serve_output_tokens_mean": "serve, LLM: output tokens of a request answered, mean",
    "serve_total_tokens_per_s": "serve, LLM: prompt and output tokens a second "
    "(serve_output_tokens_per_s scaled by the requests' mean lengths)",
    "serve_queue_ms": "serve: a query's mean wait from LoadGen's hand-over to its batch's start",
    "serve_batch_ms": "serve: a query's mean time in its batch through the model server (copy "
    "in, run, copy out)",
    "serve_complete_ms": "serve: a query's mean time returning its batch to LoadGen",
    "serve_issue_us": "serve: the mean time LoadGen's hand-over spent in dlbench, a call",
    "serve_qps_found": "serve --find-qps: the highest rate that held: LoadGen called it VALID "
    "and the server kept up (serve.search.behind_schedule)",
    "serve_qps_edge_seen": "serve --find-qps: a rate above the one found failed (False: the "
    "search never saw the server fail, and the rate found is a floor, not its edge)",
    "serve_points_tried": "serve --find-qps: rates the search tried",
    "serve_points": "serve --find-qps: each rate tried as qps:p99_ms:outcome (an LLM: "
    "qps:ttft_p99_ms/tpot_p99_ms:outcome), the outcome ok, over (LoadGen: INVALID) or behind "
    "(VALID, but the server fell behind the rate)",
    "serve_ttft_growth": "serve, LLM: the last third's median time to first token over the "
    "first third's, by arrival, on the server's clock (a queue growing through the load)",
    "serve_offline_samples_per_s": "serve: the same model's offline throughput at the largest "
    "batch, at steady state (an LLM's: the middle half of waves of requests, the ramp and the "
    "drain outside it), over at least a second (the search's first guess, never its ceiling)",
    "serve_batch1_p50_ms": "serve: the same model's median latency one query at a time (LLM: "
    "one request, every token)",
    "serve_warmup_s": "serve: the server's warm-up before its references and load (every "
    "bucket compiled, run and captured)",
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
    "serve_batching",
    "serve_lengths",
    "serve_token_bounds",
    "serve_ttft_p99_bound_ms",
    "serve_tpot_p99_bound_ms",
    "serve_kv_cache_cap_gb",
)
