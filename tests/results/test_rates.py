"""Every place that turns steps into a rate divides the samples of the steps that ran: the
measured loop runs on past its first chunk until its noise settles, so `--n-iters` is a floor,
never the count (issue 63: validate read half its rate where a repeat ran 80 steps)."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from dlbench.config import DataSource, RunConfig
from dlbench.engine.benchmark import run_benchmark
from dlbench.engine.plan import make_plan
from dlbench.engine.rows import measurement_row, per_rank_rows

CPU = torch.device("cpu")
RUNS_ON = dict(
    model="timm:test_resnet", accelerator="cpu", batch_size=4, width=32, height=32, n_iters=3,
    warmup_steps=1, telemetry=False,
)  # fmt: skip


def plant_chunks(monkeypatch, chunks: int) -> None:
    """The measured loop runs `chunks` chunks of --n-iters steps, as one whose noise settles
    late does (engine.timing.loop.next_chunk_steps), whatever this machine's timing."""
    from dlbench.engine.timing import loop

    calls = [0]

    def next_chunk(settings, unsettled, elapsed_s, steps_done):
        calls[0] += 1
        return settings.n_iters if calls[0] % chunks else 0

    monkeypatch.setattr(loop, "next_chunk_steps", next_chunk)


def test_a_benchmark_row_counts_the_steps_its_loop_ran_past_n_iters(monkeypatch):
    """The main row and the side file's per-rank rows; the batch-size search's row, scaling's
    and sweeps' are these rows too."""
    plant_chunks(monkeypatch, 4)
    m = run_benchmark(make_plan(RunConfig.of(**RUNS_ON)))
    assert m.loop.steps == 4 * RUNS_ON["n_iters"]
    row = measurement_row(m, {})
    assert row["steps"] == m.loop.steps
    assert row["samples_per_s"] == pytest.approx(4 * m.loop.steps / row["window_s"])
    assert row["batches_per_s"] == pytest.approx(m.loop.steps / row["window_s"])
    [rank] = per_rank_rows(m, "run")
    assert rank["samples_per_s"] == pytest.approx(4 * m.loop.steps / rank["window_s"])


def test_scaling_divides_the_rows_rates_whatever_steps_each_ran():
    from dlbench.analysis.scaling import scaling_table
    from tests.analysis.rows import benchmark_row

    one = benchmark_row(samples_per_s=100.0, steps=40, world_size=1, strategy="single")
    two = benchmark_row(samples_per_s=190.0, steps=10, world_size=2, devices="2", strategy="ddp")
    table = scaling_table(pd.DataFrame([one, two]))
    [line] = table[table["world_size"] == 2].to_dict("records")
    assert line["scaling_efficiency"] == pytest.approx(190.0 / (2 * 100.0))


def test_the_bare_loop_times_exactly_the_steps_it_is_asked_for():
    from dlbench.engine.scenarios.bare import BareLoop

    plan = make_plan(RunConfig.of(**RUNS_ON))
    bare = BareLoop(plan.workload, plan.shape, plan.config, plan.precision, CPU)
    timed = []
    bare.timed_step = timed.append
    bare.window_s(warmup_steps=2, steps=7)
    assert timed == [0, 1, 0, 1, 2, 3, 4, 5, 6]  # two untimed, then the seven of the window


class PlantedClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_breakdown_gives_each_phase_per_step_over_the_steps_it_timed(monkeypatch):
    from dlbench.engine.scenarios import breakdown
    from dlbench.engine.scenarios.session import Phases

    clock = PlantedClock()

    def costs(seconds):
        def phase(*_):
            clock.now += seconds
            return None, None  # what fetch gives: inputs and targets

        return phase

    phases = Phases(costs(0.001), costs(0.004), costs(0.010), costs(0.002))
    session = type("Session", (), {"phases": phases, "device": CPU})()
    real = breakdown.DeviceTimer
    monkeypatch.setattr(breakdown, "DeviceTimer", lambda device, marks: real(device, marks, clock))
    means, _ = breakdown._phase_times_ms(session, steps=7)
    assert means == pytest.approx({"h2d": 1.0, "forward": 4.0, "backward": 10.0, "optimizer": 2.0})


def test_a_loader_row_divides_the_samples_it_delivered(tmp_path):
    from dlbench.data.make import ImageSpec, make_images
    from dlbench.data.pipeline import open_pipeline
    from dlbench.data.throughput import measure_loader
    from dlbench.workloads import get_workload

    make_images(tmp_path / "images", ImageSpec(24, 40, 40, classes=2), workers=1)
    workload = get_workload("timm:test_resnet")
    shape = workload.shape(32, 32, 0)
    source = DataSource.parse(f"folder:{tmp_path / 'images'}")
    pipeline = open_pipeline(source, workload, shape, 4, 0, "cpu", 0, False)
    result = measure_loader(pipeline, 0.2, CPU)
    assert result.batches > 2 and result.samples == 4 * result.batches
    assert result.samples_per_s == pytest.approx(result.samples / result.seconds)


def test_a_peak_figure_divides_by_the_calls_made_inside_its_window(monkeypatch):
    from types import SimpleNamespace

    from dlbench.engine.timing import timer
    from dlbench.peak import measure

    clock = PlantedClock()
    calls = []

    def op():
        calls.append(clock.now)
        clock.now += 0.002

    monkeypatch.setattr(measure, "time", SimpleNamespace(perf_counter=clock))
    real = timer.DeviceTimer
    monkeypatch.setattr(timer, "DeviceTimer", lambda device, marks: real(device, marks, clock))
    assert measure.seconds_per_call(op, CPU, seconds=0.05) == pytest.approx(0.002)
    assert len(calls) == 2 + 1 + 25  # two untimed, one to size the window, its 25 calls
