"""GPU facts kept in the cache folder between processes (telemetry.gpu_facts.KeptGpuFacts): a
later process reads the idle power and the counter's period instead of measuring them, only for
the same GPU, driver and power limit, and only while the idle power is young."""

from __future__ import annotations

import json

import pytest

from dlbench.telemetry import gpu_facts
from dlbench.telemetry.gpu_facts import KEPT_FACTS_FILE, GpuFacts, KeptGpuFacts
from dlbench.telemetry.monitor import TelemetryMonitor, open_monitor
from dlbench.telemetry.nvml import NvmlBackend
from tests import fake_nvml
from tests.telemetry.test_nvml_monitor import _count_reads


def _process(folder, index: int = 0) -> TelemetryMonitor:
    """A monitor as a fresh process opens it: no facts of its own, the cache folder's."""
    return TelemetryMonitor(
        NvmlBackend([index]), None, interval_s=0.05, facts=GpuFacts(), kept=KeptGpuFacts(folder)
    )


def test_a_later_process_reads_the_idle_power_and_period_from_the_cache_folder(fake_gpus, tmp_path):
    state = fake_gpus({"power_w": 90.0, "energy_period_s": 0.02})
    first = _process(tmp_path)
    first.measure_idle(seconds=0.3)
    assert first.idle_power_age_s == 0.0 and first.counter_period_s is not None
    fake_nvml.write_state(state, [{"power_w": 400.0, "energy_period_s": 0.02}])  # busy now
    probed = []
    real_probe = gpu_facts.counter_update_period
    gpu_facts.counter_update_period = lambda read: probed.append(1) or real_probe(read)
    try:
        second = _process(tmp_path)
    finally:
        gpu_facts.counter_update_period = real_probe
    reads = _count_reads(second.gpu)
    second.measure_idle(seconds=0.3)
    assert reads == [] and probed == []  # neither measured again
    assert second.idle_power_w == pytest.approx(90.0)
    assert 0.0 < second.idle_power_age_s < 60
    assert second.counter_period_s == pytest.approx(first.counter_period_s)


def test_kept_facts_of_another_gpu_driver_or_power_limit_are_not_used(
    fake_gpus, tmp_path, monkeypatch
):
    state = fake_gpus({"power_w": 90.0}, {"power_w": 120.0})
    _process(tmp_path, 0).measure_idle(seconds=0.2)
    other_gpu = _process(tmp_path, 1)
    other_gpu.measure_idle(seconds=0.2)
    assert other_gpu.idle_power_w == pytest.approx(120.0) and other_gpu.idle_power_age_s == 0.0
    fake_nvml.write_state(state, [{"power_w": 95.0, "limit_w": 400.0}, {"power_w": 120.0}])
    capped = _process(tmp_path, 0)
    capped.measure_idle(seconds=0.2)
    assert capped.idle_power_w == pytest.approx(95.0) and capped.idle_power_age_s == 0.0
    monkeypatch.setattr(fake_nvml, "nvmlSystemGetDriverVersion", lambda: "1000.1-fake")
    fake_nvml.write_state(state, [{"power_w": 97.0, "limit_w": 400.0}, {"power_w": 120.0}])
    new_driver = _process(tmp_path, 0)
    new_driver.measure_idle(seconds=0.2)
    assert new_driver.idle_power_w == pytest.approx(97.0) and new_driver.idle_power_age_s == 0.0


def test_an_old_a_future_or_a_damaged_kept_idle_power_is_measured_again(fake_gpus, tmp_path):
    state = fake_gpus({"power_w": 90.0})
    _process(tmp_path).measure_idle(seconds=0.2)
    record = json.loads((tmp_path / KEPT_FACTS_FILE).read_text())
    [key] = [k for k in record if k.startswith("idle ")]
    fake_nvml.write_state(state, [{"power_w": 80.0}])
    now = record[key]["sampled"]
    for kept in (
        {"watts": 90.0, "sampled": now - gpu_facts.IDLE_REUSE_S - 1},  # too old
        {"watts": 90.0, "sampled": now + 3600},  # from the future: another clock
        {"watts": -5.0, "sampled": now},
        {"watts": True, "sampled": now},
        {"watts": float("inf"), "sampled": now},
        {"watts": 90.0, "sampled": "yesterday"},
        "not a record",
    ):
        (tmp_path / KEPT_FACTS_FILE).write_text(json.dumps({**record, key: kept}))
        again = _process(tmp_path)
        again.measure_idle(seconds=0.15)
        assert again.idle_power_w == pytest.approx(80.0), kept
        assert again.idle_power_age_s == 0.0
    (tmp_path / KEPT_FACTS_FILE).write_text("{not json")
    broken = _process(tmp_path)
    broken.measure_idle(seconds=0.15)
    assert broken.idle_power_w == pytest.approx(80.0)


def test_a_monitor_without_a_cache_folder_keeps_nothing(fake_gpus, tmp_path, monkeypatch):
    import torch

    fake_gpus({"power_w": 90.0})
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    lone = open_monitor(torch.device("cpu"), 0.05, None)
    lone.facts = GpuFacts()
    lone.measure_idle(seconds=0.1)
    assert lone.idle_power_w == pytest.approx(90.0)
    assert list(here.iterdir()) == []
    kept = open_monitor(torch.device("cpu"), 0.05, None, cache=here)
    kept.facts = GpuFacts()
    kept.measure_idle(seconds=0.1)
    assert (here / KEPT_FACTS_FILE).is_file()
