"""The load generator and the dynamic batcher of `dlbench serve`, as MLPerf's LoadGen runs its
scenarios: single stream (the next query when the previous one returns), server (a seeded
Poisson process at a target rate) and offline (every query at once).

Each query's latency runs from its *scheduled* arrival to its result on the host, so a server
that falls behind is charged for the queue it built (coordinated omission, as wrk2 and
HdrHistogram treat it): a latency measured from when the loop got round to a query would hide
the wait. The batcher takes what has arrived, first come first served: a batch leaves when it
holds `max_batch` queries, when its oldest query has waited `timeout_s`, or when no more
queries are coming. One thread runs it all: between batches it waits for the next arrival or
the oldest query's deadline, and how late it woke past an arrival while idle is the
generator's own lag (its delay, not the server's), reported beside the latencies."""

from __future__ import annotations

import math
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

# Shorter waits than this spin on the clock instead of sleeping: a sleep overshoots by tens of
# microseconds to a millisecond, which would be charged to every query that arrives meanwhile.
SPIN_S = 0.002
MAX_REFERENCE_QUERIES = 2**22  # the offline reference's ceiling, whatever the rate


@dataclass(frozen=True)
class Batcher:
    """The dynamic batcher's two settings."""

    max_batch: int
    timeout_s: float


def poisson_arrivals(qps: float, count: int, seed: int) -> list[float]:
    """`count` arrival times from 0 of a Poisson process at `qps` (exponential gaps, seeded)."""
    draw = random.Random(seed)
    times, now = [], 0.0
    for _ in range(count):
        now += draw.expovariate(qps)
        times.append(now)
    return times


def offline_arrivals(count: int) -> list[float]:
    """Every query at once (MLPerf's offline scenario)."""
    return [0.0] * count


def percentile_ms(seconds: Sequence[float], q: float) -> float:
    """The q-th percentile (nearest rank, as MLPerf reports it) of durations, in ms."""
    ordered = sorted(seconds)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1] * 1e3


@dataclass
class ServeResult:
    """What one load did: each query's latency (from its scheduled arrival), each batch's
    size, the time from the first arrival to the last result, and the generator's lags."""

    latencies_s: list[float]
    batch_sizes: list[int]
    span_s: float
    generator_lags_s: list[float] = field(default_factory=list)

    @property
    def queries(self) -> int:
        return len(self.latencies_s)

    @property
    def achieved_qps(self) -> float:
        """Queries answered a second over the load's span."""
        return self.queries / self.span_s if self.span_s > 0 else math.inf

    def percentile_ms(self, q: float) -> float:
        """The q-th percentile latency (nearest rank, as MLPerf reports it), in ms."""
        return percentile_ms(self.latencies_s, q)

    def columns(self) -> dict[str, object]:
        """The row's serving figures."""
        lags = self.generator_lags_s
        return {
            "serve_queries": self.queries,
            "serve_achieved_qps": self.achieved_qps,
            "latency_samples": self.queries,
            "latency_p50_ms": self.percentile_ms(50),
            "latency_p90_ms": self.percentile_ms(90),
            "latency_p99_ms": self.percentile_ms(99),
            "serve_mean_batch": statistics.fmean(self.batch_sizes),
            "serve_generator_lag_p99_ms": percentile_ms(lags, 99) if lags else 0.0,
        }


class Clock(Protocol):
    """The loop's time (a test gives its own)."""

    def now(self) -> float:
        """Seconds, monotonic."""
        ...

    def wait_until(self, moment: float) -> float:
        """Return at `moment` or just after; the time it returned."""
        ...


class HostClock:
    """perf_counter; waits sleep, then spin for the last SPIN_S."""

    def now(self) -> float:
        return time.perf_counter()

    def wait_until(self, moment: float) -> float:
        left = moment - time.perf_counter()
        if left > SPIN_S:
            time.sleep(left - SPIN_S)
        while (woke := time.perf_counter()) < moment:
            pass
        return woke


def serve_load(
    arrivals: Sequence[float],
    run_batch: Callable[[int], None],
    batcher: Batcher,
    clock: Clock | None = None,
) -> ServeResult:
    """Serve queries arriving at `arrivals` (seconds from the start, ascending) through the
    batcher; `run_batch(n)` answers the n oldest waiting queries and returns once their
    results are on the host."""
    clock = clock or HostClock()
    start = clock.now()
    scheduled = [start + a for a in arrivals]
    count, arrived, served = len(scheduled), 0, 0
    latencies: list[float] = []
    sizes: list[int] = []
    lags: list[float] = []
    while served < count:
        moment = clock.now()
        while arrived < count and scheduled[arrived] <= moment:
            arrived += 1
        waiting = arrived - served
        if waiting == 0:  # idle: the generator's next query
            woke = clock.wait_until(scheduled[arrived])
            lags.append(woke - scheduled[arrived])
            continue
        deadline = scheduled[served] + batcher.timeout_s
        if waiting >= batcher.max_batch or moment >= deadline or arrived == count:
            size = min(waiting, batcher.max_batch)
            run_batch(size)
            done = clock.now()
            latencies.extend(done - scheduled[k] for k in range(served, served + size))
            sizes.append(size)
            served += size
        else:
            clock.wait_until(min(deadline, scheduled[arrived]))
    return ServeResult(latencies, sizes, clock.now() - start, lags)


def serve_single_stream(
    count: int, run_batch: Callable[[int], None], clock: Clock | None = None
) -> ServeResult:
    """MLPerf's single stream: one query at a time, the next issued when the previous one's
    result is on the host; each latency is one query's time through the server."""
    clock = clock or HostClock()
    latencies = []
    start = clock.now()
    for _ in range(count):
        issued = clock.now()
        run_batch(1)
        latencies.append(clock.now() - issued)
    return ServeResult(latencies, [1] * count, clock.now() - start)


def offline_reference(
    run_batch: Callable[[int], None],
    batcher: Batcher,
    first_batches: int,
    min_s: float,
    clock: Clock | None = None,
) -> ServeResult:
    """The offline throughput at the largest batch, over at least `min_s`: `first_batches`
    full batches estimate the rate, and where they took less than `min_s` a load of whole
    batches sized to last it is the reference (a few batches at thousands of queries a second
    last milliseconds, shorter than any window the benchmark trusts)."""

    def load(batches: int) -> ServeResult:
        return serve_load(offline_arrivals(batcher.max_batch * batches), run_batch, batcher, clock)

    first = load(first_batches)
    if first.span_s >= min_s:
        return first
    batches = math.ceil(min_s * first.achieved_qps / batcher.max_batch)
    return load(min(batches, MAX_REFERENCE_QUERIES // batcher.max_batch))
