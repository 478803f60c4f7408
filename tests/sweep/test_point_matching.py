"""Which stored row measured which point of a plan (what a resumed sweep skips): a point that
names no FP8 recipe is the default recipe's, never another recipe's row."""

from __future__ import annotations

from dlbench.sweep.plan import SweepPoint


def _row(**columns: str) -> dict[str, str]:
    base = {"run_kind": "benchmark", "mode": "train", "model": "llm_1b", "batch_size": "4",
            "seq_len": "2048", "precision": "fp8", "strategy": "single"}  # fmt: skip
    return {**base, **columns}


def test_an_fp8_point_without_a_recipe_is_the_default_recipes_only():
    plain = SweepPoint("train", {"model": "llm_1b", "batch_size": 4, "seq_len": 2048,
                                 "precision": "fp8"})  # fmt: skip
    named = SweepPoint("train", {**plain.flags, "fp8_recipe": "tensorwise_with_head"})
    default_row, head_row = _row(fp8_recipe="tensorwise"), _row(fp8_recipe="tensorwise_with_head")
    assert plain.matches(default_row) and not plain.matches(head_row)
    assert named.matches(head_row) and not named.matches(default_row)
    inference = SweepPoint("infer", {"model": "llm_1b", "batch_size": 1, "precision": "fp8"})
    row = _row(mode="infer", batch_size="1", seq_len="", fp8_recipe="rowwise_dynamic")
    assert inference.matches(row)
    assert not inference.matches({**row, "fp8_recipe": "rowwise_dynamic_with_head"})
    bf16 = SweepPoint("train", {**plain.flags, "precision": "bf16-mixed"})
    assert bf16.matches(_row(precision="bf16-mixed", fp8_recipe=""))


def test_a_point_matches_its_row_as_pandas_or_a_run_writes_the_cells():
    """One matching rule for plan and serve points (results.pairing.key_text): a row whose
    numbers came back through pandas (64.0, "True") is the point's row; another value is not."""
    point = SweepPoint("infer", {"model": "resnet50", "batch_size": 64, "compile": True,
                                 "min_time": 2.0}, tags={"purpose": "latency"})  # fmt: skip
    row = {"run_kind": "benchmark", "mode": "infer", "model": "resnet50", "batch_size": "64.0",
           "compile": "True", "strategy": "single", "purpose": "latency"}  # fmt: skip
    assert point.matches(row)
    assert not point.matches({**row, "batch_size": "65"})
    assert not point.matches({**row, "purpose": "throughput"})


def test_a_point_that_asked_for_graphs_is_its_row_that_ran_eager():
    """A row's cuda_graphs says how it ran (False after a failed capture, or where the timed
    replays lost to the eager step): that row measured the point that asked for graphs, so a
    resumed sweep skips it (the default plan's efficientnet_v2 asks); a point that asked for
    none is never a graphed row's."""
    graphed = SweepPoint("infer", {"model": "efficientnet_v2", "batch_size": 128,
                                   "cuda_graphs": True})  # fmt: skip
    row = {"run_kind": "benchmark", "mode": "infer", "model": "efficientnet_v2",
           "batch_size": "128", "strategy": "single"}  # fmt: skip
    assert graphed.matches({**row, "cuda_graphs": "True"})
    assert graphed.matches({**row, "cuda_graphs": "False", "graph_choice": "checked"})
    eager = SweepPoint("infer", {**graphed.flags, "cuda_graphs": False})
    assert eager.matches({**row, "cuda_graphs": "False"})
    assert not eager.matches({**row, "cuda_graphs": "True"})
    assert not graphed.matches({**row, "cuda_graphs": "False", "batch_size": "64"})
