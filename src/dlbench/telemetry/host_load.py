"""What else the host ran during a window: every core's busy time (/proc/stat) less this run's
own CPU time (its process's threads and its live descendants': loader workers, the ranks it
spawned), as a share of all the cores' time. A CPU row measures the host, and another process's
work in its window is a slower row the next run need not repeat (results.verdict: `host_busy` on
a CPU row); on a GPU row it is worth knowing, no more."""

from __future__ import annotations

import os
import resource
import time
from pathlib import Path

from dlbench.host import cpu_busy_pct, cpu_times

PROC = Path("/proc")


def own_cpu_s() -> float:
    """The CPU time so far of this process (every thread's) and of its descendants, live ones
    read from /proc and reaped ones from the kernel's count (user and system)."""
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    return _tree_cpu_s(os.getpid()) + reaped.ru_utime + reaped.ru_stime


def _tree_cpu_s(root: int) -> float:
    """`root`'s CPU time and that of every live process below it (/proc), in seconds; where
    /proc cannot be read, the process's own from getrusage."""
    parents: dict[int, int] = {}
    ticks: dict[int, int] = {}
    try:
        entries = [e for e in os.listdir(PROC) if e.isdigit()]
    except OSError:
        entries = []
    for entry in entries:
        try:
            fields = (PROC / entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # it ended between the listing and the read
        parents[int(entry)], ticks[int(entry)] = int(fields[1]), int(fields[11]) + int(fields[12])
    if root not in ticks:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime
    tree, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent and pid not in tree]
        tree.update(children)
        frontier += children
    return sum(ticks[pid] for pid in tree) / os.sysconf("SC_CLK_TCK")


class HostLoad:
    """`begin_window` and `end_window` (a window observer), then `columns()`."""

    def __init__(self) -> None:
        self._host: tuple[float, float] | None = None
        self._own = self._wall = 0.0
        self.other_pct: float | None = None

    def begin_window(self) -> None:
        self._host, self._own, self._wall = cpu_times(), own_cpu_s(), time.monotonic()

    def end_window(self) -> None:
        busy, own, wall = cpu_busy_pct(self._host, cpu_times()), own_cpu_s(), time.monotonic()
        if busy is None or wall <= self._wall:
            return
        own_pct = 100.0 * (own - self._own) / ((wall - self._wall) * (os.cpu_count() or 1))
        self.other_pct = max(0.0, busy - own_pct)

    def columns(self) -> dict[str, float | None]:
        return {"host_other_cpu_pct": self.other_pct}
