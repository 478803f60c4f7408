"""`dlbench compare`: the CI regression gate, exit codes and verdicts (same, faster, slower,
inconclusive) from real CSV files."""

from __future__ import annotations

import math
import statistics

import pandas as pd
import pytest

from dlbench.analysis.compare import compare_runs
from dlbench.analysis.load import load_rows
from dlbench.results.pairing import EXPERIMENT_KEY
from tests.analysis.rows import benchmark_row, write_rows
from tests.conftest import run_cli

MODELS = ("resnet50", "vit", "convnext")


def _csv(path, rates, spread=2.0, steps=50, **env):
    rows = [
        benchmark_row(model=m, samples_per_s=r, step_time_stdev_pct=spread, steps=steps, **env)
        for m, r in zip(MODELS, rates)
    ]
    return write_rows(path, rows)


def test_a_20_percent_slowdown_exits_1_and_names_the_row(tmp_path):
    base = _csv(tmp_path / "base.csv", [1000, 500, 300])
    cand = _csv(tmp_path / "cand.csv", [1000, 400, 301])
    out = run_cli("compare", str(base), str(cand), "--threshold", "5", "--markdown")
    assert out.returncode == 1, out.stderr
    assert "1 slower beyond 5%" in out.stdout
    vit = next(line for line in out.stdout.splitlines() if "| vit" in line)
    assert "slower" in vit and "-20.0" in vit


def test_a_small_change_is_same_and_one_the_evidence_cannot_tell_is_inconclusive(tmp_path):
    base = _csv(tmp_path / "base.csv", [1000, 500, 300])
    small = _csv(tmp_path / "small.csv", [990, 497, 302])  # within 1 % of the baseline
    assert run_cli("compare", str(base), str(small)).returncode == 0
    # 8 % slower, but the candidate's window knows its figure to +/-12 %: it cannot tell
    noisy = _csv(tmp_path / "noisy.csv", [920, 460, 276], throughput_interval_pct=12.0)
    table = compare_runs(load_rows([base]), load_rows([noisy]), threshold_pct=5).table
    assert set(table["verdict"]) == {"inconclusive"}
    assert all("runs a side would settle it" in note for note in table["note"])
    out = run_cli("compare", str(base), str(noisy), "--threshold", "5")
    assert out.returncode == 5 and "3 inconclusive" in out.stdout  # its own exit code
    strict = run_cli("compare", str(base), str(noisy), "--inconclusive-fails")
    assert strict.returncode == 1


def test_verdicts_and_environment_differences():
    b = pd.DataFrame(
        [benchmark_row(model=m, samples_per_s=r) for m, r in zip(MODELS, [100, 100, 100])]
    )
    c = pd.DataFrame(
        [
            benchmark_row(model=m, samples_per_s=r, torch="2.14.1")
            for m, r in zip(MODELS, [130, 98, 90])
        ]
    )
    table = compare_runs(b, c, threshold_pct=5).table.set_index("model")
    assert table.loc["resnet50", "verdict"] == "faster"
    assert table.loc["vit", "verdict"] == "same"  # 2 %, a GPU-bound row: within the threshold
    assert table.loc["convnext", "verdict"] == "slower"
    assert table.loc["vit", "change_pct"] == pytest.approx(-2.0)
    assert table.loc["vit", "note"] == "torch 2.11.0 -> 2.14.1"


def test_a_different_cuda_environment_is_noted():
    queues = "CUDA_DEVICE_MAX_CONNECTIONS="
    b = pd.DataFrame([benchmark_row(model="resnet50", cuda_env=f"{queues}8")])
    c = pd.DataFrame([benchmark_row(model="resnet50", cuda_env=f"{queues}32")])
    table = compare_runs(b, c, threshold_pct=5).table
    assert table.loc[0, "note"] == f"cuda_env {queues}8 -> {queues}32"


@pytest.mark.e2e
def test_bad_input_exits_2(tmp_path):
    base = _csv(tmp_path / "base.csv", [1000, 500, 300])
    foreign = tmp_path / "foreign.csv"
    foreign.write_text("a,b\n1,2\n")
    other = write_rows(tmp_path / "other.csv", [benchmark_row(model="swin")])
    for args in (
        [str(base), str(tmp_path / "missing.csv")],
        [str(base), str(foreign)],
        [str(base), str(base), "--key", "model,colour"],
    ):
        out = run_cli("compare", *args)
        assert out.returncode == 2, (args, out.stdout, out.stderr)
        assert "error:" in out.stderr
    assert foreign.read_text() == "a,b\n1,2\n"
    unrelated = run_cli("compare", str(base), str(other))  # nothing matches: all missing
    assert unrelated.returncode == 1 and "3 configuration(s) failed or missing" in unrelated.stdout


