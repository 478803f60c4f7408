"""Run one `dlbench` command in its own process group, with a timeout, killable as a whole."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass

from dlbench.signals import Interrupted

KILL_GRACE_S = 10.0


@dataclass(frozen=True)
class ChildResult:
    """How a child ended: its exit code (None on timeout) and the last line it printed."""

    returncode: int | None
    last_line: str
    timed_out: bool = False


def _stop_group(proc: subprocess.Popen) -> None:
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
        )
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _stop_group(proc)
            return ChildResult(None, f"timed out after {timeout_s:g} s", timed_out=True)
        except Interrupted:
            _stop_group(proc)
            raise
        log.seek(0)
        lines = [line.strip() for line in log.read().splitlines() if line.strip()]
    code = proc.returncode
    last = lines[-1] if lines else ""
    if code is not None and code < 0:
        last = f"killed by {signal.Signals(-code).name}" + (f"; {last}" if last else "")
    return ChildResult(code, last[:500])
