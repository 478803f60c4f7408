"""Sweeps with real child processes: failures isolated, resume, SIGTERM, auto batch size."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dlbench.engine.autobatch import (
    MEMORY_FRACTION,
    Probe,
    confirm_batch_size,
    largest_fitting,
    search_batch_size,
)
from dlbench.errors import UserError
from dlbench.sweep.plan_file import load_plan, parse_plan
from tests.conftest import cli_env, read_rows, run_cli
from tests.processes import children, command_line, running

FAULT_ENV = {"DLBENCH_FAULT_MAX_BATCH": "16"}

FAULT_PLAN = """
name: faults
timeout_s: 25
fixed: {accelerator: cpu, n_iters: 2, warmup_steps: 1}
runs:
  - models: [fault_oom]
    modes: [train, infer]
    batch_sizes: [8, 32]
  - models: [fault_crash, fault_hang]
    batch_sizes: [4]
  - models: [timm:test_resnet]
    modes: [train, infer]
    batch_sizes: [4]
    resolutions: [[32, 32]]
"""

SMALL_PLAN = """
name: small
timeout_s: 120
fixed: {accelerator: cpu, n_iters: 60, warmup_steps: 0, max_host_busy: 100}
runs:
  - models: [steady]
    modes: [train, infer]
    batch_sizes: [2, 4]
