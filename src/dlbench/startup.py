"""When the command being run started: the process's start for a fresh process (so the row's
`startup_s` holds the imports and the CLI), the moment a sweep worker got the point otherwise;
and what a fresh process sets before CUDA starts."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, MutableMapping
from contextvars import ContextVar

_STARTED: ContextVar[float | None] = ContextVar("command_started", default=None)


def process_age_s() -> float:
    """Seconds since this process started (Linux /proc), 0 where unknown."""
    try:
        with open("/proc/self/stat") as stat, open("/proc/uptime") as uptime:
            start_ticks = int(stat.read().rsplit(")", 1)[1].split()[19])
            return float(uptime.read().split()[0]) - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def mark_command_start(fresh_process: bool) -> None:
    """Called as a command begins; a fresh process counts from its own start."""
    _STARTED.set(time.monotonic() - (process_age_s() if fresh_process else 0.0))


def since_command_start() -> float | None:
    """Seconds since the command (or its process) started; None if never marked."""
    started = _STARTED.get()
    return None if started is None else time.monotonic() - started


# CUDA multiplexes streams onto this many hardware work queues (fewer by default): with fewer,
# the step's stream can share one with a stream that waits (nvJPEG's, for its JPEG engines)
# and queue behind it (docs/decisions.md#work-queues).
WORK_QUEUES_VARIABLE, WORK_QUEUES = "CUDA_DEVICE_MAX_CONNECTIONS", "32"


def set_cuda_work_queues(environ: MutableMapping[str, str] = os.environ) -> None:
    """Before CUDA starts in this process (its children inherit it): 32 hardware work queues,
    unless the user set their own. The row's `cuda_env` says what ran."""
    environ.setdefault(WORK_QUEUES_VARIABLE, WORK_QUEUES)


# torch asks NVML, not the CUDA driver, whether a GPU is there: a process that asked the driver
# could not fork a child that uses CUDA, and a sweep's worker forks each point
# (subprocesses.run_forked). torch documents the variable; where NVML fails it asks the driver.
FORK_SAFE_VARIABLE = "PYTORCH_NVML_BASED_CUDA_CHECK"


def fork_safe_cuda_checks(environ: MutableMapping[str, str] = os.environ) -> None:
    """Before torch is asked about CUDA in this process (its children inherit it)."""
    environ.setdefault(FORK_SAFE_VARIABLE, "1")


# Launcher variables that dlbench, Lightning and lightning_utilities read as whole numbers, some
# at import (a rank of `abc` ended in a ValueError deep inside an import): checked first.
WHOLE_NUMBER_VARIABLES = (
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "NODE_RANK",
    "MASTER_PORT",
    "SLURM_PROCID",
    "SLURM_LOCALID",
    "SLURM_NODEID",
    "SLURM_NTASKS",
    "JSM_NAMESPACE_RANK",
    "JSM_NAMESPACE_LOCAL_RANK",
    "JSM_NAMESPACE_SIZE",
)
MAX_LAUNCHER_NUMBER = 2**31 - 1


def bad_launcher_variable(environ: Mapping[str, str] = os.environ) -> str | None:
    """What is wrong with the first launcher variable that is not a whole number where one is
    read (one line for the user), or None."""
    for name in WHOLE_NUMBER_VARIABLES:
        value = environ.get(name)
        if value is None:
            continue
        text = value.strip()
        if not text.isdigit() or int(text) > MAX_LAUNCHER_NUMBER:
            shown = value.encode("unicode_escape").decode()[:40]
            return (
                f"{name}={shown!r}: a launcher variable that must be a whole number from 0 to "
                f"{MAX_LAUNCHER_NUMBER:,}; unset it or set what the launcher would"
            )
    return None