def test_a_configuration_that_now_fails_or_vanished_exits_1_by_name(tmp_path):
    base = _csv(tmp_path / "base.csv", [1000, 500, 300])
    cand = write_rows(
        tmp_path / "cand.csv",
        [
            benchmark_row(model="resnet50", samples_per_s=1000.0),
            {
                **benchmark_row(model="vit"),
                "status": "oom",
                "error": "OutOfMemoryError: CUDA out of memory",
                "samples_per_s": "",
            },
            # convnext: no row at all
        ],
    )
    out = run_cli("compare", str(base), str(cand), "--markdown")
    assert out.returncode == 1, out.stderr
    vit = next(line for line in out.stdout.splitlines() if "| vit" in line)
    convnext = next(line for line in out.stdout.splitlines() if "| convnext" in line)
    assert "failed (oom)" in vit and "missing" in convnext
    assert "2 configuration(s) failed or missing" in out.stdout


def test_the_default_key_is_the_whole_experiment_and_the_gpu():
    b = pd.DataFrame([benchmark_row(model="vit", samples_per_s=100.0, compile=False)])
    c = pd.DataFrame(
        [
            benchmark_row(model="vit", samples_per_s=150.0, compile=True),  # another experiment
            benchmark_row(model="vit", samples_per_s=90.0, compile=False, gpu_name="NVIDIA L4"),
        ]
    )
    table = compare_runs(b, c).table
    [missing] = table[table["verdict"] == "missing"].to_dict("records")
    assert (missing["compile"], missing["gpu_name"]) == ("False", "NVIDIA H100 80GB HBM3")
    assert list(table["verdict"]).count("new") == 2  # the candidate's own, listed
    for column in ("width", "seq_len", "devices", "optimizer", "gpu_name", "world_size"):
        assert column in EXPERIMENT_KEY


def test_repeats_widen_the_interval_by_their_between_run_spread():
    def rows(rates):
        return pd.DataFrame(
            [
                benchmark_row(model="vit", samples_per_s=r, step_time_stdev_pct=1.0, repeat=k)
                for k, r in enumerate(rates)
            ]
        )

    # within-run noise alone would call -6 % slower; the repeats disagree by ~10 %
    table = compare_runs(rows([1000, 1100, 900]), rows([900, 1040, 880]), threshold_pct=5).table
    [line] = table.to_dict("records")
    assert line["runs_baseline"] == 3 and line["baseline"] == pytest.approx(1000)
    assert line["low_pct"] < -20 and line["high_pct"] > 10 and line["verdict"] == "inconclusive"
    steady = compare_runs(
        rows([1000, 1001, 999]), rows([940, 941, 939]), threshold_pct=5
    ).table.iloc[0]
    assert steady["verdict"] == "slower"


def test_invalid_rows_are_left_out_of_the_ratio_and_named(tmp_path):
    base = write_rows(tmp_path / "base.csv", [benchmark_row(samples_per_s=1000.0)])
    rows = [
        benchmark_row(samples_per_s=400.0, verdict="invalid", verdict_reasons="host_bound"),
        benchmark_row(samples_per_s=995.0, verdict="valid"),
    ]
    fine = compare_runs(load_rows([base]), load_rows([write_rows(tmp_path / "a.csv", rows)]))
    assert fine.passed and fine.table["candidate"].item() == 995.0  # not the mean with 400
    only_invalid = write_rows(tmp_path / "b.csv", rows[:1])
    gate = compare_runs(load_rows([base]), load_rows([only_invalid]))
    assert not gate.passed and gate.table["verdict"].item() == "invalid (host_bound)"
    out = run_cli("compare", only_invalid, base)  # nothing valid to compare against
    assert out.returncode == 2 and "BASELINE: every row's verdict is invalid" in out.stderr


def _one(path, rate, interval, **columns):
    row = benchmark_row(model="vit", samples_per_s=rate, throughput_interval_pct=interval,
                        step_outliers=0, **columns)  # fmt: skip
    return load_rows([write_rows(path, [row])])


