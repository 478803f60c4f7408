"""A lost rank ends the run, and the row says which. When a collective fails (a rank died: its
connections closed; or it stopped answering: the collective timed out, --collective-timeout)
or a launcher stops the survivors (torchrun's agent sends SIGTERM once a worker died), every
surviving rank asks, on a side group of its own (gloo, made when the run started, so it works
beside NCCL too), which ranks still answer: rank 0 learns who is gone and records it."""

from __future__ import annotations

import contextlib
import re
import subprocess
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from dlbench.errors import EXIT_FAILED
from dlbench.signals import Interrupted, hold_signals, release_signals

# How long rank 0 waits for each survivor to answer the probe: they reach it at about the same
# time (the same failed collective, or the same timeout), so seconds are plenty.
PROBE_TIMEOUT_S = 10.0
_SOURCE_PATH = re.compile(r"^\[[^\]]*\.(cc|cpp|h):\d+\]\s*")


class RankLost(Exception):
    """The run lost `ranks` (empty where this rank cannot tell which: only rank 0 learns it);
    `cause` is the error or signal that showed it."""

    def __init__(
        self,
        ranks: list[int],
        global_rank: int,
        world_size: int,
        cause: BaseException,
        started: list[subprocess.Popen] | None = None,
    ) -> None:
        if ranks:
            what = f"rank {', '.join(map(str, ranks))} lost"
        else:  # a survivor other than rank 0: rank 0 records which
            what = "a collective failed (rank 0 names the lost rank)"
        super().__init__(f"{what}: {_first_line(cause)}")
        self.ranks, self.global_rank, self.world_size = ranks, global_rank, world_size
        self.cause, self.started = cause, started or []

    def end_started_ranks(self) -> None:
        """SIGKILL the rank processes this one started (Lightning's launcher), a stopped one
        too: called once the row is written, so that none outlives the run."""
        for process in self.started:
            if process.poll() is None:
                process.kill()
                process.wait()

    @property
    def exit_code(self) -> int:
        """The signal's code where a launcher stopped this rank, else EXIT_FAILED."""
        return self.cause.exit_code if isinstance(self.cause, Interrupted) else EXIT_FAILED


def _first_line(exc: BaseException) -> str:
    """The cause in a line: gloo's messages lose their source path and their advice."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    line = _SOURCE_PATH.sub("", lines[0]) if lines else type(exc).__name__
    return line.split(". This is typically")[0]


@dataclass
class RankWatch:
    """The side group of a multi-process run (None for one process)."""

    group: Any = None
    rank: int = 0
    world_size: int = 1
    started: list[subprocess.Popen] = field(default_factory=list)  # ranks this process began

    @classmethod
    def open(cls, world_size: int, started: list[subprocess.Popen]) -> RankWatch:
        """Every rank calls this once, together, before the first step."""
        if world_size < 2 or not dist.is_available() or not dist.is_initialized():
            return cls()
        group = dist.new_group(backend="gloo", timeout=timedelta(seconds=PROBE_TIMEOUT_S))
        return cls(group, dist.get_rank(), world_size, started)

    def lost_ranks(self) -> list[int]:
        """The ranks that did not answer: every survivor sends rank 0 a word on the side group,
        and rank 0 names the ranks whose word failed (a closed connection: the rank died) or
        did not come within PROBE_TIMEOUT_S (it stopped answering). Other ranks learn nothing."""
        word = torch.zeros(1)
        if self.rank != 0:
            with contextlib.suppress(RuntimeError):  # rank 0 itself is gone: nothing to tell
                dist.send(word, dst=0, group=self.group)
            return []
        lost = []
        for rank in range(1, self.world_size):
            try:
                answer = dist.irecv(word, src=rank, group=self.group)
                if answer.wait(timedelta(seconds=PROBE_TIMEOUT_S)) is False:
                    lost.append(rank)
            except RuntimeError:
                lost.append(rank)
        return lost

    def check(self, cause: BaseException) -> None:
        """Raise RankLost where `cause` came from a lost rank, with stopping signals held for
        the rest of the command (a launcher's SIGTERM waits until the row is written, then
        gives the exit code); return where every rank is here (the cause is the run's own, and
        the caller raises it), raising first a signal that came during the probe."""
        if self.group is None:
            return
        hold_signals()
        ranks = self.lost_ranks()
        if ranks or (self.rank != 0 and not isinstance(cause, Interrupted)):
            raise RankLost(ranks, self.rank, self.world_size, cause, self.started) from cause
        came = release_signals()
        if came is not None:
            raise came from cause
