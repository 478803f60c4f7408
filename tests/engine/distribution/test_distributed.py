"""DDP on the CPU with gloo, through Lightning's launcher and through torchrun: one row per run,
written by rank 0, with every rank's window and power in the side file."""

from __future__ import annotations

import socket
import subprocess
import sys

import pandas as pd
import pytest

from dlbench.analysis.scaling import scaling_table
from dlbench.errors import UserError
from dlbench.sweep.scaling import device_counts
from tests import fake_nvml
from tests.conftest import TINY, cli_env, read_rows, run_cli

RUN = ["--model", "timm:test_resnet", *TINY, "--n-iters", "20", "--warmup-steps", "1"]


@pytest.mark.e2e
def test_four_cpu_ranks_write_one_row_of_the_jobs_figures_and_a_per_rank_file(csv_path, tmp_path):
    """gloo, 4 ranks, each on its own fake GPU: the row's energy and power are the job's (every
    GPU summed), its neighbours are only processes outside the job (each rank holds its own
    GPU; a foreign process on GPU 2 is named), and the side file has each rank's own."""
    state = tmp_path / "nvml.json"
    powers = [200.0, 300.0, 250.0, 150.0]
    foreign = [{"pid": 4242, "name": "someone.py", "memory_mb": 2048}]
    gpus = [
        {"power_w": w, **({"foreign": foreign} if i == 2 else {})} for i, w in enumerate(powers)
    ]
    fake_nvml.write_state(state, gpus)
    env = {**cli_env(), **fake_nvml.environment(state)}
    out = run_cli("train", *RUN, "--devices", "4", "--sample-interval", "0.01",
                  "--output", str(csv_path), env=env)  # fmt: skip
    assert out.returncode == 0, out.stderr
    [row] = read_rows(csv_path)
    assert row["world_size"] == "4" and row["launcher"] == "Lightning"
    ranks = read_rows(csv_path.with_name("bench.per_rank.csv"))
    assert [r["rank"] for r in ranks] == ["0", "1", "2", "3"]
    assert {r["run_id"] for r in ranks} == {row["run_id"]}
    for rank, watts in zip(ranks, powers):
        assert float(rank["avg_power_w"]) == pytest.approx(watts, rel=0.2)
    for column in ("energy_j", "energy_counter_j", "energy_integral_j", "avg_power_w",
                   "idle_power_w"):  # fmt: skip
        assert float(row[column]) == pytest.approx(sum(float(r[column]) for r in ranks))
    assert float(row["avg_power_w"]) == pytest.approx(sum(powers), rel=0.2)
    assert row["other_gpu_processes"] == "1" and row["verdict_reasons"].count("other_processes")
    assert row["other_gpu_process_list"] == "GPU 2: 4242 someone.py 2048 MiB"
    assert [r["other_gpu_processes"] for r in ranks] == ["0", "0", "1", "0"]
    assert row["gpu_uuid"] == "cpu cpu cpu cpu" and row["gpu_mixed"] == "False"
    slowest = max(float(r["window_s"]) for r in ranks)
    assert float(row["window_s"]) == pytest.approx(slowest)
    assert float(row["samples_per_s"]) == pytest.approx(4 * 4 * 20 / slowest)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.e2e
