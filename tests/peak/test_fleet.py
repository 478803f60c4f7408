"""The fleet check: among identical GPUs, one that attains 70 % of its siblings is named, in
`dlbench peak`'s verdict and in `dlbench report` over rows from several hosts; one under its
datasheet is named too, and a lone GPU is compared with its datasheet only."""

from __future__ import annotations

import csv

import pytest

from dlbench.results.fleet import sibling_shares
from dlbench.results.verdict import verdict_columns
from tests.conftest import run_cli

H100, H200 = "NVIDIA H100 80GB HBM3", "NVIDIA H200"


def peak(host: str, index: int, bf16: float, read: float, name: str = H100) -> dict:
    return {"schema_version": 1, "run_id": f"{host}-{index}", "status": "ok",
            "timestamp": f"2026-11-25T03:{index:02d}:00+00:00", "run_kind": "peak",
            "hostname": host, "gpu_index": index, "gpu_uuid": f"GPU-{host}-{index}",
            "gpu_name": name, "attained_bf16_tflops": bf16, "attained_read_tb_s": read}  # fmt: skip


FLEET = [
    peak("node1", 0, 790.0, 2.95), peak("node1", 1, 785.0, 2.97),
    peak("node2", 0, 792.0, 2.96), peak("node2", 1, 0.7 * 790.0, 2.95),  # the slow one
    peak("node2", 2, 1010.0, 4.3, name=H200),  # no sibling: its datasheet only
]  # fmt: skip


def test_a_gpu_at_70_percent_of_its_siblings_is_named():
    verdicts = []
    for row, shares in zip(FLEET, sibling_shares(FLEET)):
        verdicts.append({**row, **shares, **verdict_columns({**row, **shares})})
    slow = verdicts[3]
    assert slow["siblings"] == 4 and slow["siblings_low"] == "attained_bf16_tflops"
    assert slow["siblings_share"] == pytest.approx(0.7 * 790.0 / 787.5)
    assert slow["verdict"] == "invalid" and slow["verdict_reasons"] == "below_siblings"
    assert [v["verdict"] for v in verdicts] == ["valid", "valid", "valid", "invalid", "valid"]
    assert verdicts[4]["siblings_share"] is None


def test_the_report_over_several_hosts_names_it_and_a_gpu_under_its_datasheet(tmp_path):
    rows = [*FLEET, peak("node3", 0, 0.6 * 756.0, 1.9, name="NVIDIA H100 PCIe")]  # 60 % of sheet
    path = tmp_path / "peaks.csv"
    fields = list(dict.fromkeys(k for r in rows for k in r))
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    out = run_cli("report", path, "--out", tmp_path / "report")
    assert out.returncode == 0, out.stderr
    text = (tmp_path / "report" / "report.md").read_text()
    named = text.split("Named: ", 1)[1].split("\n", 1)[0]
    # 70 % of its siblings is also under 75 % of the datasheet's 989 TFLOP/s
    assert "node2 GPU 1 (NVIDIA H100 80GB HBM3): below_datasheet;below_siblings" in named
    assert "node3 GPU 0 (NVIDIA H100 PCIe): below_datasheet." in named
    assert "node1" not in named and "node2 GPU 0" not in named
    assert "| node2  |     1 | NVIDIA H100" in text  # an index, not 1.000
    assert "nan" not in text
