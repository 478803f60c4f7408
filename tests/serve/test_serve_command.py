"""`dlbench serve` end to end on the CPU with a tiny timm model (real model, MLPerf's real
LoadGen, real clock): each scenario writes one `serve` row with what LoadGen said and its logs
beside the CSV; bad flags are one line, exit 2, and the CSV keeps its bytes."""

from __future__ import annotations

import time

import pytest

from dlbench.results.store import CsvStore
from tests.conftest import refused

TINY = ["--accelerator", "cpu", "--model", "timm:test_resnet", "--width", "32", "--height",
        "32", "--precision", "32", "--no-compile", "--max-batch", "4"]  # fmt: skip
SHORT = ["--min-duration", "0.3", "--queries", "32"]


def _served(dlbench, out, scenario, *extra):
    args = ["serve", *TINY, "--scenario", scenario, *SHORT, *extra, "--output", out]
    code, printed, err = dlbench(*args)
    assert code == 0, err
    return CsvStore(out).rows()[-1], printed


@pytest.mark.parametrize(
    ("scenario", "extra"),
    [
        ("single-stream", []),
        ("offline", []),
        (
            "server",
            ["--max-batch", "1", "--qps", "5000", "--min-duration", "0.01", "--slo-p99-ms", "2"],
        ),
    ],
)
def test_each_scenario_writes_one_serve_row_with_what_loadgen_said(
    dlbench, tmp_path, scenario, extra
):
    """LoadGen drives each load: the row carries its result and reasons, its rates and
    percentiles, and its logs lie beside the CSV under the row's run id. A rate far above what
    one query at a time can answer is INVALID, the bound named (50 queries in 10 ms against a
    2 ms bound: few enough that a loaded host's offline rate still answers them in time)."""
    out = tmp_path / "serve.csv"
    row, printed = _served(dlbench, out, scenario, *extra)
    assert row["run_kind"] == "serve" and row["serve_scenario"] == scenario
    assert row["serve_loadgen"].startswith("mlcommons-loadgen ")
    assert int(row["serve_queries"]) >= 32 and float(row["serve_latency_p99_ms"]) > 0
    assert float(row["serve_offline_samples_per_s"]) > 0 and float(row["serve_batch1_p50_ms"]) > 0
    summary = out.parent / row["serve_loadgen_log"]
    assert summary.parent.name == row["run_id"] and summary.parent.parent.name == "serve.loadgen"
    assert f"Result is : {row['serve_result']}" in summary.read_text()
    assert (summary.parent / "mlperf_log_detail.txt").is_file()
    assert float(row["serve_batch_ms"]) > 0 and "LoadGen's logs" in printed
    if scenario == "server":  # 5,000 a second, one query at a time: the queue grows
        assert row["serve_result"] == "INVALID" and "latency_bound" in row["serve_invalid_reasons"]
        assert row["verdict"] == "invalid" and "latency_bound" in row["verdict_reasons"]
        assert float(row["serve_scheduled_qps"]) > float(row["serve_achieved_qps"])
    if scenario == "offline":  # one query of every sample: full batches (its VALID needs a
        # reference rate a loaded CI host keeps while LoadGen runs, so it is not asked here)
        assert float(row["serve_mean_batch"]) > 1 and int(row["serve_queries"]) >= 32


@pytest.mark.e2e
def test_a_server_at_a_low_rate_is_valid_and_a_search_finds_a_valid_rate(dlbench, tmp_path):
    out = tmp_path / "serve.csv"
    bound = ["--slo-p99-ms", "200", "--min-duration", "1.5"]  # a loaded CI host's CPU
    # low for any host: well under what a loaded two-core VM serves offline (500 a second was
    # its whole capacity at times), over enough queries for LoadGen's early stopping
    low = ["--qps", "200", "--slo-p99-ms", "200", "--min-duration", "4"]
    row, _ = _served(dlbench, out, "server", *low)
    assert row["serve_result"] == "VALID" and row["verdict"] == "valid", row
    assert row["serve_qps"] == "200.0" and row["serve_find_qps"] == "False"
    row, printed = _served(dlbench, out, "server", "--find-qps", "--search-budget", "8", *bound)
    assert int(row["serve_points_tried"]) >= 1 and row["serve_points"] and "found" in printed
    assert row["serve_find_qps"] == "True" and row["serve_qps"] == ""
    if row["serve_qps_found"]:
        assert row["serve_result"] == "VALID"


