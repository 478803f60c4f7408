"""The LLM server's loop under LoadGen's callbacks (serve.token_sut), on a real clock with a model
server of instant steps: a full static batch is run at once, not after its timeout; a burst of
newcomers learns its first tokens a prefill chunk at a time; every request handed over is
answered once."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

from dlbench.serve.continuous import Request, Scheduler
from dlbench.serve.requests import request_lengths
from dlbench.serve.token_sut import TokenSystemUnderTest, serve_step


class _InstantServer:
    """Steps that take no time; each call written down in order."""

    prefill_chunk = 8

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def prefill(self, requests):
        self.calls.append(("prefill", len(requests)))
        return [7] * len(requests)

    def decode(self, rows: int):
        self.calls.append(("decode", rows))
        return [8] * rows


class _Answers:
    def __init__(self, calls: list | None = None) -> None:
        self.calls = calls if calls is not None else []
        self.done: list[int] = []
        self.finished_all = threading.Event()
        self.expected = 0

    def first(self, requests) -> None:
        self.calls.append(("first", len(requests)))

    def finished(self, requests) -> None:
        self.done += [r.query for r in requests]
        if len(self.done) >= self.expected:
            self.finished_all.set()


def _samples(count: int) -> list[SimpleNamespace]:
    return [SimpleNamespace(id=1000 + k, index=k) for k in range(count)]


def test_a_full_static_batch_is_served_at_once_not_after_its_timeout():
    lengths = request_lengths(4, 4, 3, "fixed", seed=0)
    scheduler = Scheduler(2, prefill_tokens=64, batching="static", batch_timeout_s=10.0)
    answers = _Answers()
    answers.expected = 2
    sut = TokenSystemUnderTest(_InstantServer(), scheduler, lengths, answers, first_tokens=True)
    began = time.perf_counter()
    sut.issue_queries(_samples(2))  # as many as the slots: a full batch
    assert answers.finished_all.wait(5.0), "the full batch waited for its 10 s timeout"
    assert time.perf_counter() - began < 2.0
    sut.close()
    assert sorted(answers.done) == [1000, 1001]


def test_a_static_batch_not_full_waits_for_its_timeout_then_runs():
    lengths = request_lengths(4, 4, 3, "fixed", seed=0)
    scheduler = Scheduler(4, prefill_tokens=64, batching="static", batch_timeout_s=0.3)
    answers = _Answers()
    answers.expected = 1
    sut = TokenSystemUnderTest(_InstantServer(), scheduler, lengths, answers, first_tokens=True)
    began = time.perf_counter()
    sut.issue_queries(_samples(1))
    assert answers.finished_all.wait(5.0)
    assert time.perf_counter() - began >= 0.29  # one of four slots: it waits the timeout
    sut.close()


def test_a_burst_of_newcomers_learns_its_first_tokens_a_chunk_at_a_time():
    server = _InstantServer()
    answers = _Answers(server.calls)  # one record of prefills and first tokens, in order
    scheduler = Scheduler(32, prefill_tokens=10_000, batching="continuous", batch_timeout_s=0)
    for k in range(20):
        scheduler.submit(Request(k, k, 16, 4, 0.0))
    serve_step(server, scheduler, 0.0, answers.first)
    assert server.calls == [
        ("prefill", 8), ("first", 8), ("prefill", 8), ("first", 8), ("prefill", 4), ("first", 4),
        ("decode", 20),
    ]  # fmt: skip


def test_every_request_handed_over_is_answered_once_under_a_stream():
    lengths = request_lengths(64, 6, 5, "uniform", seed=2)
    scheduler = Scheduler(4, prefill_tokens=16, batching="continuous", batch_timeout_s=0)
    answers = _Answers()
    answers.expected = 64
    sut = TokenSystemUnderTest(_InstantServer(), scheduler, lengths, answers, first_tokens=True)
    for start in range(0, 64, 8):
        sut.issue_queries(_samples(64)[start : start + 8])
    assert answers.finished_all.wait(10.0)
    sut.close()
    assert sorted(answers.done) == [1000 + k for k in range(64)]
    assert sut.counts.requests == 64
    assert sut.counts.output_tokens == sum(lengths.output)
