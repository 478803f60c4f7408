"""`--strategy fsdp`: FSDP2 over gloo on the CPU (real torch, real Lightning, real processes),
the model built on the meta device and filled in shards, the OOM path, the refusals, and the
scaling sweep's points."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from dlbench.analysis.scaling import scaling_table
from dlbench.engine.distribution.sharding import repeated_blocks, resettable, selective_policy
from dlbench.sweep.scaling import scaling_plan
from dlbench.workloads import get_workload
from tests.conftest import read_rows, refused, run_cli

LLM = ["--model", "llm_tiny", "--accelerator", "cpu", "--seq-len", "32", "--batch-size", "2"]
FSDP = ["--devices", "2", "--strategy", "fsdp", "--precision", "bf16-mixed"]


def _native_tiny(where: torch.device) -> torch.nn.Module:
    workload = get_workload("llm_tiny")
    shape = workload.shape(None, None, 32)
    with where:
        return workload.native(workload.build(shape))


def test_the_repeated_blocks_are_a_transformers_layers():
    model = _native_tiny(torch.device("cpu"))
    container, names = repeated_blocks(model)
    assert container is model.layers and names == ["0", "1"]
    assert repeated_blocks(torch.nn.Linear(2, 2)) == (None, [])


def test_selective_checkpointing_keeps_every_second_matmul_and_fp8s_scales():
    from types import SimpleNamespace

    from torch.utils.checkpoint import CheckpointPolicy

    aten, policy = torch.ops.aten, selective_policy()
    forward, recompute = SimpleNamespace(is_recompute=False), SimpleNamespace(is_recompute=True)
    save, again = CheckpointPolicy.MUST_SAVE, CheckpointPolicy.PREFER_RECOMPUTE
    assert [policy(forward, aten.mm.default) for _ in range(4)] == [save, again, save, again]
    assert policy(recompute, aten.mm.default) == save  # the recompute counts its own matmuls
    # torchao's tensorwise scale is the absolute maximum of a whole tensor: kept, as torchtitan
    assert policy(forward, aten.max.default) == save
    assert policy(forward, aten._scaled_dot_product_flash_attention.default) == save
    assert policy(forward, aten.max.dim) == again  # a reduction along a dimension is not a scale
    assert policy(forward, aten.relu.default) == again


def test_a_model_built_on_the_meta_device_is_filled_as_one_built_whole():
    """RoPE's frequencies are computed, not learned: a meta-built model must make them again,
    and each norm starts at unit scale (else FSDP's shards hold uninitialised memory)."""
    whole = _native_tiny(torch.device("cpu"))
    empty = _native_tiny(torch.device("meta"))
    assert resettable(empty)
    empty.to_empty(device="cpu")
    for module in empty.modules():
        if callable(getattr(module, "reset_parameters", None)):
            module.reset_parameters()
    assert torch.equal(empty.inv_freq, whole.inv_freq)
    assert all(torch.equal(b.ffn_norm.weight, torch.ones_like(b.ffn_norm.weight))
               for b in empty.layers)  # fmt: skip


@pytest.mark.e2e
def test_two_gloo_ranks_train_a_sharded_llm_and_rank_0_writes_its_row(csv_path):
    out = run_cli("train", *LLM, *FSDP, "--activation-checkpointing", "selective", "--no-telemetry",
                  "--n-iters", "10", "--output", str(csv_path))  # fmt: skip
    assert out.returncode == 0, out.stderr
    [row] = read_rows(csv_path)
    assert (row["strategy"], row["world_size"], row["sharding_degree"]) == ("fsdp", "2", "2")
    assert row["activation_checkpointing"] == "selective" and row["status"] == "ok"
    whole = sum(p.numel() for p in _native_tiny(torch.device("cpu")).parameters())
    assert int(row["param_count"]) == whole  # the model's, not one shard's
    assert float(row["tokens_per_s"]) > 0
    ranks = read_rows(csv_path.with_name("bench.per_rank.csv"))
    assert [r["rank"] for r in ranks] == ["0", "1"]


@pytest.mark.e2e
def test_validate_holds_the_sharded_loop_to_a_bare_fsdp2_loop(csv_path):
    out = run_cli("validate", *LLM, *FSDP, "--n-iters", "10", "--repeats", "1",
                  "--output", str(csv_path))  # fmt: skip
    assert out.returncode == 0, out.stderr
    [row] = read_rows(csv_path)
    assert (row["run_kind"], row["strategy"], row["sharding_degree"]) == ("validate", "fsdp", "2")
    assert 0.3 < float(row["harness_ratio"]) < 3.0


@pytest.mark.e2e
def test_a_sharded_run_that_does_not_fit_is_one_oom_row_with_what_it_asked_for(csv_path):
    args = ["--model", "fault_oom", "--accelerator", "cpu", "--batch-size", "32", *FSDP]
    out = run_cli("train", *args, "--output", str(csv_path))
    assert out.returncode == 3, out.stderr
    assert "Traceback" not in out.stderr
    [row] = read_rows(csv_path)  # rank 0 alone records it
    assert (row["status"], row["strategy"]) == ("oom", "fsdp")
    assert float(row["oom_request_mb"]) == 32 * 1024  # "Tried to allocate 32 GiB"


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["train", "--devices", "1"], ("--strategy", "several devices")),
        (["infer", "--devices", "2"], ("--strategy", "training only")),
        (["train", "--devices", "2", "--cuda-graphs"], ("--cuda-graphs", "FSDP")),
        (["train", "--devices", "2", "--precision", "16-mixed"], ("--precision", "FSDP")),
        (["train", "--devices", "2", "--activation-checkpointing", "most"],
         ("--activation-checkpointing", "selective")),
    ],
)  # fmt: skip
def test_sharding_that_makes_no_sense_is_one_line_and_exit_2(dlbench, kept, args, needles):
    mode, *rest = args
    refused(dlbench(mode, *LLM, "--strategy", "fsdp", *rest, "--output", kept), *needles)


