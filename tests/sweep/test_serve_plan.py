"""A plan's `serve` runs (`dlbench sweep serve`): the packaged plan is the reference's serve
part, each entry checked as `dlbench serve` checks its flags before any point runs, each run in
a process of its own on the CPU here (a tiny timm model), resumed on a rerun, and a point that
does not finish leaves a serve row that says so."""

from __future__ import annotations

import pytest

from dlbench.errors import UserError
from dlbench.results.store import CsvStore
from dlbench.sweep.plan import ServePoint
from dlbench.sweep.plan_file import load_plan, parse_plan
from tests.conftest import run_cli

TINY = ("accelerator: cpu, model: 'timm:test_resnet', width: 32, height: 32, precision: 32, "
        "compile: false, max_batch: 4, queries: 16")  # fmt: skip


def test_the_packaged_serve_plan_serves_three_models_and_resnet50_in_every_scenario():
    points = load_plan("serve").points()
    assert all(isinstance(p, ServePoint) for p in points)
    runs = [(p.settings.model, p.settings.scenario, p.settings.find_qps) for p in points]
    assert runs == [("resnet50", "server", True), ("resnet50", "single-stream", False),
                    ("resnet50", "offline", False), ("vit", "server", True),
                    ("distilbert", "server", True)]  # fmt: skip
    budgets = [p.settings.search_budget for p in points if p.settings.find_qps]
    assert budgets == [240.0, 120, 120]
    assert points[0].cli_args()[:5] == ["serve", "--model", "resnet50", "--scenario", "server"]


def test_the_packaged_serve_llm_plan_serves_llm_1b_in_every_scenario_and_the_8b_by_memory():
    points = load_plan("serve-llm").points()
    runs = [(p.settings.model, p.settings.scenario, p.settings.precision) for p in points]
    assert runs == [
        ("llm_1b", "offline", "bf16-true"), ("llm_1b", "server", "bf16-true"),
        ("llm_1b", "single-stream", "bf16-true"), ("llm_8b", "offline", "bf16-true"),
        ("llm_8b", "offline", "fp8"),
    ]  # fmt: skip
    llm = [p.settings for p in points]
    assert {(s.prompt_len, s.new_tokens, s.lengths) for s in llm} == {(128, 128, "fixed")}
    # offline and the search as many requests at once as memory holds: the same slots
    assert [s.sized_by_memory() for s in llm] == [True, True, False, True, True]
    assert [s.search_budget for s in llm if s.find_qps] == [240]


def test_the_batching_plan_holds_continuous_and_static_to_one_grid_of_rates():
    plan = load_plan("serve-llm-batching")
    points = [p.settings for p in plan.points()]
    grid = {b: sorted({s.qps for s in points if s.batching == b}) for b in ("continuous", "static")}
    assert grid["continuous"] == grid["static"] and len(grid["static"]) >= 5
    assert {(s.lengths, s.token_bounds, s.scenario) for s in points} == {
        ("chat", "interactive", "server")
    }
    assert plan.repeats == 3 and len(points) == 3 * 2 * len(grid["static"])


def test_serve_entries_take_tags_repeats_and_only():
    plan = parse_plan(
        "repeats: 2\nserve:\n"
        "  - {model: resnet50, scenario: offline, tags: {purpose: a}}\n"
        "  - {model: vit, scenario: single-stream, tags: {purpose: b}}\n"
    )
    assert [p.label for p in plan.points()] == [
        "resnet50 serve offline #0", "resnet50 serve offline #1",
        "vit serve single-stream #0", "vit serve single-stream #1",
    ]  # fmt: skip
    plan.keep_tagged("purpose=b")
    assert [p.settings.model for p in plan.points()] == ["vit", "vit"]
    args = plan.points()[0].cli_args()
    assert args[-4:] == ["--tag", "purpose=b", "--tag", "repeat=0"]


@pytest.mark.parametrize(
    ("entry", "needle"),
    [
        ("{model: resnet50}", "--qps"),  # a server needs a rate or the search
        ("{model: resnet50, scenario: burst}", "--scenario"),
        ("{model: resnet50, scenario: offline, qps: 10}", "--qps"),
        ("{model: resnet50, scenario: server, qps: .nan}", "--qps"),
        ("{model: no_such_model, scenario: offline}", "no_such_model"),
        ("{model: resnet50, scenario: offline, colour: red}", "colour"),
        ("{model: resnet50, scenario: offline, output: /tmp/x.csv}", "output"),
        ("{model: resnet50, scenario: offline, run_id: abc}", "run_id"),
        ("{model: resnet50, scenario: offline, max_batch: many}", "max_batch"),
        ("{model: resnet50, scenario: offline, max_batch: 2.5}", "max_batch"),
        ("{model: resnet50, scenario: offline, max_batch: 0}", "--max-batch"),
        ("{model: resnet50, scenario: offline, compile: maybe}", "compile"),
        ("{model: resnet50, scenario: offline, width: 0}", "--width"),
        ("{model: resnet50, scenario: offline, tags: {verdict: x}}", "verdict"),
        ("{model: resnet50, scenario: offline, tags: [a]}", "tags"),
        ("[model, resnet50]", "serve[0]"),
        ("{model: llm_tiny, scenario: offline, width: 64}", "--width"),
        ("{model: llm_tiny, scenario: offline, batching: eager}", "--batching"),
        ("{model: llm_tiny, scenario: offline, prompt_len: 2040}", "context"),
        ("{model: resnet50, scenario: offline, new_tokens: 8}", "--new-tokens"),
        ("{model: llm_tiny, scenario: offline, sweep_concurrency: true}", "a point is one row"),
        ("{model: llm_tiny, scenario: offline, sweep_concurrency: false}", "sweep_concurrency"),
    ],
)
def test_a_bad_serve_entry_is_refused_by_place_and_flag_before_any_point(entry, needle):
    with pytest.raises(UserError) as caught:
        parse_plan(f"serve:\n  - {entry}\n")
    message = str(caught.value)
    assert message.startswith("PLAN: serve[0]") and needle in message and "\n" not in message


