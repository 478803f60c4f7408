"""Power-limit sweeps against the fake NVML: the original limit comes back on every exit path."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from dlbench.errors import UserError
from dlbench.sweep.plan_file import parse_plan
from dlbench.sweep.power import PowerLimiter, has_admin_rights
from dlbench.sweep.runner import SweepRunner
from tests import fake_nvml
from tests.conftest import read_rows, run_cli
from tests.sweep.test_sweep import env_with

ORIGINAL_W = 650.0

POWER_PLAN = """
name: power
timeout_s: 120
fixed: {accelerator: cpu, n_iters: 2, warmup_steps: 0}
runs:
  - models: [timm:test_resnet]
    batch_sizes: [2]
    resolutions: [[32, 32]]
    power_limits: [300, 100]
  - models: [fault_crash]
    batch_sizes: [2]
    power_limits: [400]
"""


@pytest.fixture
def fake_gpu(tmp_path, monkeypatch):
    state = tmp_path / "nvml.json"
    fake_nvml.write_state(state, [{"limit_w": ORIGINAL_W, "min_limit_w": 200.0}])
    for key, value in fake_nvml.environment(state).items():
        monkeypatch.setenv(key, value)
    return state


def limit_of(state) -> float:
    return fake_nvml.read_state(state)["gpus"][0]["limit_w"]


def history_of(state) -> list[float]:
    return fake_nvml.read_state(state)["gpus"][0].get("limit_history", [])


@pytest.mark.e2e
def test_normal_end_with_a_killed_child_restores_and_records(fake_gpu, tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", env_with()["PYTHONPATH"])
    csv_path = tmp_path / "power.csv"
    runner = SweepRunner(parse_plan(POWER_PLAN), csv_path, allow_power_changes=True, settle_s=0)
    outcome = runner.run()
    assert [p.status for p in outcome.points] == ["ok", "ok", "error"]
    assert limit_of(fake_gpu) == ORIGINAL_W
    assert history_of(fake_gpu) == [300.0, 200.0, 400.0, ORIGINAL_W]  # 100 W clamped to 200
    rows = read_rows(csv_path)
    assert [r["power_limit_request_w"] for r in rows] == ["300", "100", "400"]
    assert [r.get("power_limit_w") for r in rows[:2]] == ["300.0", "200.0"]  # child read it
    assert "SIGKILL" in rows[2]["error"]


@pytest.mark.e2e
def test_exception_mid_sweep_restores(fake_gpu, tmp_path, monkeypatch):
    runner = SweepRunner(parse_plan(POWER_PLAN), tmp_path / "p.csv", True, settle_s=0)
    calls = []

    def explode(point, run_id, tags, result):
        calls.append(point)
        if len(calls) == 2:
            raise RuntimeError("boom")
        return "ok"

    monkeypatch.setattr(runner.rows, "status", explode)
    with pytest.raises(RuntimeError, match="boom"):
        runner.run()
    assert limit_of(fake_gpu) == ORIGINAL_W


@pytest.mark.e2e
def test_sigterm_mid_sweep_restores(fake_gpu, tmp_path):
    plan_file = tmp_path / "power.yaml"
    plan_file.write_text(POWER_PLAN)
    cmd = [
        sys.executable,
        "-m",
        "dlbench",
        "sweep",
        str(plan_file),
        "--output",
        str(tmp_path / "p.csv"),
        "--allow-power-changes",
        "--settle-s",
        "0",
    ]
    proc = subprocess.Popen(
        cmd, env=env_with(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.time() + 60
    while time.time() < deadline and limit_of(fake_gpu) == ORIGINAL_W:
        time.sleep(0.1)
    assert limit_of(fake_gpu) == 300.0
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert limit_of(fake_gpu) == ORIGINAL_W


@pytest.mark.e2e
def test_power_plan_needs_the_explicit_flag(fake_gpu, tmp_path):
    plan_file = tmp_path / "power.yaml"
    plan_file.write_text(POWER_PLAN)
    out = run_cli("sweep", str(plan_file), "--output", str(tmp_path / "p.csv"))
    assert out.returncode == 2 and "--allow-power-changes" in out.stderr
    assert history_of(fake_gpu) == []


def test_missing_rights_and_refusals_are_clear(fake_gpu):
    with pytest.raises(UserError, match="root or CAP_SYS_ADMIN"):
        PowerLimiter(1, settle_s=0, admin=False)
    state = fake_nvml.read_state(fake_gpu)
    state["can_set"] = False
    fake_gpu.write_text(__import__("json").dumps(state))
    with (
        PowerLimiter(1, settle_s=0, admin=True) as limiter,
        pytest.raises(UserError, match="refused"),
    ):
        limiter.apply(300)


def test_capability_parsing(tmp_path):
    status = tmp_path / "status"
    status.write_text("Name:\tx\nCapEff:\t0000000000200000\n")
    assert has_admin_rights(status, euid=1000)
    status.write_text("CapEff:\t00000000a80425fb\n")  # docker's default set: no SYS_ADMIN
    assert not has_admin_rights(status, euid=1000)
    assert has_admin_rights(status, euid=0)