def test_one_run_a_side_carries_its_window_and_its_kinds_spread_between_runs(tmp_path):
    base = _one(tmp_path / "b.csv", 1000.0, 0.5)
    [same] = compare_runs(base, _one(tmp_path / "s.csv", 985.0, 0.5)).table.to_dict("records")
    # a GPU-bound row: 1 % between runs and 0.5 % of each window, as independent deviations
    half = 1.959964 * math.sqrt(2 * ((0.005 / 1.959964) ** 2 + 0.01**2)) * 100
    assert same["verdict"] == "same" and same["high_pct"] - same["low_pct"] == pytest.approx(
        2 * half * 0.985, rel=0.02
    )
    launch = {"gpu_busy_pct": 90.0}  # the host held the GPU back: 4 % between runs
    [unsure] = compare_runs(
        _one(tmp_path / "lb.csv", 1000.0, 0.5, **launch),
        _one(tmp_path / "lc.csv", 910.0, 0.5, **launch),
    ).table.to_dict("records")
    assert unsure["verdict"] == "inconclusive"  # 9 % apart, one run each: it cannot tell
    [slower] = compare_runs(base, _one(tmp_path / "l.csv", 800.0, 0.5)).table.to_dict("records")
    assert slower["verdict"] == "slower"  # a GPU-bound row of a tight window, 20 % slower


def test_a_candidate_invalid_only_for_noise_is_compared_and_named_not_a_failure(tmp_path):
    base = _one(tmp_path / "b.csv", 1000.0, 0.5)
    hiccup = {"verdict": "invalid", "verdict_reasons": "noisy"}
    cand = _one(tmp_path / "c.csv", 990.0, 6.0, **hiccup)
    comparison = compare_runs(base, cand, threshold_pct=5)
    [line] = comparison.table.to_dict("records")
    assert line["verdict"] == "inconclusive" and "candidate invalid (noisy)" in line["note"]
    assert comparison.passed and comparison.exit_code() == 5  # cannot tell: not a slowdown
    slow = compare_runs(base, _one(tmp_path / "s.csv", 800.0, 6.0, **hiccup), threshold_pct=5)
    assert not slow.passed and slow.slower["model"].tolist() == ["vit"]
    other = {"verdict": "invalid", "verdict_reasons": "noisy;other_processes"}
    shared = compare_runs(base, _one(tmp_path / "o.csv", 990.0, 6.0, **other), threshold_pct=5)
    assert not shared.passed  # a neighbour on the GPU is no noise: the row is not compared
    assert shared.table["verdict"].tolist() == ["invalid (noisy;other_processes)"]


REFERENCE = "src/dlbench/published/default-pt2.11-cu13.0-h100-80gb-hbm3.csv"


def _default_plan_pair(tmp_path):
    """The published H100 default plan as the baseline; a candidate of the same plan with a
    regression, a failure with a long error, an invalid row and a newer torch."""
    from pathlib import Path

    from dlbench.results.store import CsvStore

    root = Path(__file__).resolve().parents[2]
    rows = CsvStore(root / REFERENCE).rows()
    changed = []
    for row in rows:
        row = dict(row)
        row["torch"] = "2.14.1"
        if row["model"] == "vit" and row["batch_size"] == "256" and row["mode"] == "train":
            row["samples_per_s"] = str(float(row["samples_per_s"]) * 0.8)
        if row["model"] == "swin" and row["mode"] == "train":
            row.update(status="oom", samples_per_s="", error="OutOfMemoryError: " + "x" * 300)
        if row["model"] == "vgg16" and row["mode"] == "infer":
            row.update(verdict="invalid", verdict_reasons="other_processes")
        changed.append(row)
    return root / REFERENCE, write_rows(tmp_path / "cand.csv", changed)


