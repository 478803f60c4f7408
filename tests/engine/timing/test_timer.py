"""The one device timer on a host of several (fake) GPUs: work queued on GPU N is timed on GPU
N's clock, whichever device is current, by the measured loop, the bare loop's timing, the
breakdown and `peak` (before, GPUs 1-3 of a 4-GPU host timed their work with GPU 0's events and
reported 771x their datasheet)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from dlbench.engine.scenarios.breakdown import _phase_times_ms
from dlbench.engine.timing.loop import run_measured_loop
from dlbench.engine.timing.settings import LoopSettings
from dlbench.engine.timing.timer import DeviceTimer, seconds_of
from dlbench.peak import measure
from tests.fake_cuda import FakeCuda

GPU3 = torch.device("cuda", 3)


@pytest.fixture
def cuda(monkeypatch) -> FakeCuda:
    return FakeCuda(4).install(monkeypatch)


def test_marks_time_the_work_of_the_device_they_are_given_not_the_current_one(cuda):
    timer = DeviceTimer(GPU3, 4)
    timer.mark()
    for ms in (1.0, 2.0, 4.0):
        cuda.queue(GPU3, ms)
        cuda.queue(0, 100.0)  # GPU 0, the current device, busy with something else
        timer.mark()
    assert timer.step_times_s() == pytest.approx([1e-3, 2e-3, 4e-3])
    assert timer.window_s() == pytest.approx(7e-3)


def test_the_measured_loop_times_its_steps_on_the_runs_device(cuda):
    result = run_measured_loop(lambda i: cuda.queue(GPU3, 2.0), GPU3, LoopSettings(1, 5))
    assert result.step_times_s == pytest.approx([2e-3] * 5)
    assert result.window_s == pytest.approx(10e-3)


def test_the_bare_loops_window_is_timed_on_its_device(cuda):
    assert seconds_of(8, lambda i: cuda.queue(GPU3, 0.5), GPU3) == pytest.approx(4e-3)


def test_the_breakdown_times_each_phase_on_the_steps_device(cuda):
    phases = SimpleNamespace(
        fetch=lambda i: (cuda.queue(GPU3, 1.0), None),
        forward=lambda x, y: cuda.queue(GPU3, 3.0),
        backward=lambda loss: cuda.queue(GPU3, 6.0),
        update=lambda: cuda.queue(GPU3, 2.0),
    )
    means, _ = _phase_times_ms(SimpleNamespace(phases=phases, device=GPU3), steps=4)
    assert means == pytest.approx({"h2d": 1.0, "forward": 3.0, "backward": 6.0, "optimizer": 2.0})


def test_peak_times_each_gpus_work_on_that_gpu(cuda):
    per_call = measure.seconds_per_call(lambda: cuda.queue(GPU3, 0.25), GPU3, 0.001)
    assert per_call == pytest.approx(0.25e-3)


def test_peak_measures_each_gpu_inside_that_gpus_context(cuda, monkeypatch):
    seen = []

    def measure_here(device, total_s, peers):
        seen.append(torch.cuda.current_device())
        return {}

    monkeypatch.setattr(measure, "_measure_device", measure_here)
    for index in (1, 2, 3):
        measure.measure_device(torch.device("cuda", index), 1.0, [])
    assert seen == [1, 2, 3] and cuda.current == 0
