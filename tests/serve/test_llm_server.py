"""The LLM server's model side on the CPU with the real tiny Llama: requests of different lengths
batched continuously (each sequence at its own position, prompts padded to a bucket, their
keys and values moved into their slots, slots reused) make the same greedy tokens as the model
computes for each request alone without any cache; every step is captured once where graphs
are on; and the row says what the cache holds."""

from __future__ import annotations

import torch

from dlbench.engine.acceleration import graphs
from dlbench.engine.acceleration.precision import plan_precision
from dlbench.serve.continuous import Request, Scheduler
from dlbench.serve.llm_server import LlmServer
from dlbench.serve.requests import request_lengths
from dlbench.serve.token_sut import serve_step
from dlbench.workloads import InputShape, get_workload
from dlbench.workloads.kv_cache import KVCache
from tests import fake_graphs

SAMPLES = 12


def _server(slots: int = 3, kind: str = "uniform", graphed: bool = False) -> LlmServer:
    lengths = request_lengths(SAMPLES, 10, 6, kind, seed=3)
    precision = plan_precision("32", "cpu", "infer")
    workload = get_workload("llm_tiny")
    server = LlmServer(workload, torch.device("cpu"), precision, lengths, (slots, None), False,
                       graphed, seed=0)  # fmt: skip
    with torch.no_grad():  # at its initial scale the last token's embedding decides the argmax:
        for p in server.model.parameters():  # scaled, the whole sequence does
            p.mul_(20)
    return server


def test_the_tokens_compared_depend_on_the_whole_sequence_not_its_last_token():
    server = _server()
    served = _serve_all(server, SAMPLES)
    assert any(len(set(r.tokens)) > 1 for r in served)  # not one token repeated
    last = [server.prompts[r.sample, r.prompt_len - 1].item() for r in served]
    assert sum(r.tokens[0] != t for r, t in zip(served, last)) > len(served) // 2


def _serve_all(server: LlmServer, count: int) -> list[Request]:
    scheduler = Scheduler(server.slots, prefill_tokens=16, batching="continuous", batch_timeout_s=0)
    lengths = server.lengths
    for k in range(count):
        scheduler.submit(Request(k, k % SAMPLES, lengths.prompt[k], lengths.output[k], 0.0))
    finished: list[Request] = []
    while scheduler.busy:
        finished += serve_step(server, scheduler, 0.0)
    return sorted(finished, key=lambda r: r.query)


def _alone_without_cache(server: LlmServer, request: Request) -> list[int]:
    """Greedy tokens of the whole sequence so far through the model, one token at a time."""
    model = server.model
    ids = server.prompts[request.sample, : request.prompt_len][None]
    made = []
    with torch.inference_mode():
        for _ in range(request.output_len):
            hidden = model.norm(model.hidden_states(ids))
            token = model.output(hidden[:, -1]).argmax(-1, keepdim=True)
            made.append(int(token))
            ids = torch.cat([ids, token], dim=1)
    return made


def test_continuously_batched_requests_make_the_tokens_each_makes_alone_without_a_cache():
    server = _server()
    server.warm()
    served = _serve_all(server, SAMPLES)
    assert len({r.prompt_len for r in served}) > 2 and len({r.output_len for r in served}) > 2
    for request in served:
        assert len(request.tokens) == request.output_len
        assert request.tokens == _alone_without_cache(server, request), request.query


def test_every_step_is_captured_once_and_replays_make_the_same_tokens(monkeypatch):
    monkeypatch.setitem(graphs.CAPTURERS, "cpu", fake_graphs.fake_capture)
    eager = _server()
    eager.warm()
    server = _server(graphed=True)
    before = len(fake_graphs.captured)
    server.warm()
    decodes = [key for key in server.steps if key[0] == 0]
    prefills = [key for key in server.steps if key[0] == 1]
    assert sorted(decodes) == [(0, 1), (0, 2), (0, 3)]
    assert len(prefills) == len(server.prefill_rows) * len(server.prompt_buckets)
    assert len(fake_graphs.captured) - before == len(server.steps)
    assert server.columns()["cuda_graphs"] is True and server.columns()["graph_fallback"] == ""
    assert [r.tokens for r in _serve_all(server, 8)] == [r.tokens for r in _serve_all(eager, 8)]


def test_fixed_lengths_prefill_at_their_one_length_and_the_row_says_what_the_cache_holds():
    server = _server(slots=2, kind="fixed")
    assert server.prompt_buckets == [10] and server.max_len == 16
    per_token = 2 * 2 * 2 * 16 * 4  # keys and values, layers, kv heads, head size, fp32
    columns = server.columns()
    assert columns["serve_kv_slots"] == 2
    assert columns["serve_kv_cache_gb"] == 2 * 16 * per_token / 1e9
    assert columns["cuda_graphs"] is False  # as run: a CPU row says no graphs, not the setting


