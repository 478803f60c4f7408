"""An LLM load's figures on the server's clock from planted token times (TTFT, TPOT, ITL, E2EL,
goodput against the bounds), and the served-token check against the real tiny Llama without a
cache: the same tokens pass, a planted wrong token fails, a near tie is told apart from it."""

from __future__ import annotations

import pytest
import torch

from dlbench.serve.continuous import Request
from dlbench.serve.token_check import check_tokens, near_tie
from dlbench.serve.token_latencies import TokenLatencies
from dlbench.workloads import InputShape, get_workload


def _request(query: int, arrived: float, times: list[float]) -> Request:
    r = Request(query, query, 4, len(times), arrived)
    r.tokens, r.times = [1] * len(times), list(times)
    return r


def test_each_requests_latencies_and_the_goodput_of_those_within_both_bounds():
    latencies = TokenLatencies()
    fast = _request(0, 0.0, [0.1, 0.11, 0.12, 0.13])  # TTFT 100 ms, TPOT 10 ms
    slow_start = _request(1, 0.0, [0.6, 0.61, 0.62, 0.63])  # TTFT 600 ms
    slow_tokens = _request(2, 0.5, [0.6, 0.7, 0.8, 0.9])  # TPOT 100 ms
    unfinished = Request(3, 3, 4, 8, 0.0, tokens=[1], times=[0.2])  # abandoned: no latency
    latencies.add([fast, slow_start, slow_tokens, unfinished])
    columns = latencies.columns((500.0, 50.0), loadgen_tokens=False)
    assert columns["serve_token_clock"] == "server"
    assert columns["serve_ttft_p50_ms"] == pytest.approx(100.0)
    assert columns["serve_tpot_p99_ms"] == pytest.approx(100.0, rel=0.05)
    assert columns["serve_tokens_per_s_per_user"] == pytest.approx(100.0)  # 1 / median 10 ms
    assert columns["serve_e2el_p50_ms"] == pytest.approx(400.0)
    gaps = [10, 10, 10, 10, 10, 10, 100, 100, 100]
    assert columns["serve_itl_mean_ms"] == pytest.approx(sum(gaps) / 9)
    assert columns["serve_goodput_pct"] == pytest.approx(100 / 3)  # the first alone met both
    assert columns["serve_goodput_qps"] == pytest.approx(1 / 0.9)  # over the load's 0.9 s
    assert columns["serve_goodput_tokens_per_s"] == pytest.approx(4 / 0.9)
    loadgens = latencies.columns((500.0, 50.0), loadgen_tokens=True)
    assert "serve_ttft_p50_ms" not in loadgens and loadgens["serve_token_clock"] == "loadgen"
    assert TokenLatencies().columns((1.0, 1.0), True) == {}


def _tiny():
    torch.manual_seed(0)
    workload = get_workload("llm_tiny")
    model = workload.native(workload.build(InputShape(0, 0, 64))).eval()
    with torch.no_grad():  # weights that make the argmax depend on the sequence, not its end
        for p in model.parameters():
            p.mul_(20)
    prompts = torch.randint(0, workload.vocab_size, (2, 8))
    return model, prompts


def _greedy(model, prompt: torch.Tensor, count: int) -> tuple[list[int], list[torch.Tensor]]:
    ids, made, logits = prompt[None], [], []
    with torch.inference_mode():
        for _ in range(count):
            out = model.output(model.norm(model.hidden_states(ids)))[0, -1]
            logits.append(out)
            made.append(int(out.argmax()))
            ids = torch.cat([ids, torch.tensor([[made[-1]]])], dim=1)
    return made, logits


def test_a_near_tie_is_among_the_best_few_and_close_to_the_best_not_only_among_them():
    """A stale cache's token can sit in the reference's top 5 far below the best: a wrong
    token; a runner-up a rounding away is a near tie."""
    logits = torch.tensor([8.0, 7.9, 3.0, 2.0, 1.0, 0.5, 0.0])
    assert near_tie(logits, 1)  # 0.1 below the best
    assert not near_tie(logits, 2)  # in the top 5, 5 nats below
    assert not near_tie(logits, 6)  # outside the top 5
    assert not near_tie(logits, 99)  # no such token


def test_the_sample_checked_is_the_first_requests_that_reused_a_slot():
    """The stale-cache fault shows only where a slot held another request before: those are
    taken first; a load too short to reuse a slot has its first finished requests checked."""
    from dlbench.serve.continuous import Scheduler
    from dlbench.serve.token_check import CHECKED_REQUESTS, CheckedSample

    scheduler = Scheduler(2, prefill_tokens=100, batching="continuous", batch_timeout_s=0)
    requests = [Request(k, k, 4, 1, 0.0) for k in range(8)]
    for r in requests:
        scheduler.submit(r)
    sample = CheckedSample()
    while scheduler.busy:
        for r in scheduler.admit(0.0):
            sample.offer(scheduler.made({r.slot: 7}))
    taken = sample.requests()
    assert len(taken) == CHECKED_REQUESTS and all(r.reused_slot for r in taken)
    assert [r.query for r in taken] == [2, 3, 4, 5]  # 0 and 1 held their slots first
    short = CheckedSample()
    short.offer(requests[:2])
    assert [r.query for r in short.requests()] == [0, 1]


def test_the_served_tokens_are_held_token_for_token_against_the_model_without_a_cache():
    model, prompts = _tiny()
    tokens, logits = _greedy(model, prompts[1, :6], 5)
    right = Request(0, 1, 6, 5, 0.0, tokens=list(tokens))
    assert check_tokens(model, prompts, [right], None).columns() == {
        "serve_tokens_checked": 1, "serve_tokens_near_ties": 0, "serve_tokens_wrong": 0,
    }  # fmt: skip
    second = logits[2].topk(2).indices[1].item()  # the runner-up at the third token
    near = Request(1, 1, 6, 5, 0.0, tokens=[*tokens[:2], second, *tokens[3:]])
    worst = int(logits[2].argmin())
    wrong = Request(2, 1, 6, 5, 0.0, tokens=[*tokens[:2], worst, *tokens[3:]])
    found = check_tokens(model, prompts, [right, near, wrong], None)
    tie = near_tie(logits[2], second)  # the runner-up: a near tie only where its gap is small
    assert (found.checked, found.near_ties, found.wrong) == (3, int(tie), 2 - int(tie))
