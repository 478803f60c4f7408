"""CUDA-graph capture of short steps, driven on the CPU through a fake capturer: a step that
syncs with the host falls back to eager with one warning and the row says so; one that does
not is replayed, once per synthetic batch, its capture inside the warm-up."""

from __future__ import annotations

import pytest

from dlbench.config import RunConfig
from dlbench.engine.acceleration import graph_policy, graphs
from dlbench.run import execute
from tests import fake_graphs
from tests.conftest import read_rows


@pytest.fixture
def cpu_capture(monkeypatch):
    monkeypatch.setitem(graphs.CAPTURERS, "cpu", fake_graphs.fake_capture)
    fake_graphs.captured.clear()


def _run(tmp_path, model: str, mode: str, **more) -> dict[str, str]:
    """A run of its own (no cache folder: no earlier run's graph choice) unless `more` names one."""
    settings = dict(
        model=model, mode=mode, accelerator="cpu", batch_size=2, n_iters=5, warmup_steps=2,
        cuda_graphs=True, output=tmp_path / "rows.csv", width=32, height=32, cache=False,
    )  # fmt: skip
    config = RunConfig.of(**{**settings, **more})
    assert execute(config) == 0
    return read_rows(tmp_path / "rows.csv")[-1]


@pytest.mark.parametrize(("slower_pct", "graphed"), [(1000.0, "True"), (-100.0, "False")])
def test_a_later_run_takes_the_recorded_graph_choice_and_a_changed_point_checks_again(
    cpu_capture, tmp_path, monkeypatch, slower_pct, graphed
):
    """The check's outcome is kept in the cache folder by point: a warm run of the point
    captures nothing where the eager step won, and checks nothing where the graph did; another
    batch size is another point, checked afresh."""
    monkeypatch.setattr(graph_policy, "GRAPH_SLOWER_PCT", slower_pct)
    cache = tmp_path / "cache"
    first = _run(tmp_path, "timm:test_resnet", "infer", cache=True, cache_dir=cache)
    assert (first["graph_choice"], first["cuda_graphs"]) == ("checked", graphed)
    checked = []
    monkeypatch.setattr(graph_policy, "faster_of", lambda *a: checked.append(a) or (a[1], 0))
    fake_graphs.captured.clear()
    again = _run(tmp_path, "timm:test_resnet", "infer", cache=True, cache_dir=cache)
    assert (again["graph_choice"], again["cuda_graphs"]) == ("recorded", graphed)
    assert again["graph_fallback"] == first["graph_fallback"]
    assert not checked  # no check either way
    assert len(fake_graphs.captured) == (2 if graphed == "True" else 0)  # eager: no capture
    other = _run(tmp_path, "timm:test_resnet", "infer", cache=True, cache_dir=cache, batch_size=4)
    assert other["graph_choice"] == "checked" and len(checked) == 1
    cold = _run(tmp_path, "timm:test_resnet", "infer")
    assert cold["graph_choice"] == "checked" and len(checked) == 2


def test_a_step_that_syncs_with_the_host_runs_eager_with_a_warning(cpu_capture, tmp_path, capsys):
    row = _run(tmp_path, "host_sync", "infer")
    assert row["cuda_graphs"] == "False" and "RuntimeError" in row["graph_fallback"]
    assert float(row["samples_per_s"]) > 0
    err = capsys.readouterr().err
    assert "could not be captured as a CUDA graph" in err and "runs eager" in err


@pytest.mark.parametrize("mode", ["infer", "train"])
def test_a_capturable_step_is_captured_per_batch_inside_the_warm_up(
    cpu_capture, tmp_path, mode, monkeypatch
):
    # the fake's replay is the eager step itself: only a loaded host could time it slower
    # (it did once under the parallel suite), and that comparison has tests of its own
    monkeypatch.setattr(graph_policy, "GRAPH_SLOWER_PCT", 1000.0)
    row = _run(tmp_path, "timm:test_resnet", mode)
    assert row["cuda_graphs"] == "True" and row["graph_fallback"] == ""
    assert len(fake_graphs.captured) == 2  # one graph per synthetic batch the loop rotates
    assert 0 < float(row["capture_s"]) <= float(row["warmup_s"])
    assert int(row["warmup_steps"]) >= 2 + 2  # eager warm-up, then replays before the window
    assert row["optimizer_impl"] in ("", "foreach", "fused")
    assert float(row["host_issue_pct"]) > 0  # graphed rows say whether the host kept ahead


