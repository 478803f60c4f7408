"""The report's ranks: each row among every row of its GPU model and configuration measured by
the same code, and the GPUs low in more than one configuration named."""

from __future__ import annotations

import pandas as pd

from dlbench.analysis.load import load_published, load_rows
from dlbench.analysis.ranks import low_in_several, rank_table
from tests.analysis.rows import benchmark_row, write_rows
from tests.conftest import run_cli

CODE = {"dlbench": "0.2.0", "dlbench_commit": "a" * 40, "dlbench_dirty": False}


def _fleet(path, rates: dict[str, dict[str, float]], **extra):
    """One row per GPU and model: rates[gpu][model]."""
    code = {**CODE, **extra}
    rows = [
        benchmark_row(
            model=model, samples_per_s=rate, gpu_uuid=f"{gpu}-uuid", hostname=f"host-{gpu}", **code
        )
        for gpu, by_model in rates.items()
        for model, rate in by_model.items()
    ]
    return write_rows(path, rows)


FLEET = {
    "g1": {"resnet50": 1000.0, "vit": 500.0, "convnext": 300.0},
    "g2": {"resnet50": 1010.0, "vit": 505.0, "convnext": 302.0},
    "g3": {"resnet50": 995.0, "vit": 498.0, "convnext": 299.0},
    "g4": {"resnet50": 880.0, "vit": 430.0, "convnext": 301.0},  # low in two configurations
}


def test_each_row_gets_its_percentile_and_a_gpu_low_twice_is_named(tmp_path):
    rows = load_rows([_fleet(tmp_path / "fleet.csv", FLEET)])
    rows["machine"] = rows["gpu_name"]
    table = rank_table(rows, pd.DataFrame())
    assert len(table) == 12 and set(table["rows"]) == {4}
    g4 = table[table["GPU"] == "g4-uuid"].set_index("workload")
    assert g4.filter(like="resnet50", axis=0)["percentile"].item() == 0.0
    assert g4["low"].sum() == 2
    g2 = table[table["GPU"] == "g2-uuid"]
    assert set(g2["percentile"]) == {100.0}
    [named] = low_in_several(table)
    assert named.startswith("host host-g4 GPU g4-uuid (NVIDIA H100 80GB HBM3): low in 2 of 3")


def test_rows_of_other_code_or_alone_in_their_configuration_are_not_ranked(tmp_path):
    rows = load_rows([_fleet(tmp_path / "a.csv", {"g1": {"resnet50": 1000.0}})])
    other = load_rows([
        _fleet(tmp_path / "b.csv", {"g2": {"resnet50": 500.0}}, dlbench_commit="b" * 40)
    ])  # fmt: skip
    both = pd.concat([rows, other], ignore_index=True).assign(machine="H100")
    assert rank_table(both, pd.DataFrame()).empty
    published = load_published()  # the shipped rows: another commit than these planted ones
    assert rank_table(both, published).empty


def test_the_report_ranks_a_fleets_rows_and_names_the_low_gpu(tmp_path):
    csv = _fleet(tmp_path / "fleet.csv", FLEET)
    out = run_cli("report", str(csv), "--out", str(tmp_path / "report"))
    assert out.returncode == 0, out.stderr
    text = (tmp_path / "report" / "report.md").read_text()
    assert "## Ranks among every row of the same GPU and configuration" in text
    assert "Named: host host-g4 GPU g4-uuid" in text