def test_a_decode_step_runs_each_sequence_at_its_own_position_as_the_whole_sequence_would():
    """Two prompts of different lengths prefilled into rows of one cache, then one decode step
    of both at their own positions: each row's logits are those of its whole sequence through
    the model without a cache (RoPE, the mask and the cache write each per row)."""
    torch.manual_seed(0)
    workload = get_workload("llm_tiny")
    model = workload.native(workload.build(InputShape(0, 0, 16))).eval()
    with torch.no_grad():  # weights large enough that attention moves the logits
        for p in model.parameters():
            p.mul_(20.0 if p.dim() > 1 else 1.0)
    cache = model.setup_cache(2, 16)
    prompts = [torch.randint(0, 1000, (1, n)) for n in (5, 9)]
    nexts = torch.randint(0, 1000, (2, 1))
    with torch.inference_mode():
        for row, prompt in enumerate(prompts):
            one = KVCache([k[row : row + 1] for k in cache.keys],
                              [v[row : row + 1] for v in cache.values])  # fmt: skip
            model.logits(prompt, torch.arange(prompt.shape[1]), one)
        served = model.logits(nexts, torch.tensor([5, 9]), cache)[:, -1]
        for row, prompt in enumerate(prompts):
            whole = torch.cat([prompt, nexts[row : row + 1]], dim=1)
            alone = model.output(model.norm(model.hidden_states(whole)))[0, -1]
            assert torch.allclose(served[row], alone, atol=1e-4), row
        spread = (served[0] - served[1]).abs().max()
        assert spread > 1e-2  # the rows differ: a shared position would be caught


def test_a_captured_step_writes_nothing_to_the_host_its_copy_out_follows_it(monkeypatch):
    """CUDA graph capture refuses a copy into host memory that inductor makes unpinned (the
    failure a lent H200 showed for every compiled decode bucket): a step's tokens leave the
    device after the step, never inside what is captured."""
    server = _server()
    touched: list[tuple] = []

    def capture(fn, ready, pool):
        server.made.fill_(-7)
        fn()
        touched.append(tuple(server.made.tolist()))
        return fn, pool

    monkeypatch.setitem(graphs.CAPTURERS, "cpu", capture)
    server.graphs = True
    server.warm()
    assert touched and all(set(t) == {-7} for t in touched)
    assert server.columns()["cuda_graphs"] is True
    served = _serve_all(server, 6)
    assert all(request.tokens == _alone_without_cache(server, request) for request in served)


def test_one_compile_serves_every_decode_bucket_and_the_tokens_are_the_same(monkeypatch):
    """Regional compilation: each decoder block compiled once for all layers, its rows dynamic
    from the second bucket on; a server of five buckets compiles twice (once a bucket, where the
    whole decode was compiled per bucket), and serves what the plain model serves."""
    from dlbench.serve import llm_server

    compiled: list[int] = []

    def counting(graph, inputs):
        compiled.append(len(graph.graph.nodes))
        return graph.forward

    monkeypatch.setattr(llm_server, "COMPILE_BACKEND", counting)
    torch._dynamo.reset()
    lengths = request_lengths(SAMPLES, 10, 6, "uniform", seed=3)
    precision = plan_precision("32", "cpu", "infer")
    server = LlmServer(get_workload("llm_tiny"), torch.device("cpu"), precision, lengths,
                       (16, None), True, False, seed=0)  # fmt: skip
    assert server.decode_rows == [1, 2, 4, 8, 16]
    server.warm()
    assert 1 <= len(compiled) <= 2, compiled
    plain = _server(slots=16)
    with torch.no_grad():
        for p in server.model.parameters():
            p.mul_(20)
    assert [r.tokens for r in _serve_all(server, SAMPLES)] == [
        r.tokens for r in _serve_all(plain, SAMPLES)
    ]
    assert len(compiled) <= 2  # serving compiled nothing more


def test_a_stale_cache_in_a_reused_slot_is_what_the_token_check_catches(monkeypatch):
    """A server whose prefill leaves a reused slot's old keys in place answers wrong tokens for
    the requests that reused a slot, and only for them: the check takes those (the load's first
    finished requests, which never reused one, all read right)."""
    from dlbench.serve.token_check import CHECKED_REQUESTS, CheckedSample, check_tokens

    server = _server(slots=3)
    held: set[int] = set()
    prefill = server._prefill

    def stale(rows: int, length: int) -> None:
        slots = server.newcomers[1, :rows].tolist()
        before = [(k.clone(), v.clone()) for k, v in zip(server.cache.keys, server.cache.values)]
        prefill(rows, length)
        for slot in slots:  # a reused slot keeps its last request's keys and values
            if slot in held:
                for (k, v), key, value in zip(before, server.cache.keys, server.cache.values):
                    key[slot], value[slot] = k[slot], v[slot]
        held.update(slots)

    monkeypatch.setattr(server, "_prefill", stale)
    served = _serve_all(server, SAMPLES)
    first_finished = sorted(served, key=lambda r: r.times[-1] if r.times else 0)[:CHECKED_REQUESTS]
    sample = CheckedSample()
    sample.offer(served)
    taken = sample.requests()
    assert all(r.reused_slot for r in taken)
    found = check_tokens(server.model, server.prompts, taken, None)
    assert found.wrong > 0
    fresh = [r for r in first_finished if not r.reused_slot]
    assert fresh
    assert check_tokens(server.model, server.prompts, fresh, None).wrong == 0
