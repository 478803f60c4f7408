"""The survivors' check for a lost rank, in one process: a launcher's SIGTERM that comes while
rank 0 names the lost rank and writes its row waits until the row is written, whichever thread
the kernel hands it to (the several-process runs: test_lost_rank.py)."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from dlbench.config import RunConfig
from dlbench.engine.distribution.lost_ranks import RankLost, RankWatch
from dlbench.results.store import CsvStore
from dlbench.run import _record_lost_rank
from dlbench.signals import Interrupted, interruptible
from tests.conftest import read_rows


def test_a_launchers_sigterm_during_the_probe_waits_until_the_row_is_written(tmp_path):
    def probe_while_the_launcher_stops_us() -> list[int]:
        os.kill(os.getpid(), signal.SIGTERM)  # torchrun's agent: a worker died
        time.sleep(0.2)
        return [1]

    watch = RankWatch(group=object(), rank=0, world_size=2)
    watch.lost_ranks = probe_while_the_launcher_stops_us  # the gloo probe needs two processes
    store = CsvStore(tmp_path / "lost.csv")
    other = threading.Event()
    threading.Thread(target=other.wait, daemon=True).start()  # as gloo's and torch's threads
    try:
        with interruptible():
            with pytest.raises(RankLost) as lost:
                watch.check(RuntimeError("Connection reset by peer"))
            code = _record_lost_rank(lost.value, RunConfig(), store, {})
    finally:
        other.set()
    [row] = read_rows(tmp_path / "lost.csv")
    assert row["status"] == "failed" and row["error"].startswith("rank 1 lost: Connection reset")
    assert code == 128 + signal.SIGTERM  # the launcher's stop, once the row is down


def test_a_sigterm_that_lands_as_the_check_begins_is_checked_in_its_turn(monkeypatch):
    """Python runs a pending handler on entering a function: the launcher's SIGTERM can raise
    as the survivors' check begins, before it holds signals. The check runs again with it."""
    from types import SimpleNamespace

    from dlbench.engine import benchmark

    causes: list[BaseException] = []

    def check(self: RankWatch, cause: BaseException) -> None:
        causes.append(cause)
        if len(causes) == 1:
            raise Interrupted(signal.SIGTERM)
        raise RankLost([1], 0, 2, cause)

    def collective_fails(*_: object) -> None:
        raise RuntimeError("Connection reset by peer")

    monkeypatch.setattr(RankWatch, "open", classmethod(lambda cls, *_: cls(object(), 0, 2)))
    monkeypatch.setattr(RankWatch, "check", check)
    monkeypatch.setattr(benchmark, "_run_on", collective_fails)
    fabric = SimpleNamespace(world_size=2, strategy=None)
    with pytest.raises(RankLost) as lost:
        benchmark.run_benchmark(None, fabric)  # type: ignore[arg-type]
    assert isinstance(causes[0], RuntimeError) and isinstance(causes[1], Interrupted)
    assert str(lost.value) == "rank 1 lost: interrupted by SIGTERM"