"""


def env_with(**extra: str) -> dict[str, str]:
    return {**cli_env(), **extra}


def test_plan_expands_axes_and_blocks():

    plan = parse_plan(FAULT_PLAN)
    points = plan.points()
    assert len(points) == 8
    assert points[0].cli_args()[:1] == ["train"]
    assert {p.flags["model"] for p in points} == {
        "fault_oom",
        "fault_crash",
        "fault_hang",
        "timm:test_resnet",
    }
    assert load_plan("quick").points() and load_plan("default").points()


def test_a_fixed_flag_is_not_undone_by_the_default_of_an_axis_the_block_leaves_out():
    plan = parse_plan(
        "fixed: {devices: 2, precision: bf16-mixed, batch_size: 8, width: 64, height: 48}\n"
        "runs:\n"
        "  - {models: [resnet50]}\n"
        "  - {models: [vit], devices: [1], batch_sizes: [4], resolutions: [[32, 32]]}\n"
    )
    first, second = (p.config().settings() for p in plan.points())
    keys = ("devices", "precision", "batch_size", "width", "height")
    assert [first[k] for k in keys] == ["2", "bf16-mixed", 8, 64, 48]
    assert [second[k] for k in keys] == ["1", "bf16-mixed", 4, 32, 32]


@pytest.mark.e2e
def test_shards_split_a_plan_into_disjoint_parts_that_cover_it():
    listed = []
    for k in range(3):
        out = run_cli("sweep", "default", "--dry-run", "--shard", f"{k}/3")
        assert out.returncode == 0, out.stderr
        lines = [line.split(None, 1)[1] for line in out.stdout.splitlines()]
        assert all(line.endswith(f"--tag shard={k}/3") for line in lines)
        listed += [line.removesuffix(f" --tag shard={k}/3") for line in lines]
    everything = run_cli("sweep", "default", "--dry-run").stdout.splitlines()
    assert sorted(listed) == sorted(line.split(None, 1)[1] for line in everything)
    assert len(set(listed)) == len(listed) == len(load_plan("default").points())
    bad = run_cli("sweep", "default", "--dry-run", "--shard", "3/3")
    assert bad.returncode == 2 and "--shard" in bad.stderr


@pytest.mark.e2e
def test_only_runs_the_plans_runs_with_a_tag():
    out = run_cli("sweep", "default", "--dry-run", "--only", "purpose=latency")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    latency = [p for p in load_plan("default").points() if p.tags["purpose"] == "latency"]
    assert len(lines) == len(latency) and all("--tag purpose=latency" in x for x in lines)
    assert all("--batch-size 1 " in x for x in lines)
    for bad in ("purpose=speed", "purpose", "=latency"):
        refused = run_cli("sweep", "default", "--dry-run", "--only", bad)
        assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
        assert "--only" in refused.stderr and "purpose=latency" in refused.stderr  # its tags


def test_the_default_plans_launch_bound_points_run_in_one_process_and_the_reference_in_three():
    """A user's plan gives each batch-1 point one process; `--processes 3` (what
    benchmarks/reference.sh runs) measures those points, and only those, in three."""
    plan = load_plan("default")
    counts = {
        (p.flags["model"], p.flags["batch_size"], p.flags.get("processes", 1))
        for p in plan.points()
    }
    assert {c for m, b, c in counts if b == 1} == {1} and {c for m, b, c in counts if b != 1} == {1}
    plan.set_processes(3)
    for point in plan.points():
        expected = 3 if point.flags["batch_size"] == 1 else 1
        assert point.flags.get("processes", 1) == expected, point.label
    with pytest.raises(UserError, match="--processes: no run of plan 'quick' sets processes"):
        load_plan("quick").set_processes(3)


def test_bad_plans_are_user_errors(tmp_path):
    with pytest.raises(UserError, match="unknown axis"):
        parse_plan("runs: [{models: [a], colours: [red]}]")
    with pytest.raises(UserError, match="PLAN"):
        load_plan("no_such_plan")
    with pytest.raises(UserError, match="models"):
        parse_plan("runs: [{modes: [train]}]")


@pytest.mark.e2e
def test_one_failure_never_costs_the_others(tmp_path):
    plan_file = tmp_path / "faults.yaml"
    plan_file.write_text(FAULT_PLAN)
    csv_path = tmp_path / "sweep.csv"
    out = run_cli(
        "sweep", str(plan_file), "--output", str(csv_path), env=env_with(**FAULT_ENV), timeout=400
    )
    assert out.returncode == 1, out.stderr  # CI must see failed points
    assert out.stderr.strip().splitlines()[-1] == (
        "error: 4 of 8 point(s) failed (oom, error, timeout or interrupted); their rows say why"
    )
    rows = read_rows(csv_path)
    assert len(rows) == 8
    by_point = {(r["model"], r["mode"], r["batch_size"]): r for r in rows}
    assert by_point[("fault_oom", "train", "8")]["status"] == "ok"
    assert by_point[("fault_oom", "train", "32")]["status"] == "oom"
    assert by_point[("fault_oom", "infer", "32")]["status"] == "oom"
    crash = by_point[("fault_crash", "train", "4")]
    assert crash["status"] == "error" and "SIGKILL" in crash["error"]
    assert by_point[("fault_hang", "train", "4")]["status"] == "timeout"
    assert by_point[("timm:test_resnet", "infer", "4")]["status"] == "ok"
    assert all(r["sweep"] == "faults" for r in rows)
    assert "oom: 2" in out.stdout and "timeout: 1" in out.stdout


@pytest.mark.e2e
def test_sigterm_mid_sweep_leaves_valid_csv_and_rerun_completes_the_rest(tmp_path):
    plan_file = tmp_path / "small.yaml"
    plan_file.write_text(SMALL_PLAN)
    csv_path = tmp_path / "sweep.csv"
    cmd = [sys.executable, "-m", "dlbench", "sweep", str(plan_file), "--output", str(csv_path)]
    proc = subprocess.Popen(
        cmd, env=env_with(**FAULT_ENV), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.time() + 120
    while time.time() < deadline and not (csv_path.exists() and read_rows(csv_path)):
        time.sleep(0.2)
    time.sleep(1.5)  # the second point is in flight now
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    first = read_rows(csv_path)
    assert 1 <= sum(r["status"] == "ok" for r in first) < 4
    assert {r["status"] for r in first} <= {"ok", "interrupted"}
    # one worker measures one point at a time: the point in flight has its row, the points
    # not yet started none (the rerun measures them)
    assert sum(r["status"] == "interrupted" for r in first) <= 1

    again = run_cli("sweep", str(plan_file), "--output", str(csv_path), env=env_with(**FAULT_ENV))
    assert again.returncode == 0, again.stderr
    rows = read_rows(csv_path)
    ok = [(r["mode"], r["batch_size"]) for r in rows if r["status"] == "ok"]
    assert sorted(ok) == sorted({("train", "2"), ("train", "4"), ("infer", "2"), ("infer", "4")})
    assert "skipped" in again.stdout


def test_largest_fitting_finds_the_limit_within_resolution():
    for limit in (1, 3, 5, 16, 100, 1000, 1900):
        probes: list[int] = []

        def fits(n: int, limit=limit, probes=probes) -> bool:
            probes.append(n)
            return n <= limit

        found = largest_fitting(fits, limit=4096)
        assert limit - max(1, limit // 16) <= found <= limit
        assert len(probes) <= 16, (limit, probes)
    assert largest_fitting(lambda n: False) == 0
    assert largest_fitting(lambda n: True, limit=64) == 64
    assert largest_fitting(lambda n: n <= 5, resolution=0) == 5


def test_batch_size_auto_searches_in_process_and_confirms(monkeypatch):
    """The in-process search, driven on the CPU (where the CLI refuses `auto`: a CPU has no
    memory budget) by a workload that raises torch's OutOfMemoryError above 3."""
    from dlbench.config import RunConfig
    from dlbench.engine.autobatch import search_in_process
    from dlbench.engine.plan import make_plan

    monkeypatch.setenv("DLBENCH_FAULT_MAX_BATCH", "3")
    config = RunConfig.of(model="fault_oom", accelerator="cpu", batch_size=1, warmup_steps=0)
    plan, fabric, search = search_in_process(make_plan(config))
    assert plan.config.workload.batch_size == 3 and fabric is not None
    columns = search.columns()
    assert columns["auto_batch_probes"] == "2:ok 8:oom 5:oom 3:ok 4:oom"  # in this process
    assert columns["auto_batch_s"] < 30