@pytest.mark.parametrize("columns", [80, 100, 160])
def test_compare_fits_a_terminal_with_every_model_name_whole(dlbench, tmp_path, monkeypatch,
                                                            columns):  # fmt: skip
    base, cand = _default_plan_pair(tmp_path)
    monkeypatch.setenv("COLUMNS", str(columns))
    code, out, _ = dlbench("compare", base, cand)
    assert code == 1  # vit's 20 % and swin's failure
    lines = out.splitlines()
    assert all(len(line) <= columns for line in lines), max(lines, key=len)
    models = {r["model"] for r in load_rows([base]).to_dict("records")}
    table = [line for line in lines if line.split(" ", 1)[0] in models]
    assert {line.split()[0] for line in table} == models  # each name whole, first on its line
    assert lines[0].split()[:3] == ["model", "mode", "batch"]
    vit = next(line for line in table if line.startswith("vit ") and " train " in line)
    assert "-20.0%" in vit and "slower" in vit
    swin = next(line for line in table if line.startswith("swin ") and " train " in line)
    assert "failed" in swin and "xxxx" not in swin  # the error is a footnote
    assert any(line.startswith("[") and "OutOfMemoryError" in line for line in lines)
    assert any("every line compared: torch 2.11.0+cu130 -> 2.14.1" in line for line in lines)


def test_only_key_columns_that_tell_configurations_apart_lead_a_line():
    from dlbench.analysis.compare_view import identifying_columns

    table = pd.DataFrame(
        [
            {"model": "vit", "mode": "infer", "batch_size": 1, "compile": True,
             "optimizer": "adamw", "seq_len": "", "precision": "bf16-mixed"},
            {"model": "vit", "mode": "infer", "batch_size": 256, "compile": False,
             "optimizer": "adamw", "seq_len": "", "precision": "bf16-mixed"},
            {"model": "resnet50", "mode": "infer", "batch_size": 1, "compile": True,
             "optimizer": "sgd", "seq_len": "", "precision": "bf16-mixed"},
            {"model": "resnet50", "mode": "infer", "batch_size": 1, "compile": False,
             "optimizer": "sgd", "seq_len": "", "precision": "bf16-mixed"},
        ]
    )  # fmt: skip
    key = ["model", "mode", "precision", "batch_size", "seq_len", "compile", "optimizer"]
    # compile splits resnet50's two batch-1 lines; the optimizer goes with the model
    assert identifying_columns(table, key) == ["model", "mode", "batch_size", "compile"]
    assert identifying_columns(table.iloc[:3], key) == ["model", "mode", "batch_size"]


def test_wide_and_markdown_keep_every_column(dlbench, tmp_path):
    base = _csv(tmp_path / "base.csv", [1000, 500, 300])
    cand = _csv(tmp_path / "cand.csv", [1000, 400, 301])
    _, markdown, _ = dlbench("compare", base, cand, "--markdown")
    assert "low_pct" in markdown and "high_pct" in markdown and "| vit" in markdown
    _, wide, _ = dlbench("compare", base, cand, "--wide")
    assert "low_pct" in wide and "note" in wide
    code, printed, _ = dlbench("compare", base, cand, "--json")
    import json

    found = json.loads(printed)
    assert code == 1 and found["exit_code"] == 1 and found["verdict"].startswith("1 slower")
    vit = next(line for line in found["lines"] if line["model"] == "vit")
    assert vit["verdict"] == "slower" and vit["ratio"] == pytest.approx(0.8)
    assert vit["ratio_low"] < 0.8 < vit["ratio_high"] < 0.98


def test_a_number_read_as_float_on_one_side_is_no_environment_change():
    b = pd.DataFrame([benchmark_row(model="vit", cpu_count=16)])
    c = pd.DataFrame([benchmark_row(model="vit", cpu_count=16.0)])
    assert compare_runs(b, c).table.loc[0, "note"] == ""


def test_two_repeats_three_percent_apart_cannot_call_an_8_percent_step_by_students_t():
    """Two runs give one degree of freedom: t's 97.5th percentile is 12.7, not the normal's
    1.96, so two repeats of each side 3 % apart cannot call an 8 % step slower."""
    from dlbench.results.stats import Z_975

    def rows(rates):
        return pd.DataFrame(
            [
                benchmark_row(model="vit", samples_per_s=r, throughput_interval_pct=0.1, repeat=k)
                for k, r in enumerate(rates)
            ]
        )

    base, cand = [1000.0, 1030.0], [925.0, 952.0]  # each pair 3 % apart
    [line] = compare_runs(rows(base), rows(cand), threshold_pct=5).table.to_dict("records")
    logs = [math.log(r) for r in base], [math.log(r) for r in cand]
    se = math.sqrt(sum(statistics.variance(side) / 2 for side in logs))
    assert 100 * Z_975 * se < 8  # z would call it slower
    assert line["verdict"] == "inconclusive" and line["low_pct"] < -25
