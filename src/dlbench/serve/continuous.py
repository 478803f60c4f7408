"""Which requests an LLM server runs at each step, a pure piece apart from the model and from
LoadGen: the KV cache's slots, the queue of requests waiting for one, and the rule that admits
them.

Continuous batching (`continuous`): between two decode steps the oldest waiting requests take
the free slots (the lowest first, so the rows a step runs stay few), as many as fit the step's
prefill budget of prompt tokens (at least one: no request waits for a budget it alone exceeds);
a request leaves its slot at the step that makes its last token. First come, first served:
no request is passed over, so none starves.

Static batching (`static`), the plain server it is measured against: a batch of whole requests
is admitted only when no request runs, by the dynamic batcher's one rule (serve.batching.
BatchPolicy, which the model server's batches follow too): a full batch (every slot) at once,
else what waits once its oldest request has waited the batch timeout; each runs to the end of
the longest, and newcomers wait for the whole batch."""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass, field

from dlbench.serve.batching import BatchPolicy

BATCHINGS = ("continuous", "static")


@dataclass
class Request:
    """One request: LoadGen's query id and sample, its lengths, when it was handed over, its
    slot once admitted, the tokens made so far (the prefill makes the first) and when each
    reached the host (the server's clock)."""

    query: int
    sample: int
    prompt_len: int
    output_len: int
    arrived: float
    slot: int = -1
    reused_slot: bool = False  # its slot held another request before (a stale cache shows here)
    tokens: list[int] = field(default_factory=list)
    times: list[float] = field(default_factory=list)

    @property
    def done(self) -> bool:
        return len(self.tokens) >= self.output_len


@dataclass
class Occupancy:
    """Decode steps run and the requests they ran, summed (their mean: the batch occupancy)."""

    steps: int = 0
    running: int = 0

    def mean(self) -> float | None:
        return self.running / self.steps if self.steps else None


class Scheduler:
    """The slots, the queue and the admission rule (continuous or static)."""

    def __init__(
        self, slots: int, prefill_tokens: int, batching: str, batch_timeout_s: float
    ) -> None:
        if batching not in BATCHINGS:
            raise ValueError(f"batching: {batching!r}")
        self.slots, self.prefill_tokens = slots, prefill_tokens
        # static: whole batches by the batcher's rule; continuous: None
        self.policy = BatchPolicy(slots, batch_timeout_s) if batching == "static" else None
        self.waiting: deque[Request] = deque()
        self.running: dict[int, Request] = {}  # by slot
        self._free = list(range(slots))  # a heap: the lowest free slot first
        self._held: set[int] = set()  # slots a request has held
        self.occupancy = Occupancy()

    def submit(self, request: Request) -> None:
        """A request handed over: it waits for a slot."""
        self.waiting.append(request)

    def admit(self, now: float) -> list[Request]:
        """The requests that take a slot before the next decode step (their prompts to
        prefill), each given its slot."""
        if not self.waiting or not self._free:
            return []
        if self.policy is not None:  # static: a whole batch, only when none runs
            count = 0 if self.running else self._due(now)
            return [self._take() for _ in range(count)]
        admitted: list[Request] = []
        budget = self.prefill_tokens
        while self.waiting and self._free:
            if admitted and self.waiting[0].prompt_len > budget:
                break
            budget -= self.waiting[0].prompt_len
            admitted.append(self._take())
        return admitted

    def _take(self) -> Request:
        """The oldest waiting request, given the lowest free slot."""
        head = self.waiting.popleft()
        head.slot = heapq.heappop(self._free)
        head.reused_slot = head.slot in self._held
        self._held.add(head.slot)
        self.running[head.slot] = head
        return head

    def _due(self, now: float) -> int:
        """Static: how many waiting requests the batcher's rule runs now (0: wait)."""
        assert self.policy is not None
        return self.policy.batch_now(len(self.waiting), now - self.waiting[0].arrived)

    def wait_s(self, now: float) -> float | None:
        """How long the server may sleep with nothing to run before deciding again: static
        with requests waiting and none running, until the oldest has waited the timeout (0
        where a batch is due now, a full one at once); otherwise None (until a request comes,
        or no wait: a step runs)."""
        if self.policy is None or not self.waiting or self.running:
            return None
        if self._due(now):
            return 0.0
        return self.policy.wait_s(now - self.waiting[0].arrived)

    @property
    def rows(self) -> int:
        """The rows the next decode step runs: up to the highest slot in use."""
        return max(self.running) + 1 if self.running else 0

    def made(self, tokens: dict[int, int], at: float = 0.0) -> list[Request]:
        """Each running request's new token (by slot), on the host at `at`; those now done
        leave their slots and are returned."""
        finished = []
        for slot, token in tokens.items():
            request = self.running[slot]
            request.tokens.append(token)
            request.times.append(at)
            if request.done:
                finished.append(self._leave(slot))
        return finished

    def step(self, tokens: dict[int, int], at: float = 0.0) -> list[Request]:
        """A decode step's tokens for every running request, on the host at `at`: counted in
        the occupancy; the requests it finished."""
        self.occupancy.steps += 1
        self.occupancy.running += len(self.running)
        return self.made(tokens, at)

    def _leave(self, slot: int) -> Request:
        request = self.running.pop(slot)
        heapq.heappush(self._free, slot)
        return request

    def drain(self) -> list[Request]:
        """Every request, waiting or running, out of the scheduler (a load abandoned)."""
        every = [*self.waiting, *self.running.values()]
        self.waiting.clear()
        for slot in list(self.running):
            self._leave(slot)
        return every

    @property
    def busy(self) -> bool:
        return bool(self.waiting or self.running)
