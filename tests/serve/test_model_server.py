"""The model server's graph per bucket, behind the engine's capturer interface (the CPU fake of
tests/fake_graphs.py; tests/gpu checks the real one): each bucket captured once after warming,
a batch replayed from the static buffer its queries are copied into, and a capture that fails
leaves every bucket as it ran before, with the reason in the row."""

from __future__ import annotations

import torch

from dlbench.engine.acceleration import graphs
from dlbench.engine.acceleration.precision import plan_precision
from dlbench.serve.model_server import ModelServer
from dlbench.workloads import get_workload
from tests import fake_graphs


def _server(graphed: bool = True) -> ModelServer:
    workload = get_workload("timm:test_resnet")
    shape = workload.shape(32, 32, 0)
    precision = plan_precision("32", "cpu", "infer")
    return ModelServer(workload, shape, torch.device("cpu"), precision, 4, False, 0, graphed)


def test_each_bucket_is_captured_once_and_a_batch_replays_its_buckets_graph(monkeypatch):
    monkeypatch.setitem(graphs.CAPTURERS, "cpu", fake_graphs.fake_capture)
    server = _server()
    before = len(fake_graphs.captured)
    server.warm()
    assert sorted(server.replays) == [1, 2, 4]
    assert len(fake_graphs.captured) - before == 3
    assert server.columns() == {"channels_last": True, "cuda_graphs": True, "graph_fallback": ""}
    server.static_queries.zero_()  # a replay must copy this batch's queries in first
    server.run_batch(3)  # bucket 4
    assert torch.equal(server.static_queries, server.queries)
    assert torch.allclose(server.outputs[4], server._forward(server.queries[:4]))
    assert torch.equal(server.answers[:3], server.outputs[4][:3])  # the answers, on the host
    assert not server.answers.is_pinned()  # pinned where a device copies into it


def test_a_capture_that_fails_leaves_every_bucket_uncaptured_and_says_why(monkeypatch, capsys):
    def refuse(fn, ready, pool=None):
        raise RuntimeError("operation not permitted when stream is capturing")

    monkeypatch.setitem(graphs.CAPTURERS, "cpu", refuse)
    server = _server()
    server.warm()
    server.run_batch(2)  # eager, as before
    assert server.replays == {}
    columns = server.columns()
    assert columns["cuda_graphs"] is False and "not permitted" in columns["graph_fallback"]
    assert "could not be captured as a CUDA graph" in capsys.readouterr().err


def test_without_graphs_nothing_is_captured_and_the_row_says_nothing(monkeypatch):
    monkeypatch.setitem(graphs.CAPTURERS, "cpu", fake_graphs.fake_capture)
    server = _server(graphed=False)
    server.warm()
    assert server.replays == {} and server.columns() == {
        "channels_last": True,
        "cuda_graphs": False,
    }


def test_image_queries_and_weights_are_served_channels_last_as_inference_rows_run():
    """An image model's batch-1 reference must run in the layout of the benchmark's batch-1
    row (channels_last by default; docs/serving.md has what the contiguous layout cost on an
    H100). Text models keep their layout."""
    server = _server(graphed=False)
    assert server.queries.is_contiguous(memory_format=torch.channels_last)
    conv = next(m for m in server.model.modules() if isinstance(m, torch.nn.Conv2d))
    assert conv.weight.is_contiguous(memory_format=torch.channels_last)
    workload = get_workload("distilbert")
    precision = plan_precision("32", "cpu", "infer")
    text = ModelServer(workload, workload.shape(None, None, 16), torch.device("cpu"), precision,
                       2, False, 0, False)  # fmt: skip
    assert text.columns() == {"channels_last": False, "cuda_graphs": False}