def test_a_search_where_everything_fits_keeps_the_largest_size_it_measured():
    search = search_batch_size(lambda n: Probe(n, True), None, limit=64)
    assert search.batch_size == 64  # it was recorded as 8 while 8192 had fitted
    assert largest_fitting(lambda n: n <= 40, start=16, limit=64) == 40


def test_repeats_and_block_tags_label_the_points():
    plan = parse_plan(
        "repeats: 2\nruns: [{models: [resnet50], batch_sizes: [1], tags: {purpose: latency}}]"
    )
    points = plan.points()
    assert [p.tags for p in points] == [
        {"purpose": "latency", "repeat": "0"},
        {"purpose": "latency", "repeat": "1"},
    ]
    assert points[1].cli_args()[-4:] == ["--tag", "purpose=latency", "--tag", "repeat=1"]


@pytest.mark.e2e
def test_a_repeated_sweep_feeds_compare_its_between_run_spread(tmp_path):
    plan_file = tmp_path / "rep.yaml"
    plan_file.write_text(
        "name: rep\nfixed: {accelerator: cpu, n_iters: 10, warmup_steps: 1, max_noise: 50, "
        "max_host_busy: 100}\n"
        "runs: [{models: [steady], modes: [infer], batch_sizes: [2]}]\n"
    )
    csv_path = tmp_path / "rep.csv"
    args = ["sweep", str(plan_file), "--repeats", "2", "--output", str(csv_path)]
    out = run_cli(*args, env=env_with())
    assert out.returncode == 0, out.stderr
    assert [r["repeat"] for r in read_rows(csv_path)] == ["0", "1"]
    again = run_cli(*args, env=env_with())
    assert again.returncode == 0 and len(read_rows(csv_path)) == 2  # both repeats done
    # Two runs a side leave Student's t at 2 degrees of freedom: a threshold that a busy CI
    # host's spread between two 20 ms-step runs stays inside (5 % needs a quiet one).
    gate = run_cli("compare", str(csv_path), str(csv_path), "--markdown", "--threshold", "20")
    assert gate.returncode == 0, gate.stdout
    assert "| 2/2 " in gate.stdout


