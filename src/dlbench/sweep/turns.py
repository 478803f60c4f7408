"""The GPU's turn among a sweep's workers (their side: dlbench.gpu_turn). One worker at a time
holds it; while it does, every other worker is held still (SIGSTOP to its process group: off the
GPU and off the host's cores, its compile workers too), so that a measured window, an idle
baseline or a choice by timing sees the machine as a lone run would. Before the grant, what the
held workers said they may have left queued on the GPU drains (at most MAX_DRAIN_S); once the
holder gives the turn back, the others go on. Turns are granted in the order they were asked."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import Protocol

MAX_DRAIN_S = 1.0  # a held worker's declared GPU work is waited for up to this long


class Member(Protocol):
    """A worker as the broker sees it (sweep.launcher.Worker)."""

    def asked(self) -> None: ...

    def grant(self) -> None: ...

    def freeze(self) -> None: ...

    def thaw(self) -> None: ...

    def pending_s(self) -> float: ...


class TurnBroker:
    """Grants the turn to one member at a time and holds the others still meanwhile."""

    def __init__(self, sleep: Callable[[float], None] = time.sleep) -> None:
        self.sleep = sleep
        self.members: list[Member] = []
        self.holder: Member | None = None
        self.queue: deque[Member] = deque()
        self.turns = 0
        self.drained_s = 0.0  # waited in all for held workers' GPU work

    def join(self, member: Member) -> None:
        """A worker that may ask; held still at once if another holds the turn."""
        if member not in self.members:
            self.members.append(member)
        if self.holder is not None and member is not self.holder:
            member.freeze()

    def leave(self, member: Member) -> None:
        """A worker gone (ended, died, closed): its turn, asked or held, goes with it."""
        if member in self.members:
            self.members.remove(member)
        if member in self.queue:
            self.queue.remove(member)
        if self.holder is member:
            self.holder = None
            self._next()

    def asked(self, member: Member) -> None:
        member.asked()
        self.queue.append(member)
        self._next()

    def done(self, member: Member) -> None:
        if self.holder is member:
            self.holder = None
            self._next()

    def _next(self) -> None:
        if self.holder is not None:
            return
        if not self.queue:
            for member in self.members:
                member.thaw()
            return
        chosen = self.queue.popleft()
        others = [m for m in self.members if m is not chosen]
        for member in others:
            member.freeze()
        chosen.thaw()
        drain = min(MAX_DRAIN_S, max((m.pending_s() for m in others), default=0.0))
        if drain > 0:
            self.sleep(drain)
            self.drained_s += drain
        self.holder = chosen
        self.turns += 1
        chosen.grant()
