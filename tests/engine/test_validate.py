"""`dlbench validate`: the bare loop and the dlbench loop back to back, one row with the ratio."""

from __future__ import annotations

import pytest

from tests.conftest import TINY, read_rows, run_cli


def test_validate_records_one_row_with_the_ratio_of_the_two_loops(csv_path):
    out = run_cli(
        "validate",
        "--model",
        "timm:test_resnet",
        *TINY,
        "--n-iters",
        "3",
        "--warmup-steps",
        "1",
        "--repeats",
        "1",
        "--output",
        str(csv_path),
    )
    assert out.returncode == 0, out.stderr
    [row] = read_rows(csv_path)
    assert row["run_kind"] == "validate" and row["world_size"] == "1"
    assert row["slowest_rank"] == "0"
    ratio = float(row["samples_per_s"]) / float(row["bare_samples_per_s"])
    assert float(row["harness_ratio"]) == pytest.approx(ratio)
