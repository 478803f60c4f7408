"""What `dlbench serve` serves, behind one interface that serve.run drives: a model server,
warmed before any load, measuring its own references (its offline rate, one query alone),
making the system under test LoadGen drives, and saying what it ran.

`QueryService`: a model answering whole queries (images, text classes) through the dynamic
batcher (serve.model_server, serve.sut). `LlmService`: a decoder LLM answering requests token
by token, continuously batched or in static batches (serve.llm_server, serve.token_sut)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch

from dlbench.console import stderr
from dlbench.engine.acceleration.precision import PrecisionPlan
from dlbench.serve.batching import BatchPolicy
from dlbench.serve.continuous import Request, Scheduler
from dlbench.serve.kv_budget import PREFILL_TOKENS
from dlbench.serve.llm_server import LlmServer
from dlbench.serve.loadgen import Answers, UnderTest
from dlbench.serve.model_server import ModelServer
from dlbench.serve.requests import request_lengths
from dlbench.serve.settings import MAX_SERVE_BATCH, ServeSettings
from dlbench.serve.sut import SystemUnderTest
from dlbench.serve.token_check import check_tokens
from dlbench.serve.token_sut import TokenSystemUnderTest, serve_step
from dlbench.workloads import InputShape, Workload

REFERENCE_MIN_S = 1.0  # the offline reference lasts at least this long
REFERENCE_QUERIES = 64  # the batch-1 reference: this many queries one at a time
REFERENCE_REQUESTS = 5  # an LLM's: this many requests one at a time
REFERENCE_WAVES = 2  # an LLM's offline reference hands over this many times its slots at once
LLM_SAMPLES = 1024  # LoadGen's samples of an LLM: as many requests' lengths


class QueryService:
    """A model answering whole queries through the dynamic batcher."""

    def __init__(
        self,
        s: ServeSettings,
        workload: Workload,
        shape: InputShape,
        device: torch.device,
        precision: PrecisionPlan,
    ) -> None:
        self.settings = s
        served = (s.max_batch, s.compile, s.seed, s.cuda_graphs, s.channels_last)
        self.server = ModelServer(workload, shape, device, precision, *served)
        self.samples = s.max_batch  # LoadGen's samples: the server's pool of queries
        self.warming = f"{len(self.server.buckets)} buckets"

    def warm(self) -> None:
        self.server.warm()

    def references(self) -> dict[str, float]:
        """Queries a second at the largest batch, and one query's median latency."""
        return {
            "serve_offline_samples_per_s": self.server.offline_rate(REFERENCE_MIN_S),
            "serve_batch1_p50_ms": self.server.batch1_median_ms(REFERENCE_QUERIES),
        }

    def load_settings(self, rate: bool) -> dict[str, object]:
        """What a Load of this server holds beyond the scenario's: the p99 bound, where the
        scenario has a rate."""
        return {"bound_ms": self.settings.bound_ms() if rate else None}

    def system_under_test(self, answers: Answers) -> UnderTest:
        s = self.settings
        policy = BatchPolicy(s.max_batch, s.batch_timeout_ms / 1e3)
        inline = s.scenario == "single-stream"
        return SystemUnderTest(self.server.run_batch, answers.queries, policy, inline)

    def columns(self) -> dict[str, object]:
        return self.server.columns()

    def tokens_per_query(self, load_columns: dict) -> float | None:
        return None

    def token_check(self, sut: UnderTest) -> dict[str, object]:
        """Whole queries have no tokens to check."""
        return {}


