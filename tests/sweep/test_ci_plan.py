"""The gate's plan on a GPU runner (`ci`): the default plan's five batch-1 points and five
GPU-bound ones that take the engine's paths, as the default plan runs them, sized by the
published rows' own phases to gate a pull request within CI_GATE_BUDGET_S."""

from __future__ import annotations

import csv

import pytest

from dlbench.sweep.plan_file import load_plan
from tests.conftest import ROOT

CI_GATE_ROUNDS = 3  # what the GPU workflow runs (docker/regression-gate.sh, ROUNDS)
CI_GATE_BUDGET_S = 15 * 60
# What a run forked from a side's worker costs beyond its phases' columns (CUDA's start is in
# setup_s; the fork, the row and the moments between phases): generous for a loaded runner.
FORKED_RUN_EXTRA_S = 3.0
PUBLISHED = ROOT / "src" / "dlbench" / "published"


def _key(point) -> tuple:
    return point.mode, tuple(sorted(point.flags.items())), tuple(sorted(point.tags.items()))


def test_the_ci_plan_is_the_default_plans_batch_1_points_and_five_gpu_bound_ones():
    ci, default = load_plan("ci").points(), load_plan("default").points()
    assert len(ci) == 10
    assert {_key(p) for p in ci} <= {_key(p) for p in default}  # as the default plan runs them
    latency = [p for p in ci if p.tags["purpose"] == "latency"]
    assert {_key(p) for p in latency} == {
        _key(p) for p in default if p.tags["purpose"] == "latency"
    }
    bound = {(p.flags["model"], p.mode) for p in ci if p.tags["purpose"] == "throughput"}
    assert bound == {
        ("resnet50", "train"),  # a CNN training
        ("vit", "train"),  # a transformer training ...
        ("vit", "infer"),  # ... and serving a batch
        ("llm_1b", "train"),
        ("llm_1b", "infer"),  # its batched generation
    }


@pytest.mark.parametrize("part", ["h100-80gb-hbm3", "h200"])
def test_a_gate_of_the_ci_plan_fits_its_budget_by_the_published_rows_phases(part):
    """Each point's longest published run (build, warm-up with capture, window, profiled pass,
    and the set-up that a forked run pays again: CUDA's start), both sides, CI_GATE_ROUNDS."""
    path = PUBLISHED / f"default-pt2.11-cu13.0-{part}.csv"
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    phases = ("setup_s", "build_s", "warmup_s", "wall_window_s", "profile_s")
    per_round = 0.0
    for point in load_plan("ci").points():
        wanted = (point.flags["model"], point.mode, str(point.flags["batch_size"]))
        seconds = [
            sum(float(r[c] or 0) for c in phases)
            for r in rows
            if (r["model"], r["mode"], r["batch_size"]) == wanted
        ]
        assert seconds, f"no published row of {point.label}"
        per_round += max(seconds) + FORKED_RUN_EXTRA_S
    assert 2 * CI_GATE_ROUNDS * per_round <= CI_GATE_BUDGET_S, per_round