def test_checkpointing_without_fsdp_is_named_as_ignored(dlbench, kept):
    output = kept.parent / "other.csv"
    code, _, err = dlbench("train", *LLM, "--n-iters", "2", "--warmup-steps", "0",
                           "--activation-checkpointing", "full", "--output", output)  # fmt: skip
    assert code == 0, err
    assert "--activation-checkpointing full (only with --strategy fsdp)" in err


def test_scaling_under_fsdp_runs_one_device_plain_and_shards_the_rest():
    flags = {"model": "llm_8b", "batch_size": 1, "precision": "bf16-mixed", "strategy": "fsdp"}
    points = scaling_plan(flags, "train", [1, 2, 4], 600.0).points()
    ran = sorted((int(p.flags.get("devices", 1)), p.flags["strategy"]) for p in points)
    assert ran == [(1, "auto"), (2, "fsdp"), (4, "fsdp")]


def test_scaling_efficiency_of_sharded_runs_is_against_the_plain_one_device_run():
    base = {"status": "ok", "run_kind": "benchmark", "model": "llm_1b", "mode": "train",
            "precision": "bf16-mixed", "batch_size": 4, "gpu_name": "H100"}  # fmt: skip
    rows = pd.DataFrame([
        {**base, "strategy": "single", "world_size": 1, "samples_per_s": 10.0, "run_id": "a",
         "timestamp": "1"},
        {**base, "strategy": "fsdp", "activation_checkpointing": "none", "world_size": 4,
         "samples_per_s": 36.0, "run_id": "b", "timestamp": "2"},
    ])  # fmt: skip
    table = scaling_table(rows).set_index("world_size")
    assert table.loc[4, "scaling_efficiency"] == pytest.approx(36 / 40)


@pytest.mark.e2e
def test_the_scaling_command_shards_every_count_but_one_and_records_efficiency(csv_path):
    # 8 steps a point, invalid (few_steps) on purpose: the sharding is what is tried
    out = run_cli("scaling", *LLM, "--devices", "1,2", "--strategy", "fsdp", "--n-iters", "8",
                  "--no-telemetry", "--invalid-ok", "--output", str(csv_path))  # fmt: skip
    assert out.returncode == 0, out.stderr
    rows = read_rows(csv_path)
    runs = {r["world_size"]: r for r in rows if r["run_kind"] == "benchmark"}
    assert (runs["1"]["strategy"], runs["2"]["strategy"]) == ("single", "fsdp")
    [scaling] = [r for r in rows if r["run_kind"] == "scaling"]
    one, two = (float(runs[n]["samples_per_s"]) for n in ("1", "2"))
    assert float(scaling["scaling_efficiency"]) == pytest.approx(two / (2 * one))


@pytest.mark.e2e
def test_an_image_model_shards_in_the_contiguous_layout_and_its_row_says_so(csv_path):
    """FSDP refuses channels_last conv weights (not contiguous): a timm ViT ran into it."""
    out = run_cli("train", "--model", "timm:test_vit", "--accelerator", "cpu", "--width", "32",
                  "--height", "32", "--batch-size", "4", *FSDP, "--n-iters", "8",
                  "--no-telemetry", "--output", str(csv_path))  # fmt: skip
    assert out.returncode == 0, out.stderr
    [row] = read_rows(csv_path)
    assert (row["strategy"], row["channels_last"], row["status"]) == ("fsdp", "False", "ok")
