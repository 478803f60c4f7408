"""What this process may use of its host: the CPUs its affinity mask allows (a container's
cpuset or `taskset` narrows them below the host's count; every count of threads, processes or
ranks dlbench derives from CPUs starts here); and how busy all the host's cores were, read at a
window's edges (Linux)."""

from __future__ import annotations

import os


def available_cpus() -> int:
    """CPUs this process may run on (a container's limit, not the host's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def cpu_times() -> tuple[float, float] | None:
    """(busy, total) jiffies of all the host's cores (Linux /proc/stat), None elsewhere."""
    try:
        with open("/proc/stat") as stat:
            fields = [float(v) for v in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def cpu_busy_pct(start: tuple[float, float] | None, end: tuple[float, float] | None):
    """Share of all cores' time spent busy between two `cpu_times` readings, in %."""
    if start is None or end is None or end[1] <= start[1]:
        return None
    return 100.0 * (end[0] - start[0]) / (end[1] - start[1])
