"""What a serve run is given (`ServeSettings`): each setting declared once, as RunConfig's flags
are (its default, help and names: `dlbench serve`'s options, a plan's `serve` entries and the
command line a sweep writes are all made from it), with the checks of every value and
combination, and the columns that say in a row what was served."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from dlbench.config import RunConfig, declared_settings
from dlbench.config.fields import option
from dlbench.config.flags import SWEEP_OWNED, flag_args
from dlbench.config.run_config import shared
from dlbench.config.sections import check_choice, check_count
from dlbench.config.serve_scenarios import SERVE_SCENARIOS
from dlbench.errors import UserError, check_in_range, check_seconds, invalid
from dlbench.results.tag_columns import parse_tags

SCENARIOS = tuple(SERVE_SCENARIOS)  # MLPerf's, as LoadGen runs them
# what a load may ask for: more is a typo, and a rate times a duration is a list of arrivals
MAX_QPS = 1e6
MAX_QUERIES = 10**7
MAX_SERVE_BATCH = 4096
MAX_SLO_MS = 60_000.0
MAX_KV_CACHE_GB = 1e5
MAX_LOAD_S = 3600.0  # a load that would last longer is refused before anything warms up
# how long past its least duration a load may take to be answered (a rate beyond the server's
# offline rate queues): twice the duration, or the duration and this much, whichever is more
OVERLOAD_GRACE_S = 60.0
# MLPerf Inference's own minimums (--mlperf-rules): the duration, and the queries by scenario
MLPERF_MIN_DURATION_S = 600.0
MLPERF_MIN_QUERIES = {name: s.mlperf_min_queries for name, s in SERVE_SCENARIOS.items()}
# MLPerf Inference's p99 bounds for the server scenario: ResNet-50's for vision models, BERT's
# for text (vit and the others have none of their own)
SLO_P99_MS = {"vision": 15.0, "segmentation": 15.0, "text": 130.0}
# An LLM's server is held to its p99 time to first token and time per output token: MLPerf
# Inference's bounds for Llama-3.1-8B, the LLM benchmark closest in size to llm_1b and llm_8b
# (mlcommons/inference, loadgen/mlperf.conf: llama3_1-8b.Server.ttft_latency, tpot_latency)
TTFT_P99_MS = 2000.0
TPOT_P99_MS = 100.0
# Named sets of an LLM's (TTFT, TPOT) p99 bounds: MLPerf's server scenario, and its interactive
# one (mlcommons/inference, loadgen/mlperf.conf: llama3_1-8b-interactive)
TOKEN_BOUNDS = {"mlperf": (TTFT_P99_MS, TPOT_P99_MS), "interactive": (500.0, 30.0)}
_RULES = ", ".join(f"{k} {v:,}" for k, v in MLPERF_MIN_QUERIES.items())


@dataclass(frozen=True)
class ServeSettings:
    """Everything a serve run is given; `checked()` refuses what cannot run, by flag."""

    TITLE: ClassVar[str] = "Serve"

    model: str = shared("model")
    scenario: str = option("server", "MLPerf's scenario: single-stream, server or offline.")
    qps: float | None = option(None, "Server: the rate LoadGen schedules, queries a second.")
    find_qps: bool = option(
        False, "Server: search the highest rate LoadGen calls VALID.", switch=True
    )
    max_batch: int = option(
        64,
        "The batcher's largest batch (LLMs: the most KV cache slots, as memory allows; offline "
        "and --find-qps on a GPU: as many as memory allows unless given).",
    )
    batch_timeout_ms: float = option(2.0, "How long the batcher holds its oldest query.")
    slo_p99_ms: float | None = option(
        None, "Server: the p99 bound (default MLPerf's: 15 vision, 130 text)."
    )
    queries: int = option(1024, "Least queries a load answers (LoadGen's min_query_count).")
    min_duration: float = option(10.0, "Least seconds a load lasts (LoadGen's min_duration).")
    mlperf_rules: bool = option(
        False,
        f"MLPerf's own minimums: {MLPERF_MIN_DURATION_S:g} s, and queries by scenario "
        f"({_RULES}); replaces --min-duration and --queries.",
        switch=True,
    )
    coalesce: bool | None = option(
        None, "Server: LoadGen hands over queries due together at once (default: on)."
    )
    search_budget: float = option(240.0, "Seconds --find-qps may spend.")
    sweep_concurrency: bool = option(
        False,
        "LLMs, offline: a row at each concurrency, 1, 2, 4 ... up to the slots (the serving "
        "frontier: output tokens/s against tokens/s per user).",
        switch=True,
        only="llm",
    )
    batching: str = option(
        "continuous",
        "LLMs: continuous (a request joins the running batch at the next step and leaves when "
        "done) or static (whole batches of the next requests).",
        only="llm",
    )
    lengths: str = option(
        "fixed",
        "LLMs: request lengths: fixed, uniform (each drawn from half to 1.5x, seeded) or chat "
        "(a real chat trace's, scaled to these means).",
        only="llm",
    )
    token_bounds: str = option(
        "mlperf",
        "LLMs: the TTFT and TPOT p99 bounds (server's, and every goodput's): mlperf "
        "(2,000 / 100 ms) or interactive (500 / 30 ms).",
        only="llm",
    )
    ttft_p99_ms: float | None = option(
        None, "LLMs: the p99 time to first token bound, in place of --token-bounds'.", only="llm"
    )
    tpot_p99_ms: float | None = option(
        None, "LLMs: the p99 time per output token bound, in place of --token-bounds'.", only="llm"
    )
    kv_cache_gb: float | None = option(
        None,
        "LLMs: the most the KV cache may take, in GB, at most the device's free memory "
        "(default: half of it).",
        only="llm",
    )
    # RunConfig's settings, as a server runs them: its weights in bf16, each bucket compiled
    # and replayed as a CUDA graph
    precision: str = shared("precision", "bf16-true")
    accelerator: str = shared("accelerator")
    compile: bool | None = shared(
        "compile",
        None,
        "Serve: each bucket; default on a GPU, off on the CPU (where compiling costs more than "
        "it saves).",
    )
    cuda_graphs: bool = shared("cuda_graphs", True, "Serve: each bucket (on a GPU).")
    cache_dir: Path | None = shared("cache_dir")
    cache: bool = shared("cache")
    channels_last: bool = shared("channels_last")
    width: int | None = shared("width")
    height: int | None = shared("height")
    seq_len: int = shared("seq_len")
    prompt_len: int = shared("prompt_len", only="llm")
    new_tokens: int = shared("new_tokens", only="llm")
    seed: int = shared("seed", note="Serve: LoadGen's too.")
    output: Path = shared("output")
    run_id: str | None = shared("run_id")
    tags: tuple[str, ...] = shared("tags", ())

    def checked(self) -> ServeSettings:
        """These settings, or a UserError naming the first flag that cannot be."""
        check_count("--max-batch", self.max_batch, MAX_SERVE_BATCH)
        self.run_config()  # RunConfig's settings, checked where every run's are
        check_count("--queries", self.queries, MAX_QUERIES)
        check_in_range("--qps", self.qps, MAX_QPS)
        check_in_range("--slo-p99-ms", self.slo_p99_ms, MAX_SLO_MS)
        check_in_range("--batch-timeout-ms", self.batch_timeout_ms, MAX_SLO_MS, zero=True)
        check_in_range("--ttft-p99-ms", self.ttft_p99_ms, MAX_SLO_MS)
        check_in_range("--tpot-p99-ms", self.tpot_p99_ms, MAX_SLO_MS)
        check_in_range("--kv-cache-gb", self.kv_cache_gb, MAX_KV_CACHE_GB)
        check_seconds("--min-duration", self.min_duration)
        check_seconds("--search-budget", self.search_budget)
        self.tag_columns()
        self._check_combination()
        self._check_length()
        return self

    def run_config(self) -> RunConfig:
        """The RunConfig of the settings a serve run shares with every run (its workload,
        precision, compilation, device, seed and output): a UserError naming a flag that
        cannot be, as `dlbench infer` would give it."""
        shared_keys = {k for k, s in SERVE_SETTINGS.items() if s.field.metadata.get("shared")}
        given = {k: getattr(self, k) for k in shared_keys - {"tags"}}
        return RunConfig.of(**given, mode="infer", batch_size=self.max_batch)

    def given(self) -> set[str]:
        """The settings given other than at their default."""
        return {k for k, s in SERVE_SETTINGS.items() if getattr(self, k) != s.default}

    def token_bounds_ms(self) -> tuple[float, float]:
        """An LLM's p99 bounds, (time to first token, time per output token): the named set's,
        or those given."""
        ttft, tpot = TOKEN_BOUNDS.get(self.token_bounds, TOKEN_BOUNDS["mlperf"])
        return self.ttft_p99_ms or ttft, self.tpot_p99_ms or tpot

    def sized_by_memory(self) -> bool:
        """An LLM's offline or --find-qps run on a GPU without --max-batch: as many requests at
        once as the KV cache's memory holds, as a serving engine's throughput figure runs them.
        Not on the CPU: its cores are busy long before its memory is full, and a cache of
        MAX_SERVE_BATCH requests only lengthens the warm-up and the reference."""
        load = self.scenario == "offline" or self.find_qps
        gpu = self.accelerator != "cpu"
        return load and gpu and "max_batch" not in self.given() and self.is_llm()

    def is_llm(self) -> bool:
        """Whether the model is a decoder LLM, served by its tokens."""
        from dlbench.workloads import get_workload  # the registry imports torch: not at start-up

        return get_workload(self.model).family == "llm"

    def tag_columns(self) -> dict[str, str]:
        """`tags` as the row's columns; a UserError for one that is no KEY=VALUE, is given twice
        or names a column the row writes."""
        return parse_tags(list(self.tags))

    def bound_ms(self) -> float | None:
        """The server scenario's p99 bound: as given, else MLPerf's for the model's kind (an
        LLM's: none, its tokens are bounded)."""
        from dlbench.workloads import get_workload

        family = get_workload(self.model).family
        if family == "llm":
            return None
        return self.slo_p99_ms or SLO_P99_MS.get(family, SLO_P99_MS["vision"])

    def minimums(self) -> tuple[float, int]:
        """The least seconds and queries a load lasts: MLPerf's with --mlperf-rules."""
        if self.mlperf_rules:
            return MLPERF_MIN_DURATION_S, MLPERF_MIN_QUERIES[self.scenario]
        return self.min_duration, self.queries

    def _check_combination(self) -> None:
        if self.scenario not in SCENARIOS:
            raise invalid("--scenario", self.scenario, f"allowed: {', '.join(SCENARIOS)}")
        rate = SERVE_SCENARIOS[self.scenario].takes_rate
        if rate and (self.qps is None) == (not self.find_qps):
            raise UserError("--qps: the server scenario takes one of --qps RATE and --find-qps")
        if not rate and (self.qps is not None or self.find_qps):
            flag = "--find-qps" if self.find_qps else "--qps"
            raise UserError(
                f"{flag}: only the server scenario has a rate ({self.scenario} has none)"
            )
        self._check_unused(rate)
        check_choice("--token-bounds", self.token_bounds, tuple(TOKEN_BOUNDS))
        check_model_flags(self)
        if self.precision == "fp8" and not self.is_llm():
            raise invalid("--precision", self.precision, "an LLM's server only; use bf16-true")

    def _check_unused(self, rate: bool) -> None:
        """A flag the scenario or the rules would drop without a word, refused by name."""
        given = self.given()
        unused = {
            "--slo-p99-ms": not rate and "slo_p99_ms" in given,
            "--coalesce": not rate and "coalesce" in given,
            "--search-budget": not self.find_qps and "search_budget" in given,
        }
        for flag, dropped in unused.items():
            if dropped:
                why = "--find-qps" if flag == "--search-budget" else "the server scenario"
                raise UserError(f"{flag}: only {why} takes it ({self.scenario} was given)")
        for flag, key in (("--min-duration", "min_duration"), ("--queries", "queries")):
            if self.mlperf_rules and key in given:
                raise UserError(
                    f"{flag}: --mlperf-rules sets MLPerf's own minimums in its place; give one "
                    "or the other"
                )
        seconds, _ = self.minimums()
        if self.find_qps and self.search_budget < seconds:
            raise UserError(
                f"--search-budget: {self.search_budget:g} s cannot hold one load of at least "
                f"{seconds:g} s; give more, or a shorter --min-duration"
            )

    def _check_length(self) -> None:
        """A load that would outlast MAX_LOAD_S, refused before anything warms up: the least
        duration, or (server, at a rate given) the least queries at that rate."""
        seconds, queries = self.minimums()
        given = "--mlperf-rules" if self.mlperf_rules else "--min-duration"
        if seconds > MAX_LOAD_S:
            raise UserError(
                f"{given}: a load of at least {seconds:g} s; at most {MAX_LOAD_S:g} s a load"
            )
        if self.qps is not None and queries / self.qps > MAX_LOAD_S:
            count = "--mlperf-rules" if self.mlperf_rules else "--queries"
            raise UserError(
                f"--qps {self.qps:g} with {count} ({queries:,} queries): the load would last "
                f"{queries / self.qps / 3600:,.1f} hours; at most {MAX_LOAD_S:g} s (a higher "
                "--qps, or fewer --queries)"
            )

    def columns(self) -> dict[str, object]:
        """What the row says was served, one column a setting that decides the measurement (a
        sweep's point matches a row on them all)."""
        seconds, queries = self.minimums()
        server = SERVE_SCENARIOS[self.scenario].takes_rate
        llm = self.is_llm()
        ttft, tpot = self.token_bounds_ms() if llm else (None, None)
        held = not llm or self.batching == "static"  # continuous batching holds no request
        cap = None if self.sized_by_memory() else self.max_batch  # empty: as memory allows
        return {
            "model": self.model,
            "precision": self.precision,
            "batch_size": cap,
            "compile": self.compile,
            "cuda_graphs": self.cuda_graphs,
            "seed": self.seed,
            "serve_scenario": self.scenario,
            "serve_max_batch": cap,
            "serve_batch_timeout_ms": self.batch_timeout_ms if held else None,
            "serve_slo_p99_ms": self.bound_ms() if server else None,
            "serve_qps": self.qps,
            "serve_find_qps": self.find_qps,
            "serve_coalesce": (self.coalesce is not False) if server else None,
            "serve_mlperf_rules": self.mlperf_rules,
            "serve_min_duration_s": seconds,
            "serve_min_queries": queries,
            "prompt_len": self.prompt_len if llm else None,
            "new_tokens": self.new_tokens if llm else None,
            "serve_batching": self.batching if llm else None,
            "serve_lengths": self.lengths if llm else None,
            "serve_token_bounds": self.token_bounds if llm else None,
            "serve_ttft_p99_bound_ms": ttft,
            "serve_tpot_p99_bound_ms": tpot,
            "serve_kv_cache_cap_gb": self.kv_cache_gb if llm else None,
        }

    def cli_args(self) -> list[str]:
        """The `dlbench serve` command line of these settings (flags at their default left out)."""
        args = ["serve"]
        for key, setting in SERVE_SETTINGS.items():
            value = getattr(self, key)
            if value != setting.default or key in ("model", "scenario"):  # read first
                args += flag_args(key, value, SERVE_SETTINGS)
        return args


SERVE_SETTINGS = declared_settings(ServeSettings, "serve")
# what a plan's entry may not set: the sweep sets them (those of its own a serve run takes)
SERVE_SWEEP_OWNED = tuple(k for k in SWEEP_OWNED if k in SERVE_SETTINGS)


def check_model_flags(s: ServeSettings) -> None:
    """A flag the model does not take, refused by name: an LLM's own given for another model,
    one for images or --slo-p99-ms given for an LLM; and an LLM's requests checked against
    its context and LoadGen's least output."""
    from dlbench.serve.llm_checks import check_llm_settings, llm_only_flags

    given = s.given()
    if not s.is_llm():
        for flag, key in llm_only_flags(SERVE_SETTINGS).items():
            if key in given:
                raise UserError(f"{flag}: only an LLM takes it ({s.model} is not one)")
        return
    check_llm_settings(s, given)


def answering_limit_s(seconds: float) -> float:
    """The longest a load of at least `seconds` may take to be answered."""
    return min(MAX_LOAD_S, max(2.0 * seconds, seconds + OVERLOAD_GRACE_S))
