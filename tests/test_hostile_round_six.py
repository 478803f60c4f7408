"""Hostile input and faults, round six (issue 93): a record the cache folder cannot keep costs no
measured row; what is read back from the cache folder or a CSV is held to what it can be; a
plan's LLM cache is checked when the plan is read; the reference script refuses before it makes
anything; a forked point refuses a parent that started CUDA, cannot be held open by a
grandchild, is stopped whole and leaves its output where the user can read it; a signal gives one
line naming the signal that came."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dlbench import caches
from dlbench.config import RunConfig
from dlbench.engine.acceleration.compile_choice import COMPILE_CHOICE
from dlbench.engine.acceleration.graph_policy import GRAPH_CHOICE_FILE, GraphRecord
from dlbench.engine.acceleration.measured_choice import point_key
from dlbench.errors import UserError
from dlbench.results.store import CsvStore
from dlbench.subprocesses import run_forked
from dlbench.workloads import get_workload
from dlbench.workloads.flops import FLOPS_FILE, recorded_flops_per_sample
from tests.analysis.rows import benchmark_row, write_rows
from tests.conftest import ROOT, TINY, cli_env, read_rows, refused, run_cli

TINY_INFER = ["infer", "--model", "timm:test_resnet", *TINY, "--n-iters", "2",
              "--warmup-steps", "0"]  # fmt: skip


@pytest.fixture(autouse=True)
def _warned_afresh():
    caches._REFUSED.clear()
    yield
    caches._REFUSED.clear()


@pytest.mark.parametrize("name", [GRAPH_CHOICE_FILE, COMPILE_CHOICE.file, FLOPS_FILE, "any.json"])
def test_a_record_the_cache_folder_refuses_is_one_warning_never_an_error(tmp_path, capsys, name):
    (tmp_path / name).mkdir()  # a folder where the record goes
    assert caches.keep_record(tmp_path, name, {"a": 1}) is False
    assert caches.keep_record(tmp_path, name, {"a": 2}) is False  # said once
    err = capsys.readouterr().err
    assert err.count("warning:") == 1 and name in err and "the row is kept" in err
    assert caches.keep_record(None, name, {}) is False  # a cold run keeps nothing, silently


def test_the_graph_and_compile_records_write_through_a_folder_that_refuses_them(tmp_path):
    from dlbench.engine.acceleration.graphs import GraphedStep

    (tmp_path / GRAPH_CHOICE_FILE).mkdir()
    (tmp_path / COMPILE_CHOICE.file).mkdir()
    GraphRecord(tmp_path, "k").remember(GraphedStep(None, True, ""))  # no IsADirectoryError
    steps = COMPILE_CHOICE.record(tmp_path, "k", "compiled", 0.001, {})
    assert steps == {"compiled": 0.001}


@pytest.mark.e2e
def test_a_run_whose_cache_records_cannot_be_written_keeps_its_row(tmp_path):
    cache = tmp_path / "cache"
    out = tmp_path / "rows.csv"
    first = run_cli(
        *TINY_INFER, "--output", out, env={**cli_env(), "DLBENCH_CACHE_DIR": str(cache)}
    )
    assert first.returncode == 0, first.stderr
    [folder] = [p for p in cache.iterdir() if p.is_dir()]
    for name in (FLOPS_FILE, GRAPH_CHOICE_FILE, COMPILE_CHOICE.file, "cudnn_search.json"):
        path = folder / name
        if path.exists():
            path.unlink()
        path.mkdir()
    again = run_cli(
        *TINY_INFER, "--output", out, env={**cli_env(), "DLBENCH_CACHE_DIR": str(cache)}
    )
    assert again.returncode == 0, again.stderr
    assert "Traceback" not in again.stderr and len(read_rows(out)) == 2
    assert float(read_rows(out)[1]["samples_per_s"]) > 0


@pytest.mark.parametrize(
    "kept", [{"per_sample": -8388096.0, "method": "x"}, {"per_sample": math.inf, "method": "x"},
             {"per_sample": True, "method": "x"}, {"per_sample": "12", "method": "x"},
             {"per_sample": 5.0, "method": 7}, {"per_sample": 0.0, "method": "x"}, []],
)  # fmt: skip
def test_a_flop_count_read_back_is_held_to_what_it_can_be(tmp_path, capsys, kept):
    from dlbench.workloads import InputShape

    workload = get_workload("timm:test_resnet")
    shape = InputShape(32, 32, 0)
    key = f"{workload.name}|32x32x0|infer"
    (tmp_path / FLOPS_FILE).write_text(json.dumps({key: kept}))
    count = recorded_flops_per_sample(workload, shape, "infer", tmp_path)
    assert count is not None and math.isfinite(count.per_sample) and count.per_sample > 0
    assert count.per_sample != 5.0
    if isinstance(kept, dict):
        assert "counted again" in capsys.readouterr().err


@pytest.mark.parametrize("step", ["Infinity", "true", "-1", "0", '"0.001"', "NaN", "1e400"])
def test_a_recorded_step_that_cannot_be_is_no_step(tmp_path, step):
    (tmp_path / COMPILE_CHOICE.file).write_text(f'{{"k": {{"compiled": 0.002, "eager": {step}}}}}')
    assert COMPILE_CHOICE.recorded(tmp_path) == {"k": {"compiled": 0.002}}
    assert not COMPILE_CHOICE.other_wins(COMPILE_CHOICE.recorded(tmp_path)["k"])


def test_a_choice_is_kept_per_every_setting_that_decides_the_measurement():
    base = {"model": "llm_tiny", "mode": "infer", "batch_size": 1}
    keys = {
        point_key(RunConfig.of(**base, **extra), "compile")
        for extra in ({}, {"llm_impl": "hf"}, {"strategy": "ddp"}, {"data_on": "host"},
                      {"seq_len": 64}, {"prompt_len": 16}, {"attention": "math"})
    }  # fmt: skip
    assert len(keys) == 7  # each setting its own record
    assert point_key(RunConfig.of(**base, compile=True), "compile") == point_key(
        RunConfig.of(**base, compile=False), "compile"
    )  # the choice's own setting is what it chooses


def test_a_tree_with_local_changes_keeps_its_caches_apart():
    env = {"gpu_name": "NVIDIA H200", "driver": "580", "torch": "2.11", "dlbench": "0.2.0",
           "dlbench_commit": "f9268a7" * 5}  # fmt: skip
    clean, dirty = caches.cache_key(env), caches.cache_key({**env, "dlbench_dirty": True})
    assert clean != dirty and dirty.endswith("-dirty")


@pytest.mark.parametrize(
    ("column", "value"),
    [("samples_per_s", "inf"), ("samples_per_s", "-5"), ("step_time_p99_ms", "-24"),
     ("serve_ttft_p99_ms", "-123.456"), ("serve_tpot_p50_ms", "inf"),
     ("serve_output_tokens_per_s", "-2219"), ("energy_j", "inf"), ("latency_p50_ms", "-0.5")],
)  # fmt: skip
def test_compare_and_report_refuse_an_impossible_figure_in_one_line(
    dlbench, tmp_path, column, value
):
    rows = [benchmark_row(model=m, samples_per_s=1000.0, step_time_p99_ms=2.0) for m in ("a", "b")]
    base = write_rows(tmp_path / "base.csv", rows)
    bad = [dict(rows[0]), {**rows[1], column: value}]
    cand = write_rows(tmp_path / "cand.csv", bad)
    before = cand.read_bytes()
    for args in (
        ["compare", base, cand],
        ["compare", cand],
        ["report", cand, "--out", tmp_path / "r"],
    ):
        refused(dlbench(*args), column)
    assert cand.read_bytes() == before
    _, _, warned = dlbench("compare", cand, base)  # as the baseline: that row does not count
    assert "do not count" in warned, warned  # its figure's, or another cell's


def test_a_published_interval_edited_to_inf_widens_no_band(tmp_path):
    from dlbench.results.published import band_pct

    row = benchmark_row(throughput_interval_pct=0.5)
    published = [benchmark_row(throughput_interval_pct="inf", process_spread_pct="-3")]
    assert band_pct(row, published) == 5.0


def test_a_plans_llm_cache_that_holds_no_request_is_refused_when_the_plan_is_read(tmp_path):
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        "name: t\nserve:\n  - {model: llm_tiny, scenario: offline, accelerator: cpu, "
        'precision: "32", compile: false, kv_cache_gb: 0.000001}\n'
    )
    out = tmp_path / "rows.csv"
    done = run_cli("sweep", plan, "--output", out)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "--kv-cache-gb" in done.stderr and "cannot hold one request" in done.stderr
    assert not out.exists()


def test_the_reference_script_refuses_before_it_makes_anything(tmp_path):
    env = {**cli_env(), "REFERENCE_DIR": str(tmp_path / "out"), "PATH": "/usr/bin:/bin"}
    env["PATH"] = f"{Path(sys.executable).parent}:/usr/bin:/bin"  # python3, git; no nvidia-smi
    done = subprocess.run(["bash", "benchmarks/reference.sh", "default"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2 and "command not found" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("error: ")
    assert not (tmp_path / "out").exists()


def test_a_fork_after_cuda_started_is_refused_in_one_line(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    with pytest.raises(UserError, match="cannot measure in a fresh forked process"):
        run_forked(lambda: (0, ""))


def test_a_grandchild_that_keeps_the_childs_files_cannot_hold_the_answer(tmp_path):
    def call():
        subprocess.Popen(["sleep", "30"], start_new_session=False)  # inherits the child's fds
        return 0, "done"

    began = time.monotonic()
    result = run_forked(call, lambda: {"seen": 1})
    assert time.monotonic() - began < 10 and result.returncode == 0
    assert result.learned == {"seen": 1}


STUBBORN = """
import os, signal, sys, time
sys.path[:0] = {paths!r}
from dlbench import subprocesses
from dlbench.signals import interruptible
subprocesses.KILL_GRACE_S = 1.0

