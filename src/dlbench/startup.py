"""When the command being run started and where its seconds went since (the row's phase columns,
`CommandClock`), how a fresh process leaves once its row is written (`leave`), and what a fresh
process sets before CUDA starts."""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import time
from collections.abc import Callable, Mapping, MutableMapping
from contextvars import ContextVar
from dataclasses import dataclass, field

# A process older than this when dlbench is first imported was not started to run dlbench: a
# shell exec'd it as its last command (`bash -c 'make venv && dlbench ...'`), and the kernel's
# start time is the shell's. Python's own start takes well under this, cold caches included.
EXEC_AGE_LIMIT_S = 10.0


def process_age_s() -> float:
    """Seconds since this process started (Linux /proc), 0 where unknown."""
    try:
        with open("/proc/self/stat") as stat, open("/proc/uptime") as uptime:
            start_ticks = int(stat.read().rsplit(")", 1)[1].split()[19])
            return float(uptime.read().split()[0]) - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def waited_for_children() -> bool:
    """Whether this process has reaped children before (their CPU time is in its /proc stat,
    fields 16-17): Python's start reaps none, a shell that ran commands before exec'ing this
    one has."""
    try:
        with open("/proc/self/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return int(fields[13]) + int(fields[14]) > 0
    except (OSError, ValueError, IndexError):
        return False


def interpreter_age_s(
    age: Callable[[], float] = process_age_s, reaped: Callable[[], bool] = waited_for_children
) -> float:
    """Seconds this interpreter has run, read as dlbench is first imported: the process's age,
    unless the process ran something else before exec'ing Python (it reaped children, or is
    older than EXEC_AGE_LIMIT_S): then 0, counting from dlbench's import."""
    seconds = age()
    return 0.0 if reaped() or seconds > EXEC_AGE_LIMIT_S else seconds


# The interpreter's start on the monotonic clock, fixed the first time this module is imported
# (dlbench's package imports it before anything heavy).
INTERPRETER_STARTED = time.monotonic() - interpreter_age_s()


@dataclass
class CommandClock:
    """The seconds of one command, from its start (a fresh process's own start, or the fork of
    a sweep's point) to the row: each `lap` gives the time since the last one to a phase, so
    the phases sum to the command's seconds by construction (docs/time-to-result.md)."""

    started: float
    last: float = 0.0
    laps: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.last = self.last or self.started

    def lap(self, phase: str, now: float | None = None) -> float:
        """The seconds since the last lap, added to `phase` (and returned)."""
        now = time.monotonic() if now is None else now
        seconds = now - self.last
        self.laps[phase] = self.laps.get(phase, 0.0) + seconds
        self.last = now
        return seconds

    def elapsed_s(self, now: float | None = None) -> float:
        return (time.monotonic() if now is None else now) - self.started


_CLOCK: ContextVar[CommandClock | None] = ContextVar("command_clock", default=None)


def mark_command_start(fresh_process: bool) -> None:
    """Called as a command begins; a fresh process counts from its interpreter's start."""
    now = time.monotonic()
    _CLOCK.set(CommandClock(INTERPRETER_STARTED if fresh_process else now))


def command_clock() -> CommandClock:
    """This command's clock (one started now where no command was marked: a library call)."""
    clock = _CLOCK.get()
    if clock is None:
        clock = CommandClock(time.monotonic())
        _CLOCK.set(clock)
    return clock


def lap(phase: str) -> float:
    """The seconds since the command's last lap, given to `phase`."""
    return command_clock().lap(phase)


def since_command_start() -> float | None:
    """Seconds since the command (or its process) started; None if never marked."""
    clock = _CLOCK.get()
    return None if clock is None else clock.elapsed_s()


_CLEANUPS: list[Callable[[], object]] = []


def at_exit(cleanup: Callable[[], object]) -> None:
    """Run `cleanup` as this process ends, by `leave` or by Python's own exit."""
    _CLEANUPS.append(cleanup)
    atexit.register(cleanup)


def leave(code: int) -> None:
    """End a fresh process once its command returned (its row written and flushed): dlbench's
    own clean-ups run and child processes are stopped, then the process exits without Python's
    teardown, which walks every object left and waits on pools with nothing left to do
    (inductor's compile workers; docs/decisions.md#fast-exit). A process in a collective group
    (DDP ranks) leaves the ordinary way, its process group torn down by torch."""
    distributed = sys.modules.get("torch.distributed")
    if distributed is not None and distributed.is_available() and distributed.is_initialized():
        sys.exit(code)
    for cleanup in _CLEANUPS:
        atexit.unregister(cleanup)
        with contextlib.suppress(Exception):  # a clean-up is a courtesy; the exit is the command's
            cleanup()
    import multiprocessing

    for child in multiprocessing.active_children():  # a loader's workers, where any remain
        child.terminate()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


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
