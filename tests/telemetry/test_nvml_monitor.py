"""Telemetry against the fake NVML (same function API as pynvml), in process and through the CLI."""

from __future__ import annotations

import json
import re
import time

import pytest

from dlbench.telemetry.gpu_facts import counter_update_period
from dlbench.telemetry.monitor import TelemetryMonitor, open_monitor
from dlbench.telemetry.nvml import NvmlBackend, visible_nvml_indices
from dlbench.telemetry.window import timed_counter_j
from tests import fake_nvml
from tests.conftest import TINY, cli_env, read_rows, run_cli


def _count_reads(gpu: NvmlBackend) -> list[int]:
    """The devices `gpu.read` is asked for from now on, one entry a read."""
    reads: list[int] = []
    read = gpu.read
    gpu.read = lambda device, t: reads.append(device) or read(device, t)
    return reads


def _window(monitor: TelemetryMonitor, seconds: float) -> dict:
    monitor.begin_window()
    time.sleep(seconds)
    monitor.end_window()
    return monitor.summary()


def test_window_energy_from_counter_matches_power_times_time(fake_gpus):
    fake_gpus({"power_w": 250.0})
    summary = _window(TelemetryMonitor(NvmlBackend([0]), None, interval_s=0.02), 0.5)
    assert summary["energy_source"] == "nvml_counter"
    assert summary["energy_j"] == pytest.approx(250.0 * 0.5, rel=0.1)
    assert summary["energy_integral_j"] == pytest.approx(summary["energy_counter_j"], rel=0.1)
    assert summary["avg_power_w"] == pytest.approx(250.0, rel=0.1)
    assert summary["telemetry_samples"] >= 10


def test_without_counter_energy_falls_back_to_power_integral(fake_gpus):
    fake_gpus({"power_w": 100.0, "energy_counter": False})
    monitor = TelemetryMonitor(NvmlBackend([0]), None, interval_s=0.02, min_integral_s=0.3)
    summary = _window(monitor, 0.4)
    assert summary["energy_source"] == "power_integral"
    assert summary["energy_counter_j"] is None
    assert summary["energy_j"] == pytest.approx(100.0 * 0.4, rel=0.15)


def test_throttling_is_detected_and_named(fake_gpus):
    fake_gpus({"throttle": 0x4 | 0x40, "sm_clock": 1400})
    summary = _window(TelemetryMonitor(NvmlBackend([0]), None, interval_s=0.02), 0.1)
    assert summary["throttle_pct"] == 100.0
    assert summary["throttle_reasons"] == "hw_thermal sw_power_cap"
    assert summary["sm_clock_min_mhz"] == 1400


@pytest.mark.parametrize(
    ("jpeg_util", "busy", "decoder"),
    [(35, 35.0, "nvjpeg-hardware"), (0, 0.0, "nvjpeg-cuda"), (None, None, "nvjpeg")],
)
def test_the_row_says_which_jpeg_decoder_ran(fake_gpus, jpeg_util, busy, decoder):
    """From the GPU's own account of its JPEG engines: busy (hardware decode), idle (nvJPEG
    ran on the SMs), or a GPU or driver that cannot say."""
    from dlbench.results.telemetry_columns import decoder_column

    fake_gpus({"jpeg_util": jpeg_util})
    summary = _window(TelemetryMonitor(NvmlBackend([0]), None, interval_s=0.02), 0.1)
    assert summary["jpeg_decoder_busy_pct"] == busy
    assert decoder_column("gpu", summary["jpeg_decoder_busy_pct"]) == {"data_decoder": decoder}
    assert decoder_column("cpu", summary["jpeg_decoder_busy_pct"]) == {}


def test_other_processes_on_the_gpu_are_counted(fake_gpus):
    fake_gpus({"processes": 2})
    summary = _window(TelemetryMonitor(NvmlBackend([0]), None, interval_s=0.05), 0.05)
    assert summary["other_gpu_processes"] == 2
    assert summary["other_gpu_process_list"] == "100000 ? 512 MiB; 100001 ? 512 MiB"


