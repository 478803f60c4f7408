"""Which requests an LLM server runs at each step, a pure piece apart from the model and from
LoadGen: the KV cache's slots, the queue of requests waiting for one, and the rule that admits
them.

Continuous batching (`continuous`): between two decode steps the oldest waiting requests take
the free slots (the lowest first, so the rows a step runs stay few), as many as fit the step's
prefill budget of prompt tokens (at least one: no request waits for a budget it alone exceeds);
a request leaves its slot at the step that makes its last token. First come, first served:
no request is passed over, so none starves.

Static batching (`static`), the plain server it is measured against: a batch of whole requests
is admitted only when no request runs, once the batch is full (every slot) or its oldest
request has waited the batch timeout; each runs to the end of the longest, and newcomers wait
for the whole batch."""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass, field

BATCHINGS = ("continuous", "static")


@dataclass
class Request:
    """One request: LoadGen's query id and sample, its lengths, when it was handed over, its
    slot once admitted and the tokens made so far (the prefill makes the first)."""

    query: int
    sample: int
    prompt_len: int
    output_len: int
    arrived: float
    slot: int = -1
    tokens: list[int] = field(default_factory=list)

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
        self.static, self.batch_timeout_s = batching == "static", batch_timeout_s
        self.waiting: deque[Request] = deque()
        self.running: dict[int, Request] = {}  # by slot
        self._free = list(range(slots))  # a heap: the lowest free slot first
        self.occupancy = Occupancy()

    def submit(self, request: Request) -> None:
        """A request handed over: it waits for a slot."""
        self.waiting.append(request)

    def admit(self, now: float) -> list[Request]:
        """The requests that take a slot before the next decode step (their prompts to
        prefill), each given its slot."""
        if not self.waiting or not self._free:
            return []
        if self.static and (self.running or not self._batch_ready(now)):
            return []
        admitted: list[Request] = []
        budget = self.prefill_tokens
        while self.waiting and self._free:
            head = self.waiting[0]
            if admitted and head.prompt_len > budget and not self.static:
                break
            budget -= head.prompt_len
            self.waiting.popleft()
            head.slot = heapq.heappop(self._free)
            self.running[head.slot] = head
            admitted.append(head)
        return admitted

    def _batch_ready(self, now: float) -> bool:
        """Static: a whole batch waits, or its oldest request has waited the timeout."""
        due = self.waiting[0].arrived + self.batch_timeout_s
        return len(self.waiting) >= self.slots or now >= due

    def wait_s(self, now: float) -> float | None:
        """How long the server may sleep with nothing to run before deciding again (None:
        until a request comes)."""
        if self.static and self.waiting and not self.running:
            return max(0.0, self.waiting[0].arrived + self.batch_timeout_s - now)
        return None

    @property
    def rows(self) -> int:
        """The rows the next decode step runs: up to the highest slot in use."""
        return max(self.running) + 1 if self.running else 0

    def made(self, tokens: dict[int, int]) -> list[Request]:
        """Each running request's new token (by slot); those now done leave their slots and
        are returned."""
        finished = []
        for slot, token in tokens.items():
            request = self.running[slot]
            request.tokens.append(token)
            if request.done:
                finished.append(self._leave(slot))
        return finished

    def step(self, tokens: dict[int, int]) -> list[Request]:
        """A decode step's tokens for every running request: counted in the occupancy; the
        requests it finished."""
        self.occupancy.steps += 1
        self.occupancy.running += len(self.running)
        return self.made(tokens)

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
