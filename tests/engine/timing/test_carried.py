"""A point starts from the state a point run first would, whatever ran before it in its worker:
the state as its window opens is the same, and a row names what an earlier point left."""

from __future__ import annotations

import threading

import torch

from dlbench.config import RunConfig
from dlbench.engine.timing import carried
from dlbench.sweep import worker
from tests.conftest import read_rows

SMALL = dict(accelerator="cpu", n_iters=3, warmup_steps=1, width=32, height=32)


def _config(tmp_path, run_id: str, **settings) -> RunConfig:
    return RunConfig.of(**{**SMALL, **settings}, output=tmp_path / "rows.csv", run_id=run_id)


def _points_that_leave_a_switch(monkeypatch) -> None:
    """Every point from here ends with one of torch's switches flipped, as a point that sets
    what it does not set back would."""
    import dlbench.run

    real = dlbench.run.execute

    def leaving(config, auto_batch=False):
        code = real(config, auto_batch)
        torch.backends.cuda.enable_mem_efficient_sdp(False)
        return code

    monkeypatch.setattr(dlbench.run, "execute", leaving)


def _windows(tmp_path, monkeypatch) -> tuple[dict, dict]:
    """The state as the window opened for a point run first, and for the same point after two
    others in the same process."""
    monkeypatch.setattr(carried, "_notes", carried._Notes())
    first = _config(tmp_path, "first", model="timm:test_resnet", mode="train", batch_size=2)
    assert worker.run_point(first, False)[0] == 0
    opened_first = carried.window_state()
    _points_that_leave_a_switch(monkeypatch)
    vit = _config(tmp_path, "vit", model="timm:test_vit", mode="infer", batch_size=4)
    llm = _config(tmp_path, "llm", model="llm_tiny", mode="train", batch_size=2, seq_len=32)
    for config in (vit, llm):
        assert worker.run_point(config, False)[0] == 0
    assert worker.run_point(first.replace(run_id="again"), False)[0] == 0
    return opened_first, carried.window_state()


def test_a_point_after_others_opens_its_window_as_it_would_run_first(tmp_path, monkeypatch):
    flash = torch.backends.cuda.mem_efficient_sdp_enabled()
    try:
        first, again = _windows(tmp_path, monkeypatch)
        assert carried.differences(first, again) == []
        rows = {r["run_id"]: r for r in read_rows(tmp_path / "rows.csv")}
        assert rows["first"]["carried_state"] == ""  # the process's first point
        assert rows["again"]["carried_state"] == ""  # set back after each point
    finally:
        torch.backends.cuda.enable_mem_efficient_sdp(flash)


def test_without_setting_switches_back_the_next_window_would_inherit_them(tmp_path, monkeypatch):
    """The mechanism, shown the other way: a worker that did not set torch's switches back
    would open the same point's window in another state, and its row would say what."""
    flash = torch.backends.cuda.mem_efficient_sdp_enabled()
    monkeypatch.setattr(worker, "restore_after_point", lambda: None)
    try:
        first, again = _windows(tmp_path, monkeypatch)
        assert "sdpa: flash efficient math cudnn -> flash math cudnn" in carried.differences(
            first, again
        )
        rows = {r["run_id"]: r for r in read_rows(tmp_path / "rows.csv")}
        assert (
            "sdpa: flash efficient math cudnn -> flash math cudnn" in rows["again"]["carried_state"]
        )
    finally:
        torch.backends.cuda.enable_mem_efficient_sdp(flash)


def test_a_thread_an_earlier_point_left_running_is_named_in_the_next_row(tmp_path, monkeypatch):
    monkeypatch.setattr(carried, "_notes", carried._Notes())
    config = _config(tmp_path, "one", model="timm:test_resnet", mode="infer", batch_size=2)
    assert worker.run_point(config, False)[0] == 0
    stop = threading.Event()
    left = threading.Thread(target=stop.wait, name="left-by-a-point", daemon=True)
    left.start()
    try:
        assert worker.run_point(config.replace(run_id="two"), False)[0] == 0
    finally:
        stop.set()
    rows = {r["run_id"]: r for r in read_rows(tmp_path / "rows.csv")}
    assert "left-by-a-point" in rows["two"]["carried_state"]
