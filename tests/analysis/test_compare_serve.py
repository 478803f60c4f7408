"""`dlbench compare` of serve rows: a searched rate, a latency at a rate given, a single
stream's p90 and offline's rate, with the same verdicts and exit codes as benchmark rows; a
rise in latency is the slowdown."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from dlbench.analysis.compare import compare_runs
from dlbench.analysis.load import load_rows
from dlbench.results.row import identity
from tests.analysis.rows import write_rows
from tests.conftest import run_cli

SETTINGS = {"model": "resnet50", "precision": "bf16-true", "batch_size": 64,
            "serve_max_batch": 64, "serve_batch_timeout_ms": 2.0, "serve_coalesce": True,
            "serve_mlperf_rules": False, "serve_min_duration_s": 10.0, "serve_min_queries": 1024,
            "gpu_name": "NVIDIA H100 80GB HBM3"}  # fmt: skip


def _serve_row(scenario: str, **figures: object) -> dict[str, object]:
    find = "serve_qps_found" in figures
    return {
        **identity(None, "ok"),
        "run_kind": "serve",
        **SETTINGS,
        "serve_scenario": scenario,
        "serve_find_qps": find,
        "serve_qps": 15000.0 if scenario == "server" and not find else None,
        "serve_slo_p99_ms": 15.0 if scenario == "server" else None,
        "serve_result": "VALID",
        "verdict": "valid",
        **figures,
    }


BASE = [
    _serve_row("server", serve_qps_found=17000.0, serve_latency_p99_ms=12.0),
    _serve_row("server", serve_latency_p99_ms=7.0),
    _serve_row("single-stream", serve_latency_p90_ms=0.46),
    _serve_row("offline", serve_achieved_qps=18500.0),
]


def _compare(tmp_path, changes: dict[int, dict[str, float]]):
    base = write_rows(tmp_path / "base.csv", BASE)
    rows = [{**row, **changes.get(i, {})} for i, row in enumerate(BASE)]
    return base, write_rows(tmp_path / "cand.csv", rows)


# A served latency of one run (a fixed rate's p99, a single stream's p90) is given a launch-bound
# row's prior between runs (analysis.change.RUN_SPREAD_PCT): one run a side cannot call it same.


def test_unchanged_serve_rows_pass_and_each_figure_is_named(tmp_path):
    base, cand = _compare(tmp_path, {})
    table = compare_runs(load_rows([base]), load_rows([cand])).table
    assert list(table["verdict"]) == ["same", "same", "inconclusive", "inconclusive"]
    assert any(n.startswith("latency_p99_ms (lower is better)") for n in table["note"])
    assert run_cli("compare", str(base), str(cand)).returncode == 5  # nothing slower


@pytest.mark.parametrize(
    ("index", "change", "verdict"),
    [
        (0, {"serve_qps_found": 15000.0}, "slower"),  # the rate found fell 12 %
        (1, {"serve_latency_p99_ms": 8.4}, "slower"),  # p99 at the rate rose 20 %
        (1, {"serve_latency_p99_ms": 5.0}, "faster"),  # p99 fell: better
        (2, {"serve_latency_p90_ms": 0.60}, "slower"),  # single stream's p90 rose
        (3, {"serve_achieved_qps": 17000.0}, "slower"),  # offline's rate fell 8 %
    ],
)
def test_a_planted_serve_slowdown_fails_the_gate(tmp_path, index, change, verdict):
    base, cand = _compare(tmp_path, {index: change})
    table = compare_runs(load_rows([base]), load_rows([cand])).table
    wanted = BASE[index]
    line = table[
        (table["serve_scenario"] == wanted["serve_scenario"])
        & (table["serve_find_qps"].astype(str) == str(wanted["serve_find_qps"]))
    ]
    assert list(line["verdict"]) == [verdict]
    assert set(table.drop(line.index)["verdict"]) <= {"same", "inconclusive"}
    out = run_cli("compare", str(base), str(cand))
    assert out.returncode == (1 if verdict == "slower" else 5), out.stdout


@pytest.mark.e2e
def test_two_real_serve_csvs_compare_and_a_planted_drop_exits_1(dlbench, tmp_path):
    from tests.serve.test_serve_command import SHORT, TINY

    served = tmp_path / "serve.csv"
    args = ["serve", *TINY, "--scenario", "offline", *SHORT, "--output", served]
    assert dlbench(*args)[0] == 0
    with open(served, newline="") as handle:
        rows = list(csv.DictReader(handle))

    def written(name: str, scale: float):
        """The real row, judged valid (LoadGen may call a loaded CI host's load INVALID), its
        offline rate scaled."""
        path = tmp_path / name
        with open(path, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            rate = float(rows[0]["serve_achieved_qps"]) * scale
            writer.writerow({**rows[0], "verdict": "valid", "verdict_reasons": "",
                             "serve_achieved_qps": str(rate)})  # fmt: skip
        return path

    # a CPU row of one run strays from the next by CPU_RUN_SPREAD_PCT: the same row is the same
    # within 80 % (within 5 %: inconclusive), and a drop to 0.4 is slower beyond 5 %
    base, same = written("base.csv", 1.0), written("same.csv", 1.0)
    assert run_cli("compare", str(base), str(same)).returncode == 5
    assert run_cli("compare", str(base), str(same), "--threshold", "80").returncode == 0
    out = run_cli("compare", str(base), str(written("dropped.csv", 0.4)))
    assert out.returncode == 1 and "1 slower beyond" in out.stdout


def test_serve_rows_from_before_loadgen_are_refused_in_one_line_not_failed():
    """The serve rows published at 18695e1 came from dlbench's own generator (kept here as they
    were): they hold none of the figures compared, and a gate on them says so instead of
    calling every line missing."""
    old = Path(__file__).with_name("data") / "serve-before-loadgen-h100.csv"
    out = run_cli("compare", str(old), str(old))
    assert out.returncode == 2 and "before LoadGen drove serve" in out.stderr