def stubborn():
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a child that will not hear SIGTERM
    print(os.getpid(), file=open({pidfile!r}, "w"), flush=True)
    time.sleep(60)
    return 0, ""

try:
    with interruptible():
        subprocesses.run_forked(stubborn)
except BaseException as exc:
    print(type(exc).__name__)
"""


def test_a_forked_child_that_ignores_sigterm_is_killed_within_its_grace(tmp_path):
    pidfile = tmp_path / "child.pid"
    paths = [str(ROOT / "src"), str(ROOT)]
    script = STUBBORN.format(paths=paths, pidfile=str(pidfile))
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    for _ in range(100):
        if pidfile.exists() and pidfile.read_text().strip():
            break
        time.sleep(0.1)
    child = int(pidfile.read_text())
    began = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    assert "Interrupted" in out and time.monotonic() - began < 10
    with pytest.raises(ProcessLookupError):
        os.kill(child, 0)


@pytest.mark.e2e
@pytest.mark.parametrize(("sent", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_processes_stopped_by_a_signal_say_so_once_naming_it(tmp_path, sent, code):
    out = tmp_path / "rows.csv"
    args = [sys.executable, "-m", "dlbench", "infer", "--model", "steady", "--batch-size", "2",
            *TINY, "--n-iters", "2000", "--processes", "3", "--output", str(out)]  # fmt: skip
    proc = subprocess.Popen(args, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)  # fmt: skip
    time.sleep(12)  # imports, then the first process's window
    os.killpg(proc.pid, sent) if sent == signal.SIGINT else proc.send_signal(
        sent
    )  # Ctrl-C: the group
    _, err = proc.communicate(timeout=60)
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert proc.returncode == code, err
    assert len(errors) == 1 and signal.Signals(sent).name in errors[0], err


@pytest.mark.e2e
def test_a_crashed_points_output_is_kept_and_the_summary_names_where(tmp_path):
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        "name: crash\nfixed: {accelerator: cpu, n_iters: 4, warmup_steps: 1}\nruns:\n"
        "  - {models: [steady, fault_crash], modes: [train], batch_sizes: [4]}\n"
    )
    out = tmp_path / "rows.csv"
    done = run_cli("sweep", plan, "--output", out, "--no-recheck", timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    logs = tmp_path / "rows.logs"
    assert f"each point's output: {logs}" in " ".join(done.stdout.split())
    rows = {r["model"]: r for r in read_rows(out)}
    crashed = logs / f"{rows['fault_crash']['run_id']}.log"
    steady = (logs / f"{rows['steady']['run_id']}.log").read_text()
    assert crashed.exists() and steady  # each point's own file, the finished one's output too
    assert "killed by SIGKILL" in rows["fault_crash"]["error"]
    assert len(CsvStore(out).rows()) == 2  # the CSV intact: a row a point
