"""Hostile input, round five (issue 82): published rows a fleet edits, files that are not what
they seem, serve's loads and files, plans and reports. Each ends in a correct result or one
`error:` line and exit 2, with no traceback, no hang and no earlier row changed; a published or
baseline row whose figure is no positive number does not count, and that is said once."""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dlbench.results.published import FOLDER_VARIABLE, PACKAGED_DIR, forget_published
from dlbench.results.store import CsvStore
from tests.analysis.rows import benchmark_row, write_rows
from tests.conftest import TINY, cli_env, refused, run_cli

TINY_INFER = ["infer", "--model", "timm:test_resnet", *TINY, "--n-iters", "2",
              "--warmup-steps", "0"]  # fmt: skip
NO_FIGURES = ["abc", "0", "-5", "inf", "nan", ""]
SERVE = ["serve", "--accelerator", "cpu", "--model", "timm:test_resnet", "--width", "32",
         "--height", "32", "--precision", "32", "--no-compile", "--max-batch", "4"]  # fmt: skip


@pytest.fixture(autouse=True)
def _fresh_published(monkeypatch):
    """Each test reads its own published folder (the rows are read once a process)."""
    forget_published()
    yield
    forget_published()


def _measured(dlbench, tmp_path: Path) -> dict[str, str]:
    """A real row of this CPU, its verdict made valid (two steps are too few for one): the
    candidate a gate holds against the published rows."""
    path = tmp_path / "first.csv"
    code, _, err = dlbench(*TINY_INFER, "--output", path)
    assert code == 0, err
    row = {**CsvStore(path).rows()[0], "verdict": "valid", "verdict_reasons": ""}
    path.unlink()
    CsvStore(path).append(row)
    return row


def _folder(tmp_path: Path, rows: list[dict[str, str]], name: str = "fleet.csv") -> Path:
    folder = tmp_path / "published"
    folder.mkdir(exist_ok=True)
    with open(folder / name, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return folder


def _as_published(row: dict[str, str], figure: str, run_id: str) -> dict[str, str]:
    return {**row, "samples_per_s": figure, "run_id": run_id, "verdict": "valid",
            "verdict_reasons": ""}  # fmt: skip


def _warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("warning:")]


# Published rows that break runs


@pytest.mark.parametrize("figure", NO_FIGURES)
def test_a_published_row_of_no_figure_leaves_a_run_its_row_and_is_said_once(
    dlbench, tmp_path, monkeypatch, figure
):
    first = _measured(dlbench, tmp_path)
    bad = [_as_published(first, figure, f"bad{i}") for i in range(3)]
    monkeypatch.setenv(FOLDER_VARIABLE, str(_folder(tmp_path, bad)))
    out = tmp_path / "rows.csv"
    code, _, err = dlbench(*TINY_INFER, "--output", out)
    assert code == 0 and "Traceback" not in err, err
    [row] = CsvStore(out).rows()
    assert row["status"] == "ok" and row.get("published_ratio", "") == ""
    if figure:  # an empty cell is a row that measured nothing: no warning owed
        [line] = [w for w in _warnings(err) if "published" in w]
        assert "fleet.csv" in line and "3 row(s)" in line and "do not count" in line


@pytest.mark.parametrize("figure", ["abc", "0", "-5"])
def test_compare_against_published_rows_of_no_figure_ends_in_a_verdict(
    dlbench, tmp_path, monkeypatch, figure
):
    first = _measured(dlbench, tmp_path)
    good = _as_published(first, first["samples_per_s"], "good")
    monkeypatch.setenv(
        FOLDER_VARIABLE, str(_folder(tmp_path, [good, _as_published(first, figure, "bad")]))
    )
    code, out, err = dlbench("compare", tmp_path / "first.csv")
    # a CPU row of one run: its machine's spread between runs leaves it inconclusive (exit 5)
    assert code == 5 and "Traceback" not in err, err
    assert "inconclusive" in out and "nothing published for" not in out
    assert len([w for w in _warnings(err) if "do not count" in w]) == 1


@pytest.mark.parametrize("figure", ["abc", "0", "-1", "inf"])
def test_a_baseline_row_of_no_figure_does_not_count(dlbench, tmp_path, figure):
    vit = benchmark_row(model="vit", samples_per_s=500.0)
    base = write_rows(tmp_path / "base.csv", [benchmark_row(samples_per_s=figure), vit])
    cand = write_rows(tmp_path / "cand.csv", [benchmark_row(samples_per_s=1000.0), vit])
    code, out, err = dlbench("compare", base, cand)
    assert "Traceback" not in err and code == 0, err  # resnet50 is new to it: no failure
    assert [w for w in _warnings(err) if "do not count" in w and "base.csv" in w]
    lines = [line for line in out.splitlines() if line.startswith("vit")]
    assert lines and "same" in lines[0]


