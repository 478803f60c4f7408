"""Batch-1 inference compiled or eager, chosen by measurement: a latency point runs compiled
until the cache's record for this GPU says eager won by more than the threshold; a flag forces
either way and is recorded; any other point, or a cold run, decides nothing."""

from __future__ import annotations

import json

import pytest
import torch

from dlbench.caches import use_caches
from dlbench.config import RunConfig
from dlbench.engine import plan as plan_module
from dlbench.engine.acceleration.compile_choice import COMPILE_CHOICE, choose_compile
from dlbench.engine.acceleration.measured_choice import MIN_GAIN_PCT, point_key
from dlbench.engine.distribution.devices import DevicePlan
from dlbench.engine.plan import make_plan
from tests.engine.acceleration.test_caches import ENVIRONMENT

LATENCY = RunConfig.of(model="mobilenet_v3", mode="infer", batch_size=1, precision="16-mixed")


@pytest.fixture(autouse=True)
def one_gpu(monkeypatch):
    """Plans as on a host of Hopper GPUs (a device's type, count and capability; nothing
    runs)."""

    def devices(accelerator: str, devices: str, num_nodes: int) -> DevicePlan:
        return DevicePlan("cuda", int(devices) if devices.isdigit() else 1, num_nodes)

    monkeypatch.setattr(plan_module, "plan_devices", devices)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))


def latency_key() -> str:
    """The record's name of LATENCY's point, as its plan resolves it."""
    return point_key(make_plan(LATENCY).config, "compile")


def run_point(config: RunConfig, folder, median_s: float) -> tuple[bool, dict]:
    """What a run of the point does: plan, choose, and record its window's median."""
    choice = _choose(config, folder)
    return bool(choice.config.acceleration.compile), choice.finish(median_s, folder)


def _choose(config: RunConfig, folder):
    plan = make_plan(config)
    return choose_compile(plan.config, plan.latency_point, plan.compile_measured, folder)


def test_a_latency_point_runs_compiled_unless_the_flag_says_otherwise():
    assert (
        make_plan(LATENCY).config.acceleration.compile is True
        and make_plan(LATENCY).compile_measured
    )
    forced = make_plan(LATENCY.replace(compile=False))
    assert forced.config.acceleration.compile is False and not forced.compile_measured
    for other in (LATENCY.replace(batch_size=2), LATENCY.replace(mode="train"),
                  LATENCY.replace(devices="2")):  # fmt: skip
        plan = make_plan(other)
        assert plan.config.acceleration.compile is False and not plan.latency_point


def test_eager_runs_once_the_record_says_it_won(tmp_path):
    folder = use_caches(tmp_path, ENVIRONMENT)
    assert run_point(LATENCY, folder, 0.0004) == (True, {"compile_speedup": None})
    eager = run_point(LATENCY.replace(compile=False), folder, 0.0003)
    assert eager == (False, {"compile_speedup": pytest.approx(0.75)})
    again = run_point(LATENCY, folder, 0.0003)  # the record now says eager is faster here
    assert again == (False, {"compile_speedup": pytest.approx(0.75)})
    forced = run_point(LATENCY.replace(compile=True), folder, 0.0004)  # the flag still rules
    assert forced[0] is True
    recorded = json.loads((folder / COMPILE_CHOICE.file).read_text())
    assert recorded == {latency_key(): {"compiled": 0.0004, "eager": 0.0003}}


def test_an_eager_gain_inside_the_threshold_keeps_compiled(tmp_path):
    folder = use_caches(tmp_path, ENVIRONMENT)
    run_point(LATENCY.replace(compile=False), folder, 0.001)
    slower = 0.001 * (1 + MIN_GAIN_PCT / 100 / 2)
    run_point(LATENCY.replace(compile=True), folder, slower)
    compiled, columns = run_point(LATENCY, folder, slower)
    assert compiled and columns["compile_speedup"] == pytest.approx(1 / (1 + MIN_GAIN_PCT / 200))


def test_compiled_winning_is_recorded_and_kept(tmp_path):
    folder = use_caches(tmp_path, ENVIRONMENT)
    run_point(LATENCY.replace(compile=False), folder, 0.0006)
    compiled, columns = run_point(LATENCY, folder, 0.0003)
    assert compiled and columns == {"compile_speedup": pytest.approx(2.0)}


def test_another_point_or_gpu_does_not_read_the_record(tmp_path):
    folder = use_caches(tmp_path, ENVIRONMENT)
    (folder / COMPILE_CHOICE.file).write_text(
        json.dumps({latency_key(): {"compiled": 0.002, "eager": 0.001}})
    )
    assert run_point(LATENCY, folder, 0.001)[0] is False
    for other in (LATENCY.replace(precision="32"), LATENCY.replace(width=160),
                  LATENCY.replace(model="resnet50")):  # fmt: skip
        assert _choose(other, folder).config.acceleration.compile is True
    elsewhere = use_caches(tmp_path, {**ENVIRONMENT, "gpu_name": "NVIDIA H200"})
    assert _choose(LATENCY, elsewhere).config.acceleration.compile is True


def test_a_cold_run_or_another_point_records_nothing(tmp_path):
    assert run_point(LATENCY, None, 0.001) == (True, {"compile_speedup": None})
    folder = use_caches(tmp_path, ENVIRONMENT)
    assert run_point(LATENCY.replace(batch_size=8), folder, 0.001) == (False, {})
    assert not (folder / COMPILE_CHOICE.file).exists()


@pytest.mark.parametrize("text", ["[1]", '{"k": {"eager": "fast"}}', "{not json", "null"])
def test_a_record_that_cannot_be_read_is_no_record(tmp_path, text):
    folder = use_caches(tmp_path, ENVIRONMENT)
    (folder / COMPILE_CHOICE.file).write_text(text)
    assert run_point(LATENCY, folder, 0.001) == (True, {"compile_speedup": None})
