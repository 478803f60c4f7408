"""Points prepared ahead: what fits beside what, where the wall time went, and real workers on the
CPU (each measurement alone, the others held still; a point compiled ahead found in the cache)."""

from __future__ import annotations

import itertools

import pytest

from dlbench.config import RunConfig
from dlbench.sweep.ahead import AHEAD_WORKERS, GpuRoom, ahead_by_default, workers_for
from dlbench.sweep.pipeline import CONTEXT_MB, MEMORY_SHARE, MemoryBudget, Pipeline, Task
from dlbench.sweep.timing import TimeSplit, covered
from tests import fake_nvml
from tests.conftest import read_rows, run_cli


def _task(memory_mb):
    return Task(key=memory_mb, config=RunConfig(), memory_mb=memory_mb)


def test_two_points_share_the_gpu_only_where_both_are_known_to_fit():
    budget = MemoryBudget(total_mb=80_000)
    alone = [_task(70_000)]
    assert budget.fits(_task(70_000), [])  # nothing beside it: always
    assert not budget.fits(_task(20_000), alone)
    room = MEMORY_SHARE * 80_000 - 2 * CONTEXT_MB
    assert budget.fits(_task(room / 2), [_task(room / 2)])
    assert not budget.fits(_task(None), [_task(1)])  # unknown size: nothing beside it
    assert not budget.fits(_task(1), [_task(None)])
    assert MemoryBudget(None).fits(_task(None), [_task(1)])  # no GPU: no memory to share


def test_points_are_prepared_ahead_where_asked_and_the_gpu_takes_several_processes():
    shared, exclusive = GpuRoom("H200", 143_000, True), GpuRoom("H200", 143_000, False)
    assert workers_for(True, shared, False) == (AHEAD_WORKERS, True)
    assert workers_for(True, None, False) == (AHEAD_WORKERS, True)  # the CPU
    assert workers_for(False, shared, False) == (1, False)  # --no-prepare-ahead, or the CPU
    assert workers_for(True, exclusive, False) == (1, False)
    assert workers_for(True, shared, True) == (1, False)  # power limits are GPU-wide


@pytest.mark.parametrize(("mode", "ahead"), [(0, True), (3, False)])
def test_a_sweep_prepares_ahead_by_default_on_a_gpu_that_takes_several_processes(
    tmp_path, monkeypatch, mode, ahead
):
    state = tmp_path / "nvml.json"
    fake_nvml.write_state(state, [{"compute_mode": mode}])
    for key, value in fake_nvml.environment(state).items():
        monkeypatch.setenv(key, value)
    assert ahead_by_default() is ahead


def test_a_sweep_on_the_cpu_runs_its_points_one_after_another_by_default(monkeypatch):
    monkeypatch.delenv(fake_nvml.STATE_VARIABLE, raising=False)
    monkeypatch.setattr("dlbench.sweep.ahead.gpu_room", lambda: None)
    assert ahead_by_default() is False


def test_the_wall_time_split_adds_up_and_says_what_ran_beside():
    split = TimeSplit(started=0.0, first_ready=5.0, windows=12.0, recheck_windows=2.0)
    split.tasks = [
        (0, 40, "measure"),
        (20, 60, "measure"),
        (10, 30, "prepare"),
        (60, 70, "recheck"),
    ]
    parts = split.parts(80.0)
    assert parts["worker starts"] == 5.0
    assert parts["rechecks"] == pytest.approx(8.0)  # 10 s after the points, less its window
    assert parts["warm-up and compile"] == pytest.approx(60 - 10 - 5)
    assert parts["windows"] == 12.0
    beside = parts.pop("beside")
    assert beside == pytest.approx(110 - covered([(0, 40), (20, 60), (10, 30), (60, 70)]))
    assert sum(parts.values()) == pytest.approx(80.0)
    line = split.line(80.0)
    assert line.startswith("wall 80.0 s: windows 12.0 s, warm-up and compile 45.0 s (")
    assert "rechecks 8.0 s" in line and "everything else" in line


ALONE_PLAN = """
name: alone
timeout_s: 120
fixed: {accelerator: cpu, n_iters: 30, warmup_steps: 2}
runs:
  - models: [watch_alone]
    modes: [train, infer]
    batch_sizes: [2, 4]
"""


