"""The LLM server's scheduler (serve.continuous), alone: a request joins at the next step and
leaves at the step that makes its last token, the lowest free slot first; first come, first
served, so no request starves; a step's prefill budget; static batches; and the KV cache's
slots from its memory, refusing what cannot hold one request. Then the same scheduler against
a server whose steps take a known time: continuous batching answers a stream of requests
sooner than static batches."""

from __future__ import annotations

import random

import pytest

from dlbench.errors import UserError
from dlbench.serve.batching import BatchPolicy
from dlbench.serve.continuous import Request, Scheduler
from dlbench.serve.kv_budget import (
    KV_SHARE,
    PREFILL_TOKENS,
    KvBudget,
    cache_element_size,
    cache_slots,
    prefill_rows,
)


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


PER_POSITION = 2 * 2 * 2 * 16 * 2  # keys and values, layers, kv heads, head size, bf16


def _budget(prefill_rows: int = 8) -> KvBudget:
    """Requests of at most 100 positions and 10-token prompts, a cache of bf16 elements."""
    return KvBudget(PER_POSITION // 2, 2, 100, 10, prefill_rows)


STAGING = 8 * PER_POSITION * 10  # the prefill's staging cache: 8 prompts of 10 tokens


def test_the_cache_holds_as_many_requests_as_its_memory_allows_at_most_the_batch():
    # 4.5 requests' memory past the staging: 3 slots and the spare a padding row writes to
    assert cache_slots(_budget(), 8, STAGING + 4.5 * PER_POSITION * 100, 80e9) == 3
    assert cache_slots(_budget(), 2, 1e9, 80e9) == 2
    unlimited = cache_slots(_budget(), 10**6, None, 1e9)  # KV_SHARE of the free memory
    assert unlimited == int((KV_SHARE * 1e9 - STAGING) // (PER_POSITION * 100)) - 1


def test_a_cache_that_cannot_hold_one_request_is_refused_naming_the_flag():
    with pytest.raises(UserError, match="--kv-cache-gb: the KV cache cannot hold one request"):
        cache_slots(_budget(), 8, STAGING + PER_POSITION * 199, 80e9)


def test_a_cap_past_the_devices_free_memory_is_refused_naming_the_flag():
    with pytest.raises(UserError, match=r"--kv-cache-gb: 1e\+03 GB is more than the device's"):
        cache_slots(_budget(), 8, 1000e9, 80e9)
    assert cache_slots(_budget(), 8, 79e9, 80e9) == 8


@pytest.mark.parametrize(
    ("precision", "element"),
    [("bf16-true", 2), ("16-true", 2), ("bf16-mixed", 4), ("16-mixed", 4), ("32", 4), ("fp8", 2)],
)
def test_the_cache_is_counted_in_the_dtype_the_server_keeps_it_in(precision, element):
    """A mixed precision serves fp32 weights and so an fp32 cache (autocast computes in
    bf16); fp8 keeps its cache in the weights' bf16."""
    assert cache_element_size(precision) == element


def test_the_settings_check_and_the_server_count_a_request_alike():
    """The check before anything is built and the server's slots: one rule, so a cap the check
    passes holds a request on the server, and one it refuses holds none."""
    from dlbench.serve.llm_checks import _check_cache
    from dlbench.serve.settings import ServeSettings
    from dlbench.workloads import get_workload

    width = get_workload("llm_tiny").cache_width
    for precision in ("bf16-mixed", "bf16-true"):
        element = cache_element_size(precision)
        budget = KvBudget(width, element, 64 + 16, 64, prefill_rows(8, 64))
        least = (budget.staging + 2 * budget.per_slot) / 1e9  # one slot and the spare
        for gb, holds in ((least, True), (least * 0.99, False)):
            s = ServeSettings(model="llm_tiny", prompt_len=64, new_tokens=16, max_batch=8,
                              kv_cache_gb=gb, precision=precision)  # fmt: skip
            refused = False
            try:
                _check_cache(s)
            except UserError:
                refused = True
            assert refused is not holds, (precision, gb)
            assert (budget.slots_within(gb * 1e9) >= 1) is holds


def test_prefill_rows_are_as_many_longest_prompts_as_a_steps_prompt_budget_holds():
    assert prefill_rows(1000, 128) == PREFILL_TOKENS // 128
    assert prefill_rows(4, 128) == 4  # never more than the slots
    assert prefill_rows(1000, 10 * PREFILL_TOKENS) == 1  # one request at least


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


def test_offline_and_a_search_serve_as_many_requests_as_memory_holds_unless_capped():
    """An LLM's throughput figure runs as many requests as fit (a serving engine's table does);
    --max-batch caps it, and the row's key says which it was (empty: by memory). On a GPU (or
    what may be one) only: a CPU's load keeps --max-batch's default."""
    from dlbench.serve.settings import ServeSettings

    llm = {"model": "llm_tiny", "accelerator": "auto"}
    for scenario in ("offline", "server"):
        cpu = ServeSettings(model="llm_tiny", accelerator="cpu", scenario=scenario, find_qps=True)
        assert not cpu.sized_by_memory() and cpu.columns()["serve_max_batch"] == 64
    assert ServeSettings(**llm, scenario="offline").sized_by_memory()
    assert ServeSettings(**llm, scenario="server", find_qps=True).sized_by_memory()
    assert not ServeSettings(**llm, scenario="offline", max_batch=8).sized_by_memory()
    assert not ServeSettings(**llm, scenario="server", qps=5.0).sized_by_memory()
    assert not ServeSettings(**llm, scenario="single-stream").sized_by_memory()
    assert not ServeSettings(model="resnet50", scenario="offline").sized_by_memory()
    columns = ServeSettings(**llm, scenario="offline").columns()
    assert columns["serve_max_batch"] is None and columns["batch_size"] is None
    assert ServeSettings(**llm, scenario="offline", max_batch=8).columns()["serve_max_batch"] == 8