def test_default_plan_labels_throughput_and_latency_rows():
    points = load_plan("default").points()
    purposes = {p.tags.get("purpose") for p in points}
    assert purposes == {"throughput", "latency"}
    for point in points:
        batch = int(point.flags["batch_size"])
        if point.tags["purpose"] == "latency":
            assert batch == 1 and point.mode == "infer"
            if point.flags["model"] != "llm_1b":  # generation counts rounds, not queries
                assert point.flags["n_iters"] >= 1000  # a p99 over 1,000 queries
                # compiled or eager is the GPU's measured choice
                # (engine.acceleration.compile_choice)
                assert "compile" not in point.flags
        elif point.flags["model"] != "llm_1b":
            assert batch >= 128  # small batches on an H100 measure kernel launches
    graphed = {p.mode for p in points if p.flags.get("cuda_graphs")}
    assert graphed == {"train", "infer"}  # efficientnet_v2, launch-bound at batch 128


WORKER_PLAN = """
name: worker
timeout_s: 60
fixed: {accelerator: cpu, n_iters: 20, warmup_steps: 2, max_host_busy: 100}
runs:
  - models: [steady]
    modes: [train]
    batch_sizes: [4]
  - models: [fault_crash]
    batch_sizes: [4]
  - models: [steady]
    modes: [infer]
    batch_sizes: [4]
"""


@pytest.mark.e2e
def test_worker_mode_survives_a_crash_and_measures_what_isolated_processes_measure(tmp_path):
    plan_file = tmp_path / "worker.yaml"
    plan_file.write_text(WORKER_PLAN)
    rates = {}
    for isolation in ("process", "worker"):
        csv_path = tmp_path / f"{isolation}.csv"
        out = run_cli(
            "sweep", str(plan_file), "--isolation", isolation, "--output", str(csv_path),
            env=env_with(**FAULT_ENV), timeout=400,
        )  # fmt: skip
        assert out.returncode == 1, out.stderr  # one point failed
        rows = read_rows(csv_path)
        assert [r["status"] for r in rows] == ["ok", "error", "ok"]
        assert "SIGKILL" in rows[1]["error"]
        assert {rows[0]["isolation"], rows[2]["isolation"]} == {isolation}
        rates[isolation] = [float(rows[i]["samples_per_s"]) for i in (0, 2)]
        assert "outside window" in out.stdout and "steady train bs4" in out.stderr
    for worker, process in zip(rates["worker"], rates["process"]):
        assert worker == pytest.approx(process, rel=0.15)  # 20 ms steps: about 200 samples/s


