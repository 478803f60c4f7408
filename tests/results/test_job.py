"""A multi-process row speaks for the job: sums over its GPUs, the worst GPU, a mixed host named,
and attained peaks judged against every GPU's own (results.job, results.peaks.attained)."""

from __future__ import annotations

import pytest

from dlbench.results.job import job_gpus, job_telemetry
from dlbench.results.peaks.attained import job_peaks


def rank(i: int, name: str = "NVIDIA H100 80GB HBM3", memory: int = 81559, **telemetry) -> dict:
    return {"device_index": i, "hostname": "node", "gpu_uuid": f"GPU-{i}", "gpu_name": name,
            "gpu_memory_mb": memory, "gpu_capability": "9.0", "energy_j": 100.0 + i,
            "energy_counter_j": 99.0, "energy_integral_j": 98.0, "avg_power_w": 500.0,
            "peak_power_w": 600.0, "idle_power_w": 70.0, "power_limit_w": 700.0,
            "temp_max_c": 40 + i, "throttle_pct": 0.0, "mem_used_max_mb": 1000.0 * i,
            "other_gpu_processes": 0, "other_gpu_process_list": "",
            "gpu_processes_hidden": False, "cpu_energy_j": 30.0, **telemetry}  # fmt: skip


def test_energy_and_power_are_the_jobs_and_heat_is_the_hottest_gpus():
    job = job_telemetry([rank(0), rank(1), rank(2), rank(3)])
    assert job["energy_j"] == pytest.approx(406.0) and job["energy_counter_j"] == 396.0
    assert job["energy_integral_j"] == 392.0 and job["avg_power_w"] == 2000.0
    assert job["idle_power_w"] == 280.0 and job["peak_power_w"] == 2400.0
    assert job["temp_max_c"] == 43 and job["mem_used_max_mb"] == 3000.0
    assert job["power_limit_w"] == 700.0 and job["cpu_energy_j"] == 30.0  # one host, once
    assert job["other_gpu_processes"] == 0 and job["other_gpu_process_list"] == ""


def test_a_rank_without_a_figure_leaves_the_sum_empty_not_partial():
    job = job_telemetry([rank(0), rank(1, energy_counter_j=None, power_limit_w=400.0)])
    assert job["energy_counter_j"] is None and job["energy_j"] == 201.0
    assert job["power_limit_w"] is None  # the GPUs ran under different limits


def test_foreign_processes_are_named_with_their_gpu_and_counted_on_the_worst_one():
    job = job_telemetry(
        [rank(0), rank(1, other_gpu_processes=2, other_gpu_process_list="7 a 1 MiB; 8 b")]
    )
    assert job["other_gpu_processes"] == 2
    assert job["other_gpu_process_list"] == "GPU 1: 7 a 1 MiB; 8 b"


def test_a_host_of_mixed_gpus_says_so():
    same = job_gpus([rank(0), rank(1)])
    assert same == {"gpu_name": "NVIDIA H100 80GB HBM3", "gpu_mixed": False,
                    "gpu_memory_mb": 81559.0, "gpu_capability": "9.0",
                    "gpu_uuid": "GPU-0 GPU-1"}  # fmt: skip
    mixed = job_gpus([rank(0), rank(1), rank(2, "NVIDIA H200", 143771, gpu_capability="9.0"),
                      rank(3, "NVIDIA A100-SXM4-80GB", 81920, gpu_capability="8.0")])  # fmt: skip
    assert mixed["gpu_mixed"] is True and mixed["gpu_memory_mb"] == 81559.0
    assert mixed["gpu_name"] == (
        "NVIDIA H100 80GB HBM3 x2 + NVIDIA H200 x1 + NVIDIA A100-SXM4-80GB x1"
    )
    assert mixed["gpu_capability"] == "8.0,9.0"


def test_a_job_is_judged_against_every_gpus_own_attained_peak_or_none():
    a = {"bf16": 740.0, "read_tb_s": 3.1, "run_id": "p1", "timestamp": "t"}
    b = {"bf16": 720.0, "read_tb_s": 3.2, "run_id": "p1", "timestamp": "t"}
    assert job_peaks([a, b]) == {"run_id": "p1", "bf16": 730.0, "read_tb_s": pytest.approx(3.15)}
    assert job_peaks([a, None]) is None and job_peaks([a]) == a and job_peaks([]) is None