# Files that are not what they seem


def _not_utf8_past_8_kib(path: Path) -> Path:
    rows = [benchmark_row(run_id=f"r{i}", hostname="h" * 200) for i in range(60)]
    write_rows(path, rows)
    data = path.read_bytes()
    assert len(data) > 9000
    path.write_bytes(data[:9000] + b"\xff\xfe\xfa" + data[9000:])
    return path


def test_a_csv_not_utf8_past_its_first_8_kib_is_refused_naming_it(dlbench, tmp_path):
    bad = _not_utf8_past_8_kib(tmp_path / "bad.csv")
    good = write_rows(tmp_path / "good.csv", [benchmark_row()])
    refused(dlbench("compare", bad), "bad.csv", "UTF-8")
    refused(dlbench("compare", good, bad), "bad.csv", "UTF-8")
    refused(dlbench("compare", bad, good), "bad.csv", "UTF-8")
    refused(dlbench("report", bad, "-o", tmp_path / "r"), "bad.csv", "UTF-8")
    before = bad.read_bytes()
    refused(dlbench(*TINY_INFER, "--output", bad), "bad.csv", "UTF-8")  # before measuring
    assert bad.read_bytes() == before


def test_a_published_file_not_utf8_or_not_a_file_does_not_count(dlbench, tmp_path, monkeypatch):
    first = _measured(dlbench, tmp_path)
    folder = _folder(tmp_path, [_as_published(first, first["samples_per_s"], "good")])
    _not_utf8_past_8_kib(folder / "broken.csv")
    os.mkfifo(folder / "x.csv")
    monkeypatch.setenv(FOLDER_VARIABLE, str(folder))
    env = {**cli_env(), FOLDER_VARIABLE: str(folder)}
    done = run_cli("compare", tmp_path / "first.csv", env=env, timeout=60)  # a FIFO: no hang
    assert done.returncode == 5 and "Traceback" not in done.stderr, done.stderr
    warned = _warnings(done.stderr)
    assert any("broken.csv" in w and "UTF-8" in w for w in warned), warned
    assert any("x.csv" in w and "not a regular file" in w for w in warned), warned
    assert "inconclusive" in done.stdout  # a CPU row of one run (as above)


def test_a_fifo_given_as_a_csv_is_refused_not_waited_on(tmp_path):
    fifo = tmp_path / "x.csv"
    os.mkfifo(fifo)
    for args in (["compare", fifo], ["report", fifo, "-o", tmp_path / "r"]):
        done = run_cli(*args, timeout=60)
        assert done.returncode == 2 and "not a regular file" in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("state", ["missing", "empty", "a file"])
def test_a_published_folder_with_no_rows_is_named_with_its_variable(
    dlbench, tmp_path, monkeypatch, state
):
    folder = tmp_path / "fleet"
    if state == "empty":
        folder.mkdir()
    elif state == "a file":
        folder.write_text("not a folder")
    monkeypatch.setenv(FOLDER_VARIABLE, str(folder))
    candidate = write_rows(tmp_path / "cand.csv", [benchmark_row()])
    refused(dlbench("compare", candidate), FOLDER_VARIABLE, str(folder))


def test_a_fleet_folder_of_this_cpus_rows_holds_them_without_a_contradiction(
    dlbench, tmp_path, monkeypatch
):
    first = _measured(dlbench, tmp_path)
    monkeypatch.setenv(
        FOLDER_VARIABLE, str(_folder(tmp_path, [_as_published(first, first["samples_per_s"], "f")]))
    )
    code, out, err = dlbench("compare", tmp_path / "first.csv")
    assert code == 5, err  # held against itself, one run a side of a CPU: no contradiction
    assert "slower" not in out.split("\n")[0] and "nothing published for" not in out


# Serve's loads and files


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--scenario", "server", "--find-qps", "--search-budget", "1e-9"], "--search-budget"),
        (["--scenario", "server", "--find-qps", "--search-budget", "5", "--min-duration", "10"],
         "--search-budget"),
        (["--batch-timeout-ms", "-0.5"], "--batch-timeout-ms"),
        (["--batch-timeout-ms", "-1e-9"], "--batch-timeout-ms"),
        (["--mlperf-rules", "--min-duration", "1"], "--min-duration"),
        (["--mlperf-rules", "--queries", "64"], "--queries"),
        (["--scenario", "offline", "--coalesce"], "--coalesce"),
        (["--scenario", "offline", "--slo-p99-ms", "20"], "--slo-p99-ms"),
        (["--scenario", "offline", "--search-budget", "30"], "--search-budget"),
    ],
)  # fmt: skip
def test_serve_flags_that_cannot_make_a_load_are_refused_before_the_warm_up(
    dlbench, kept, args, needle
):
    base = [a for a in SERVE if a != "serve"]
    if "--scenario" not in args:
        base += ["--scenario", "offline"]
    refused(dlbench("serve", *base, *args, "--output", kept), needle)


