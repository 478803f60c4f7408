"""Every second of a run in a column: the command's clock (dlbench.startup.CommandClock) laps
its phases, a row's phase columns sum to its process_wall_s, and that is the process's own wall
time, from the interpreter's start to its exit (which follows the row at once)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from dlbench.startup import EXEC_AGE_LIMIT_S, CommandClock, interpreter_age_s
from tests.conftest import TINY, cli_env, read_rows

# The columns that divide a row's process_wall_s, in the order the process spends them.
PHASES = (
    "startup_s",
    "setup_s",
    "auto_batch_s",
    "build_s",
    "baseline_s",
    "warmup_s",
    "wall_window_s",
    "profile_s",
    "finish_s",
)
RUN = ["infer", "--model", "timm:test_resnet", *TINY, "--n-iters", "5", "--warmup-steps", "1"]


def _phase_sum(row: dict[str, str]) -> float:
    return sum(float(row[c]) for c in PHASES if row.get(c))


def test_laps_give_each_phase_the_seconds_since_the_last_and_sum_to_the_elapsed():
    clock = CommandClock(started=100.0)
    assert clock.lap("startup_s", now=101.5) == 1.5
    clock.lap("setup_s", now=104.0)
    clock.lap("startup_s", now=104.25)  # a phase met twice adds up
    assert clock.laps == {"startup_s": 1.75, "setup_s": 2.5}
    assert sum(clock.laps.values()) == clock.elapsed_s(clock.last) == 4.25


@pytest.mark.parametrize(
    ("age", "reaped", "expected"),
    [
        (0.4, False, 0.4),  # a fresh interpreter: its own start counts
        (0.4, True, 0.0),  # a shell ran commands, then exec'd Python
        (EXEC_AGE_LIMIT_S + 1, False, 0.0),  # far older than any interpreter's start
    ],
)
def test_the_interpreter_counts_from_its_start_unless_a_shell_exec_d_it(age, reaped, expected):
    assert interpreter_age_s(lambda: age, lambda: reaped) == expected


def test_a_fresh_processes_phases_sum_to_its_wall_time(tmp_path):
    """From before the fork to the process's end, against the row's own account."""
    output = tmp_path / "r.csv"
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "dlbench", *RUN, "--output", str(output)],
        capture_output=True,
        text=True,
        env=cli_env(),
        timeout=240,
    )
    wall = time.monotonic() - began
    assert done.returncode == 0, done.stderr
    [row] = read_rows(output)
    total = float(row["process_wall_s"])
    assert abs(_phase_sum(row) - total) < 1.0, {c: row.get(c) for c in PHASES}
    assert total <= wall and wall - total < 1.0, (wall, total)  # the start and the exit


SHELL_BEFORE_EXEC_S = 8.0  # under EXEC_AGE_LIMIT_S: the reaped child is what tells


@pytest.mark.e2e
def test_startup_counts_from_dlbench_where_a_shell_ran_long_before_exec_ing_it(tmp_path):
    """`bash -c 'make a venv && dlbench ...'` runs dlbench in the shell's own process (bash
    execs the last command): the kernel's start time is the shell's, seconds before dlbench."""
    output, stamp = tmp_path / "r.csv", tmp_path / "exec_at"
    busy = f"{sys.executable} -c 'sum(range(30_000_000))'"  # a child with CPU time to reap
    stamped = f"{sys.executable} -c 'import time; print(time.monotonic())' > {stamp}"
    command = " ".join([sys.executable, "-m", "dlbench", *RUN, "--output", str(output)])
    script = f"{busy}; sleep {SHELL_BEFORE_EXEC_S:g}; {stamped}; exec {command}"
    done = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, env=cli_env(), timeout=240
    )
    ended = time.monotonic()
    assert done.returncode == 0, done.stderr
    [row] = read_rows(output)
    assert float(row["startup_s"]) < SHELL_BEFORE_EXEC_S
    assert float(row["process_wall_s"]) <= ended - float(stamp.read_text())