def test_a_load_that_would_outlast_an_hour_is_refused_before_anything_warms(dlbench, kept):
    """--qps 0.001 (a slip for 1000) with 1,024 queries would run for twelve days."""
    began = time.monotonic()
    refused(dlbench("serve", "--accelerator", "cpu", "--scenario", "server", "--qps", "0.001",
                    "--output", kept), "--qps 0.001 with --queries")  # fmt: skip
    assert time.monotonic() - began < 10
    for args, needle in (
        (["--scenario", "offline", "--min-duration", "7200"], "--min-duration"),
        (["--scenario", "server", "--qps", "10", "--mlperf-rules"], "--mlperf-rules"),
    ):
        refused(dlbench("serve", "--accelerator", "cpu", *args, "--output", kept), needle)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--scenario", "burst"], "--scenario"),
        (["--scenario", "server"], "--qps"),
        (["--scenario", "offline", "--qps", "10"], "--qps"),
        (["--scenario", "server", "--qps", "nan"], "--qps"),
        (["--scenario", "server", "--qps", "0"], "--qps"),
        (["--scenario", "server", "--qps", "1e12"], "--qps"),
        (["--max-batch", "0"], "--max-batch"),
        (["--batch-timeout-ms", "-1"], "--batch-timeout-ms"),
        (["--batch-timeout-ms", "inf"], "--batch-timeout-ms"),
        (["--slo-p99-ms", "0"], "--slo-p99-ms"),
        (["--queries", "100000000000"], "--queries"),
        (["--min-duration", "-3"], "--min-duration"),
        (["--precision", "fp8"], "an LLM's server only"),
        (["--precision", "64"], "--precision"),
        (["--accelerator", "tpu"], "--accelerator"),
        (["--model", "no_such_model"], "no_such_model"),
        (["--width", "0"], "--width"),
        (["--tag", "nokey"], "--tag"),
        (["--tag", "verdict=fine"], "verdict"),
        (["--tag", "a=1", "--tag", "a=2"], "given twice"),
    ],
)
def test_bad_serve_flags_are_refused_in_one_line(dlbench, kept, args, needle):
    base = ["--accelerator", "cpu", "--scenario", "offline", "--no-compile"]
    refused(dlbench("serve", *base, *args, "--output", kept), needle)


@pytest.mark.e2e
def test_a_compiled_model_is_served_from_a_graph_per_bucket(dlbench, tmp_path):
    """Compiled, the model gets a static graph per bucket (1, 2 and 4 here), made while warming."""
    from torch._dynamo.utils import counters

    out = tmp_path / "serve.csv"
    args = [a for a in TINY if a != "--no-compile"] + ["--compile"]  # on the CPU: asked for
    code, _, err = dlbench("serve", *args, "--scenario", "offline", *SHORT, "--output", out)
    assert code == 0, err
    [row] = CsvStore(out).rows()
    assert row["compile"] == "True" and float(row["serve_mean_batch"]) > 3.5  # full batches
    assert counters["stats"]["unique_graphs"] >= 3  # buckets 1, 2 and 4


def test_the_report_shows_serving_and_draws_latency_against_rate(dlbench, tmp_path):
    """A real searched serve row beside a real benchmark row: the report's serving section
    holds the row's figures and its figure the rates the search tried."""
    from dlbench.analysis.report import build_report
    from dlbench.analysis.serving import search_points

    out = tmp_path / "rows.csv"
    args = ["serve", *TINY, "--scenario", "server", "--find-qps", "--search-budget", "3",
            *SHORT, "--output", out]  # fmt: skip
    assert dlbench(*args)[0] == 0
    train = ["train", *TINY[:2], "--model", "timm:test_resnet", "--batch-size", "2",
             "--width", "32", "--height", "32", "--n-iters", "3", "--warmup-steps", "1",
             "--output", out]  # fmt: skip
    assert dlbench(*train)[0] == 0
    [served] = [r for r in CsvStore(out).rows() if r["run_kind"] == "serve"]
    report = build_report([out], tmp_path / "report")
    section = report.markdown.read_text().split("## Serving under load")[1].split("## ")[0]
    assert "timm:test_resnet" in section and "p99 bound ms" in section
    from dlbench.analysis.load import load_rows

    points = search_points(load_rows([out]))
    assert len(points) == int(served["serve_points_tried"]) and points["p99_ms"].gt(0).all()
    assert any("serving" in p.name for p in (tmp_path / "report").glob("*.png"))
