"""The GPU's turn among a sweep's workers: one holder at a time, the others held still, what they
left queued drained first; and a worker's side of it (dlbench.gpu_turn)."""

from __future__ import annotations

import io
import json

import pytest

from dlbench import gpu_turn
from dlbench.sweep.messages import COMPILING, GAVE_WAY, RUNNING, WAITING
from dlbench.sweep.turns import MAX_GRANT_WAIT_S, TurnBroker
from dlbench.sweep.worker import WorkerTurn


class Member:
    def __init__(self, name: str, state: int = RUNNING) -> None:
        self.name, self.state_now = name, state
        self.asked_to_give_way = self.granted = False
        self.cpus = None

    def grant(self) -> None:
        self.granted = True

    def give_way(self, asked: bool) -> None:
        self.asked_to_give_way = asked

    def state(self) -> int:
        return self.state_now

    def pin(self, cpus) -> None:
        self.cpus = cpus


def test_the_turn_is_granted_once_every_other_worker_has_given_way():
    broker = TurnBroker(cpu_count=2)
    a, b, c = Member("a"), Member("b"), Member("c", state=COMPILING)
    for member in (a, b, c):
        broker.join(member)
    broker.asked(a)
    assert b.asked_to_give_way and c.asked_to_give_way and not a.asked_to_give_way
    assert not a.granted  # b still runs (it may use the GPU at any moment)
    b.state_now = GAVE_WAY  # at its next checkpoint, its GPU work done
    broker.poll()
    assert a.granted and broker.holder is a
    assert a.cpus == {0} and c.cpus == {1}  # c compiles on, on a core of its own
    assert b.cpus is None  # b gave way: it holds no core the holder needs
    broker.asked(b)
    assert broker.holder is a and not b.granted  # waits its turn
    a.state_now = RUNNING
    broker.done(a)
    assert a.asked_to_give_way and not b.asked_to_give_way  # now a gives way for b
    assert not b.granted
    a.state_now = WAITING  # between points
    broker.poll()
    assert b.granted and broker.holder is b
    broker.done(b)
    assert broker.holder is None and not any(m.asked_to_give_way for m in (a, b, c))
    assert all(m.cpus is None for m in (a, b, c))  # every core again


def test_a_worker_that_never_gives_way_holds_a_grant_up_for_a_bounded_time():
    now = [0.0]
    broker = TurnBroker(cpu_count=1, clock=lambda: now[0])
    a, stuck = Member("a"), Member("stuck")
    broker.join(a)
    broker.join(stuck)
    broker.asked(a)
    now[0] = MAX_GRANT_WAIT_S - 1
    broker.poll()
    assert not a.granted
    now[0] = MAX_GRANT_WAIT_S + 1
    broker.poll()
    assert a.granted and broker.forced == 1  # the sweep says so


def test_on_one_core_a_compiling_worker_gives_way_too():
    broker = TurnBroker(cpu_count=1)
    a, b = Member("a"), Member("b", state=COMPILING)
    broker.join(a)
    broker.join(b)
    broker.asked(a)
    assert not a.granted
    b.state_now = GAVE_WAY
    broker.poll()
    assert a.granted


def test_a_worker_gone_with_the_turn_passes_it_on_and_a_newcomer_gives_way():
    broker = TurnBroker(cpu_count=1)
    a, b = Member("a", state=WAITING), Member("b", state=WAITING)
    broker.join(a)
    broker.join(b)
    broker.asked(a)
    broker.asked(b)
    late = Member("late")
    broker.join(late)
    assert late.asked_to_give_way  # joined while another held the turn
    broker.leave(a)  # died holding it
    late.state_now = GAVE_WAY
    broker.poll()
    assert broker.holder is b and b.granted


def test_a_region_keeps_the_turn_and_alone_gives_it_back():
    asked = []

    class Client:
        waited_s = 0.0

        def ask(self, kind):
            asked.append(kind)

        def done(self):
            asked.append("done")

        def checkpoint(self):
            pass

        def compiling(self, on):
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
    grant = json.dumps({"granted": True, "job_pids": [4242]}).encode() + b"\n"
    turn = WorkerTurn(io.BytesIO(grant * 2), -1, None)
    turn.prepare_only = True
    turn.ask(gpu_turn.CHOICE)  # its autotuning still takes its turn
    assert sent == [{"ask": gpu_turn.CHOICE}] and turn.waited_s > 0
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

        def checkpoint(self):
            pass

        def compiling(self, on):
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
        gpu_turn.checkpoint()  # the process moved on: the burst is over now
        assert asked[-2:] == [gpu_turn.CHOICE, "done"]
    finally:
        gpu_turn.use(None)
