"""`dlbench validate`: the bare loop and the dlbench loop back to back, one row with the ratio,
on one process and under DDP (gloo on the CPU); a planted slowdown must show."""

from __future__ import annotations

import pytest

from tests.conftest import TINY, cli_env, read_rows, run_cli

VALIDATE = ["validate", "--model", "timm:test_resnet", *TINY, "--warmup-steps", "1"]


@pytest.mark.e2e
def test_validate_records_one_row_with_the_ratio_of_the_two_loops(csv_path):
    out = run_cli(*VALIDATE, "--n-iters", "3", "--repeats", "1", "--output", csv_path)
    assert out.returncode == 0, out.stderr
    [row] = read_rows(csv_path)
    assert row["run_kind"] == "validate" and row["world_size"] == "1"
    assert row["slowest_rank"] == "0" and row["strategy"] == "single"
    ratio = float(row["samples_per_s"]) / float(row["bare_samples_per_s"])
    assert float(row["harness_ratio"]) == pytest.approx(ratio)


@pytest.mark.e2e
def test_validate_on_two_ddp_ranks_records_the_ratio_per_repeat(csv_path):
    out = run_cli(*VALIDATE, "--n-iters", "20", "--devices", "2", "--repeats", "2",
                  "--ddp", "static_graph=true", "--output", csv_path)  # fmt: skip
    assert out.returncode == 0, out.stderr
    [row] = read_rows(csv_path)  # rank 0 alone writes
    assert (row["world_size"], row["strategy"], row["ddp_static_graph"]) == ("2", "ddp", "True")
    ratios = [float(r) for r in row["harness_ratios"].split()]
    assert len(ratios) == 2 and all(0.5 < r < 2.0 for r in ratios)


@pytest.mark.e2e
def test_a_planted_slowdown_in_the_dlbench_ddp_step_moves_the_ratio_below_1(csv_path):
    env = {**cli_env(), "DLBENCH_TEST_SLOW_STEPS": "1"}  # +50 ms per dlbench step
    out = run_cli(*VALIDATE, "--n-iters", "10", "--devices", "2", "--repeats", "1",
                  "--output", csv_path, env=env)  # fmt: skip
    assert out.returncode == 0, out.stderr
    [row] = read_rows(csv_path)
    assert float(row["harness_ratio"]) < 0.8


def test_a_dlbench_loop_that_runs_on_past_its_first_chunk_keeps_its_ratio_near_one(monkeypatch):
    """The measured loop runs further chunks until its noise settles (planted here: ten
    chunks); the bare loop runs --n-iters steps. Each rate counts the steps that ran: a repeat
    that ran ten times the steps must not read a tenth of its rate."""
    from dlbench.config import RunConfig
    from dlbench.engine.validate import compare_loops
    from tests.results.test_rates import plant_chunks

    config = RunConfig.of(  # 20 ms a step asleep: a loaded host adds little to either loop
        model="steady", accelerator="cpu", batch_size=4, n_iters=6, warmup_steps=1,
        telemetry=False,
    )  # fmt: skip
    plant_chunks(monkeypatch, 10)  # ten chunks in each repeat
    measurement, rates, bare_rates = compare_loops(config, repeats=2)
    assert measurement.loop.steps == 10 * config.measurement.n_iters
    for rate, bare in zip(rates, bare_rates):
        assert 0.3 < rate / bare < 3.5  # the old count read a tenth of its rate, give or take