def test_auto_search_finds_a_planted_memory_limit_in_at_most_12_probes():
    gib = 2**30
    for fixed, per_sample, total in [
        (3 * gib, 0.30 * gib, 80 * gib),
        (0.5 * gib, 0.011 * gib, 80 * gib),
        (20 * gib, 2.0 * gib, 141 * gib),
        (1 * gib, 0.9 * gib, 16 * gib),
    ]:
        budget = MEMORY_FRACTION * total

        def probe(n: int, fixed=fixed, per_sample=per_sample, total=total) -> Probe:
            peak = fixed + per_sample * n * 1.02 + 0.2 * gib  # allocator slack, not linear
            return Probe(n, peak <= total) if peak > total else Probe(n, True, peak)

        found = search_batch_size(probe, budget)
        largest = max(n for n in range(1, 8193) if probe(n).fits and probe(n).peak_bytes <= budget)
        assert largest - max(1, largest // 16) <= found.batch_size <= largest, (fixed, found)
        assert len(found.probes) <= 12, found.probes
        assert found.columns()["auto_batch_probes"].startswith("2:ok 8:ok")


def test_an_estimate_that_does_not_fit_is_stepped_down_from_not_bisected_from_the_small_probes():
    """resnet50 training on an H100: the small probes' line said 1,728, which ran out of memory,
    and bisecting from 8 took six more probes (868, 1298, 1513, 1620, 1566) to 1,513."""
    gib, limit = 2**30, 1540
    budget = MEMORY_FRACTION * 80 * gib
    per_sample = budget / 1728.5  # the line through the small probes meets the budget at 1,728

    def probe(n: int) -> Probe:
        return Probe(n, True, per_sample * n) if n <= limit else Probe(n, False)

    found = search_batch_size(probe, budget)
    assert limit - limit // 16 <= found.batch_size <= limit
    assert found.columns()["auto_batch_probes"].startswith("2:ok 8:ok 1728:oom")
    assert len(found.probes) <= 5, found.columns()["auto_batch_probes"]


def test_the_chosen_size_is_confirmed_with_autotuned_memory_and_stepped_down():
    gib = 2**30
    budget = MEMORY_FRACTION * 80 * gib

    def heuristic(n: int) -> Probe:  # search probes: cuDNN heuristics, small workspaces
        return Probe(n, True, 2 * gib + 0.1 * gib * n)

    def autotuned(n: int) -> Probe:  # the measured run's algorithms take 4 GiB more
        return Probe(n, True, 6 * gib + 0.1 * gib * n)

    search = search_batch_size(heuristic, budget)
    assert search.batch_size >= 640  # (72 - 2) / 0.1 = 700 under heuristics
    confirmed = confirm_batch_size(search, autotuned, budget)
    assert 6 * gib + 0.1 * gib * confirmed.batch_size <= budget
    assert confirmed.batch_size >= 0.85 * 660  # (72 - 6) / 0.1 = 660 fits when autotuned
    tuned = [p for p in confirmed.probes if p.confirming]
    assert tuned[-1].fits and not any(p.fits for p in tuned[:-1])
    assert "(tuned)" in confirmed.columns()["auto_batch_probes"]


LONG_PLAN = """
name: long
timeout_s: 120
fixed: {accelerator: cpu, n_iters: 1500, warmup_steps: 0, max_host_busy: 100}
runs:
  - models: [steady]
    batch_sizes: [2]
"""
SHORT_PLAN = LONG_PLAN.replace("1500", "10")  # a spread's least steps: a valid point


def _workers_of(pid: int) -> list[int]:
    """The children of `pid` that are sweep workers."""
    return [c for c in children(pid) if b"sweep-worker" in command_line(c)]


@pytest.mark.e2e
def test_a_killed_sweep_leaves_no_worker_and_one_sweep_writes_a_csv_at_a_time(tmp_path):
    long_plan, short_plan = tmp_path / "long.yaml", tmp_path / "short.yaml"
    long_plan.write_text(LONG_PLAN)
    short_plan.write_text(SHORT_PLAN)
    csv_path = tmp_path / "sweep.csv"
    cmd = [sys.executable, "-m", "dlbench", "sweep", str(long_plan), "--output", str(csv_path)]
    env = env_with(**FAULT_ENV)
    sweep = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 60
        while time.time() < deadline and not _workers_of(sweep.pid):
            time.sleep(0.2)
        [worker] = _workers_of(sweep.pid)  # started first; the sweep's other children come and go
        while time.time() < deadline and not children(worker):
            time.sleep(0.2)
        point = children(worker)  # the process it forked for its 30 s point
        assert point
        time.sleep(1)

        second = run_cli("sweep", str(short_plan), "--output", str(csv_path), env=env)
        assert second.returncode == 2, second.stderr
        assert "another sweep is writing" in second.stderr.strip().splitlines()[-1]

        sweep.send_signal(signal.SIGKILL)
        sweep.wait(timeout=10)
        deadline = time.time() + 10
        while time.time() < deadline and any(map(running, [worker, *point])):
            time.sleep(0.1)
        assert not running(worker), "the worker outlived its sweep"
        assert not any(map(running, point)), "the point's process outlived its sweep"
    finally:
        if sweep.poll() is None:
            sweep.kill()
    assert not csv_path.exists()  # nothing finished, and nothing appends a row later

    again = run_cli("sweep", str(short_plan), "--output", str(csv_path), env=env)
    assert again.returncode == 0, again.stderr  # the dead sweep's lock went with it
    resumed = run_cli("sweep", str(short_plan), "--output", str(csv_path), env=env)
    assert resumed.returncode == 0 and "resuming: 1 of 1 point(s)" in resumed.stderr
    assert len(read_rows(csv_path)) == 1
    rerun = run_cli("sweep", str(short_plan), "--no-resume", "--output", str(csv_path), env=env)
    assert rerun.returncode == 0 and "resuming" not in rerun.stderr
    assert len(read_rows(csv_path)) == 2


def test_a_worker_imports_what_its_points_will_before_the_first_arrives(monkeypatch):
    """While the parent reads the plan, not after it sends the first point."""
    import gc
    import io
    import sys

    from dlbench.sweep import worker

    calls = []
    monkeypatch.setattr(worker, "_preload", lambda: calls.append("preload"))
    monkeypatch.setattr(worker, "send", lambda fd, message: calls.append(message))
    worker.serve(lambda args: 0, io.BytesIO(b""), answers=-1)  # no point at all
    assert calls == ["preload", {"ready": True, "protocol": 2}]
    monkeypatch.undo()
    gc.unfreeze()
    try:
        worker._preload()
        assert all(name in sys.modules for name in worker.PRELOADED)
        assert gc.get_freeze_count() > 0  # out of the collections before each window
    finally:
        gc.unfreeze()


def test_a_worker_runs_each_point_in_a_fresh_child_and_outlives_a_failed_one(monkeypatch):
    """Each point is forked from the worker (its own process, as a point run first would be),
    answered with its exit and last line; a point that fails or is killed ends its child only,
    and the worker answers the next."""
    import io
    import json
    import signal

    from dlbench import run
    from dlbench.sweep import worker
    from dlbench.telemetry.gpu_facts import GpuFacts

    answers, facts = [], GpuFacts()
    monkeypatch.setattr(run, "PROCESS_GPU_FACTS", facts)

    def point(config, auto_batch, log):
        if config == "killed":
            os.kill(os.getpid(), signal.SIGKILL)
        if config == "a":  # what a point measured of its GPU serves the next points
            facts.idle_baselines[("gpu", 0)] = (time.monotonic(), 70.0)
        return (3 if config == "oom" else 0), f"pid {os.getpid()}"

    tasks = b"".join(
        json.dumps(c).encode() + b"\n"
        for c in (*({"config": c} for c in ("a", "oom", "killed", "b")), {"args": ["x", 7]})
    )
    commands = []

    def command_line(args):  # a gate's task: its own CLI parses it, in the child
        commands.append(os.getpid())
        return 5 if args == ["x", "7"] else 1

    monkeypatch.setattr(worker, "_preload", lambda: None)
    monkeypatch.setattr(worker, "config_from_json", lambda c: c)
    monkeypatch.setattr(run, "_in_child", point)
    monkeypatch.setattr(worker, "send", lambda fd, message: answers.append(message))
    worker.serve(command_line, io.BytesIO(tasks), answers=-1)
    ready, a, oom, killed, b, args = answers
    assert ready == {"ready": True, "protocol": 2}
    assert args["code"] == 5 and commands == []  # it ran in a child, not here
    pids = {int(m["last"].split()[1]) for m in (a, oom, b)}
    assert len(pids) == 3 and os.getpid() not in pids  # three children, none of them this one
    assert (a["code"], oom["code"], b["code"]) == (0, 3, 0)
    assert killed == {"code": -9, "last": "killed by SIGKILL"}
    assert facts.idle_baseline(("gpu", 0), time.monotonic())[0] == 70.0  # learned from "a"


def test_a_multi_process_point_runs_with_no_idle_worker_beside_it(monkeypatch):
    """A DDP point (its ranks in processes of their own) runs only once the sweep's worker is
    closed: nothing of the sweep's sits beside the job's ranks."""
    from dlbench.subprocesses import ChildResult
    from dlbench.sweep import launcher as launchers

    closed, launched = [], []
    launcher = launchers.Launcher(lambda: closed.append(True))
    monkeypatch.setattr(
        launchers, "run_child", lambda args, t: launched.append(args) or ChildResult(0, "")
    )
    point = parse_plan("models: [timm:test_resnet]\nfixed: {accelerator: cpu, devices: 2}\n")
    [point] = point.points()
    assert launchers.needs_own_process(point.config())
    point.launch(launcher, 10.0, Path("rows.csv"), "run", {})
    assert closed == [True] and launched


def test_a_plan_refused_after_the_worker_started_leaves_no_worker_behind(
    dlbench, kept, tmp_path, monkeypatch
):
    from dlbench.sweep import launcher as worker_module
    from tests.conftest import refused

    started = []
    real = worker_module.Worker.start
    monkeypatch.setattr(worker_module.Worker, "start", lambda w: started.append(w) or real(w))
    earlier = set(_workers_of(os.getpid()))  # an earlier test's worker may still be exiting
    bad = tmp_path / "plan.yaml"
    bad.write_text("name: bad\nruns:\n  - models: [no_such_model]\n")
    refused(dlbench("sweep", bad, "--output", kept), "no_such_model")
    assert len(started) == 1 and started[0].proc is None  # started first, then stopped
    assert set(_workers_of(os.getpid())) <= earlier


@pytest.mark.e2e
def test_a_worker_started_early_runs_the_points(monkeypatch, tmp_path):
    from dlbench.sweep import launcher as worker_module

    started = []
    real = worker_module.Worker.start

    def start(self):
        started.append(self)
        return real(self)

    monkeypatch.setattr(worker_module.Worker, "start", start)
    from dlbench.cli import run_command

    earlier = set(_workers_of(os.getpid()))  # an earlier test's worker may still be exiting
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        "name: one\nfixed: {accelerator: cpu, n_iters: 2, warmup_steps: 0, width: 32, height: 32}"
        "\nruns:\n  - models: [timm:test_resnet]\n    batch_sizes: [2]\n"
    )
    rows = tmp_path / "rows.csv"  # 2 steps, invalid (few_steps): the early worker is what is tried
    assert run_command(["sweep", str(plan), "--output", str(rows), "--invalid-ok"]) == 0
    [early] = started
    assert early.proc is None  # the launcher ran the point in it, then closed it
    assert set(_workers_of(os.getpid())) <= earlier


