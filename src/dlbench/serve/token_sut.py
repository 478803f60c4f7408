"""An LLM server as LoadGen's system under test: LoadGen hands requests over
(`issue_queries`), one serving thread runs the scheduler's steps (serve.continuous) on the model
(serve.llm_server), tells LoadGen each request's first token as soon as it is on the host
(`FirstTokenComplete`: its time to first token) and each request's tokens once its last is
(`QuerySamplesComplete` with their count: its time per output token).

`serve_step` is the one loop body, shared by the serving thread and by the server's own
references (its offline rate, one request alone). A request is never lost: where the model
fails mid-load every request, running or waiting or still to come, is answered at once and
`failure` says why (serve.loadgen ends the load there)."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from dlbench.serve.continuous import Request, Scheduler
from dlbench.serve.requests import RequestLengths
from dlbench.serve.search import ttft_growth
from dlbench.serve.token_check import CheckedSample
from dlbench.serve.token_latencies import TokenLatencies


class TokenServer(Protocol):
    prefill_chunk: int  # the most newcomers one prefill takes

    def prefill(self, requests: Sequence[Request]) -> list[int]: ...

    def decode(self, rows: int) -> list[int]: ...


class TokenAnswers(Protocol):
    def first(self, requests: Sequence[Request]) -> None: ...

    def finished(self, requests: Sequence[Request]) -> None: ...


def serve_step(
    server: TokenServer,
    scheduler: Scheduler,
    now: float,
    first: Callable[[list[Request]], None] | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> list[Request]:
    """One step: newcomers admitted and prefilled a chunk at a time (`first` told of each chunk
    as soon as its first tokens are on the host, not after the last chunk), then one decode step
    of every running request; the requests it finished."""
    admitted = scheduler.admit(now)
    finished = []
    for start in range(0, len(admitted), server.prefill_chunk):
        chunk = admitted[start : start + server.prefill_chunk]
        tokens = server.prefill(chunk)
        finished += scheduler.made({r.slot: t for r, t in zip(chunk, tokens)}, clock())
        if first is not None:
            first(chunk)
    if scheduler.running:
        tokens = server.decode(scheduler.rows)
        finished += scheduler.step({slot: tokens[slot] for slot in scheduler.running}, clock())
    return finished


@dataclass
class TokenCounts:
    """The requests answered and their tokens, summed over the load."""

    requests: int = 0
    prompt_tokens: int = 0
    output_tokens: int = 0


class TokenSystemUnderTest:
    """LoadGen's callbacks (`issue_queries`, `flush_queries`) over one serving thread."""

    def __init__(
        self,
        server: TokenServer,
        scheduler: Scheduler,
        lengths: RequestLengths,
        answers: TokenAnswers,
        first_tokens: bool,
        bounds_ms: tuple[float, float] = (math.inf, math.inf),
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        """`first_tokens`: LoadGen measures time to first token (it is told of each); the
        goodput is held to `bounds_ms` (TTFT, TPOT)."""
        self.server, self.scheduler, self.lengths = server, scheduler, lengths
        self.answers, self.first_tokens, self.clock = answers, first_tokens, clock
        self.bounds_ms = bounds_ms
        self.counts = TokenCounts()
        self.latencies = TokenLatencies()
        self.sample = CheckedSample()  # the requests the token check takes
        self._handed: list[Request] = []
        self._ready = threading.Condition()
        self._closing = False
        self.failure: BaseException | None = None
        self.abandoned = False
        self._thread = threading.Thread(target=self._serve, name="dlbench-llm", daemon=True)
        self._thread.start()

    def issue_queries(self, samples: Sequence) -> None:
        """LoadGen's hand-over: each query a request of its sample's lengths, queued."""
        now = self.clock()
        requests = [
            Request(s.id, s.index, self.lengths.prompt[s.index], self.lengths.output[s.index], now)
            for s in samples
        ]
        with self._ready:
            if self.abandoned:
                self.answers.finished(requests)
                return
            self._handed.extend(requests)
            self._ready.notify()

    def flush_queries(self) -> None:
        """LoadGen's end of issuing: nothing is held back."""

    def _serve(self) -> None:
        while True:
            with self._ready:
                for request in self._handed:
                    self.scheduler.submit(request)
                self._handed.clear()
                if self.abandoned:
                    self.answers.finished(self.scheduler.drain())
                if not self.scheduler.busy or self.abandoned:
                    if self._closing:
                        return
                    self._ready.wait()
                    continue
                pause = self.scheduler.wait_s(self.clock())
                if pause:  # a static batch not yet full: more may come within its timeout
                    self._ready.wait(pause)
                    continue
            self._step()

    def _step(self) -> None:
        first = self.answers.first if self.first_tokens else None
        try:
            finished = serve_step(self.server, self.scheduler, self.clock(), first, self.clock)
        except BaseException as exc:  # any failure ends the load; none may hang it
            self.failure = self.failure or exc
            self.abandon()
            return
        if finished:
            self.answers.finished(finished)
            self._count(finished)

    def _count(self, finished: list[Request]) -> None:
        self.latencies.add(finished)
        self.sample.offer(finished)
        counts = self.counts
        counts.requests += len(finished)
        counts.prompt_tokens += sum(r.prompt_len for r in finished)
        counts.output_tokens += sum(len(r.tokens) for r in finished)

    def abandon(self) -> None:
        """Answer every request, running, waiting and to come, at once: the load ends without
        the model (it failed, or a signal stops the run)."""
        with self._ready:
            self.abandoned = True
            self._ready.notify()

    def close(self) -> None:
        """Answer what runs and waits, then stop the serving thread."""
        with self._ready:
            self._closing = True
            self._ready.notify()
        self._thread.join()

    def columns(self) -> dict[str, float | None]:
        """The load's counts as the row's columns: the mean batch occupancy, and tokens a
        request (prompt and output) to turn LoadGen's output rate into a total one."""
        counts, answered = self.counts, self.counts.requests
        growth = self.ttft_growth()
        return {
            "serve_ttft_growth": growth[1] / growth[0] if growth and growth[0] > 0 else None,
            "serve_mean_batch": self.scheduler.occupancy.mean(),
            "serve_prompt_tokens_mean": counts.prompt_tokens / answered if answered else None,
            "serve_output_tokens_mean": counts.output_tokens / answered if answered else None,
            **self.latencies.columns(self.bounds_ms, loadgen_tokens=self.first_tokens),
        }

    def ttft_growth(self) -> tuple[float, float] | None:
        """The first and the last third's median time to first token, by arrival, on the
        server's clock (serve.search.behind_schedule: a queue that grew through the load)."""
        return ttft_growth(self.latencies.arrivals, self.latencies.ttft)

    def served_sample(self) -> list[Request]:
        """The requests the token check takes, their tokens as served (serve.token_check)."""
        return self.sample.requests()
