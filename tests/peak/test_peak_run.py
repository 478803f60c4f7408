"""`dlbench peak` on the CPU end to end (real matmuls and memory, bounded in time), the figures
later runs divide by, and the columns from a fake GPU's findings."""

from __future__ import annotations

import time

import pytest

from dlbench.peak.run import peak_row
from dlbench.peak.search import Best
from dlbench.results.efficiency import attained_columns
from dlbench.results.peaks.siblings import datasheet_shares
from tests.conftest import read_rows, run_cli

TRAIN = ["train", "--accelerator", "cpu", "--model", "timm:test_resnet", "--width", "32",
         "--height", "32", "--batch-size", "4", "--n-iters", "3",
         "--warmup-steps", "1"]  # fmt: skip


@pytest.mark.e2e
def test_peak_on_the_cpu_writes_a_row_within_its_time_and_later_runs_divide_by_it(tmp_path):
    csv, cache = tmp_path / "rows.csv", tmp_path / "cache"
    began = time.perf_counter()
    out = run_cli("peak", "--accelerator", "cpu", "--max-time", "2", "--output", csv,
                  "--cache-dir", cache)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert time.perf_counter() - began < 2 + 30  # the search's bound, plus start-up and imports
    [peak] = read_rows(csv)
    assert peak["run_kind"] == "peak" and peak["gpu_uuid"] == "cpu" and peak["verdict"] == "valid"
    assert float(peak["attained_fp32_tflops"]) > 0 and float(peak["attained_read_tb_s"]) > 0
    assert peak["attained_matmul_shapes"].startswith("fp32=")
    assert float(peak["window_s"]) < 2 * 1.5
    assert run_cli(*TRAIN, "--cache-dir", cache, "--output", csv).returncode == 0
    _, served = read_rows(csv)
    assert served["attained_peak_run_id"] == peak["run_id"]
    attained = float(served["attained_tflops"])
    assert attained == pytest.approx(float(peak["attained_fp32_tflops"]))
    assert float(served["mfu_attained"]) == pytest.approx(
        float(served["achieved_tflops"]) / attained
    )


def test_another_gpu_or_software_or_a_cold_run_finds_no_peaks(tmp_path):
    from dlbench.caches import use_caches
    from dlbench.results.peaks.attained import attained_peaks, record_peaks
    from tests.engine.acceleration.test_caches import ENVIRONMENT

    folder = use_caches(tmp_path, ENVIRONMENT)
    record_peaks(folder, "GPU-1", {"bf16": 742.4, "run_id": "abc"})
    assert attained_peaks(folder, "GPU-1")["bf16"] == 742.4
    assert attained_peaks(folder, "GPU-2") is None  # another GPU of the same model
    for column, other in (("torch", "2.12.0+cu130"), ("driver", "590.1"), ("dlbench", "0.3.0")):
        assert attained_peaks(use_caches(tmp_path, {**ENVIRONMENT, column: other}), "GPU-1") is None
    assert attained_peaks(None, "GPU-1") is None  # --no-cache


H100 = "NVIDIA H100 80GB HBM3"


def test_a_fake_gpus_findings_become_the_rows_columns():
    import torch

    found = {"bf16": Best(790.0, (8192, 8192, 8192), 12, 680.0),
             "fp8": Best(1300.0, (8192, 8192, 16384), 9, 1250.0),
             "read": Best(2.95, (2048,), 4, 2.95), "h2d": Best(55.0, (1024,), 2, 55.0),
             "fp16": None, "p2p": None}  # fmt: skip
    built = peak_row(torch.device("cpu"), found, 30.0, {"avg_power_w": 650.0})
    built.add("the GPU", {"gpu_name": H100})
    row = built.add("the datasheet", datasheet_shares(built.columns())).columns()
    assert row["attained_bf16_tflops"] == 790.0 and row["attained_fp8_tflops"] == 1300.0
    assert row["attained_bf16_sustained_tflops"] == 680.0
    assert row["attained_matmul_shapes"] == "bf16=8192x8192x8192 fp8=8192x8192x16384"
    assert row["attained_read_tb_s"] == 2.95 and row["attained_copy_tb_s"] is None
    assert row["peak_shapes_tried"] == 27 and row["avg_power_w"] == 650.0
    assert row["attained_bf16_datasheet_share"] == pytest.approx(790.0 / 989.4)
    assert row["attained_read_datasheet_share"] == pytest.approx(2.95 / 3.35)


@pytest.mark.parametrize("text", ["{not json", "[1]", '{"cpu": 3}'])
def test_a_peaks_record_that_cannot_be_read_gives_no_peaks(tmp_path, text):
    from dlbench.results.peaks.attained import PEAKS_FILE, attained_peaks, record_peaks

    (tmp_path / PEAKS_FILE).write_text(text)
    assert attained_peaks(tmp_path, "cpu") is None
    record_peaks(tmp_path, "cpu", {"bf16": 1.0})  # and the next peak replaces it
    assert attained_peaks(tmp_path, "cpu") == {"bf16": 1.0}


def test_attained_columns_divide_by_the_dtype_the_precision_runs_in():
    peaks = {"bf16": 790.0, "fp16": 780.0, "fp32": 51.0, "read_tb_s": 2.95, "run_id": "abc"}
    train = attained_columns({"achieved_tflops": 395.0}, "bf16-mixed", peaks)
    assert train == {"attained_peak_run_id": "abc", "attained_tflops": 790.0,
                     "mfu_attained": 0.5}  # fmt: skip
    assert attained_columns({"achieved_tflops": 25.5}, "32", peaks)["mfu_attained"] == 0.5
    decode = attained_columns({"decode_hbm_tb_s": 2.36}, "bf16-true", peaks)
    assert decode["hbm_bandwidth_share_attained"] == pytest.approx(0.8)
    assert attained_columns({"achieved_tflops": 1.0}, "tf32", peaks) == {
        "attained_peak_run_id": "abc"
    }  # no tf32 figure: no MFU against it
    assert attained_columns({"achieved_tflops": 1.0}, "bf16-mixed", None) == {}


def test_peer_copies_are_measured_per_pair_with_their_median_and_slowest():
    import torch

    from dlbench.peak.measure import measure_device
    from dlbench.peak.run import peer_columns

    cpu = torch.device("cpu")  # three "peers" that are the host: the copy path, no GPU needed
    found = measure_device(cpu, total_s=1.0, peers=[cpu, cpu, cpu])
    assert [peer for peer, _ in found["p2p"]] == ["cpu"] * 3
    assert all(rate > 0 for _, rate in found["p2p"])
    assert found["h2d"] is None and found["fp8"] is None
    assert isinstance(found["fp32"], Best) and isinstance(found["read"], Best)
    columns = peer_columns([("1", 380.0), ("2", 120.0), ("3", 390.0)])
    assert columns == {"attained_p2p_gb_s": 380.0, "attained_p2p_min_gb_s": 120.0,
                       "attained_p2p_pairs": "1:380.0 2:120.0 3:390.0"}  # fmt: skip
    assert peer_columns([])["attained_p2p_gb_s"] is None
