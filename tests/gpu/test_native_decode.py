"""On a GPU (skipped elsewhere; run by the device script): the native LLM's batch-1 decode in
half precision takes its one kernel path (GEMV projections and the decode attention kernel,
chosen once per forward by `NativeLlama.path`) and computes what transformers computes."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from dlbench.workloads import InputShape, get_workload
from dlbench.workloads.llama import NativeLlama

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.parametrize("kernels", [True, False])
def test_batch1_decode_path_agrees_with_transformers(kernels: bool) -> None:
    torch.manual_seed(0)
    with torch.device("cuda"):
        hf = get_workload("llm_125m").build(InputShape(0, 0, 64)).to(torch.bfloat16).eval()
    native = NativeLlama.from_transformers(hf).eval()
    native.decode_kernels = kernels  # False: --attention asked for one of SDPA's kernels
    position = torch.tensor([16], device="cuda")
    cache = native.setup_cache(1, 64)
    path = native.path(1, torch.bfloat16, position, cache)
    assert (path.gemv, path.kernel_attention) == (True, kernels)
    assert native.kernel_decode(1) is kernels and not native.kernel_decode(2)
    assert not native.path(16, torch.bfloat16, torch.arange(16, device="cuda"), cache).gemv
    ids = torch.randint(0, hf.config.vocab_size, (1, 17), device="cuda")
    with torch.inference_mode():
        native.logits(ids[:, :16], torch.arange(16, device="cuda"))  # prefill: torch's ops
        decoded = native.logits(ids[:, 16:], position).float().flatten()
        expected = hf(ids).logits[:, -1].float().flatten()
    assert F.cosine_similarity(decoded, expected, dim=0) > 0.999
    assert int(decoded.argmax()) in expected.topk(5).indices.tolist()