def test_a_foreign_process_is_named_and_only_on_the_gpu_it_uses(fake_gpus):
    """Processes are per GPU and per PID: a process on GPU 1 is not GPU 0's business."""
    fake_gpus({}, {"foreign": [{"pid": 4242, "name": "train.py", "memory_mb": 1024}]})
    gpu0 = _window(TelemetryMonitor(NvmlBackend([0]), None, interval_s=0.05), 0.05)
    gpu1 = _window(TelemetryMonitor(NvmlBackend([1]), None, interval_s=0.05), 0.05)
    assert gpu0["other_gpu_processes"] == 0 and gpu0["other_gpu_process_list"] == ""
    assert gpu1["other_gpu_processes"] == 1
    assert gpu1["other_gpu_process_list"] == "4242 train.py 1024 MiB"
    assert not gpu1["gpu_processes_hidden"]


def test_the_jobs_own_processes_are_not_other_processes(fake_gpus, tmp_path):
    """Its ranks and their launchers hold contexts on the GPU too: they are the job, not a
    neighbour. A process outside the job that opened the same GPU is named."""
    import subprocess
    import sys

    fake_gpus({})
    opened = "from dlbench.telemetry.nvml import NvmlBackend; NvmlBackend([0]); print('ok')"
    code = f"import tests.fake_nvml; {opened}; import sys; sys.stdin.read()"
    rank = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert rank.stdout.readline().strip() == "ok"
        monitor = TelemetryMonitor(NvmlBackend([0]), None, interval_s=0.05)
        alone = _window(monitor, 0.05)
        assert alone["other_gpu_processes"] == 1
        assert alone["other_gpu_process_list"].startswith(f"{rank.pid} python")
        monitor.isolation.job_pids |= {rank.pid}  # the same process, now a rank of the job
        assert _window(monitor, 0.05)["other_gpu_processes"] == 0
    finally:
        rank.communicate("")


def test_processes_of_another_pid_namespace_count_all_but_one(fake_gpus):
    from dlbench.telemetry.base import GpuProcess
    from dlbench.telemetry.isolation import foreign_processes

    listed = [GpuProcess(7, "python3"), GpuProcess(9, "python3")]  # host PIDs, none ours
    assert foreign_processes(listed, {123}) == ([GpuProcess(9, "python3")], True)
    assert foreign_processes([GpuProcess(7)], {123}) == ([], True)
    assert foreign_processes([], {123}) == ([], False)


