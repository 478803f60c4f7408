"""--breakdown: a diagnostic pass after the window, in its own columns, with a hint."""

from __future__ import annotations

import pytest

from dlbench.engine.scenarios.breakdown import hint
from tests.conftest import TINY, read_rows, run_cli


def test_hint_names_the_bottleneck():
    assert hint({"h2d": 6.0, "forward": 2.0, "backward": 2.0}, 0.05).startswith("input-bound")
    assert hint({"h2d": 0.1, "forward": 2.0}, 0.5).startswith("host-bound")
    assert hint({"h2d": 0.1, "forward": 2.0}, 0.02).startswith("compute-bound")
    assert hint({"forward": 2.0}, None).startswith("compute-bound")


@pytest.mark.e2e
def test_breakdown_columns_come_from_the_diagnostic_pass(csv_path):
    out = run_cli(
        "train",
        "--model",
        "timm:test_resnet",
        *TINY,
        "--n-iters",
        "3",
        "--warmup-steps",
        "1",
        "--breakdown",
        "--data-on",
        "host",
        "--output",
        str(csv_path),
    )
    assert out.returncode == 0, out.stderr
    row = read_rows(csv_path)[0]
    for phase in ("h2d", "forward", "backward", "optimizer"):
        assert float(row[f"breakdown_{phase}_ms"]) >= 0
    assert float(row["breakdown_forward_ms"]) > 0 and row["breakdown_hint"]
    assert row["steps"] == "3"  # the diagnostic steps are not in the window
