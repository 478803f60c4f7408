"""Text workloads, generation metrics, FLOP counts and MFU, on the CPU with tiny sizes."""

from __future__ import annotations

import json

import pytest

from dlbench.hardware import peak_tflops
from dlbench.results.efficiency import mfu_columns
from dlbench.workloads import get_workload
from dlbench.workloads.flops import FlopCount, flops_per_sample, palm_flops
from dlbench.workloads.text import LLAMA_SIZES
from tests.conftest import run_cli


def test_resnet50_counted_flops_match_the_published_figure():
    w = get_workload("resnet50")
    infer = flops_per_sample(w, w.shape(224, 224, 0), "infer")
    train = flops_per_sample(w, w.shape(224, 224, 0), "train")
    assert infer.method == "flop_counter"
    assert infer.per_sample == pytest.approx(8.18e9, rel=0.01)  # 4.09 GMACs
    assert train.per_sample == pytest.approx(3 * infer.per_sample, rel=0.02)


def test_palm_formula_by_hand():
    count = palm_flops(
        params=1000, embedding_params=100, layers=2, hidden=8, seq_len=4, mode="train"
    )
    assert count.per_sample == (6 * 900 + 12 * 2 * 8 * 4) * 4
    assert palm_flops(1000, 100, 2, 8, 4, "infer").per_sample == count.per_sample / 3


def test_llama_analytic_parameter_count_matches_the_real_model():
    import torch

    w = get_workload("llm_tiny")
    shape = w.shape(None, None, 16)
    with torch.device("meta"):
        model = w.build(shape)
    size = LLAMA_SIZES["llm_tiny"]
    matrices = sum(p.numel() for p in model.parameters() if p.dim() == 2)  # norms do no matmul
    real_non_embedding = matrices - size.vocab * size.hidden
    flops = flops_per_sample(w, shape, "train")
    attention = 12 * size.layers * size.hidden * 16
    assert flops.per_sample == (6 * real_non_embedding + attention) * 16


def test_peak_table_matches_names_exactly():
    assert peak_tflops("NVIDIA L40S", "bf16-mixed")[0] == 362.0
    assert peak_tflops("NVIDIA L4", "bf16-mixed")[0] == 121.0
    assert peak_tflops("NVIDIA H100 80GB HBM3", "bf16-true")[0] == pytest.approx(989.4)
    assert peak_tflops("NVIDIA H100 PCIe", "tf32")[0] == 378.0
    assert peak_tflops("NVIDIA L40", "32") is None
    assert peak_tflops("NVIDIA H100", "32") is None


def test_mfu_is_empty_for_unknown_gpus():
    flops = FlopCount(1e12, "flop_counter")
    known = mfu_columns(flops, 100.0, "NVIDIA H200", "bf16-mixed")
    assert known["mfu"] == pytest.approx(100.0 / 989.4)
    unknown = mfu_columns(flops, 100.0, "Mystery GPU 9000", "bf16-mixed")
    assert unknown["achieved_tflops"] == 100.0 and "mfu" not in unknown


@pytest.mark.e2e
@pytest.mark.parametrize("mode", ["train", "infer"])
def test_distilbert_and_llm_train_report_tokens(csv_path, mode):
    model = "distilbert" if mode == "infer" else "llm_tiny"
    out = run_cli(
        mode,
        "--model",
        model,
        "--accelerator",
        "cpu",
        "--batch-size",
        "2",
        "--seq-len",
        "16",
        "--n-iters",
        "2",
        "--warmup-steps",
        "1",
        "--output",
        str(csv_path),
        "--json",
    )
    assert out.returncode == 0, out.stderr
    row = json.loads(out.stdout.strip().splitlines()[-1])
    assert row["sample_unit"] == "sequence" and row["seq_len"] == 16
    assert row["tokens_per_s"] == pytest.approx(16 * row["samples_per_s"])
    assert row["flops_per_sample"] > 0 and "images_per_s" not in row
    if mode == "train":
        assert (row["optimizer"], row["optimizer_impl"]) == ("adamw", "fused")
