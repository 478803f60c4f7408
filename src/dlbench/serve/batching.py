"""The dynamic batcher's policy, a pure piece apart from whatever issues the queries: given how
many queries wait and how long the oldest has waited, run a batch now (how large) or wait (how
long). First come, first served: a batch leaves when it holds `max_batch` queries or when its
oldest query has waited `timeout_s`."""

from __future__ import annotations

from dataclasses import dataclass

# A wait this close to the timeout has reached it: a deadline computed as arrival + timeout
# and read back as now - arrival can fall short by a rounding error, and a server would sleep
# for nothing again and again.
CLOCK_TOLERANCE_S = 1e-9


@dataclass(frozen=True)
class BatchPolicy:
    """The batcher's two settings and its one decision."""

    max_batch: int
    timeout_s: float

    def batch_now(self, waiting: int, oldest_waited_s: float) -> int:
        """How many of the `waiting` queries to run now: a full batch, or all of them once the
        oldest has waited the timeout; 0: wait (`wait_s`)."""
        if waiting >= self.max_batch:
            return self.max_batch
        if waiting and oldest_waited_s >= self.timeout_s - CLOCK_TOLERANCE_S:
            return waiting
        return 0

    def wait_s(self, oldest_waited_s: float) -> float:
        """How long to wait, at most, before deciding again (a new query may come sooner)."""
        return max(0.0, self.timeout_s - oldest_waited_s)
