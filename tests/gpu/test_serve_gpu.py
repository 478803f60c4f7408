"""On a GPU (skipped elsewhere; run by the device script): the model server's graph per bucket
answers what the same compiled model answers uncaptured, from the static buffer a batch is
copied into, for an image model served channels_last and a text model."""

from __future__ import annotations

import pytest
import torch

from dlbench.engine.acceleration.precision import plan_precision
from dlbench.serve.model_server import ModelServer
from dlbench.workloads import get_workload

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.parametrize(("model", "width", "seq_len"), [("timm:test_resnet", 32, 0),
                                                         ("distilbert", None, 16)])  # fmt: skip
def test_each_bucket_replays_what_the_model_computes(model, width, seq_len) -> None:
    workload = get_workload(model)
    shape = workload.shape(width, width, seq_len)
    precision = plan_precision("bf16-true", "cuda", "infer")
    device = torch.device("cuda", torch.cuda.current_device())
    server = ModelServer(workload, shape, device, precision, 4, True, 0)
    server.warm()
    assert server.columns()["cuda_graphs"] is True, server.fallback
    for n in (1, 3, 4):
        server.run_batch(n)
        size = server.bucket(n)
        uncaptured = server._forward(server.queries[:size].to(device))
        torch.testing.assert_close(server.outputs[size], uncaptured, rtol=2e-2, atol=2e-2)
        assert torch.equal(server.answers[:n], server.outputs[size][:n].cpu())
    assert server.answers.is_pinned()  # the answers' host buffer, as a server's
    if workload.is_image:
        assert server.static_queries.is_contiguous(memory_format=torch.channels_last)
