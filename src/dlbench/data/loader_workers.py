"""How many loader processes a run gets: the CPUs this process may use."""

from __future__ import annotations

from dlbench.host import available_cpus

DEFAULT_MAX_WORKERS = 8  # --workers default: one per CPU, at most this many


def default_workers() -> int:
    """Loader processes when --workers is not given: one per CPU, at most 8."""
    return min(DEFAULT_MAX_WORKERS, available_cpus())
