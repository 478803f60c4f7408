"""The GPU's turn among a sweep's workers (their side: dlbench.gpu_turn). One worker at a time
holds it; before it is granted, every other worker is asked to give way and the grant waits until
each has: it gave way at a checkpoint, or it waits (for its own turn or its next point), or it
compiles (host work, which goes on: the compiling workers and the holder then run on two halves of
the host's cores; otherwise the holder has every core, as a lone run). No worker is ever stopped
from outside: a process stopped inside the CUDA driver, NVML or a cache's file lock could hold
the others up. Once
the holder gives the turn back, the others go on; turns are granted in the order asked."""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable
from typing import Protocol

from dlbench.sweep.messages import COMPILING, GAVE_WAY, WAITING


class Member(Protocol):
    """A worker as the broker sees it (sweep.launcher.Worker)."""

    def grant(self) -> None: ...

    def give_way(self, asked: bool) -> None: ...

    def state(self) -> int: ...

    def pin(self, cpus: set[int] | None) -> None: ...


def split_cores(count: int | None = None) -> tuple[set[int], set[int]] | None:
    """The holder's cores and the others' (the lower half and the rest), or None on a host of
    one core, where a worker that compiles must give way too."""
    count = count or os.cpu_count() or 1
    if count < 2:
        return None
    half = count // 2
    return set(range(half)), set(range(half, count))


# A grant waits at most this long for the others to give way, then goes ahead (and says so):
# a worker that cannot reach a checkpoint must not stop the sweep
MAX_GRANT_WAIT_S = 60.0
# Where a sweep writes each turn's events (asked, granted, given back, who had not given way),
# for one that seems stuck
TRACE_VARIABLE = "DLBENCH_TURN_TRACE"
STATES = {0: "running", 1: "gave way", 2: "waiting", 3: "compiling"}


def trace(line: str) -> None:
    """One event of the GPU's turn, where TRACE_VARIABLE names a file (workers write there
    too); nothing otherwise."""
    path = os.environ.get(TRACE_VARIABLE)
    if path:
        with open(path, "a") as f:
            f.write(f"{time.monotonic():.3f} {line}\n")


class TurnBroker:
    """Grants the turn to one member at a time, once every other has given way."""

    def __init__(
        self, cpu_count: int | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.cores = split_cores(cpu_count)
        self.clock = clock
        self.members: list[Member] = []
        self.holder: Member | None = None
        self.granting: Member | None = None  # asked the others to give way for it
        self.asked_at = 0.0
        self.queue: deque[Member] = deque()
        self.turns = 0
        self.forced = 0  # grants that went ahead without every other worker giving way
        self._traced = ""

    def join(self, member: Member) -> None:
        """A worker that may ask; asked to give way at once if another has or awaits the turn."""
        if member not in self.members:
            self.members.append(member)
        turn = self.holder or self.granting
        if turn is not None and member is not turn:
            member.give_way(True)

    def leave(self, member: Member) -> None:
        """A worker gone (ended, died, closed): its turn, asked or held, goes with it."""
        if member in self.members:
            self.members.remove(member)
        if member in self.queue:
            self.queue.remove(member)
        if self.granting is member:
            self.granting = None
        if self.holder is member:
            self._end_turn()
        self.poll()

    def asked(self, member: Member) -> None:
        trace(f"asked {self._name(member)}")
        self.queue.append(member)
        self.poll()

    def done(self, member: Member) -> None:
        trace(f"done {self._name(member)}")
        if self.holder is member:
            self._end_turn()
            self.poll()

    def _end_turn(self) -> None:
        self.holder = None
        for member in self.members:
            member.pin(None)
            member.give_way(False)

    def poll(self) -> None:
        """Move turns on: ask the others to give way for the next in line, grant once they
        have. The sweep calls it as messages come and, while a grant waits, every few ms."""
        if self.holder is not None:
            return
        if self.granting is None:
            if not self.queue:
                return
            self.granting, self.asked_at = self.queue.popleft(), self.clock()
            for member in self.members:
                member.give_way(member is not self.granting)
        chosen = self.granting
        others = [m for m in self.members if m is not chosen]
        if not all(self._gave_way(m) for m in others):
            if os.environ.get(TRACE_VARIABLE):
                states = ", ".join(f"{self._name(m)} {STATES.get(m.state())}" for m in others)
                if states != self._traced:
                    self._traced = states
                    trace(f"waiting for {self._name(chosen)}: {states}")
            if self.clock() - self.asked_at < MAX_GRANT_WAIT_S:
                return
            self.forced += 1
        self.granting, self.holder = None, chosen
        compiling = [m for m in others if m.state() == COMPILING]
        if self.cores is not None and compiling:  # they go on, on cores of their own
            chosen.pin(self.cores[0])
            for member in compiling:
                member.pin(self.cores[1])
        self.turns += 1
        trace(f"granted {self._name(chosen)}")
        chosen.grant()

    def _name(self, member: Member) -> str:
        return f"{getattr(member, 'name', 'worker')}#{getattr(member, 'pid', '')}"

    def _gave_way(self, member: Member) -> bool:
        state = member.state()
        return state in (GAVE_WAY, WAITING) or (state == COMPILING and self.cores is not None)

    @property
    def waiting(self) -> bool:
        """A grant waits for workers to give way (the sweep polls again soon)."""
        return self.granting is not None