def test_a_rerun_resumes_only_from_rows_of_the_same_code(tmp_path):
    """An ok row of another dlbench commit or version is no resume's: the point runs again,
    so one CSV never reads as one code's figures when two measured it. The rule is the one
    every reader of rows uses (results.pairing.same_code): a tree with changes is its own code,
    and code that cannot say its commit is never the same."""
    from dlbench.sweep.runner import SweepRunner
    from tests.analysis.rows import benchmark_row

    plan = parse_plan("models: [timm:test_resnet]\nmodes: [infer]\nbatch_sizes: [4]\n")
    runner = SweepRunner(plan, tmp_path / "rows.csv")
    [point] = runner.points
    code = {k: "b" * 40 if k == "dlbench_commit" else runner.rows.env.get(k)
            for k in ("dlbench", "dlbench_commit")}  # fmt: skip
    runner.rows.code = f"{code['dlbench']} bbbbbbb"
    row = benchmark_row(model="timm:test_resnet", mode="infer", batch_size="4", precision="32",
                        devices="1", strategy="single", dlbench_dirty="False", **code)  # fmt: skip
    row = {k: str(v) for k, v in row.items()}
    assert runner.rows.done(point, [row])
    assert not runner.rows.done(point, [{**row, "dlbench_commit": "0000000"}])
    assert not runner.rows.done(point, [{**row, "dlbench": "0.1.0"}])
    assert not runner.rows.done(point, [{**row, "dlbench_dirty": "True"}])
    runner.rows.code = f"{code['dlbench']} (commit unknown)"
    assert not runner.rows.done(point, [{**row, "dlbench_commit": "unknown"}])


