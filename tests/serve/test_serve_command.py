"""`dlbench serve` end to end on the CPU with a tiny timm model (real model, real clock): each
scenario writes one `serve` row with its figures and references; bad flags are one line, exit
2, and the CSV keeps its bytes."""

from __future__ import annotations

import pytest

from dlbench.results.store import CsvStore
from tests.conftest import refused

TINY = ["--accelerator", "cpu", "--model", "timm:test_resnet", "--width", "32", "--height",
        "32", "--precision", "32", "--no-compile", "--max-batch", "4"]  # fmt: skip


@pytest.mark.parametrize(
    ("scenario", "extra"),
    [
        ("single-stream", []),
        ("offline", []),
        ("server", ["--qps", "40", "--min-duration", "0.2"]),
        ("server", ["--find-qps", "--search-budget", "3", "--min-duration", "0.1"]),
    ],
)
def test_each_scenario_writes_one_serve_row(dlbench, tmp_path, scenario, extra):
    out = tmp_path / "serve.csv"
    args = ["serve", *TINY, "--scenario", scenario, "--queries", "16", *extra, "--output", out]
    code, printed, err = dlbench(*args)
    assert code == 0, err
    [row] = CsvStore(out).rows()
    assert row["run_kind"] == "serve" and row["serve_scenario"] == scenario
    assert int(row["serve_queries"]) >= 16 and float(row["latency_p99_ms"]) > 0
    assert float(row["serve_offline_samples_per_s"]) > 0 and float(row["serve_batch1_p50_ms"]) > 0
    assert row["verdict"] in ("valid", "invalid") and "latency p50" in printed
    if scenario == "server":
        assert float(row["serve_qps_target"]) > 0 and row["serve_slo_met"] in ("True", "False")
    if "--find-qps" in extra:
        assert int(row["serve_points_tried"]) >= 1 and row["serve_points"]
    if scenario == "offline":
        assert float(row["serve_mean_batch"]) == pytest.approx(4.0)


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
        (["--model", "llm_tiny"], "continuous batching"),
        (["--precision", "fp8"], "--precision"),
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
    args = [a for a in TINY if a != "--no-compile"]
    code, _, err = dlbench("serve", *args, "--scenario", "offline", "--queries", "8",
                           "--output", out)  # fmt: skip
    assert code == 0, err
    [row] = CsvStore(out).rows()
    assert row["compile"] == "True" and float(row["serve_mean_batch"]) == pytest.approx(4.0)
    assert counters["stats"]["unique_graphs"] >= 3  # buckets 1, 2 and 4


def test_the_report_shows_serving_and_draws_latency_against_rate(dlbench, tmp_path):
    """A real searched serve row beside a real benchmark row: the report's serving section
    holds the row's figures and its figure the rates the search tried."""
    from dlbench.analysis.report import build_report
    from dlbench.analysis.serving import search_points

    out = tmp_path / "rows.csv"
    args = ["serve", *TINY, "--scenario", "server", "--find-qps", "--search-budget", "2",
            "--min-duration", "0.1", "--queries", "16", "--output", out]  # fmt: skip
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


def test_every_serve_setting_is_an_option_with_its_default():
    """The command hands its options to ServeSettings by name: an option missing, renamed or
    defaulted otherwise would break a run or change what it measures without a word."""
    import dataclasses

    import typer.main

    from dlbench.cli.app import app
    from dlbench.serve.settings import ServeSettings

    command = typer.main.get_command(app).commands["serve"]  # type: ignore[attr-defined]
    options = {p.name: p.default for p in command.params}
    renamed = {"tags": "tag"}  # one --tag a column, repeated
    for field in dataclasses.fields(ServeSettings):
        name = renamed.get(field.name, field.name)
        assert name in options, field.name
        default = field.default
        if field.name == "tags":
            assert options[name] is None
        elif field.name == "output":
            assert options[name] == str(default)
        else:
            assert options[name] == default, field.name
    assert set(options) == {renamed.get(f.name, f.name) for f in dataclasses.fields(ServeSettings)}
