"""The real CLI: rows written, bad input refused with exit 2 (in this process), signals and a
fresh process's start-up (in real subprocesses)."""

from __future__ import annotations

import signal
import time

import pytest

from tests.conftest import TINY, cli_env, read_rows, refused, run_cli, tiny_run


@pytest.mark.e2e
def test_train_and_src_inference_append_one_row_each(csv_path):
    steps = ["--n-iters", "3", "--warmup-steps", "1"]
    first = tiny_run(*steps, output=csv_path)
    assert first.returncode == 0, first.stderr
    second = tiny_run(*steps, mode="src.inference", output=csv_path)
    assert second.returncode == 0, second.stderr
    rows = read_rows(csv_path)
    assert [r["mode"] for r in rows] == ["train", "infer"]
    for row in rows:
        assert row["status"] == "ok" and float(row["images_per_s"]) > 0
        assert row["steps"] == "3" and row["width"] == "32" and row["height"] == "32"
        assert row["torch"] and row["lightning"] and row["timm"]
    assert "images/s" in first.stdout
    for phase in ("startup_s", "setup_s", "build_s", "warmup_s", "profile_s"):
        assert all(float(r[phase]) >= 0 for r in rows), phase
    assert float(rows[0]["startup_s"]) > 0.5  # a fresh process: imports and the CLI


def test_json_prints_the_row(dlbench, csv_path):
    import json

    code, out, err = dlbench("infer", "--model", "timm:test_resnet", *TINY, "--n-iters", "2",
                             "--warmup-steps", "0", "--json", "--output", csv_path)  # fmt: skip
    assert code == 0, err
    row = json.loads(out.strip().splitlines()[-1])
    assert row["model"] == "timm:test_resnet" and row["samples_per_s"] > 0


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--model", "resnet5"], "--model"),
        (["--batch-size", "0"], "--batch-size"),
        (["--n-iters", "-1"], "--n-iters"),
        (["--warmup-steps", "-2"], "--warmup-steps"),
        (["--model", "vit", "--width", "100"], "--width"),
        (["--precision", "16-mixed"], "--precision"),
        (["--precision", "fp8"], "--precision"),
        (["--devices", "99999"], "--devices"),
        (["--model", "llm_tiny", "--cuda-graphs"], "--cuda-graphs"),
    ],
)
def test_bad_input_exits_2_with_one_line_and_writes_nothing(dlbench, csv_path, args, flag):
    # in this process: the refusal's path is the same, a fresh one's start-up is e2e's to pay
    refused(dlbench("train", "--accelerator", "cpu", *args, "--output", csv_path), flag)
    assert not csv_path.exists()


def test_foreign_output_is_refused_untouched(dlbench, tmp_path):
    foreign = tmp_path / "other.csv"
    foreign.write_text("a,b\n1,2\n")
    refused(dlbench("train", *TINY, "--output", foreign), "not a dlbench CSV")
    assert foreign.read_text() == "a,b\n1,2\n"


def test_unwritable_output_is_refused(dlbench, tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    refused(dlbench("train", *TINY, "--output", blocker / "x.csv"), "--output")
    assert blocker.read_text() == "not a folder"


@pytest.mark.e2e
@pytest.mark.parametrize(("stop", "code"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_a_stopping_signal_mid_run_exits_128_plus_it_and_keeps_earlier_rows(csv_path, stop, code):
    """SIGHUP too: a terminal or an ssh session that closes killed the run outright, its
    DataLoader workers and a sweep's point unrecorded."""
    import subprocess
    import sys

    from tests.conftest import cli_env

    ok = tiny_run(output=csv_path)
    assert ok.returncode == 0
    before = csv_path.read_text()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dlbench",
            "train",
            "--model",
            "timm:test_resnet",
            *TINY,
            "--n-iters",
            "100000",
            "--warmup-steps",
            "0",
            "--output",
            str(csv_path),
        ],
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(8)
        proc.send_signal(stop)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:  # never leave a stray run eating the CI's two cores
            proc.kill()
    assert proc.returncode == code, err
    assert stop.name in err
    assert csv_path.read_text() == before


@pytest.mark.slow
def test_models_lists_the_registry_with_parameter_counts():
    out = run_cli("models", env={**cli_env(), "COLUMNS": "200"})
    assert out.returncode == 0
    for name in ("resnet50", "unet_resnet50", "distilbert", "llm_tiny"):
        assert name in out.stdout
    assert "params (M)" in out.stdout
    [resnet50] = [line for line in out.stdout.splitlines() if "│ resnet50 " in line]
    assert "25.6" in resnet50  # timm's resnet50: 25.6 M parameters


@pytest.mark.e2e
def test_the_cli_runs_cuda_with_32_work_queues_unless_the_user_set_their_own(tmp_path):
    from tests.conftest import cli_env

    env = cli_env()
    env.pop("CUDA_DEVICE_MAX_CONNECTIONS", None)
    assert tiny_run(output=tmp_path / "a.csv", env=env).returncode == 0
    assert read_rows(tmp_path / "a.csv")[0]["cuda_env"] == "CUDA_DEVICE_MAX_CONNECTIONS=32"
    env["CUDA_DEVICE_MAX_CONNECTIONS"] = "4"
    assert tiny_run(output=tmp_path / "b.csv", env=env).returncode == 0
    assert read_rows(tmp_path / "b.csv")[0]["cuda_env"] == "CUDA_DEVICE_MAX_CONNECTIONS=4"


def test_help_shows_no_type_beside_a_flag_and_compare_its_arguments_as_written(dlbench):
    for command in ("train", "infer", "sweep", "serve", "compare", "report", "peak"):
        code, out, _ = dlbench(command, "--help")
        assert code == 0 and "<bool>" not in out, command
    _, out, _ = dlbench("compare", "--help")  # in-process, the program is pytest's name
    [usage] = [line.split("compare", 1)[1].strip() for line in out.splitlines() if "Usage:" in line]
    assert usage == "[OPTIONS] [BASELINE] CANDIDATE"
