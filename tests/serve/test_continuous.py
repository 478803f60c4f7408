"""The LLM server's scheduler (serve.continuous), alone: a request joins at the next step and
leaves at the step that makes its last token, the lowest free slot first; first come, first
served, so no request starves; a step's prefill budget; static batches; and the KV cache's
slots from its memory, refusing what cannot hold one request. Then the same scheduler against
a server whose steps take a known time: continuous batching answers a stream of requests
sooner than static batches."""

from __future__ import annotations

import random

import pytest
import torch

from dlbench.errors import UserError
from dlbench.serve.batching import BatchPolicy
from dlbench.serve.continuous import Request, Scheduler
from dlbench.serve.llm_server import PREFILL_ROWS, cache_slots


def _request(query: int, prompt: int = 4, output: int = 3, arrived: float = 0.0) -> Request:
    return Request(query, query, prompt, output, arrived)


def _first_tokens(scheduler: Scheduler, admitted: list[Request]) -> list[Request]:
    return scheduler.made({r.slot: 0 for r in admitted})


def _decode(scheduler: Scheduler) -> list[Request]:
    return scheduler.step({slot: 1 for slot in scheduler.running})


def test_a_request_joins_the_running_batch_at_the_next_step_and_leaves_when_done():
    scheduler = Scheduler(slots=4, prefill_tokens=64, batching="continuous", batch_timeout_s=0)
    first = _request(0, output=3)
    scheduler.submit(first)
    assert _first_tokens(scheduler, scheduler.admit(0.0)) == [] and first.slot == 0
    assert _decode(scheduler) == []  # two tokens of three
    late = _request(1, output=2)
    scheduler.submit(late)
    assert scheduler.admit(0.1) == [late] and late.slot == 1  # while the first still runs
    _first_tokens(scheduler, [late])
    assert scheduler.rows == 2
    assert _decode(scheduler) == [first, late]  # both made their last token this step
    assert first.tokens == [0, 1, 1] and late.tokens == [0, 1]
    assert scheduler.running == {} and not scheduler.busy and scheduler.rows == 0
    assert scheduler.occupancy.mean() == pytest.approx(1.5)  # 1 then 2 requests a step


def test_a_slot_left_is_taken_by_the_next_request_the_lowest_free_slot_first():
    scheduler = Scheduler(slots=3, prefill_tokens=64, batching="continuous", batch_timeout_s=0)
    short, long, other = _request(0, output=2), _request(1, output=5), _request(2, output=5)
    for request in (short, long, other):
        scheduler.submit(request)
    _first_tokens(scheduler, scheduler.admit(0.0))
    assert [r.slot for r in (short, long, other)] == [0, 1, 2]
    assert _decode(scheduler) == [short]
    newcomer = _request(3)
    scheduler.submit(newcomer)
    assert scheduler.admit(0.0) == [newcomer] and newcomer.slot == 0


def test_a_full_cache_leaves_newcomers_waiting_in_order():
    scheduler = Scheduler(slots=2, prefill_tokens=64, batching="continuous", batch_timeout_s=0)
    for k in range(5):
        scheduler.submit(_request(k, output=2))
    assert [r.query for r in scheduler.admit(0.0)] == [0, 1]
    assert scheduler.admit(0.0) == []  # no free slot
    _first_tokens(scheduler, list(scheduler.running.values()))
    _decode(scheduler)
    assert [r.query for r in scheduler.admit(0.0)] == [2, 3]


def test_a_steps_prefill_budget_admits_at_least_one_request_and_stops_past_it():
    scheduler = Scheduler(slots=8, prefill_tokens=10, batching="continuous", batch_timeout_s=0)
    for k, prompt in enumerate((30, 4, 4, 4)):
        scheduler.submit(_request(k, prompt=prompt))
    assert [r.query for r in scheduler.admit(0.0)] == [0]  # alone past the budget: still in
    assert [r.query for r in scheduler.admit(0.0)] == [1, 2]  # 4 + 4; a third would pass 10
    assert [r.query for r in scheduler.admit(0.0)] == [3]


