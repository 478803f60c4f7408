"""The `dlbench` processes a run starts (a sweep's points, a batch-size search's probes): they die
with it and stop as a whole, their process group with them; what each said last."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass

from dlbench.signals import Interrupted

# Set by a sweep for the processes it starts: the pid they must not outlive.
PARENT_PID_VARIABLE = "DLBENCH_PARENT_PID"
_PR_SET_PDEATHSIG = 1


def child_environment() -> dict[str, str]:
    """The environment for a process that must die with this one (see `die_with_parent`)."""
    return {**os.environ, PARENT_PID_VARIABLE: str(os.getpid())}


def die_with_parent() -> None:
    """In a process a sweep started: ask the kernel for SIGKILL when the parent dies, however
    it dies (SIGKILL included), so that no point runs on and appends a row after its sweep is
    gone. Our own children (DDP ranks) inherit the request, aimed at us. Linux only."""
    parent = os.environ.get(PARENT_PID_VARIABLE)
    if not parent:
        return
    _die_with(int(parent))
    os.environ[PARENT_PID_VARIABLE] = str(os.getpid())


def _die_with(parent: int) -> None:
    """SIGKILL for this process when `parent` dies (Linux; elsewhere nothing)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before the request took hold
        os._exit(128 + signal.SIGKILL)


KILL_GRACE_S = 10.0


@dataclass(frozen=True)
class ChildResult:
    """How a child ended: its exit code (None on timeout) and the last line it printed."""

    returncode: int | None
    last_line: str
    timed_out: bool = False
    learned: object = None  # what a forked child found out for the next (run_forked)


def last_line_of(text: str) -> str:
    """The last non-empty line a process printed."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def stop_group(proc: subprocess.Popen) -> None:
    """SIGTERM the child's whole process group, then SIGKILL whatever is left. A group that
    was stopped (SIGSTOP: a user, a debugger) is woken after the SIGTERM, so that it hears it."""
    for sig, wait_s in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, None)):
        try:
            os.killpg(proc.pid, sig)
            if sig == signal.SIGTERM:
                os.killpg(proc.pid, signal.SIGCONT)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def dlbench_command() -> list[str]:
    """How this dlbench is started as a command: this interpreter, `-m dlbench`."""
    return [sys.executable, "-m", "dlbench"]


def run_child(
    args: list[str], timeout_s: float, quiet: bool = True, command: list[str] | None = None
) -> ChildResult:
    """`python -m dlbench ARGS` (or `command ARGS`: another build's dlbench, an image); SIGTERM
    and SIGINT to us stop the child first, then are raised again."""
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(
            [*(command or dlbench_command()), *args],
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


def run_forked(
    call: Callable[[], tuple[int, str]], learned: Callable[[], object] | None = None
) -> ChildResult:
    """`call` in a forked child of this process, waited for: a fresh process (its own CUDA
    context, allocator and threads) that costs no imports. This process must not have started
    CUDA (a child could not), which is why dlbench asks torch for NVML's device count
    (startup.fork_safe_cuda_checks). What `learned` returns in the child after `call` (JSON)
    comes back as the result's `learned`. The child dies with this process; a signal that
    stops this one stops the child first."""
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 70  # EX_SOFTWARE: `call` raised
        try:
            os.close(reader)
            _die_with(os.getppid())
            code, last = call()
            said = {"last": last, "learned": learned() if learned else None}
            with os.fdopen(writer, "w") as out:
                json.dump(said, out)
        finally:
            for stream in (sys.stdout, sys.stderr):
                stream.flush()
            os._exit(code)
    os.close(writer)
    try:
        with os.fdopen(reader, "r") as said:
            text = said.read()  # to its end: the child wrote it whole, or died
        status = os.waitpid(pid, 0)[1]
    except BaseException:  # a signal (Interrupted): the child goes first
        os.kill(pid, signal.SIGTERM)
        os.waitpid(pid, 0)
        raise
    try:
        said = json.loads(text) if text else {}
    except ValueError:
        said = {}
    last = str(said.get("last") or "")[:500]
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        last = f"killed by {signal.Signals(-code).name}" + (f"; {last}" if last else "")
    return ChildResult(code, last, learned=said.get("learned"))
