"""SIGTERM (docker stop), SIGINT and SIGHUP become an exception, so a run unwinds and nothing
stays half-written; the `dlbench` processes a run starts (a sweep's points, a batch-size
search's probes) die with it and stop as a whole, their process group with them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

# Set by a sweep for the processes it starts: the pid they must not outlive.
PARENT_PID_VARIABLE = "DLBENCH_PARENT_PID"
_PR_SET_PDEATHSIG = 1


# docker stop, Ctrl-C, and a closed terminal or ssh session (a sweep over ssh whose link drops)
STOPPING_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGINT", "SIGHUP") if hasattr(signal, name)
)


class Interrupted(BaseException):
    """Raised in the main thread when a stopping signal arrives; exit code 128 + signal."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.signum = signum

    @property
    def exit_code(self) -> int:
        """130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP, as shells report them."""
        return 128 + self.signum


_pending: list[int] = []  # a signal that arrived, in case its exception was swallowed


def _raise(signum: int, _frame: object) -> None:
    _pending.append(signum)
    raise Interrupted(signum)


def raise_if_interrupted() -> None:
    """Raise the signal that arrived if its exception was lost: a handler that fires inside a
    `__del__` (an import's clean-up, say) has its exception printed and ignored by Python, and
    the run would go on. The measured loop calls this between steps (a list read, no sync)."""
    if _pending:
        raise Interrupted(_pending[-1])


@contextmanager
def interruptible() -> Iterator[None]:
    """Turn STOPPING_SIGNALS into `Interrupted` inside the block; restore handlers after."""
    _pending.clear()
    previous = {s: signal.signal(s, _raise) for s in STOPPING_SIGNALS}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        _pending.clear()  # handled here: the next run in this process starts clean


def hold_signals() -> set[int]:
    """From now on STOPPING_SIGNALS wait (in this thread) until `release_signals`; returns
    what to hand it."""
    return signal.pthread_sigmask(signal.SIG_BLOCK, STOPPING_SIGNALS)


def release_signals(held: set[int]) -> None:
    """The mask before `hold_signals`: a signal that arrived meanwhile is delivered now."""
    signal.pthread_sigmask(signal.SIG_SETMASK, held)


def child_environment() -> dict[str, str]:
    """The environment for a process that must die with this one (see `die_with_parent`)."""
    return {**os.environ, PARENT_PID_VARIABLE: str(os.getpid())}


def die_with_parent() -> None:
    """In a process a sweep started: ask the kernel for SIGKILL when the parent dies, however
    it dies (SIGKILL included), so that no point runs on and appends a row after its sweep is
    gone. Our own children (DDP ranks) inherit the request, aimed at us. Linux only."""
    parent = os.environ.get(PARENT_PID_VARIABLE)
    if not parent or not sys.platform.startswith("linux"):
        return
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != int(parent):  # the parent died before the request took hold
        os._exit(128 + signal.SIGKILL)
    os.environ[PARENT_PID_VARIABLE] = str(os.getpid())


KILL_GRACE_S = 10.0


@dataclass(frozen=True)
class ChildResult:
    """How a child ended: its exit code (None on timeout) and the last line it printed."""

    returncode: int | None
    last_line: str
    timed_out: bool = False


def last_line_of(text: str) -> str:
    """The last non-empty line a process printed."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def stop_group(proc: subprocess.Popen) -> None:
    """SIGTERM the child's whole process group, then SIGKILL whatever is left."""
    for sig, wait_s in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, None)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def run_child(args: list[str], timeout_s: float, quiet: bool = True) -> ChildResult:
    """`python -m dlbench ARGS`; SIGTERM/SIGINT to us stops the child first, then re-raises."""
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "dlbench", *args],
            stdout=log if quiet else None,
            stderr=log,
            start_new_session=True,
            env=child_environment(),
        )
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            stop_group(proc)
            return ChildResult(None, f"timed out after {timeout_s:g} s", timed_out=True)
        except Interrupted:
            stop_group(proc)
            raise
        log.seek(0)
        last = last_line_of(log.read())
    code = proc.returncode
    if code is not None and code < 0:
        last = f"killed by {signal.Signals(-code).name}" + (f"; {last}" if last else "")
    return ChildResult(code, last[:500])