def test_no_request_starves_under_a_stream_that_never_lets_up():
    """Random arrivals and lengths, more than the slots can hold: every request is admitted in
    the order it came and each waits no longer than the requests before it took."""
    draw = random.Random(0)
    scheduler = Scheduler(slots=4, prefill_tokens=32, batching="continuous", batch_timeout_s=0)
    admitted: list[int] = []
    finished: list[int] = []
    for step in range(400):
        for _ in range(draw.choice((0, 1, 1, 2))):
            query = step * 10 + len(scheduler.waiting)
            scheduler.submit(Request(query, 0, draw.randint(1, 40), draw.randint(2, 9), step))
        newcomers = scheduler.admit(step)
        admitted += [r.query for r in newcomers]
        finished += [r.query for r in _first_tokens(scheduler, newcomers)]
        finished += [r.query for r in _decode(scheduler)]
    while scheduler.busy:
        newcomers = scheduler.admit(0)
        admitted += [r.query for r in newcomers]
        _first_tokens(scheduler, newcomers)
        finished += [r.query for r in _decode(scheduler)]
    assert admitted == sorted(admitted) and sorted(finished) == admitted


def test_static_batches_wait_for_a_full_batch_or_the_timeout_and_run_to_the_end():
    scheduler = Scheduler(slots=3, prefill_tokens=4, batching="static", batch_timeout_s=0.5)
    scheduler.submit(_request(0, prompt=10, output=2, arrived=0.0))
    assert scheduler.admit(0.1) == [] and scheduler.wait_s(0.1) == pytest.approx(0.4)
    scheduler.submit(_request(1, prompt=10, output=4, arrived=0.2))
    batch = scheduler.admit(0.5)  # the oldest waited the timeout: both, past the budget
    assert [r.query for r in batch] == [0, 1]
    _first_tokens(scheduler, batch)
    scheduler.submit(_request(2, arrived=0.6))
    for _ in range(3):
        assert scheduler.admit(1.0) == []  # a newcomer waits for the whole batch
        _decode(scheduler)
    assert scheduler.admit(1.0) == []  # the batch is done; the newcomer waits its timeout
    assert [r.query for r in scheduler.admit(1.1)] == [2]


def test_static_batching_takes_a_full_batch_at_once():
    scheduler = Scheduler(slots=2, prefill_tokens=64, batching="static", batch_timeout_s=10)
    for k in range(3):
        scheduler.submit(_request(k))
    assert scheduler.wait_s(0.0) == 0.0  # a full batch waits out no timeout
    assert [r.query for r in scheduler.admit(0.0)] == [0, 1]
    assert scheduler.wait_s(0.0) is None  # a batch runs: the next waits for it, not a clock


@pytest.mark.parametrize("seed", range(20))
def test_static_batches_follow_the_dynamic_batchers_one_rule(seed):
    """The LLM's static server and the model server batch by one rule (BatchPolicy): for any
    queue and wait, as many requests run now, and the server sleeps exactly while none may."""
    draw = random.Random(seed)
    slots, timeout = draw.randint(1, 8), draw.choice([0.0, 0.002, 0.05, 10.0])
    policy = BatchPolicy(slots, timeout)
    scheduler = Scheduler(slots, prefill_tokens=1, batching="static", batch_timeout_s=timeout)
    waiting = draw.randint(1, 3 * slots)
    for k in range(waiting):
        scheduler.submit(_request(k, prompt=draw.randint(1, 50), arrived=0.0))
    now = draw.choice([0.0, timeout / 2, timeout, 2 * timeout + 1e-3])
    due = policy.batch_now(waiting, now)
    assert (scheduler.wait_s(now) == 0.0) is (due > 0)
    if not due:
        assert scheduler.wait_s(now) == pytest.approx(policy.wait_s(now))
    assert len(scheduler.admit(now)) == due  # the prompt budget does not apply to a batch