def test_serve_must_be_a_list():
    with pytest.raises(UserError, match="PLAN: serve: must be a list"):
        parse_plan("serve: {model: resnet50}\n")


@pytest.mark.e2e
def test_a_serve_plan_runs_each_point_in_its_own_process_and_a_rerun_resumes(tmp_path):
    plan = tmp_path / "served.yaml"
    plan.write_text(
        "name: served\ntimeout_s: 240\nserve:\n"
        f"  - {{{TINY}, scenario: single-stream}}\n"
        f"  - {{{TINY}, scenario: offline, tags: {{purpose: offline}}}}\n"
    )
    out = tmp_path / "serve.csv"
    first = run_cli("sweep", plan, "--output", out)
    assert first.returncode == 0, first.stderr
    rows = CsvStore(out).rows()
    assert [(r["run_kind"], r["serve_scenario"], r["status"]) for r in rows] == [
        ("serve", "single-stream", "ok"), ("serve", "offline", "ok")]  # fmt: skip
    assert all(r["sweep"] == "served" for r in rows) and rows[1]["purpose"] == "offline"
    assert "queries/s" in first.stderr  # each point's line names what it measured
    again = run_cli("sweep", plan, "--output", out)
    assert again.returncode == 0 and "2 of 2 point(s) already have an ok row" in again.stderr
    assert len(CsvStore(out).rows()) == 2


@pytest.mark.e2e
def test_a_serve_point_that_runs_out_of_time_leaves_a_serve_row_that_says_so(tmp_path):
    plan = tmp_path / "slow.yaml"
    plan.write_text(f"name: slow\ntimeout_s: 1\nserve:\n  - {{{TINY}, scenario: offline}}\n")
    out = tmp_path / "serve.csv"
    result = run_cli("sweep", plan, "--output", out)
    assert result.returncode == 1, result.stderr
    [row] = CsvStore(out).rows()
    assert (row["run_kind"], row["status"], row["model"]) == (
        "serve",
        "timeout",
        "timm:test_resnet",
    )
    assert row["serve_scenario"] == "offline" and row["sweep"] == "slow"


def test_a_stored_row_counts_for_the_serve_point_it_measured_and_no_other():
    """A row matches a point only where every setting the row records is the point's: another
    batcher, rate, bound or minimum, a run uncompiled or without graphs is another point."""
    [server, single] = parse_plan(
        "serve:\n  - {model: resnet50, scenario: server, qps: 100, max_batch: 8}\n"
        "  - {model: resnet50, scenario: single-stream}\n"
    ).points()
    written = {k: "" if v is None else str(v) for k, v in server.settings.columns().items()}
    row = {"run_kind": "serve", **written}  # as the CSV holds the row's cells
    assert row["serve_slo_p99_ms"] == "15.0" and row["serve_qps"] == "100.0"
    assert server.matches(row) and not single.matches(row)
    for other in (
        {"serve_max_batch": "16"},
        {"serve_qps": "200.0"},
        {"serve_slo_p99_ms": "20.0"},
        {"serve_min_duration_s": "5.0"},
        {"serve_find_qps": "True"},
        {"serve_mlperf_rules": "True"},
        {"run_kind": "benchmark"},
        {"repeat": "1"},  # a repeat's row is its own
    ):
        assert not server.matches({**row, **other}), other
    # the row's cuda_graphs says how it ran: eager on a CPU or after a failed capture is the
    # point that asked for graphs (resumed, not run again); a point that asked none needs none
    assert server.matches({**row, "cuda_graphs": "False"})
    [eager] = parse_plan(
        "serve:\n  - {model: resnet50, scenario: server, qps: 100, max_batch: 8, "
        "cuda_graphs: false}\n"
    ).points()
    assert eager.matches({**row, "cuda_graphs": "False"})
    # compile left unset is the device's (a GPU compiles, a CPU does not): either row is it;
    # a point that set it is matched on it
    assert server.matches({**row, "compile": "False"}) and server.matches(
        {**row, "compile": "True"}
    )
    [compiled] = parse_plan(
        "serve:\n  - {model: resnet50, scenario: server, qps: 100, max_batch: 8, compile: true}\n"
    ).points()
    assert not compiled.matches({**row, "compile": "False"})
    assert not eager.matches({**row, "cuda_graphs": "True"})


def test_each_serve_points_command_line_gives_the_command_its_settings(monkeypatch, tmp_path):
    from typer.testing import CliRunner

    import dlbench.serve.run
    import dlbench.serve.summary
    from dlbench.cli import app

    given = []
    monkeypatch.setattr(dlbench.serve.run, "execute_serve", lambda s, shown: given.append(s) or [])
    monkeypatch.setattr(dlbench.serve.summary, "show_serve", lambda row, output=None: None)
    out = tmp_path / "serve.csv"
    for point in load_plan("serve").points():
        fields = {"output": out, "run_id": "r1", "tags": {"sweep": "serve"}}
        result = CliRunner().invoke(app, point.cli_args(**fields))
        assert result.exit_code == 0, result.output
        assert given[-1] == point.with_run(**fields)