def test_the_quick_plan_asks_for_what_its_verdicts_need():
    """Each point of `quick` measures enough steps for a spread (MIN_SPREAD_STEPS) over a least
    window: on 4c280ac it measured 5 steps and every point was invalid."""
    from dlbench.config.limits import MIN_SPREAD_STEPS

    points = load_plan("quick").points()
    assert points
    for point in points:
        assert int(point.flags["n_iters"]) >= MIN_SPREAD_STEPS, point.label
        assert float(point.flags["min_time"]) >= 1.0, point.label


FEW_STEPS_PLAN = """
name: few
timeout_s: 60
fixed: {accelerator: cpu, n_iters: 3, warmup_steps: 0}
runs:
  - models: [steady]
    modes: [train, infer]
    batch_sizes: [2]
"""


@pytest.mark.e2e
def test_a_sweep_of_invalid_points_says_so_last_and_exits_4_unless_told(tmp_path):
    plan_file = tmp_path / "few.yaml"
    plan_file.write_text(FEW_STEPS_PLAN)
    out = run_cli("sweep", str(plan_file), "--output", str(tmp_path / "few.csv"), env=env_with())
    assert out.returncode == 4, out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("error: every point measured (2) is INVALID") and "--invalid-ok" in last
    rows = read_rows(tmp_path / "few.csv")
    assert [r["status"] for r in rows] == ["ok", "ok"]
    assert all("few_steps" in r["verdict_reasons"] for r in rows)
    kept = run_cli(
        "sweep", str(plan_file), "--output", str(tmp_path / "ok.csv"), "--invalid-ok",
        env=env_with(),
    )  # fmt: skip
    assert kept.returncode == 0, kept.stderr
    assert "x published" not in out.stdout  # a CPU has no published rows: no empty column


