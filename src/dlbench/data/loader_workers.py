"""How many loader processes a run gets: the CPUs this process may use."""

from __future__ import annotations

import os

DEFAULT_MAX_WORKERS = 8  # --workers default: one per CPU, at most this many


def available_cpus() -> int:
    """CPUs this process may run on (a container's limit, not the host's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def default_workers() -> int:
    """Loader processes when --workers is not given: one per CPU, at most 8."""
    return min(DEFAULT_MAX_WORKERS, available_cpus())
