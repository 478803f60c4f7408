"""What else the host ran in a window, read from the real /proc/stat: a process spinning on one
core beside the window is counted, the window's own work is not, nor a process it started (a
loader's worker, a rank it spawned)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dlbench.host import cpu_busy_pct, cpu_times
from dlbench.telemetry.host_load import HostLoad

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="needs /proc/stat")


def _window(seconds: float, spin: bool = False) -> tuple[float, float, float]:
    """The other processes' share of the host's CPU time in a window (HostLoad), every
    process's over the same window, and this process's own (time.process_time)."""
    load = HostLoad()
    before, own, began = cpu_times(), time.process_time(), time.monotonic()
    load.begin_window()
    end = time.monotonic() + seconds
    while spin and time.monotonic() < end:
        pass
    time.sleep(max(0.0, end - time.monotonic()))
    load.end_window()
    busy = cpu_busy_pct(before, cpu_times())
    cores = os.cpu_count() or 1
    own_pct = 100.0 * (time.process_time() - own) / ((time.monotonic() - began) * cores)
    assert load.other_pct is not None and busy is not None
    return load.other_pct, busy, own_pct


def test_a_process_spinning_beside_the_window_is_counted():
    """A process the run did not start (its shell ended: it is no descendant of this one)."""
    one_core = 100.0 / (os.cpu_count() or 1)
    spin = f"{sys.executable} -c 'while True: pass' > /dev/null 2>&1 & echo $!"
    pid = int(subprocess.run(["sh", "-c", spin], capture_output=True, text=True).stdout)
    try:
        time.sleep(0.3)  # the interpreter started and spinning
        assert _window(1.5)[0] > 0.6 * one_core
    finally:
        os.kill(pid, signal.SIGKILL)


def _in_a_fresh_process(call: str) -> list[float]:
    """`call`, a function of this module, run in a fresh process: a worker of the suite may still
    have a child of an earlier test running, which HostLoad rightly counts as the window's own
    and the tests' own sums do not."""
    root = Path(__file__).resolve().parents[2]
    code = f"from tests.telemetry.test_host_load import {call.split('(')[0]}; print(*{call})"
    env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{root / 'src'}"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root,
                          env=env, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return [float(figure) for figure in done.stdout.split()]


def test_the_windows_own_work_is_not_anothers():
    """Spinning in the window itself: the host's busy time holds this process's, and HostLoad
    leaves it out (the suite's other workers may add theirs to both figures)."""
    other, busy, own = _in_a_fresh_process("_window(1.0, spin=True)")
    assert own > 100.0 / (os.cpu_count() or 1) / 4  # it did spin
    assert other == pytest.approx(max(0.0, busy - own), abs=5.0)


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _window_beside_a_child() -> tuple[float, float, float]:
    """A window with a child spinning through it: HostLoad's other share, every process's
    share, and this process's and the child's."""
    cores = os.cpu_count() or 1
    child = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        load, before, began = HostLoad(), cpu_times(), time.monotonic()
        child_s, own_s = _cpu_s(child.pid), time.process_time()
        load.begin_window()
        time.sleep(1.5)
        load.end_window()
        busy = cpu_busy_pct(before, cpu_times())
        spent = _cpu_s(child.pid) - child_s + time.process_time() - own_s
        ours = 100.0 * spent / ((time.monotonic() - began) * cores)
    finally:
        child.kill()
        child.wait()
    assert load.other_pct is not None and busy is not None
    return load.other_pct, busy, ours


def test_a_process_the_run_started_is_its_own_work():
    """A child spinning through the window (as a loader's worker computes): its CPU time is
    the run's, so the others' share is the host's busy share less this process's and the
    child's (the suite's other workers may add theirs to both)."""
    other, busy, ours = _in_a_fresh_process("_window_beside_a_child()")
    assert ours > 100.0 / (os.cpu_count() or 1) / 4  # the child did spin
    assert other == pytest.approx(max(0.0, busy - ours), abs=5.0)


def test_no_window_no_figure():
    load = HostLoad()
    load.end_window()
    assert load.columns() == {"host_other_cpu_pct": None}
