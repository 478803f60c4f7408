"""dlbench's model server as LoadGen's system under test. LoadGen's `issue_queries` hands queries
over; the batcher's policy (serve.batching) forms batches; the model server answers a batch
(copy in, run, copy out); `complete` returns its queries to LoadGen (`QuerySamplesComplete`).

Single stream answers each query inside the callback (LoadGen issues the next only when it is
answered, so a thread between would only add a wake-up); server and offline queue queries for one
serving thread, which LoadGen's issuing never waits for. Where a query's time goes outside the
model is timed as it happens (a clock read at each hand-over, never a device sync): its wait for
a batch, its batch through the model server, the return to LoadGen, and LoadGen's call into
this code; a row carries the means (`split`).

A query is never lost: where the model server fails mid-load, the failing batch's queries and
every one after are answered at once with an empty response (as MLCommons' reference completes
its queries in `finally`), LoadGen is left to finish on its own, and `failure` says why
(serve.loadgen ends the load there)."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from dlbench.serve.batching import BatchPolicy


@dataclass
class Split:
    """Seconds summed over the load, and the queries and calls they are over."""

    queued_s: float = 0.0  # each query: from its hand-over to its batch's start
    batch_s: float = 0.0  # each query: its batch through the model server
    complete_s: float = 0.0  # each query: its batch's return to LoadGen
    issue_s: float = 0.0  # each of LoadGen's calls: the time spent in this code
    queries: int = 0
    calls: int = 0
    batches: list[int] = field(default_factory=list)

    def columns(self) -> dict[str, float | None]:
        """The means a row carries: per query (ms) and per LoadGen call (us)."""
        per = 1e3 / self.queries if self.queries else None
        return {
            "serve_mean_batch": sum(self.batches) / len(self.batches) if self.batches else None,
            "serve_queue_ms": self.queued_s * per if per else None,
            "serve_batch_ms": self.batch_s * per if per else None,
            "serve_complete_ms": self.complete_s * per if per else None,
            "serve_issue_us": 1e6 * self.issue_s / self.calls if self.calls else None,
        }


class SystemUnderTest:
    """Queries in, answers out: `issue_queries` and `flush_queries` are LoadGen's callbacks;
    `run_batch(n)` answers n queries (their results on the host when it returns); `complete(ids)`
    returns answered queries to LoadGen."""

    def __init__(
        self,
        run_batch: Callable[[int], None],
        complete: Callable[[Sequence[int]], None],
        policy: BatchPolicy,
        inline: bool,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.run_batch, self.complete, self.policy = run_batch, complete, policy
        self.inline, self.clock = inline, clock
        self.split = Split()
        self._waiting: deque[tuple[int, float]] = deque()  # (query id, handed over at)
        self._ready = threading.Condition()
        self._closing = False
        self.failure: BaseException | None = None  # the model server's, mid-load
        self.abandoned = False  # from here every query is answered at once, unrun
        self._thread: threading.Thread | None = None
        if not inline:
            self._thread = threading.Thread(target=self._serve, name="dlbench-sut", daemon=True)
            self._thread.start()

    def issue_queries(self, samples: Sequence) -> None:
        """LoadGen's hand-over (its issuing thread): answered now (inline), or queued."""
        began = self.clock()
        if self.abandoned:
            self.complete([s.id for s in samples])
        elif self.inline:
            self._answer([s.id for s in samples], began)
        else:
            with self._ready:
                self._waiting.extend((s.id, began) for s in samples)
                self._ready.notify()
        self.split.issue_s += self.clock() - began
        self.split.calls += 1

    def flush_queries(self) -> None:
        """LoadGen's end of issuing: nothing is held back here beyond the policy's timeout."""

    def _serve(self) -> None:
        """The serving thread: the policy's batches, as long as queries come."""
        while True:
            with self._ready:
                while not self._waiting and not self._closing:
                    self._ready.wait()
                if not self._waiting:
                    return
                if self.abandoned:
                    self.complete([query for query, _ in self._waiting])
                    self._waiting.clear()
                    continue
                oldest = self._waiting[0][1]
                size = self.policy.batch_now(len(self._waiting), self.clock() - oldest)
                if size == 0:
                    self._ready.wait(self.policy.wait_s(self.clock() - oldest))
                    continue
                batch = [self._waiting.popleft() for _ in range(size)]
            began = self.clock()
            self.split.queued_s += sum(began - handed for _, handed in batch)
            self._answer([query for query, _ in batch], began)

    def _answer(self, queries: list[int], began: float) -> None:
        try:
            self.run_batch(len(queries))
        except BaseException as exc:  # any failure ends the load; none may hang it
            self.failure = self.failure or exc
            self.abandon()
            self.complete(queries)
            return
        ran = self.clock()
        self.complete(queries)
        done = self.clock()
        count = len(queries)
        self.split.batch_s += (ran - began) * count
        self.split.complete_s += (done - ran) * count
        self.split.queries += count
        self.split.batches.append(count)

    def abandon(self) -> None:
        """Answer every query waiting and every one to come at once, unrun: the load ends
        without the model (it failed, or a signal stops the run)."""
        with self._ready:
            self.abandoned = True
            self._ready.notify()

    def columns(self) -> dict[str, float | None]:
        """Where the load's queries' time went, as the row's columns (`Split`)."""
        return self.split.columns()

    def ttft_growth(self) -> tuple[float, float] | None:
        """Whole queries have no first token (serve.search.behind_schedule reads the rate)."""
        return None

    def close(self) -> None:
        """Answer what waits, then stop the serving thread."""
        if self._thread is None:
            return
        with self._ready:
            self._closing = True
            self._ready.notify()
        self._thread.join()
        self._thread = None
