"""The serving frontier in the report (`dlbench serve --sweep-concurrency`): an LLM's offline
rows at several concurrencies, output tokens a second per GPU against each user's, a line per
machine and setting; a lone offline row or a row at a rate is no frontier."""

from __future__ import annotations

import pandas as pd
import pytest

from dlbench.analysis.report import build_report
from dlbench.analysis.serving import frontier_points
from dlbench.results.row import identity
from tests.analysis.rows import write_rows

H200 = "NVIDIA H200"


def _served(concurrency: int, per_user: float, total: float, **columns: object) -> dict:
    """An ok offline row of llm_8b at `concurrency` requests at once."""
    return {
        **identity(None, "ok"),
        "run_kind": "serve",
        "model": "llm_8b",
        "precision": "bf16-true",
        "serve_scenario": "offline",
        "serve_result": "VALID",
        "serve_max_batch": concurrency,
        "batch_size": concurrency,
        "serve_tokens_per_s_per_user": per_user,
        "serve_output_tokens_per_s": total,
        "serve_achieved_qps": total / 128,
        "serve_offline_samples_per_s": total / 128,
        "serve_tpot_p50_ms": 1e3 / per_user,
        "energy_per_token_j": 700.0 / total,
        "prompt_len": 128,
        "new_tokens": 128,
        "devices": 1,
        "gpu_name": H200,
        **columns,
    }


FRONTIER = [_served(1, 160.0, 160.0), _served(4, 150.0, 600.0), _served(16, 120.0, 1920.0)]


def test_a_line_of_concurrencies_is_a_frontier_and_a_lone_row_or_a_rate_is_not():
    rows = pd.DataFrame(
        [
            *reversed(FRONTIER),  # in any order: the line runs by concurrency
            _served(8, 100.0, 800.0, model="llm_1b"),  # one concurrency: a point, no line
            _served(8, 100.0, 800.0, serve_scenario="server", serve_qps=5.0),
            _served(1, 100.0, 100.0, gpu_name="NVIDIA H100 80GB HBM3", devices=2),
            _served(2, 90.0, 180.0, gpu_name="NVIDIA H100 80GB HBM3", devices=2),
        ]
    )
    points = frontier_points(rows)
    h200 = points[points["machine"] == H200]
    assert list(h200["serve_max_batch"]) == [1, 4, 16]
    assert list(h200["tokens_per_s_per_gpu"]) == [160.0, 600.0, 1920.0]
    h100 = points[points["machine"] != H200]
    assert list(h100["tokens_per_s_per_gpu"]) == [50.0, 90.0]  # two GPUs: each one's share
    assert set(points["model"]) == {"llm_8b"} and h100["line"].nunique() == 1


def test_rows_of_another_length_or_precision_are_another_line():
    rows = pd.DataFrame([*FRONTIER, _served(2, 150.0, 300.0, precision="fp8")])
    assert frontier_points(rows)["line"].nunique() == 1  # a lone fp8 point draws nothing
    longer = [{**r, "prompt_len": 1024} for r in FRONTIER]
    assert frontier_points(pd.DataFrame([*FRONTIER, *longer]))["line"].nunique() == 2


@pytest.mark.parametrize("column", ["serve_tokens_per_s_per_user", "serve_max_batch"])
def test_rows_without_the_frontiers_columns_draw_none(column):
    rows = pd.DataFrame([{k: v for k, v in r.items() if k != column} for r in FRONTIER])
    assert frontier_points(rows).empty


def test_a_report_of_a_frontiers_rows_alone_draws_it_with_its_table(tmp_path):
    csv = write_rows(tmp_path / "frontier.csv", FRONTIER)
    report = build_report([csv], tmp_path / "report")
    text = report.markdown.read_text()
    assert "## The serving frontier" in text
    section = text[text.index("## The serving frontier") :]
    assert "| llm_8b  | NVIDIA H200 | bf16-true   |             4 |" in section
    assert any(p.name.endswith("the-serving-frontier.png") for p in report.pngs)
