"""The sweep's one worker: points in order, one at a time; a point that hangs, a worker that
dies or is stopped, each ends within the point's timeout with its cause, and the next point gets
a fresh worker (fake workers behind the real interface; the e2e faults in test_sweep_faults)."""

from __future__ import annotations

import os
from typing import ClassVar

import pytest

from dlbench.config.limits import WORKER_START_TIMEOUT_S
from dlbench.subprocesses import ChildResult
from dlbench.sweep.messages import LineReader, send
from dlbench.sweep.timing import TimeSplit
from dlbench.sweep.worker_queue import Task, WorkerQueue


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class FakeWorker:
    """A worker whose answers the test scripts: 'ok' answers at once, 'hang' never does,
    'die' closes its output as a killed process would; 'slow' spends 100 s on its imports
    (ready only then) and answers once its readiness was read; 'stuck' never gets ready."""

    made: ClassVar[list[FakeWorker]] = []

    def __init__(self, script: list[str], clock: FakeClock) -> None:
        self.script, self.clock = script, clock
        read, self.write = os.pipe()
        os.set_blocking(read, False)
        self.reader = LineReader(read)
        self.proc = type("Proc", (), {"stdout": read})()
        self.assigned: list[str] = []
        self.closed = False
        self.answer_next: dict | None = None
        self.hanging = False
        if script[0] not in ("slow", "stuck"):
            send(self.write, {"ready": True})
        FakeWorker.made.append(self)

    def assign(self, config, auto_batch: bool) -> None:
        self.assigned.append(config)
        what = self.script.pop(0)
        if what == "ok":
            send(self.write, {"code": 0, "last": f"{config} done"})
        elif what == "die":
            os.close(self.write)
        elif what == "slow":
            self.clock.now += 100.0
            send(self.write, {"ready": True})
            self.answer_next = {"code": 0, "last": f"{config} done late"}
        elif what == "stuck":
            self.clock.now += 400.0
        else:  # hang: time passes on the sweep's clock, no answer comes
            self.hanging = True

    def messages(self) -> list[dict]:
        said = self.reader.feed()
        if self.hanging:  # each look costs 100 s; a line the queue ignores wakes its next look
            self.clock.now += 100.0
            send(self.write, {"still": "running"})
        if self.answer_next is not None and any(m.get("ready") for m in said):
            send(self.write, self.answer_next)  # read on the queue's next look
            self.answer_next = None
        return said

    @property
    def ended(self) -> bool:
        return self.reader.closed

    def result(self) -> ChildResult:
        return ChildResult(-9, "killed by SIGKILL")

    def close(self) -> None:
        self.closed = True


def _queue(script: list[str], timeout_s: float = 50.0) -> tuple[WorkerQueue, FakeClock]:
    clock = FakeClock()
    FakeWorker.made = []
    return WorkerQueue(timeout_s, None, clock, lambda: FakeWorker(script, clock)), clock


def _run(queue: WorkerQueue, names: list[str]) -> list[tuple[str, ChildResult]]:
    for name in names:
        queue.submit(Task(name, name))
    ended = []
    while queue.busy:
        ended += [(e.task.key, e.result) for e in queue.wait()]
    return ended


def test_points_run_in_order_one_at_a_time_in_one_worker():
    queue, _ = _queue(["ok", "ok", "ok"])
    ended = _run(queue, ["a", "b", "c"])
    assert [(k, r.returncode, r.last_line) for k, r in ended] == [
        ("a", 0, "a done"),
        ("b", 0, "b done"),
        ("c", 0, "c done"),
    ]
    assert len(FakeWorker.made) == 1 and FakeWorker.made[0].assigned == ["a", "b", "c"]
    assert queue.first_ready == 0.0


def test_a_point_that_never_answers_times_out_and_the_next_gets_a_fresh_worker():
    queue, _ = _queue(["hang", "ok"], timeout_s=50.0)
    ended = _run(queue, ["stuck", "next"])
    (key, stuck), (after, fine) = ended
    assert key == "stuck" and stuck.timed_out and stuck.last_line == "timed out after 50 s"
    assert after == "next" and fine.returncode == 0
    first, second = FakeWorker.made
    assert first.closed and first.assigned == ["stuck"] and second.assigned == ["next"]


def test_a_fresh_workers_imports_are_not_the_points_seconds():
    # 100 s of imports against a 50 s point timeout: the point's seconds start once it is ready
    queue, clock = _queue(["slow"], timeout_s=50.0)
    [(_, result)] = _run(queue, ["late start"])
    assert result.returncode == 0 and not result.timed_out, result
    assert queue.first_ready == 100.0 and clock.now == 100.0


def test_a_worker_that_never_gets_ready_ends_its_point_saying_so():
    queue, _ = _queue(["stuck", "ok"], timeout_s=50.0)
    (_, stuck), (_, fine) = _run(queue, ["first", "next"])
    assert stuck.timed_out and stuck.last_line == (
        f"timed out: its worker did not start within {WORKER_START_TIMEOUT_S:g} s"
    )
    assert fine.returncode == 0 and len(FakeWorker.made) == 2 and FakeWorker.made[0].closed


def test_a_worker_that_dies_mid_point_ends_that_point_with_its_cause_only():
    queue, _ = _queue(["die", "ok"])
    ended = _run(queue, ["killed", "next"])
    assert ended[0] == ("killed", ChildResult(-9, "killed by SIGKILL"))
    assert ended[1][1].returncode == 0
    assert len(FakeWorker.made) == 2


def test_the_queue_says_which_point_it_has_begun():
    queue, _ = _queue(["ok"])
    queue.submit(Task("a", "a"))
    assert queue.started_keys() == set()  # queued, not begun: a signal now leaves it no row
    queue.wait()
    assert queue.started_keys() == set() and not queue.busy


def test_the_wall_time_split_adds_up_and_says_what_was_reused():
    split = TimeSplit(started=0.0, first_ready=5.0, windows=12.0, recheck_windows=2.0)
    split.tasks = [(0, 40, "measure"), (40, 60, "measure"), (60, 70, "recheck")]
    split.reused.update({"graph choice": 3})
    parts = split.parts(80.0)
    assert parts["worker starts"] == 5.0
    assert parts["rechecks"] == pytest.approx(8.0)  # 10 s after the points, less its window
    assert parts["warm-up and compile"] == pytest.approx(60 - 10 - 5)
    assert parts["windows"] == 12.0
    assert sum(parts.values()) == pytest.approx(80.0)
    line = split.line(80.0)
    assert line.startswith("wall 80.0 s: windows 12.0 s, warm-up and compile 45.0 s, ")
    assert line.endswith("; reused from earlier runs: graph choice 3")
