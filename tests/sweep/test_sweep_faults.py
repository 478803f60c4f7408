"""A sweep keeps its promise under faults (real processes on the CPU): its worker killed or a
point's process stopped mid-sweep, a one-CPU mask. It ends within the point's timeout, every
point has one row (ok, or failed saying why), no process of it outlives it, and none runs
outside the mask it was given. (SIGTERM and SIGKILL to the sweep and two sweeps on one CSV:
test_sweep.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import cli_env, read_rows
from tests.processes import command_line, descendants, running

PLAN = """
name: faults
timeout_s: {timeout}
fixed: {{accelerator: cpu, n_iters: 100, warmup_steps: 1, max_noise: 50, max_host_busy: 100}}
runs:
  - models: [steady]
    batch_sizes: [2, 3, 4]
"""


def _sweep(tmp_path: Path, timeout: float, **popen) -> tuple[subprocess.Popen, Path]:
    plan, out = tmp_path / "plan.yaml", tmp_path / "rows.csv"
    plan.write_text(PLAN.format(timeout=timeout))
    cmd = [sys.executable, "-m", "dlbench", "sweep", str(plan), "--output", str(out)]
    proc = subprocess.Popen(cmd, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, **popen)  # fmt: skip
    return proc, out


def _point_process(sweep: subprocess.Popen) -> tuple[int, int]:
    """The worker and the process it forked for the point it runs, once there is one."""
    deadline = time.time() + 90
    while time.time() < deadline:
        for pid in descendants(sweep.pid):
            below = [c for c in descendants(pid) if running(c)]
            if below and b"sweep-worker" in command_line(pid):
                return pid, below[0]
        time.sleep(0.1)
    raise AssertionError("no point started within 90 s")


def _one_row_each(out: Path) -> list[dict[str, str]]:
    rows = read_rows(out)
    assert sorted(r["batch_size"] for r in rows) == ["2", "3", "4"]  # one row a point
    return rows


@pytest.mark.e2e
@pytest.mark.parametrize("who", ["worker", "point"])
def test_a_killed_worker_or_point_costs_that_point_only(tmp_path, who):
    sweep, out = _sweep(tmp_path, timeout=60)
    worker, point = _point_process(sweep)
    os.kill(worker if who == "worker" else point, signal.SIGKILL)
    _, err = sweep.communicate(timeout=120)
    assert sweep.returncode == 1, err  # a failed point: CI must see it
    rows = _one_row_each(out)
    failed = [r for r in rows if r["status"] != "ok"]
    assert len(failed) == 1 and "killed by SIGKILL" in failed[0]["error"]
    assert not [p for p in (worker, point) if running(p)]


@pytest.mark.e2e
def test_a_stopped_point_ends_at_its_timeout_and_the_sweep_goes_on(tmp_path):
    # the next points' fresh worker imports torch on a loaded host: that is not their time
    timeout = 12
    sweep, out = _sweep(tmp_path, timeout=timeout)
    worker, point = _point_process(sweep)
    os.kill(point, signal.SIGSTOP)
    began = time.monotonic()
    _, err = sweep.communicate(timeout=180)
    assert sweep.returncode == 1, err
    rows = _one_row_each(out)
    failed = [r for r in rows if r["status"] != "ok"]
    assert len(failed) == 1, [(r["status"], r.get("error", "")[-300:]) for r in failed]
    [stuck] = failed
    assert stuck["status"] == "timeout" and f"timed out after {timeout} s" in stuck["error"]
    assert time.monotonic() - began < 2 * timeout + 60  # the others' own seconds besides
    assert not [p for p in (worker, point) if running(p)]


@pytest.mark.e2e
def test_under_a_one_cpu_mask_every_process_of_the_sweep_stays_on_it(tmp_path):
    sweep, out = _sweep(tmp_path, timeout=60, preexec_fn=lambda: os.sched_setaffinity(0, {0}))
    seen: set[str] = set()
    while sweep.poll() is None:
        for pid in descendants(sweep.pid):
            for task in Path(f"/proc/{pid}/task").glob("*"):
                try:
                    status = (task / "status").read_text()
                except OSError:
                    continue
                seen.update(
                    line.split()[1] for line in status.splitlines()
                    if line.startswith("Cpus_allowed_list")
                )  # fmt: skip
        time.sleep(0.2)
    assert sweep.returncode == 0, sweep.stderr.read()
    assert seen == {"0"}
    assert all(r["status"] == "ok" for r in _one_row_each(out))
