"""On a GPU (skipped elsewhere; run by the device script before any LLM serve figure is taken):
the LLM server compiled and captured serves a stream of requests of different lengths to the
end, every step a graph, its tokens those of the model without a cache; a decode step's rows at
their own positions give the logits of each whole sequence (bf16's tolerance), at one row (the
Triton kernels' path) and at several."""

from __future__ import annotations

import pytest
import torch

from dlbench.engine.acceleration.precision import plan_precision
from dlbench.serve.continuous import Request, Scheduler
from dlbench.serve.llm_server import LlmServer
from dlbench.serve.requests import request_lengths
from dlbench.serve.token_check import check_tokens
from dlbench.serve.token_sut import serve_step
from dlbench.workloads import InputShape, get_workload
from dlbench.workloads.kv_cache import KVCache

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def test_a_compiled_captured_server_serves_a_stream_of_requests_to_the_end() -> None:
    lengths = request_lengths(32, 24, 12, "uniform", seed=0)
    device = torch.device("cuda", torch.cuda.current_device())
    precision = plan_precision("bf16-true", "cuda", "infer")
    workload = get_workload("llm_125m")
    server = LlmServer(workload, device, precision, lengths, (8, None), True, True, seed=0)
    server.warm()
    assert server.columns()["cuda_graphs"] is True, server.fallback
    scheduler = Scheduler(server.slots, prefill_tokens=64, batching="continuous", batch_timeout_s=0)
    for k in range(32):
        scheduler.submit(Request(k, k, lengths.prompt[k], lengths.output[k], 0.0))
    finished = []
    while scheduler.busy:
        finished += serve_step(server, scheduler, 0.0)
    assert sorted(r.query for r in finished) == list(range(32))
    assert all(len(r.tokens) == r.output_len for r in finished)
    assert scheduler.occupancy.mean() > 4  # requests ran together
    # the replayed graphs' tokens against the model without a cache (near ties allowed, as a
    # served row's check allows them): not merely counted
    checked = check_tokens(server.model, server.prompts, finished[:8], server.dtype)
    assert checked.checked == 8 and checked.wrong == 0, checked


@pytest.mark.parametrize("rows", [1, 3])
def test_each_row_decodes_at_its_own_position_as_its_whole_sequence_would(rows: int) -> None:
    torch.manual_seed(0)
    workload = get_workload("llm_125m")
    with torch.device("cuda"):
        model = workload.native(workload.build(InputShape(0, 0, 64)).to(torch.bfloat16)).eval()
    cache = model.setup_cache(rows, 64)
    prompts = [torch.randint(0, 32000, (1, 5 + 4 * r), device="cuda") for r in range(rows)]
    nexts = torch.randint(0, 32000, (rows, 1), device="cuda")
    ends = torch.tensor([p.shape[1] for p in prompts], device="cuda")
    with torch.inference_mode():
        for r, prompt in enumerate(prompts):
            one = KVCache([k[r : r + 1] for k in cache.keys], [v[r : r + 1] for v in cache.values])
            model.logits(prompt, torch.arange(prompt.shape[1], device="cuda"), one)
        served = model.logits(nexts, ends, cache)[:, -1].float()
        for r, prompt in enumerate(prompts):
            whole = torch.cat([prompt, nexts[r : r + 1]], dim=1)
            alone = model.output(model.norm(model.hidden_states(whole)))[0, -1].float()
            cosine = torch.nn.functional.cosine_similarity(served[r], alone, dim=0)
            assert cosine > 0.99, (rows, r, float(cosine))


def test_an_fp8_server_serves_its_float8_weights_and_the_tokens_hold() -> None:
    """--precision fp8: the Linear layers' weights float8 (a scale per row), the cache in bf16,
    every step a graph, and the served tokens those of the same model without a cache."""
    from dlbench.config.fp8_recipes import resolve_recipe

    if torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("needs FP8 tensor cores")
    lengths = request_lengths(16, 24, 12, "uniform", seed=0)
    device = torch.device("cuda", torch.cuda.current_device())
    precision = plan_precision("fp8", "cuda", "infer", resolve_recipe(None, "infer"))
    server = LlmServer(get_workload("llm_125m"), device, precision, lengths, (8, None), True,
                       True, seed=0)  # fmt: skip
    server.warm()
    columns = server.columns()
    assert columns["cuda_graphs"] is True and columns["fp8_linear_layers"] > 0, server.fallback
    assert server.cache.keys[0].dtype == torch.bfloat16
    scheduler = Scheduler(server.slots, prefill_tokens=64, batching="continuous", batch_timeout_s=0)
    for k in range(16):
        scheduler.submit(Request(k, k, lengths.prompt[k], lengths.output[k], 0.0))
    finished = []
    while scheduler.busy:
        finished += serve_step(server, scheduler, 0.0)
    checked = check_tokens(server.model, server.prompts, finished[:8], server.dtype)
    assert checked.checked == 8 and checked.wrong == 0, checked
