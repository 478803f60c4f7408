"""What this process may use of its host: the CPUs its affinity mask allows (a container's
cpuset or `taskset` narrows them below the host's count; every count of threads, processes or
ranks dlbench derives from CPUs starts here)."""

from __future__ import annotations

import os


def available_cpus() -> int:
    """CPUs this process may run on (a container's limit, not the host's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1