def test_torchrun_two_node_ranks_on_localhost_write_one_row(csv_path):
    endpoint = f"127.0.0.1:{_free_port()}"
    launch = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nnodes",
        "2",
        "--nproc-per-node",
        "1",
        "--rdzv-backend",
        "c10d",
        "--rdzv-endpoint",
        endpoint,
        "--rdzv-id",
        "dlbench-test",
        "-m",
        "dlbench",
        "train",
        *RUN,
        "--devices",
        "1",
        "--num-nodes",
        "2",
        "--output",
        str(csv_path),
    ]
    nodes = [
        subprocess.Popen(
            launch, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        for _ in range(2)
    ]
    logs = [node.communicate(timeout=240)[0] for node in nodes]
    assert [node.returncode for node in nodes] == [0, 0], logs
    [row] = read_rows(csv_path)
    assert (row["world_size"], row["num_nodes"], row["launcher"]) == ("2", "2", "TorchElastic")
    assert [r["node_rank"] for r in read_rows(csv_path.with_name("bench.per_rank.csv"))] == [
        "0",
        "1",
    ]


@pytest.mark.e2e
def test_scaling_command_records_efficiency_and_reruns_add_nothing(csv_path):
    args = ["scaling", *RUN, "--accelerator", "cpu", "--devices", "1,2", "--output", str(csv_path)]
    out = run_cli(*args)
    assert out.returncode == 0, out.stderr
    rows = read_rows(csv_path)
    runs = {(r["world_size"], r["strategy"]): r for r in rows if r["run_kind"] == "benchmark"}
    assert set(runs) == {("1", "single"), ("1", "ddp"), ("2", "ddp")}
    two, one, wrapped = (float(runs[k]["samples_per_s"]) for k in sorted(runs, reverse=True))
    [scaling] = [r for r in rows if r["run_kind"] == "scaling"]
    assert float(scaling["scaling_efficiency"]) == pytest.approx(two / (2 * one))
    assert float(scaling["scaling_efficiency_ddp"]) == pytest.approx(two / (2 * wrapped))
    assert scaling["benchmark_run_id"] == runs[("2", "ddp")]["run_id"]
    assert scaling["baseline_run_id"] == runs[("1", "single")]["run_id"]
    assert "eff. vs DDP 1" in out.stdout
    again = run_cli(*args)
    assert again.returncode == 0, again.stderr
    assert len(read_rows(csv_path)) == len(rows)


def _run(gpu: str, world: int, rate: float, run_id: str, strategy: str = "") -> dict:
    return {
        "strategy": strategy or ("single" if world == 1 else "ddp"),
        "status": "ok",
        "run_kind": "benchmark",
        "model": "vit",
        "mode": "train",
        "precision": "bf16-mixed",
        "batch_size": 256,
        "gpu_name": gpu,
        "world_size": world,
        "samples_per_s": rate,
        "samples_per_s_per_device": rate / world,
        "timestamp": run_id,
        "run_id": run_id,
    }


def test_scaling_table_compares_each_gpu_with_its_own_single_device_run():
    rows = pd.DataFrame(
        [
            _run("H200", 1, 1000.0, "a"),
            _run("H200", 2, 1900.0, "b"),
            _run("H200", 4, 3600.0, "c"),
            _run("H100", 2, 1500.0, "d"),  # no one-GPU H100 run: no efficiency for it
        ]
    )
    table = scaling_table(rows)
    assert table["gpu_name"].tolist() == ["H200"] * 3
    assert table["scaling_efficiency"].tolist() == pytest.approx([1.0, 0.95, 0.9])
    assert table["baseline_run_id"].tolist() == ["a"] * 3


def test_scaling_tells_ddp_overhead_from_communication_cost():
    # the figures: unwrapped 4,692; DDP-wrapped on one GPU 4,571; 2 GPUs 9,167
    rows = pd.DataFrame(
        [
            _run("H200", 1, 4692.0, "a"),
            _run("H200", 1, 4571.0, "w", strategy="ddp"),
            _run("H200", 2, 9167.0, "b"),
        ]
    )
    table = scaling_table(rows).set_index("world_size")
    assert table.loc[2, "scaling_efficiency"] == pytest.approx(9167 / (2 * 4692))
    assert table.loc[2, "scaling_efficiency_ddp"] == pytest.approx(9167 / (2 * 4571))
    assert table.loc[2, "ddp_overhead"] == pytest.approx(1 - 4571 / 4692)
    assert list(table.index) == [1, 2]  # the DDP-wrapped baseline is no row of its own


def test_device_counts_add_the_baseline_and_refuse_too_many():
    assert device_counts("2", "cpu") == [1, 2]
    assert device_counts("all", "cpu")[0] == 1
    with pytest.raises(UserError, match="--devices"):
        device_counts("1,100000", "cpu")
    with pytest.raises(UserError, match="--devices"):
        device_counts("two", "cpu")


@pytest.mark.e2e
def test_max_noise_under_ddp_stops_all_ranks_together(csv_path):
    # rank 0's noise settles within 20 % at once, rank 1's never does: both must stop at
    # --max-time with the same steps, and the row's rate must count every rank's steps.
    env = cli_env()
    out = run_cli(
        "infer",
        "--model",
        "uneven_ranks",
        "--accelerator",
        "cpu",
        "--devices",
        "2",
        "--batch-size",
        "4",
        "--n-iters",
        "6",
        "--warmup-steps",
        "1",
        "--max-noise",
        "20",
        "--max-time",
        "1.5",
        "--output",
        str(csv_path),
        env=env,
    )
    assert out.returncode == 0, out.stderr
    [row] = read_rows(csv_path)
    ranks = read_rows(csv_path.with_name("bench.per_rank.csv"))
    assert ranks[0]["steps"] == ranks[1]["steps"] == row["steps"]
    assert int(row["steps"]) > 6 and row["noise_met"] == "False"
    assert float(row["samples_per_s"]) == pytest.approx(
        2 * 4 * int(row["steps"]) / float(row["window_s"])
    )
