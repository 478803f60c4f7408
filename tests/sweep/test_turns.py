"""The GPU's turn among a sweep's workers: one holder at a time, the others held still, what they
left queued drained first; and a worker's side of it (dlbench.gpu_turn)."""

from __future__ import annotations

import io
import json

import pytest

from dlbench import gpu_turn
from dlbench.sweep.turns import MAX_DRAIN_S, TurnBroker
from dlbench.sweep.worker import WorkerTurn


class Member:
    def __init__(self, name: str, pending: float = 0.0) -> None:
        self.name, self.pending = name, pending
        self.frozen = self.granted = self.waiting = False
        self.log: list[str] = []

    def asked(self) -> None:
        self.waiting = True

    def grant(self) -> None:
        self.granted, self.waiting = True, False
        self.log.append("granted")

    def freeze(self) -> None:
        self.frozen = True
        self.log.append("frozen")

    def thaw(self) -> None:
        self.frozen = False
        self.log.append("thawed")

    def pending_s(self) -> float:
        return self.pending


def test_one_worker_holds_the_turn_and_every_other_is_held_still_meanwhile():
    slept = []
    broker = TurnBroker(sleep=slept.append)
    a, b, c = Member("a"), Member("b", pending=0.3), Member("c", pending=5.0)
    for member in (a, b, c):
        broker.join(member)
    broker.asked(a)
    assert broker.holder is a and a.granted and not a.frozen
    assert b.frozen and c.frozen
    assert slept == [MAX_DRAIN_S]  # the most any held worker said it left queued, capped
    broker.asked(b)  # waits its turn, still held
    assert broker.holder is a and b.frozen and not b.granted
    broker.done(a)
    assert broker.holder is b and b.granted and not b.frozen and a.frozen and c.frozen
    broker.done(b)
    assert broker.holder is None and not any(m.frozen for m in (a, b, c))


def test_a_worker_gone_with_the_turn_passes_it_on_and_a_newcomer_waits():
    broker = TurnBroker(sleep=lambda s: None)
    a, b = Member("a"), Member("b")
    broker.join(a)
    broker.join(b)
    broker.asked(a)
    broker.asked(b)
    late = Member("late")
    broker.join(late)
    assert late.frozen  # joined while another held the turn
    broker.leave(a)  # died holding it
    assert broker.holder is b and b.granted and late.frozen


def test_a_region_keeps_the_turn_and_alone_gives_it_back():
    asked = []

    class Client:
        waited_s = 0.0

        def ask(self, kind):
            asked.append(kind)

        def done(self):
            asked.append("done")

        def pending(self, seconds):
            pass

    gpu_turn.use(Client())
    try:
        with gpu_turn.alone(gpu_turn.CHOICE), gpu_turn.alone(gpu_turn.CHOICE):
            pass  # the second: already held, nothing asked
        assert asked == [gpu_turn.CHOICE, "done"]
        asked.clear()
        with gpu_turn.region():
            with gpu_turn.alone():  # outside the hold: taken and given back
                pass
            gpu_turn.hold(gpu_turn.MEASURE)
            with gpu_turn.alone():  # inside it: nothing more
                pass
            assert asked == [gpu_turn.CHOICE, "done", gpu_turn.MEASURE]
        assert asked[-1] == "done"
        assert gpu_turn.wait_columns() == {"turn_wait_s": 0.0}
    finally:
        gpu_turn.use(None)
    with gpu_turn.region():  # no sweep: nothing to ask anyone
        gpu_turn.hold()
    assert gpu_turn.wait_columns() == {}


def test_a_compile_ahead_task_stops_where_its_point_would_be_measured(monkeypatch):
    from dlbench.telemetry import isolation

    monkeypatch.setattr(isolation, "_SWEEP_PROCESSES", set())  # this test's alone
    sent = []
    monkeypatch.setattr("dlbench.sweep.worker.send", lambda fd, message: sent.append(message))
    grant = json.dumps({"granted": True, "waited_s": 1.5, "job_pids": [4242]}).encode() + b"\n"
    turn = WorkerTurn(io.BytesIO(grant * 2), -1, None)
    turn.prepare_only = True
    turn.ask(gpu_turn.CHOICE)  # its autotuning still takes its turn
    assert sent == [{"ask": gpu_turn.CHOICE}] and turn.waited_s == 1.5
    with pytest.raises(gpu_turn.PreparedOnly):
        turn.ask(gpu_turn.MEASURE)
    turn.prepare_only = False
    turn.ask(gpu_turn.MEASURE)
    assert sent[-1] == {"ask": gpu_turn.MEASURE}
    assert 4242 in isolation.own_process_ids()  # a sibling named in a grant is the job's own


def test_a_burst_of_benchmarks_takes_one_turn_and_gives_it_back_once_over():
    import time

    asked = []

    class Client:
        waited_s = 0.0

        def ask(self, kind):
            asked.append(kind)

        def done(self):
            asked.append("done")

        def pending(self, seconds):
            pass

    gpu_turn.use(Client())
    try:
        for _ in range(3):  # one kernel's launch shapes, timed one after another
            with gpu_turn.benchmark_burst():
                pass
        assert asked == [gpu_turn.CHOICE]
        time.sleep(gpu_turn.BURST_LINGER_S * 4)
        assert asked == [gpu_turn.CHOICE, "done"]  # no benchmark followed: given back
        with gpu_turn.benchmark_burst():
            pass
        with gpu_turn.region():
            gpu_turn.hold(gpu_turn.MEASURE)  # takes the burst's turn over, asks nothing
            time.sleep(gpu_turn.BURST_LINGER_S * 4)
            assert asked == [gpu_turn.CHOICE, "done", gpu_turn.CHOICE]
        assert asked[-1] == "done" and asked.count("done") == 2
        with gpu_turn.benchmark_burst():
            pass
        gpu_turn.pending(0.0)  # the process moved on: the burst is over now
        assert asked[-2:] == [gpu_turn.CHOICE, "done"]
    finally:
        gpu_turn.use(None)
