"""The `dlbench` processes a run starts (a sweep's points, a batch-size search's probes): they die
with it and stop as a whole, their process group with them; what each said last."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

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
    args: list[str],
    timeout_s: float,
    quiet: bool = True,
    command: list[str] | None = None,
    keep: Path | None = None,
) -> ChildResult:
    """`python -m dlbench ARGS` (or `command ARGS`: another build's dlbench, an image); SIGTERM
    and SIGINT to us stop the child first, then are raised again. `keep`: the file its output
    is kept in (else a temporary one)."""
    if keep is not None:
        keep.parent.mkdir(parents=True, exist_ok=True)
    with keep.open("w+") if keep is not None else tempfile.TemporaryFile("w+") as log:
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
    call: Callable[[], tuple[int, str]],
    learned: Callable[[], object] | None = None,
    log: Path | None = None,
) -> ChildResult:
    """`call` in a forked child of this process, waited for: a fresh process (its own CUDA
    context, allocator and threads) that costs no imports. This process must not have started
    CUDA (a child could not: refused in one line), which is why dlbench asks torch for NVML's
    device count (startup.fork_safe_cuda_checks). What `learned` returns in the child after
    `call` (JSON) comes back as the result's `learned`, through a file, so that no grandchild
    (a DataLoader worker) can hold the answer open.

    The child runs in a process group of its own with its output at the file level: into `log`
    where given (a sweep's point: kept for the user), else held and passed on to this process's
    stderr once it ends (its standard output, a table the parent shows, is held back). A signal
    that stops this one stops the child's group first (SIGTERM, then SIGKILL after
    KILL_GRACE_S), its held output dropped: the parent says what stopped it, once."""
    _refuse_after_cuda()
    with tempfile.TemporaryDirectory(prefix="dlbench-fork-") as scratch:
        answer, held = Path(scratch) / "answer.json", Path(scratch) / "stderr"
        pid = os.fork()
        if pid == 0:
            _in_forked_child(call, learned, answer, log, held)
        try:
            status = os.waitpid(pid, 0)[1]
        except BaseException:  # a signal (Interrupted): the child's group goes first
            _stop_forked(pid)
            raise
        output = (log or held).read_text(errors="replace") if (log or held).exists() else ""
        if log is None:
            sys.stderr.write(output)
            sys.stderr.flush()
        try:
            said = json.loads(answer.read_text()) if answer.exists() else {}
        except (OSError, ValueError):
            said = {}
    last = (last_line_of(output) or str(said.get("last") or ""))[:500]
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        last = f"killed by {signal.Signals(-code).name}" + (f"; {last}" if last else "")
    return ChildResult(code, last, learned=said.get("learned"))


def _refuse_after_cuda() -> None:
    """A UserError where this process has started CUDA: a forked child inherits a context it
    cannot use, and every point would die with an obscure CUDA error."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        from dlbench.errors import UserError

        raise UserError(
            "cannot measure in a fresh forked process: this process has started CUDA (a library "
            "caller's, or a fallback's); start dlbench in a process that has not"
        )


def _in_forked_child(call, learned, answer: Path, log: Path | None, held: Path) -> None:
    """The child's side: its own process group, its output to `log` (or held), `call`, its
    answer written whole; it never returns."""
    code = 70  # EX_SOFTWARE: `call` raised
    try:
        os.setpgid(0, 0)
        _die_with(os.getppid())
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        out = os.open(log or held.with_name("stdout"), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        err = out if log is not None else os.open(held, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        os.dup2(out, 1)
        os.dup2(err, 2)
        code, last = call()
        said = {"last": last, "learned": learned() if learned else None}
        temporary = answer.with_suffix(".part")
        temporary.write_text(json.dumps(said))
        os.replace(temporary, answer)
    finally:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        os._exit(code)


def _stop_forked(pid: int) -> None:
    """SIGTERM the forked child's group, then SIGKILL after KILL_GRACE_S; the child reaped."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + KILL_GRACE_S
        while time.monotonic() < deadline:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return
            time.sleep(0.05)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)