@pytest.mark.e2e
def test_while_one_point_measures_every_other_worker_gives_way(tmp_path):
    """Two workers prepare and measure in turn: over each stretch of steps measured with the
    turn held, the other workers used no CPU (they gave way, their builds' busy host work
    waited); every row is valid and says how long its point waited."""
    plan = tmp_path / "alone.yaml"
    plan.write_text(ALONE_PLAN)
    log = tmp_path / "alone.log"
    from tests.sweep.test_sweep import env_with

    out = run_cli(
        "sweep", plan, "--prepare-ahead", "--output", tmp_path / "rows.csv",
        env=env_with(DLBENCH_ALONE_LOG=str(log)), timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    rows = read_rows(tmp_path / "rows.csv")
    assert [r["status"] for r in rows] == ["ok"] * 4
    assert all(r["turn_wait_s"] != "" for r in rows)
    assert any(float(r["turn_wait_s"]) > 0.5 for r in rows)  # waited while another built
    stretches: dict[str, list[int]] = {}
    for line in log.read_text().splitlines():
        point, others, ticks = line.split()
        assert int(others) >= 1  # the sibling is known to the one measuring
        stretches.setdefault(point, []).append(int(ticks))
    assert len(stretches) == 4 and sum(map(len, stretches.values())) >= 4 * 30
    for ticks in stretches.values():  # each point's steps with the turn held, in order
        used = [b - a for a, b in itertools.pairwise(ticks) if b >= a]
        assert max(used) <= 3  # a few polls at most, never a build (1.5 s: 150 ticks)
    assert "wall " in out.stdout and "worker starts" in out.stdout


COMPILED = dict(
    model="timm:test_resnet", mode="infer", batch_size=2, width=32, height=32,
    accelerator="cpu", compile=True, n_iters=50, warmup_steps=2,
)  # fmt: skip


@pytest.mark.e2e
def test_a_point_compiled_ahead_is_found_in_the_cache_and_measures_what_it_would_in_place(
    tmp_path, monkeypatch
):
    """The compiler compiles a point while a worker runs another; the worker that measures it
    then compiles nothing (compile_cache hit), and its row matches the point compiled in place
    in a cold cache."""
    from tests.sweep.test_sweep import env_with

    for key, value in env_with().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("DLBENCH_CACHE_DIR", str(tmp_path / "cache"))
    output = tmp_path / "rows.csv"
    slow = RunConfig.of(model="steady", accelerator="cpu", batch_size=2, n_iters=200,
                        output=output, run_id="slow")  # fmt: skip
    ahead = RunConfig.of(**COMPILED, output=output, run_id="ahead")
    pipeline = Pipeline(workers=1, compiler=True)
    try:
        pipeline.submit(Task("slow", slow))
        pipeline.submit(Task("ahead", ahead))
        pipeline.compile_ahead(Task("ahead", ahead.replace(telemetry=False), kind="prepare"))
        ended = pipeline.drain()
    finally:
        pipeline.close()
    assert {(e.task.kind, e.result.returncode) for e in ended} == {
        ("measure", 0),
        ("prepare", 0),
    }
    monkeypatch.setenv("DLBENCH_CACHE_DIR", str(tmp_path / "cold"))
    in_place = Pipeline(workers=1)
    try:
        in_place.submit(Task("cold", ahead.replace(run_id="cold")))
        [cold] = in_place.drain()
    finally:
        in_place.close()
    assert cold.result.returncode == 0
    rows = {r["run_id"]: r for r in read_rows(output)}
    assert rows["ahead"]["compile_cache"] == "hit" and rows["cold"]["compile_cache"] == "miss"
    assert float(rows["ahead"]["warmup_s"]) < float(rows["cold"]["warmup_s"])
    for column in ("param_count", "compile", "cuda_graphs", "flops_per_sample", "steps"):
        assert rows["ahead"][column] == rows["cold"][column], column
    ratio = float(rows["ahead"]["samples_per_s"]) / float(rows["cold"]["samples_per_s"])
    assert 0.6 < ratio < 1.6  # the same kernels; a shared two-core host's noise, no more
