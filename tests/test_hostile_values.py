"""Hostile values a user or an operator passes in variables, caches and plans: cells that would
break a CSV, cached records dlbench must not trust, launcher variables, numbers at their edges,
rows that cannot say which code measured them. Each ends in a correct row or in one line and
exit 2, with no traceback and no earlier row changed."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pandas as pd
import pytest

from dlbench.results.store import CsvStore
from tests.analysis.rows import benchmark_row, write_rows
from tests.conftest import cli_env, read_rows, refused, run_cli, tiny_run

BREAKING = ["4242\n=1+1", "a\r\nb", "nul\x00byte", "cr\ronly", "\x1b[31mred", "tab\tkept",
            "=HYPERLINK(\"x\")", "-2+3"]  # fmt: skip


@pytest.mark.parametrize("text", BREAKING)
def test_a_text_cell_with_a_line_break_or_a_nul_stays_one_cell(tmp_path, text):
    path = tmp_path / "rows.csv"
    store = CsvStore(path)
    for i in range(3):  # appended lines, then a rewrite for a new column
        row = {**benchmark_row(), "slurm_job_id": text, "cache_dir": f"/c/{text}"}
        store.append({**row, **({"new_column": text} if i == 2 else {})})
    store.check_rows()  # dlbench reads its own file back
    assert b"\x00" not in path.read_bytes()
    with path.open(newline="") as f:
        lines = f.read().split("\n")
    assert len([line for line in lines if line]) == 4  # a header and three rows, a line each
    frame = pd.read_csv(path)
    assert len(frame) == 3 and frame["slurm_job_id"].notna().all()
    rows = store.rows()
    assert all("\n" not in v and "\x00" not in v for r in rows for v in r.values() if v)


def test_no_nul_reaches_a_report_from_an_old_csv(dlbench, tmp_path):
    path = tmp_path / "old.csv"
    write_rows(path, [{**benchmark_row(), "hostname": "node\x00one"}])
    out = tmp_path / "report"
    code, _, err = dlbench("report", path, "-o", out)
    assert code == 0, err
    for name in ("report.md", "report.html"):
        assert "\x00" not in (out / name).read_text()


@pytest.mark.e2e
def test_a_run_under_a_broken_job_id_writes_rows_it_can_append_to(tmp_path):
    """(A cache path with a newline is refused: tests/engine/acceleration/test_caches.py.)"""
    env = {**cli_env(), "SLURM_JOB_ID": "4242\n=1+1"}
    csv_path = tmp_path / "rows.csv"
    for _ in range(2):
        out = tiny_run(output=csv_path, env=env)
        assert out.returncode == 0, out.stderr
    rows = read_rows(csv_path)
    assert len(rows) == 2 and rows[0]["slurm_job_id"] == "4242\\n=1+1"


def test_every_runconfig_field_survives_the_workers_round_trip(tmp_path):
    """A sweep worker gets its points as JSON: a path came back as text (`cache_dir`: every
    point of a plan that set it failed with a TypeError in the default worker)."""

    from dlbench.config import RunConfig
    from dlbench.config.flags import config_args, config_from_json, config_to_json
    from dlbench.config.row_tags import RowTags

    config = RunConfig.of(
        model="vit", mode="infer", batch_size=3, n_iters=11, warmup_steps=2, precision="fp8",
        fp8_recipe="rowwise_dynamic_with_head",
        width=64, height=48, seq_len=64, prompt_len=8, new_tokens=9, accelerator="cpu",
        devices="2", num_nodes=2, strategy="ddp", ddp=("bucket_cap_mb=50",),
        activation_checkpointing="full", collective_timeout=30.0, channels_last=False,
        compile=True, cache_dir=tmp_path / "c",
        cache=False, cudnn_search="off", cuda_graphs=False, llm_impl="hf", attention="math",
        optimizer="adamw", data_on="host", data=f"folder:{tmp_path}", data_workers=2,
        data_decode="gpu",
        output=tmp_path / "o.csv", json=True, seed=7, max_noise=3.0, max_host_busy=25.0,
        max_time=9.0, min_time=1.0,
        run_id="abc", telemetry=False, sample_interval=0.5, telemetry_log=tmp_path / "t.csv",
        strict=True, processes=3, usd_per_hour=2.5, nvtx=True, breakdown=True,
        tags=RowTags({"purpose": "x"}, "process", "auto"),
    )  # fmt: skip
    defaults = RunConfig().settings()
    assert {k for k, v in config.settings().items() if v == defaults[k]} == set()
    back = config_from_json(json.loads(json.dumps(config_to_json(config))))
    assert back == config
    assert isinstance(back.acceleration.cache_dir, Path) and isinstance(back.telemetry.log, Path)
    assert isinstance(back.output.tags, RowTags)
    words = config_args(config)  # the command line a sweep's own process gets
    pairs = [words[i + 1].split("=", 1) for i, w in enumerate(words) if w == "--tag"]
    assert RowTags.of(dict(pairs)) == config.output.tags


PLAN = """
name: cached
fixed: {{accelerator: cpu, n_iters: 2, warmup_steps: 0, width: 32, height: 32,
        cache_dir: {cache}, cudnn_search: off}}