def test_inference_rows_carry_query_latency_percentiles(tmp_path):
    config = RunConfig.of(
        model="timm:test_resnet", mode="infer", accelerator="cpu", batch_size=1, n_iters=30,
        warmup_steps=1, output=tmp_path / "rows.csv", width=32, height=32,
    )  # fmt: skip
    assert execute(config) == 0
    [row] = read_rows(tmp_path / "rows.csv")
    assert row["latency_samples"] == "30"
    assert float(row["latency_p50_ms"]) <= float(row["latency_p90_ms"])
    assert row["latency_p99_ms"] == ""  # 30 queries give no p99
    assert row["cuda_graphs"] == "False"  # no CUDA, nothing asked: eager


def test_graphs_are_refused_under_ddp_and_without_a_capturer():
    from dlbench.engine.plan import make_plan
    from dlbench.errors import UserError

    with pytest.raises(UserError, match="--cuda-graphs.*CUDA GPU"):
        make_plan(RunConfig.of(model="timm:test_resnet", accelerator="cpu", cuda_graphs=True))
    graphs.CAPTURERS["cpu"] = fake_graphs.fake_capture
    try:
        with pytest.raises(UserError, match="not under DDP"):
            make_plan(
                RunConfig.of(
                    model="timm:test_resnet", accelerator="cpu", cuda_graphs=True, strategy="ddp"
                )
            )
    finally:
        del graphs.CAPTURERS["cpu"]


def test_a_graph_slower_than_the_eager_step_is_dropped_and_the_row_says_why(
    monkeypatch, tmp_path, capsys
):
    """Capture can change what a step computes (a mask a library skips only outside capture):
    where the replays run slower than the eager step, the run measures the eager step."""
    monkeypatch.setitem(graphs.CAPTURERS, "cpu", fake_graphs.slow_capture)
    row = _run(tmp_path, "timm:test_resnet", "infer")
    assert row["cuda_graphs"] == "False" and "eager step ran faster" in row["graph_fallback"]
    assert int(row["warmup_steps"]) >= 2 + 1 + 3 * 2 * 5  # three timed rounds, in the warm-up
    assert "runs eager" in capsys.readouterr().err


@pytest.mark.parametrize(
    "stalled",
    [[False, True, True, False, True, False], [True] * 6],
    ids=["most replays of a round", "a whole round"],
)
def test_a_burst_of_contention_on_the_replays_keeps_the_graph(stalled):
    """Noise only adds time: the check compares each path's fastest step, round by round, and
    drops the graph only if it loses every round; a shared CI core that stalls most replays of
    a round, or all of them (the parallel suite did), does not pass for a slower computation."""
    import time
    from types import SimpleNamespace

    import torch

    from dlbench.engine.acceleration import graph_policy
    from dlbench.engine.acceleration.graphs import GraphedStep

    stalled = iter(stalled)  # the first replay is untimed

    def replay(_: int) -> None:
        time.sleep(0.004 + (0.02 if next(stalled, False) else 0.0))

    session = SimpleNamespace(device=torch.device("cpu"), step=lambda _: time.sleep(0.004))
    kept, _ = graph_policy.faster_of(session, GraphedStep(replay, True), first=0)
    assert kept.graphed and kept.step is replay


def test_the_output_watch_lets_nothing_go_while_a_graph_is_captured(monkeypatch):
    """A step captured as a CUDA graph (efficientnet_v2's training in the default plan) failed
    its capture on an H100 once the watch replaced, during the capture, the loss an eager
    warm-up step had made on another stream: freeing it then is an operation a capture
    refuses. While capturing, the watch keeps each graph's output beside the last eager one."""
    import torch

    from dlbench.engine.scenarios.outputs import OutputWatch

    capturing = [False]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: capturing[0])
    watch = OutputWatch()
    step = watch.watching(lambda x: x * 2)
    warm = step(torch.tensor(1.0))
    capturing[0] = True
    graph_outputs = [step(torch.tensor(2.0)), step(torch.tensor(float("nan")))]
    capturing[0] = False
    assert watch.last is warm  # not let go during the captures
    assert watch.captured == graph_outputs
    assert watch.columns() == {
        "last_step_finite": False,
        "final_loss": pytest.approx(float("nan"), nan_ok=True),
    }