def test_a_rate_this_server_cannot_answer_in_an_hour_is_refused_before_its_load(dlbench, tmp_path):
    out = tmp_path / "serve.csv"
    began = time.monotonic()
    code, _, err = dlbench(*SERVE, "--scenario", "server", "--qps", "1000000",
                           "--min-duration", "1", "--output", out)  # fmt: skip
    assert time.monotonic() - began < 90
    assert code == 2 and "Traceback" not in err, err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "--qps" in errors[0] and "offline" in errors[0]
    assert not out.exists() or not CsvStore(out).rows()


@pytest.mark.parametrize("kind", ["a file", "read-only"])
def test_a_loadgen_folder_that_cannot_be_written_is_refused_before_the_warm_up(
    dlbench, tmp_path, kind
):
    if kind == "read-only" and os.geteuid() == 0:
        pytest.skip("root writes into a read-only folder")
    out = tmp_path / "serve.csv"
    logs = tmp_path / "serve.loadgen"  # where LoadGen's logs of serve.csv's loads are kept
    if kind == "a file":
        logs.write_text("in the way")
    else:
        logs.mkdir()
        logs.chmod(0o500)
    try:
        line = refused(dlbench(*SERVE, "--scenario", "offline", "--output", out), "serve.loadgen")
    finally:
        if logs.is_dir():
            logs.chmod(0o700)
    assert "warm" not in line and not out.exists()


@pytest.mark.e2e
@pytest.mark.parametrize("scenario", ["server", "offline"])
def test_a_signal_mid_load_ends_the_run_at_once_with_its_code(tmp_path, scenario):
    """Every query issued (offline issues them all at once) is no reason to wait for the load."""
    out = tmp_path / "serve.csv"
    # a server load at 50 queries/s lasts its 60 s; an offline one, its 100,000 queries
    size = ["--qps", "50"] if scenario == "server" else ["--queries", "100000"]
    args = [*SERVE, "--scenario", scenario, *size, "--min-duration", "60", "--output", str(out)]
    proc = subprocess.Popen([sys.executable, "-m", "dlbench", *args], env=cli_env(),
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        for line in proc.stderr:
            if line.startswith(("LoadGen: a ", "LoadGen: an ")) and f"{scenario} load" in line:
                break
        time.sleep(2.0)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        err = proc.stderr.read()
        code = proc.wait(timeout=60)
    finally:
        proc.kill()
    assert code == 143 and time.monotonic() - sent < 15, err
    assert [r["status"] for r in CsvStore(out).rows()] == ["interrupted"]


# Plans and reports


def test_a_plan_with_another_modes_fp8_recipe_is_refused_when_loaded(dlbench, kept, tmp_path):
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        "models: [timm:test_resnet]\nmodes: [train]\nprecisions: [fp8]\n"
        "batch_sizes: [4]\nfixed: {accelerator: cpu, fp8_recipe: rowwise_dynamic}\n"
    )
    for extra in ([], ["--dry-run"]):
        refused(dlbench("sweep", plan, *extra, "--output", kept), "fp8-recipe", "rowwise_dynamic")


def test_a_report_of_serve_rows_alone_shows_serving(dlbench, tmp_path):
    code, _, err = dlbench("report", PACKAGED_DIR / "serve-pt2.11-cu13.0-h100-80gb-hbm3.csv",
                           "-o", tmp_path / "r")  # fmt: skip
    assert code == 0, err
    assert "## Serving under load" in (tmp_path / "r" / "report.md").read_text()


@pytest.mark.parametrize("cell", ["12.5:abc:ok", "abc", "1:2", "::", "-5:3:ok;7:nan:over"])
def test_a_hand_edited_search_cell_leaves_the_report_whole(dlbench, tmp_path, cell):
    source = PACKAGED_DIR / "serve-pt2.11-cu13.0-h100-80gb-hbm3.csv"
    with open(source, newline="") as handle:
        rows = list(csv.DictReader(handle))
    rows[0]["serve_points"] = cell
    edited = tmp_path / "edited.csv"
    with open(edited, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    code, _, err = dlbench("report", edited, "-o", tmp_path / "r")
    assert code == 0 and "Traceback" not in err, err