def test_cuda_visible_devices_maps_torch_device_to_the_right_gpu(fake_gpus, monkeypatch):
    fake_gpus({"name": "gpu-a"}, {"name": "gpu-b"}, {"name": "gpu-c"})
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,0")
    assert NvmlBackend([0]).device_names == ["gpu-c"]
    assert NvmlBackend([1]).device_names == ["gpu-a"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-fake-0001")
    assert NvmlBackend([0]).device_names == ["gpu-b"]


def test_torch_uuid_wins_over_index(fake_gpus, monkeypatch):
    fake_gpus({"name": "gpu-a"}, {"name": "gpu-b"})
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert NvmlBackend([0], uuids=["fake-0001"]).device_names == ["gpu-b"]


def test_visible_indices_parsing():
    assert visible_nvml_indices(2, None) == [0, 1]
    assert visible_nvml_indices(1, "3, 1") == [3]
    assert visible_nvml_indices(2, "GPU-x,GPU-y") == ["GPU-x", "GPU-y"]


def test_missing_nvml_degrades_to_a_warning(monkeypatch, tmp_path, capsys):
    import torch

    for key, value in fake_nvml.environment(tmp_path / "missing.json").items():
        monkeypatch.setenv(key, value)
    monitor = open_monitor(torch.device("cpu"), 0.1, None)
    assert monitor.gpu is None
    assert "telemetry unavailable" in capsys.readouterr().err
    assert _window(monitor, 0.01).get("energy_j") is None


@pytest.mark.e2e
def test_cli_row_carries_energy_per_sample_and_log(fake_gpus, csv_path, tmp_path):
    fake_gpus({"power_w": 200.0})
    log = tmp_path / "samples.csv"
    out = run_cli(
        "train",
        "--model",
        "timm:test_resnet",
        *TINY,
        "--n-iters",
        "40",
        "--warmup-steps",
        "1",
        "--sample-interval",
        "0.01",
        "--telemetry-log",
        str(log),
        "--output",
        str(csv_path),
        env=cli_env(),
    )
    assert out.returncode == 0, out.stderr
    row = read_rows(csv_path)[0]
    samples = 4 * 40
    assert float(row["energy_per_sample_j"]) == pytest.approx(float(row["energy_j"]) / samples)
    assert float(row["avg_power_w"]) == pytest.approx(200.0, rel=0.2)
    assert row["energy_source"] == "nvml_counter" and row["power_limit_w"] == "700.0"
    assert len(read_rows(log)) == int(row["telemetry_samples"])


@pytest.mark.e2e
def test_cli_without_nvml_still_writes_the_row(csv_path, tmp_path):
    env = {**cli_env(), **fake_nvml.environment(tmp_path / "absent.json")}
    out = run_cli(
        "infer",
        "--model",
        "timm:test_resnet",
        *TINY,
        "--n-iters",
        "2",
        "--warmup-steps",
        "0",
        "--output",
        str(csv_path),
        env=env,
    )
    assert out.returncode == 0, out.stderr
    assert "telemetry unavailable" in out.stderr
    row = read_rows(csv_path)[0]
    assert row["status"] == "ok" and row.get("energy_j", "") == ""


@pytest.mark.e2e
def test_no_telemetry_flag_leaves_power_columns_out(fake_gpus, csv_path):
    fake_gpus()
    out = run_cli(
        "infer",
        "--model",
        "timm:test_resnet",
        *TINY,
        "--n-iters",
        "2",
        "--warmup-steps",
        "0",
        "--no-telemetry",
        "--json",
        "--output",
        str(csv_path),
        env=cli_env(),
    )
    assert out.returncode == 0, out.stderr
    assert "energy_j" not in json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.e2e
def test_throttle_warning_is_printed(fake_gpus, csv_path):
    fake_gpus({"throttle": 0x20})
    out = run_cli(
        "infer",
        "--model",
        "timm:test_resnet",
        *TINY,
        "--n-iters",
        "5",
        "--warmup-steps",
        "0",
        "--output",
        str(csv_path),
        env=cli_env(),
    )
    assert out.returncode == 0, out.stderr
    assert "throttled" in out.stderr and "sw_thermal" in out.stderr


def test_counter_update_period_is_measured_before_the_window(fake_gpus):
    fake_gpus({"energy_period_s": 0.05})
    backend = NvmlBackend([0])
    assert counter_update_period(lambda: backend.energy_j(0)) == pytest.approx(0.05, rel=0.3)


def test_a_window_short_for_the_counter_gives_no_energy_figure(fake_gpus):
    # 0.5 s against a counter that steps every 50 ms: one step at each edge is 20 % of the window
    fake_gpus({"power_w": 300.0, "energy_period_s": 0.05})
    summary = _window(TelemetryMonitor(NvmlBackend([0]), None, interval_s=0.02), 0.5)
    quality = re.fullmatch(
        r"short window: ([\d.]+) s < ([\d.]+) s needed by nvml_counter \(use --min-time\)",
        summary["energy_quality"],
    )
    assert quality and float(quality[1]) == pytest.approx(0.5, abs=0.05)
    assert float(quality[2]) == pytest.approx(40 * 0.05, rel=0.3)
    assert summary["energy_j"] is None and summary["avg_power_w"] is None
    assert summary["energy_counter_j"] is not None  # the raw reading stays in the row


def test_a_counters_steps_timed_in_the_window_need_no_whole_period_at_its_edges():
    # 500 W, a counter stepping every 0.1 s; a 2.05 s window opening 0.09 s after a step: the
    # edges' delta counts 2.0 s of energy (2.5 % short), the timed steps the window's own
    steps = [(k * 0.1, 500.0 * k * 0.1) for k in range(40)]
    t0, t1 = 1.09, 3.14
    edges = 500.0 * (3.1 - 1.0)
    assert edges != pytest.approx(500.0 * (t1 - t0), rel=0.02)
    assert timed_counter_j(steps, t0, t1, 1.0) == pytest.approx(500.0 * (t1 - t0), rel=1e-9)
    assert timed_counter_j(steps, t0, t1, 2.5) is None  # steps inside span less than asked
    assert timed_counter_j(steps[:5], t0, t1, 0.0) is None  # none inside


def test_a_window_of_timed_counter_steps_is_trusted_where_its_edges_alone_are_not(fake_gpus):
    # 0.8 s against a counter stepping every 50 ms: 16 steps, too few for the edges' delta
    # (40 needed) but enough when timed (10); the figure is the window's power x time
    fake_gpus({"power_w": 300.0, "energy_period_s": 0.05})
    summary = _window(TelemetryMonitor(NvmlBackend([0]), None, interval_s=0.02), 0.8)
    assert summary["energy_source"] == "nvml_counter_timed"
    assert summary["energy_quality"] == "ok"
    assert summary["energy_j"] == pytest.approx(300.0 * summary["telemetry_window_s"], rel=0.02)
    assert summary["energy_counter_j"] is not None  # the edges' delta stays in the row


def test_a_long_enough_window_is_trusted_and_agrees_with_the_integral(fake_gpus):
    fake_gpus({"power_w": 300.0, "energy_period_s": 0.01})
    summary = _window(TelemetryMonitor(NvmlBackend([0]), None, interval_s=0.02), 0.6)
    assert summary["energy_quality"] == "ok"
    assert summary["energy_j"] == pytest.approx(300.0 * 0.6, rel=0.05)
    assert summary["energy_integral_j"] == pytest.approx(summary["energy_j"], rel=0.05)
    assert summary["telemetry_window_s"] == pytest.approx(0.6, abs=0.05)


@pytest.mark.e2e
def test_min_time_stretches_the_window_until_the_counter_can_be_trusted(fake_gpus, csv_path):
    fake_gpus({"power_w": 200.0, "energy_period_s": 0.01})  # needs 0.4 s
    args = ["--model", "timm:test_resnet", *TINY, "--n-iters", "2", "--warmup-steps", "1"]
    out = run_cli("infer", *args, "--min-time", "0.6", "--output", str(csv_path), env=cli_env())
    assert out.returncode == 0, out.stderr
    row = read_rows(csv_path)[0]
    assert float(row["min_time_s"]) == 0.6 and int(row["steps"]) > 2
    assert float(row["telemetry_window_s"]) >= 0.6 and row["energy_quality"] == "ok"
    assert float(row["avg_power_w"]) == pytest.approx(200.0, rel=0.1)
    short = run_cli("infer", *args, "--output", str(csv_path), env=cli_env())
    assert short.returncode == 0, short.stderr
    row = read_rows(csv_path)[1]
    assert float(row["min_time_s"]) == 0.0  # a CPU run: the GPU default does not apply
    assert row["energy_quality"].startswith("short window") and row["energy_j"] == ""


def test_a_later_run_in_the_process_reuses_the_idle_baseline_and_says_how_old(fake_gpus):
    state = fake_gpus({"power_w": 100.0})
    first = TelemetryMonitor(NvmlBackend([0]), None, interval_s=0.05)
    reads = _count_reads(first.gpu)
    first.measure_idle(seconds=0.3)
    assert len(reads) >= 3 and first.idle_power_age_s == 0.0
    fake_nvml.write_state(state, [{"power_w": 400.0}])  # the GPU is warm now, not idle
    second = TelemetryMonitor(NvmlBackend([0]), None, interval_s=0.05)
    reads = _count_reads(second.gpu)
    second.measure_idle(seconds=0.3)
    assert reads == []  # not sampled again
    assert second.idle_power_w == pytest.approx(100.0) and second.idle_power_age_s > 0
    assert second.counter_period_s == first.counter_period_s


def test_an_old_idle_baseline_is_sampled_again(fake_gpus, monkeypatch):
    from dlbench.telemetry import gpu_facts

    state = fake_gpus({"power_w": 100.0})
    TelemetryMonitor(NvmlBackend([0]), None).measure_idle(seconds=0.2)
    fake_nvml.write_state(state, [{"power_w": 150.0}])
    monkeypatch.setattr(gpu_facts, "IDLE_REUSE_S", 0.0)
    later = TelemetryMonitor(NvmlBackend([0]), None)
    later.measure_idle(seconds=0.2)
    assert later.idle_power_w == pytest.approx(150.0) and later.idle_power_age_s == 0.0


def test_end_window_returns_a_typed_measurement_whose_columns_are_the_rows(fake_gpus):
    fake_gpus({"power_w": 300.0, "energy_period_s": 0.05})
    monitor = TelemetryMonitor(NvmlBackend([0]), None, interval_s=0.02)
    monitor.begin_window()
    time.sleep(0.3)
    measured = monitor.end_window()
    assert measured.backend == "nvml" and measured.samples.count >= 10
    assert measured.energy.source == "nvml_counter" and measured.energy.counter_j > 0
    assert measured.energy.quality.startswith("short window") and measured.energy.trusted_j is None
    assert measured.columns() == monitor.summary()


def test_gpu_facts_are_state_a_monitor_is_given_not_a_hidden_cache(fake_gpus):
    from dlbench.telemetry.gpu_facts import PROCESS_GPU_FACTS, GpuFacts

    fake_gpus({"power_w": 100.0})
    own = GpuFacts()
    TelemetryMonitor(NvmlBackend([0]), None, facts=own).measure_idle(seconds=0.1)
    assert len(own.idle_baselines) == 1 and len(own.counter_periods) == 1
    assert PROCESS_GPU_FACTS.idle_baselines == {}  # the process's own facts untouched
    fresh = TelemetryMonitor(NvmlBackend([0]), None)  # the process's facts: not measured yet
    assert fresh.facts is PROCESS_GPU_FACTS and fresh.idle_power_w is None


def test_a_monitor_of_two_gpus_judges_each_clock_against_its_own_base(fake_gpus):
    """Each GPU at its own base clock is no low clock: judged against GPU 0's higher base,
    GPU 1's samples all read low. The power limit is the one they share, or none."""
    fake_gpus({"sm_clock": 1980, "base_clock": 1980}, {"sm_clock": 1590, "base_clock": 1590})
    summary = _window(TelemetryMonitor(NvmlBackend([0, 1]), None, interval_s=0.02), 0.2)
    assert summary["sm_clock_below_base_pct"] == 0.0
    assert summary["sm_clock_base_mhz"] == 1590


def test_gpu_facts_found_in_one_process_serve_the_next_through_json():
    """A forked point hands what it measured of its GPU back to the worker that forks the next:
    the counter's period and the idle baseline come back under the same keys; a malformed
    record is ignored, and an older baseline never replaces a younger one."""
    import json

    from dlbench.telemetry.gpu_facts import GpuFacts

    key = ("NvmlBackend", (1234, "GPU-x"), "NVIDIA H200")
    found = GpuFacts({key: 0.02}, {key: (100.0, 75.5)})
    kept = GpuFacts()
    kept.adopt(json.loads(json.dumps(found.as_record())))
    assert kept == found and kept.idle_baseline(key, 130.0) == (75.5, 30.0)
    kept.adopt({"idle_baselines": [[list(key[:1]), "not a pair"]]})
    kept.adopt("garbage")
    kept.adopt({"idle_baselines": [[[key[0], list(key[1]), key[2]], [50.0, 60.0]]]})
    assert kept == found
