"""A lost or stopped rank ends the run: the survivors stop within the collective timeout (plus the
probe and the launcher's own clean-up), rank 0 writes one row, status=failed, naming the rank,
the exit is non-zero and no process is left. Real processes, gloo on the CPU: a rank of the
`fault_lost_rank` workload sends itself SIGKILL or SIGSTOP inside the measured window.
torchrun here; srun in tests/test_slurm.py."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from dlbench.engine.distribution.fabric import own_processes_in_allocation
from dlbench.engine.distribution.lost_ranks import RankLost
from tests.conftest import cli_env, read_rows, run_cli
from tests.engine.distribution.test_distributed import _free_port

pytestmark = pytest.mark.cluster
LOST = ["--model", "fault_lost_rank", "--accelerator", "cpu", "--batch-size", "4", "--n-iters",
        "30", "--warmup-steps", "2", "--collective-timeout", "15"]  # fmt: skip
# The collective timeout also bounds the ranks' start (Lightning gives it to the store), and a
# rank starts seconds after the first on two busy CI cores: 15 s, not less.
# Start, the collective timeout, the probe's, and (torchrun) the agent's wait before SIGKILL
BOUND_S = {"KILL": 60, "STOP": 120}


def _left_running(marker: str) -> list[str]:
    ps = subprocess.run(["ps", "-eo", "pid,stat,args"], capture_output=True, text=True).stdout
    return [line for line in ps.splitlines() if marker in line and "ps -eo" not in line]


def _assert_one_failed_row(csv: Path, world_size: str = "2") -> dict[str, str]:
    [row] = read_rows(csv)
    assert row["status"] == "failed" and row["error"].startswith("rank 1 lost: "), row["error"]
    assert row["world_size"] == world_size and "GLHF" not in row["error"]
    return row


@pytest.mark.parametrize("signal_name", ["KILL", "STOP"])
def test_a_rank_lost_under_torchrun_fails_the_run_with_one_row(tmp_path, signal_name):
    csv = tmp_path / "lost.csv"
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
               "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{_free_port()}",
               "-m", "dlbench", "train", *LOST, "--devices", "2", "--output", str(csv)]  # fmt: skip
    env = {**cli_env(), "DLBENCH_FAULT_SIGNAL": signal_name}
    began = time.monotonic()
    out = subprocess.run(command, env=env, capture_output=True, text=True, timeout=180)
    took = time.monotonic() - began
    assert out.returncode != 0
    assert took < BOUND_S[signal_name], took
    _assert_one_failed_row(csv)
    assert "error: rank 1 lost" in out.stderr
    assert _left_running(str(csv)) == []


@pytest.mark.parametrize("signal_name", ["KILL", "STOP"])
def test_a_rank_lost_under_lightnings_launcher_is_recorded_before_anything_is_killed(
    tmp_path, signal_name
):
    csv = tmp_path / "lost.csv"
    env = {**cli_env(), "DLBENCH_FAULT_SIGNAL": signal_name}
    out = run_cli("train", *LOST, "--devices", "2", "--output", csv, env=env, timeout=120)
    assert out.returncode == 1, out.stderr
    assert out.stderr.strip().splitlines()[-1].startswith("error: rank 1 lost: ")
    _assert_one_failed_row(csv)
    assert _left_running(str(csv)) == []  # the stopped rank too: rank 0 started it, ended it


def test_a_sweep_of_ddp_points_goes_on_after_a_lost_rank(tmp_path):
    plan = tmp_path / "ddp.yaml"
    plan.write_text(
        "fixed: {accelerator: cpu, devices: 2, n_iters: 30, warmup_steps: 2,\n"
        "        collective_timeout: 15}\n"
        "runs:\n"
        "  - {models: [fault_lost_rank], modes: [train], batch_sizes: [4]}\n"
        "  - {models: [steady], modes: [train], batch_sizes: [4]}\n"
    )
    csv = tmp_path / "sweep.csv"
    out = run_cli("sweep", plan, "--output", csv, timeout=240)
    assert out.returncode == 1, out.stderr  # a failed point: CI must see it
    rows = read_rows(csv)
    assert [(r["model"], r["status"]) for r in rows] == [
        ("fault_lost_rank", "failed"), ("steady", "ok")
    ]  # fmt: skip
    assert rows[0]["error"].startswith("rank 1 lost: ")
    assert _left_running(str(csv)) == []


def test_the_cause_reads_as_one_line_without_gloos_source_and_advice():
    cause = RuntimeError(
        "[/__w/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:545] Read error "
        "[127.0.0.1]:9137: Connection reset by peer. This is typically caused by a remote "
        "worker hanging. GLHF!\nmore"
    )
    lost = RankLost([1, 3], 0, 4, cause)
    assert str(lost) == "rank 1, 3 lost: Read error [127.0.0.1]:9137: Connection reset by peer"
    assert lost.exit_code == 1
    assert str(RankLost([], 2, 4, cause)).startswith("a collective failed (rank 0 names")


@pytest.mark.parametrize(
    ("variables", "world_size", "own"),
    [
        ({}, 2, False),  # no SLURM: Lightning finds what there is
        ({"SLURM_NTASKS": "2", "SLURM_STEP_ID": "0"}, 2, False),  # srun started the ranks
        ({"SLURM_NTASKS": "1", "SLURM_STEP_ID": "0"}, 2, True),  # one task, two ranks: ours
        ({"SLURM_NTASKS": "2"}, 2, True),  # the batch script itself, no srun step
        ({"SLURM_NTASKS": "2", "TORCHELASTIC_RUN_ID": "x"}, 2, False),  # torchrun inside
    ],
)
def test_who_starts_the_ranks_inside_a_slurm_allocation(monkeypatch, variables, world_size, own):
    for name in ("SLURM_NTASKS", "SLURM_STEP_ID", "TORCHELASTIC_RUN_ID"):
        monkeypatch.delenv(name, raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    environment = own_processes_in_allocation(world_size)
    assert (type(environment).__name__ == "LightningEnvironment") is own
