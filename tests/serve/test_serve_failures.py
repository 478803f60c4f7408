"""A serve load that cannot go on ends cleanly: a model server that fails mid-load answers every
query, LoadGen is not waited for, the command ends with one error line and its own exit code,
the CSV keeps its earlier rows and gains one that says why; a signal likewise. And every serve
row carries the load's telemetry window (a fake NVML on the CPU), which its verdict reads."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from dlbench.results.store import CsvStore
from tests import fake_nvml
from tests.analysis.rows import benchmark_row
from tests.conftest import cli_env, run_cli

FAILING = ["--accelerator", "cpu", "--model", "serve_fail", "--precision", "32", "--no-compile",
           "--max-batch", "4", "--min-duration", "45", "--queries", "100000"]  # fmt: skip
TINY = ["--accelerator", "cpu", "--model", "timm:test_resnet", "--width", "32", "--height",
        "32", "--precision", "32", "--no-compile", "--max-batch", "4"]  # fmt: skip


def _earlier_rows(path) -> dict[str, str]:
    CsvStore(path).append({k: str(v) for k, v in benchmark_row(run_id="earlier").items()})
    return CsvStore(path).rows()[0]


def _kept(before: dict[str, str], after: dict[str, str]) -> bool:
    """The earlier row as it was (a row with new columns widens the header; its cells stay)."""
    return all(after[k] == v for k, v in before.items())


@pytest.mark.parametrize(
    "scenario",
    [
        "single-stream",
        pytest.param("server", marks=pytest.mark.e2e),
        pytest.param("offline", marks=pytest.mark.e2e),
    ],
)
@pytest.mark.e2e
def test_a_server_that_fails_mid_load_ends_in_one_line_with_every_query_answered(
    tmp_path, scenario
):
    # 45 s at a rate: few enough queries (900) that a loaded host's offline rate answers them
    rate = ["--qps", "20", "--queries", "1"] if scenario == "server" else []
    rows = failed_mid_load(tmp_path / "serve.csv", [*FAILING, "--scenario", scenario, *rate])
    assert rows[1]["run_kind"] == "serve" and "injected" in rows[1]["error"]


def failed_mid_load(out, args: list[str]) -> list[dict[str, str]]:
    """`dlbench serve ARGS` of a model that fails mid-load, after an earlier row: it ends within
    a minute (LoadGen's 45 s load is not waited for), exit 1, one error line naming the
    failure; the earlier row kept and one row of its own, status error. The rows."""
    before = _earlier_rows(out)
    began = time.monotonic()
    done = run_cli("serve", *args, "--output", out, timeout=120)
    assert time.monotonic() - began < 60
    assert done.returncode == 1, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in done.stderr
    assert "the model server failed mid-load" in errors[0] and "injected" in errors[0]
    rows = CsvStore(out).rows()
    assert _kept(before, rows[0])
    assert [r["status"] for r in rows] == ["ok", "error"]
    return rows


@pytest.mark.e2e
def test_a_signal_mid_load_ends_the_run_with_its_code_and_a_row(tmp_path):
    out = tmp_path / "serve.csv"
    before = _earlier_rows(out)
    args = ["serve", *TINY, "--scenario", "single-stream", "--min-duration", "120",
            "--queries", "100000", "--output", str(out)]  # fmt: skip
    proc = subprocess.Popen([sys.executable, "-m", "dlbench", *args], env=cli_env(),
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        for line in proc.stderr:  # the load has begun
            if line.startswith("LoadGen: a single-stream load"):
                break
        time.sleep(1.0)
        proc.send_signal(signal.SIGTERM)
        err = proc.stderr.read()
        code = proc.wait(timeout=30)
    finally:
        proc.kill()
    assert code == 143, err  # not 139: no crash under LoadGen's running thread
    assert "interrupted by SIGTERM" in err and "Traceback" not in err
    rows = CsvStore(out).rows()
    assert _kept(before, rows[0])
    assert [r["status"] for r in rows] == ["ok", "interrupted"]


@pytest.mark.e2e
def test_a_serve_row_carries_the_loads_telemetry_and_energy_per_query(tmp_path):
    state = tmp_path / "nvml.json"
    fake_nvml.write_state(state, [{"power_w": 250.0, "processes": 1}])
    env = {**cli_env(), **fake_nvml.environment(state)}
    out = tmp_path / "serve.csv"
    done = run_cli("serve", *TINY, "--scenario", "offline", "--min-duration", "1",
                   "--queries", "64", "--output", out, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    [row] = CsvStore(out).rows()
    assert row["telemetry_backend"] == "nvml"
    assert float(row["avg_power_w"]) == pytest.approx(250.0, rel=0.01)
    energy, queries = float(row["energy_j"]), int(row["serve_queries"])
    assert float(row["energy_per_sample_j"]) == pytest.approx(energy / queries)
    assert row["idle_power_w"] and row["energy_above_idle_per_sample_j"]
    assert row["throttle_pct"] != "" and row["sm_clock_avg_mhz"] != ""
    assert row["other_gpu_processes"] == "1"  # a foreign process on the GPU
    assert "other_processes" in row["verdict_reasons"]  # read as every row's is
    assert os.path.exists(out.parent / f"{out.stem}.loadgen")