class _Model(torch.nn.Module):
    """What cache_slots reads of the native Llama: layers, kv heads, head size, weights' dtype."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = [object()] * 2
        self.kv_heads, self.head_dim = 2, 16
        self.output = torch.nn.Linear(1, 1).to(torch.bfloat16)


PER_POSITION = 2 * 2 * 2 * 16 * 2  # keys and values, layers, kv heads, head size, bf16


STAGING = PREFILL_ROWS * PER_POSITION * 10  # the prefill's staging cache: 10-token prompts


def test_the_cache_holds_as_many_requests_as_its_memory_allows_at_most_the_batch():
    model, cpu = _Model(), torch.device("cpu")
    # 4.5 requests' memory past the staging: 3 slots and the spare a padding row writes to
    assert cache_slots(model, (100, 10), 8, STAGING + 4.5 * PER_POSITION * 100, cpu) == 3
    assert cache_slots(model, (100, 10), 2, 1e9, cpu) == 2


def test_a_cache_that_cannot_hold_one_request_is_refused_naming_the_flag():
    with pytest.raises(UserError, match="--kv-cache-gb: the KV cache cannot hold one request"):
        cache_slots(_Model(), (100, 10), 8, STAGING + PER_POSITION * 199, torch.device("cpu"))


def test_a_cap_past_the_devices_free_memory_is_refused_naming_the_flag(monkeypatch):
    from dlbench.serve import llm_server

    monkeypatch.setattr(llm_server, "free_memory", lambda device: 80e9)  # a fake 80 GB GPU
    with pytest.raises(UserError, match=r"--kv-cache-gb: 1e\+03 GB is more than the device's"):
        cache_slots(_Model(), (100, 10), 8, 1000e9, torch.device("cpu"))
    assert cache_slots(_Model(), (100, 10), 8, 79e9, torch.device("cpu")) == 8


class _TimedServer:
    """A model server whose steps take a known time on a clock of its own: a prefill a fixed
    time, a decode step a fixed time whatever its rows (bound by reading the weights)."""

    prefill_chunk = 8

    def __init__(self, prefill_s: float, decode_s: float) -> None:
        self.now, self.prefill_s, self.decode_s = 0.0, prefill_s, decode_s
        self.first: dict[int, float] = {}

    def prefill(self, requests):
        self.now += self.prefill_s
        self.first.update({r.query: self.now for r in requests})
        return [0] * len(requests)

    def decode(self, rows: int):
        self.now += self.decode_s
        return [1] * rows


def _served(batching: str, rate: float, count: int = 300) -> tuple[list[float], list[float]]:
    """`count` requests of Poisson arrivals at `rate` a second through `serve_step`: each one's
    time to first token and its whole latency, in seconds."""
    from dlbench.serve.token_sut import serve_step

    draw = random.Random(1)
    arrivals, at = [], 0.0
    for _ in range(count):
        at += draw.expovariate(rate)
        arrivals.append(at)
    server = _TimedServer(prefill_s=0.004, decode_s=0.010)
    scheduler = Scheduler(slots=8, prefill_tokens=512, batching=batching, batch_timeout_s=0.05)
    done: dict[int, float] = {}
    k = 0
    while len(done) < count:
        while k < count and arrivals[k] <= server.now:
            scheduler.submit(Request(k, k, 32, 20, arrivals[k]))
            k += 1
        pause = scheduler.wait_s(server.now) if scheduler.busy else None
        if not scheduler.busy or pause:  # to the next arrival, or the batch's timeout
            due = scheduler.waiting[0].arrived + 0.05 if pause else float("inf")
            server.now = min(arrivals[k] if k < count else due, due)
            continue
        for r in serve_step(server, scheduler, server.now):
            done[r.query] = server.now
    ttft = [server.first[q] - arrivals[q] for q in range(count)]
    return ttft, [done[q] - arrivals[q] for q in range(count)]


def _p99(values: list[float]) -> float:
    return sorted(values)[int(0.99 * len(values))]


def test_continuous_batching_answers_a_stream_sooner_than_static_batches():
    """The same requests at the same rate (a quarter of what eight slots of 20-token requests
    can run): joining the running batch at the next step keeps the first token within a step
    or two, where a static batch makes newcomers wait for the whole batch."""
    ttft, latency = _served("continuous", rate=10.0)
    static_ttft, static_latency = _served("static", rate=10.0)
    assert _p99(ttft) < 0.05 and _p99(static_ttft) > 4 * _p99(ttft)
    assert sum(latency) < sum(static_latency)