class LlmService:
    """A decoder LLM answering requests token by token."""

    def __init__(
        self, s: ServeSettings, workload: Workload, device: torch.device, precision: PrecisionPlan
    ) -> None:
        self.settings = s
        self.lengths = request_lengths(LLM_SAMPLES, s.prompt_len, s.new_tokens, s.lengths, s.seed)
        limit = s.kv_cache_gb * 1e9 if s.kv_cache_gb is not None else None
        sizes = (MAX_SERVE_BATCH if s.sized_by_memory() else s.max_batch, limit)
        self.server = LlmServer(
            workload, device, precision, self.lengths, sizes, s.compile, s.cuda_graphs, s.seed
        )
        self.samples = LLM_SAMPLES
        self.concurrency = self.server.slots  # the most requests a load runs at once
        steps = len(self.server.decode_rows) + len(self.server.prefill_rows) * len(
            self.server.prompt_buckets
        )
        self.warming = f"{self.server.slots} slots, {steps} steps"

    def warm(self) -> None:
        """Every step warmed, each said on its own line as it is (an 8B's take seconds each)."""
        self.server.warm(lambda line: stderr.print(f"  {line}", markup=False, highlight=False))

    def concurrencies(self) -> list[int]:
        """The serving frontier's points (--sweep-concurrency): its decode buckets, 1, 2, 4 ...
        up to the slots and the slots themselves."""
        return list(self.server.decode_rows)

    def _scheduler(self) -> Scheduler:
        s = self.settings
        return Scheduler(self.concurrency, PREFILL_TOKENS, s.batching, s.batch_timeout_ms / 1e3)

    def _finish_times(
        self, count: int, clock: Callable[[], float] = time.perf_counter
    ) -> list[float]:
        """When each of `count` requests handed over at once (samples in order) finished, in
        seconds from the hand-over, by the same steps a load runs."""
        scheduler = self._scheduler()
        began = clock()
        for i in range(count):
            k = i % self.samples
            scheduler.submit(Request(i, k, self.lengths.prompt[k], self.lengths.output[k], began))
        finished: list[float] = []
        while scheduler.busy:
            done = serve_step(self.server, scheduler, clock())
            finished += [clock() - began] * len(done)
        return finished

    def references(self) -> dict[str, float]:
        """The offline rate (`offline_reference`) and one request's median latency alone
        (every token)."""
        alone = [self._finish_times(1)[-1] for _ in range(REFERENCE_REQUESTS)]
        return {
            **self.offline_reference(),
            "serve_batch1_p50_ms": 1e3 * statistics.median(alone),
        }

    def offline_reference(self) -> dict[str, float]:
        """Requests a second at steady state: waves of REFERENCE_WAVES times the concurrency
        handed over at once, counted over the middle half of their finishes (the ramp as the
        slots fill and the drain as they empty left out), at least REFERENCE_MIN_S of it."""
        count = REFERENCE_WAVES * self.concurrency
        while True:
            rate, seconds = steady_rate(self._finish_times(count))
            if seconds >= REFERENCE_MIN_S:
                return {"serve_offline_samples_per_s": rate}
            count *= 2

    def load_settings(self, rate: bool) -> dict[str, object]:
        """An LLM's load: LoadGen's token latencies, held to the TTFT and TPOT bounds (which
        LoadGen checks where the scenario has a rate)."""
        return {"token_bounds_ms": self.settings.token_bounds_ms()}

    def system_under_test(self, answers: Answers) -> UnderTest:
        first_tokens = self.settings.scenario != "offline"  # LoadGen asks for none there
        bounds = self.settings.token_bounds_ms()
        return TokenSystemUnderTest(
            self.server, self._scheduler(), self.lengths, answers, first_tokens, bounds
        )

    def token_check(self, sut: UnderTest) -> dict[str, object]:
        """The load's first finished requests generated again without a cache, held against
        what was served (serve.token_check)."""
        sample = sut.served_sample()  # type: ignore[attr-defined]
        server = self.server
        return check_tokens(server.model, server.prompts, sample, server.dtype).columns()

    def columns(self) -> dict[str, object]:
        """The server's columns, its slots and cache as a load at the concurrency holds them
        (a frontier's point reads as a server of that many slots)."""
        return self.server.columns(self.concurrency)

    def tokens_per_query(self, load_columns: dict) -> float | None:
        """Output tokens a request, as the load's requests had them."""
        return load_columns.get("serve_output_tokens_mean")


def open_service(
    s: ServeSettings,
    workload: Workload,
    shape: InputShape,
    device: torch.device,
    precision: PrecisionPlan,
) -> QueryService | LlmService:
    """The service of the model: an LLM's, or whole queries'."""
    if workload.family == "llm":
        return LlmService(s, workload, device, precision)
    return QueryService(s, workload, shape, device, precision)


def steady_rate(finish_times: list[float]) -> tuple[float, float]:
    """Requests a second over the middle half of their finishes (sorted), and that span's
    seconds: the rate with every slot busy, neither filling nor draining."""
    times = sorted(finish_times)
    quarter = len(times) // 4
    first, last = times[quarter], times[len(times) - 1 - quarter]
    span = last - first
    finished = len(times) - 1 - 2 * quarter
    return (finished / span if span > 0 else 0.0), span


def token_rates(columns: dict) -> dict[str, float | None]:
    """All tokens a second (prompt and output) from LoadGen's output rate and the mean
    request's lengths; nothing where the load had no tokens."""
    rate = columns.get("serve_output_tokens_per_s")
    prompt, output = (
        columns.get("serve_prompt_tokens_mean"),
        columns.get("serve_output_tokens_mean"),
    )
    if not rate or not output or prompt is None:
        return {}
    return {"serve_total_tokens_per_s": rate * (prompt + output) / output}
