"""The host's CPU time, read at a window's edges: how busy all its cores were (Linux)."""

from __future__ import annotations


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