runs:
  - models: [timm:test_resnet]
    batch_sizes: [2]
"""


@pytest.mark.e2e
def test_a_plan_with_a_cache_dir_runs_in_the_default_worker(tmp_path):
    plan = tmp_path / "plan.yaml"
    plan.write_text(PLAN.format(cache=tmp_path / "cache"))
    out = run_cli("sweep", plan, "--output", tmp_path / "rows.csv", "--invalid-ok")  # 2 steps
    assert out.returncode == 0, out.stderr
    [row] = read_rows(tmp_path / "rows.csv")
    assert row["status"] == "ok" and row["isolation"] == "worker"
    assert row["cache_dir"].startswith(str(tmp_path / "cache"))


def test_a_plan_whose_cache_dir_cannot_be_used_is_refused_before_any_point(dlbench, kept, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    plan = tmp_path / "plan.yaml"
    plan.write_text(PLAN.format(cache=blocker / "cache"))
    refused(dlbench("sweep", plan, "--output", kept), "cache_dir", str(blocker))


@pytest.mark.parametrize(
    ("fixed", "field", "expected"),
    [("cudnn_search: off", "cudnn_search", "off"), ("cudnn_search: on", "cudnn_search", "on"),
     ("n_iters: '3'", "n_iters", 3), ("max_time: '2.5'", "max_time", 2.5),
     ("min_time: '1e-1'", "min_time", 0.1)],
)  # fmt: skip
def test_yaml_values_are_read_as_the_user_meant_them(fixed, field, expected):
    from dlbench.sweep.plan_file import parse_plan

    plan = parse_plan(f"fixed: {{{fixed}}}\nruns:\n  - models: [resnet50]\n", "PLAN")
    assert plan.points()[0].config().setting(field) == expected


@pytest.mark.parametrize(
    ("fixed", "needles"),
    [("max_time: soon", ("max_time", "e.g.")), ("batch_sizes_x: 1", ("unknown",)),
     ("channels_last: 'maybe'", ("channels_last",)), ("max_time: .inf", ("max-time",)),
     ("data_on: no", ("data_on", "quote it"))],
)  # fmt: skip
def test_yaml_values_that_cannot_be_meant_are_refused_saying_how_to_write_them(fixed, needles):
    from dlbench.errors import UserError
    from dlbench.sweep.plan_file import parse_plan

    with pytest.raises(UserError) as caught:
        plan = parse_plan(f"fixed: {{{fixed}}}\nruns:\n  - models: [resnet50]\n", "PLAN")
        plan.points()[0].config()
    for needle in needles:
        assert needle in str(caught.value)


H100 = "NVIDIA H100 80GB HBM3"


@pytest.mark.parametrize(
    "figure", [1e-12, float("inf"), float("nan"), 1e30, -5.0, 0.0, True, "742", 990.0]
)
def test_a_recorded_peak_the_gpu_cannot_have_is_no_record(tmp_path, figure):
    from dlbench.results.peaks.attained import PEAKS_FILE, attained_peaks

    record = {"GPU-1": {"bf16": figure, "read_tb_s": 3.1, "run_id": "p"}}
    (tmp_path / PEAKS_FILE).write_text(json.dumps(record))  # Infinity and NaN as JSON allows
    peaks = attained_peaks(tmp_path, "GPU-1", H100)
    assert peaks == {"read_tb_s": 3.1, "run_id": "p"}  # the bf16 figure dropped, read kept
    only_bad = {"GPU-1": {"bf16": figure, "run_id": "p"}}
    (tmp_path / PEAKS_FILE).write_text(json.dumps(only_bad))
    assert attained_peaks(tmp_path, "GPU-1", H100) is None


def test_mfu_against_the_attained_peak_is_never_above_one():
    from dlbench.results.efficiency import attained_columns

    peaks = {"bf16": 100.0, "read_tb_s": 1.0, "run_id": "p"}
    row = {"achieved_tflops": 400.0, "decode_hbm_tb_s": 2.0}
    assert attained_columns(row, "bf16-mixed", peaks) == {"attained_peak_run_id": "p"}
    fine = attained_columns({"achieved_tflops": 50.0}, "bf16-mixed", peaks)
    assert fine["mfu_attained"] == 0.5


def test_records_that_are_not_files_or_nest_too_deep_are_no_records(tmp_path):
    from dlbench.caches import read_record, write_json

    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    assert read_record(tmp_path, "deep.json") == {}
    os.mkfifo(tmp_path / "fifo.json")  # reading it would wait for a writer forever
    assert read_record(tmp_path, "fifo.json") == {}
    (tmp_path / "folder.json").mkdir()
    assert read_record(tmp_path, "folder.json") == {}
    with pytest.raises(OSError):
        write_json(tmp_path / "folder.json", {"a": 1})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["deep.json", "fifo.json", "folder.json"]


@pytest.mark.e2e
def test_peak_keeps_its_rows_when_its_record_cannot_be_written(tmp_path):
    from dlbench.caches import cache_key
    from dlbench.results.environment import collect_environment
    from dlbench.results.peaks.attained import PEAKS_FILE

    cache = tmp_path / "cache"
    (cache / cache_key(collect_environment("cpu")) / PEAKS_FILE).mkdir(parents=True)
    out = run_cli("peak", "--accelerator", "cpu", "--max-time", "1", "--output",
                  tmp_path / "peak.csv", "--cache-dir", cache)  # fmt: skip
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    warned = [line for line in out.stderr.splitlines() if line.startswith("warning:")]
    assert len(warned) == 1 and "would not keep attained_peaks.json" in warned[0], out.stderr
    assert "the row is kept" in warned[0]  # one warning, as every record's (caches.keep_record)
    assert len(read_rows(tmp_path / "peak.csv")) == 1


@pytest.mark.e2e
@pytest.mark.parametrize("variable", ["GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"])
def test_the_codes_identity_comes_from_its_own_tree_whatever_gits_variables_say(tmp_path, variable):
    import subprocess

    other = tmp_path / "other"
    subprocess.run(["git", "init", "-q", str(other)], check=True)
    subprocess.run(["git", "-C", str(other), "-c", "user.email=a@b", "-c", "user.name=a",
                    "commit", "-q", "--allow-empty", "-m", "x"], check=True)  # fmt: skip
    env = {**cli_env(), variable: str(other / ".git" if variable == "GIT_DIR" else other)}
    out = run_cli("--version", env=env)
    ours = subprocess.run(["git", "-C", str(Path(__file__).parents[1]), "rev-parse", "HEAD"],
                          capture_output=True, text=True).stdout.strip()  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert ours[:7] in out.stdout


@pytest.mark.parametrize(
    ("variable", "value"),
    [("SLURM_PROCID", "abc"), ("LOCAL_RANK", "x"), ("RANK", "-1"), ("WORLD_SIZE", "1e3"),
     ("MASTER_PORT", "99999999999"), ("NODE_RANK", " "), ("SLURM_LOCALID", "0\n1"),
     ("JSM_NAMESPACE_RANK", "one")],
)  # fmt: skip
def test_a_launcher_variable_that_is_no_number_is_one_line_before_any_import(
    dlbench, kept, monkeypatch, variable, value
):
    monkeypatch.setenv(variable, value)
    line = refused(dlbench("train", "--accelerator", "cpu", "--output", kept), variable)
    assert "whole number" in line


@pytest.mark.e2e
def test_a_launcher_variable_that_is_no_number_is_refused_by_a_fresh_process(tmp_path):
    out = run_cli("train", "--accelerator", "cpu", env={**cli_env(), "SLURM_PROCID": "abc"})
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.strip().splitlines() == [out.stderr.strip()]


@pytest.mark.parametrize(
    ("args", "needle"),
    [(["train", "--collective-timeout", "1e300"], "--collective-timeout"),
     (["train", "--max-time", "1e300"], "--max-time"),
     (["train", "--min-time", "-1"], "--min-time"),
     (["train", "--sample-interval", "1e9"], "--sample-interval"),
     (["train", "--usd-per-hour", "1e300"], "--usd-per-hour"),
     (["scaling", "--timeout", "-5"], "--timeout"),
     (["scaling", "--timeout", "0"], "--timeout"),
     (["scaling", "--timeout", "1e12"], "--timeout"),
     (["sweep", "quick", "--timeout", "-1"], "--timeout"),
     (["sweep", "quick", "--settle-s", "-1"], "--settle-s"),
     (["peak", "--max-time", "1e300"], "--max-time"),
     (["data", ".", "--min-time", "1e300"], "--min-time")],
)  # fmt: skip
def test_numbers_at_their_edges_are_refused_where_the_flag_is_read(dlbench, kept, args, needle):
    refused(dlbench(*args, "--output", kept), needle)


@pytest.mark.parametrize(
    "fixed", ["collective_timeout: 1e300", "max_time: -1", "sample_interval: 0"]
)
def test_numbers_at_their_edges_are_refused_where_the_plan_is_read(fixed):
    from dlbench.errors import UserError
    from dlbench.sweep.plan_file import parse_plan

    with pytest.raises(UserError):
        parse_plan(f"fixed: {{{fixed}}}\nruns:\n  - models: [resnet50]\n", "PLAN").points()[
            0
        ].config()
    with pytest.raises(UserError):
        parse_plan("timeout_s: 1e300\nruns:\n  - models: [resnet50]\n", "PLAN")


@pytest.mark.parametrize(
    ("commit", "dirty"),
    [("", "False"), ("unknown", "False"), ("a" * 40, ""), ("a" * 40, "maybe"), ("", "")],
)
def test_rows_that_cannot_say_their_code_are_never_the_same_code(tmp_path, commit, dirty):
    from dlbench.analysis.compare import OTHER_CODE, compare_runs
    from dlbench.analysis.load import load_rows

    row = {**benchmark_row(), "dlbench_commit": commit, "dlbench_dirty": dirty}
    base = write_rows(tmp_path / "a.csv", [row])
    cand = write_rows(tmp_path / "b.csv", [{**row, "run_id": "other"}])
    result = compare_runs(load_rows([base]), load_rows([cand]), same_code=True)
    assert list(result.table["verdict"]) == [OTHER_CODE]
    known = {**row, "dlbench_commit": "b" * 40, "dlbench_dirty": "False"}
    base = write_rows(tmp_path / "c.csv", [known])
    cand = write_rows(tmp_path / "d.csv", [{**known, "run_id": "other"}])
    same = compare_runs(load_rows([base]), load_rows([cand]), same_code=True)
    assert list(same.table["verdict"]) != [OTHER_CODE]


def test_no_lock_file_is_left_beside_the_csv(tmp_path):
    path = tmp_path / "rows.csv"
    CsvStore(path).append(benchmark_row())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rows.csv"]  # hidden ones too


@pytest.mark.parametrize("bad", ["inf", "-742", "1e30", "nan"])
def test_a_report_of_impossible_peaks_names_the_impossible_gpu_not_the_healthy_ones(
    dlbench, tmp_path, bad
):
    from tests.peak.test_fleet import peak

    rows = [peak("h", 0, 745.0, 3.16), peak("h", 1, 740.0, 3.15), peak("h", 2, 748.0, 3.16),
            {**peak("h", 3, 744.0, 3.15), "attained_bf16_tflops": bad}]  # fmt: skip
    path = tmp_path / "peaks.csv"
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(dict.fromkeys(k for r in rows for k in r)))
        writer.writeheader()
        writer.writerows(rows)
    code, _, err = dlbench("report", path, "-o", tmp_path / "report")
    if bad in ("inf", "-742"):  # no run measures it: refused in one line naming its row (round six)
        assert code == 2 and err.count("\n") == 1 and "line 5" in err, err
        assert "attained_bf16_tflops" in err and not (tmp_path / "report").exists()
        return
    assert code == 0, err
    named = (tmp_path / "report" / "report.md").read_text().split("Named: ", 1)
    if bad == "nan":  # no figure at all: nothing to judge it by
        assert len(named) == 1 or "GPU 3" not in named[1].split("\n", 1)[0]
        return
    line = named[1].split("\n", 1)[0]
    assert "h GPU 3" in line and "GPU 0" not in line and "GPU 1" not in line