@pytest.mark.e2e
def test_the_quick_plan_passes_its_own_checks_and_its_report_has_plots(tmp_path):
    """Every point of `quick` measured and, but for what a busy host does to a CPU row (the
    suite's other workers), valid; the report beside the CSV has its plots; no lock file is
    left behind."""
    csv_path = tmp_path / "q.csv"
    out = run_cli("sweep", "quick", "--output", str(csv_path), env=env_with(), timeout=300)
    assert out.returncode in (0, 4), out.stderr
    rows = read_rows(csv_path)
    assert len(rows) == len(load_plan("quick").points())
    for row in rows:
        assert row["status"] == "ok", row["error"]
        reasons = set(filter(None, row["verdict_reasons"].split(";")))
        assert reasons <= {"host_busy", "noisy"}, (row["model"], reasons)
    report = run_cli("report", str(csv_path), env=env_with())
    assert report.returncode == 0, report.stderr
    if any(row["verdict"] == "valid" for row in rows):  # a quiet host: plots of them
        assert list((tmp_path / "q-report").glob("*.png")), report.stdout
    else:  # the suite's workers made every row host_busy: the report says it left them out
        text = (tmp_path / "q-report" / "report.md").read_text()
        assert "Rows left out of every ratio" in text and "host_busy" in text
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".lock")]
