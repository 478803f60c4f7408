"""Bad input to plans, checked whole against the schema before any point runs: one `error:` line
and exit 2 (1 for a sweep with failed points), no traceback, and the CSV it names keeps every
earlier byte."""

from __future__ import annotations

import pytest

from dlbench.errors import UserError
from dlbench.sweep.plan_file import parse_plan
from tests.conftest import refused


# plans checked against the schema before any point runs.
@pytest.mark.parametrize(
    ("plan", "needle"),
    [
        ("- models: [resnet50]\n", "mapping"),
        ("runs: 5\n", "runs"),
        ("runs: []\n", "runs"),
        ("runs: [5]\n", "runs[0]"),
        ("repeats: many\nmodels: [timm:test_resnet]\n", "repeats"),
        ("repeats: 0\nmodels: [timm:test_resnet]\n", "repeats"),
        ("timeout_s: nan\nmodels: [timm:test_resnet]\n", "timeout_s"),
        ("timeout_s: -5\nmodels: [timm:test_resnet]\n", "timeout_s"),
        ("models: mobilenet_v3\n", "must be a non-empty list"),
        ("models: []\n", "models"),
        ("models: [no_such_model]\n", "no_such_model"),
        ("models: [timm:test_resnet]\nbatch_sizes: [-4]\n", "batch_sizes"),
        ("models: [timm:test_resnet]\nbatch_sizes: [huge]\n", "batch_sizes"),
        ("models: [timm:test_resnet]\nmodes: [trian]\n", "modes"),
        ("models: [timm:test_resnet]\nprecisions: [fp4]\n", "--precision"),
        ("models: [timm:test_resnet]\nresolutions: [[32]]\n", "resolutions"),
        ("models: [vit]\nresolutions: [[100, 100]]\n", "--width"),
        ("models: [timm:test_resnet]\ndevices: [0]\n", "devices"),
        ("models: [timm:test_resnet]\npower_limits: [-300]\n", "power_limits"),
        ("models: [timm:test_resnet]\nfixed: {bogus_flag: 1}\n", "bogus_flag"),
        ("models: [timm:test_resnet]\nfixed: {n_iters: many}\n", "n_iters"),
        ("models: [timm:test_resnet]\nfixed: {n_iters: -1}\n", "--n-iters"),
        ("models: [timm:test_resnet]\nfixed: {output: /tmp/x.csv}\n", "output"),
        ("models: [timm:test_resnet]\nfixed: {compile: yes please}\n", "compile"),
        ("models: [timm:test_resnet]\nfixed: {min_time: .nan}\n", "--min-time"),
        ("models: [timm:test_resnet]\nfixed: [n_iters]\n", "fixed"),
        ("runs: [{models: [timm:test_resnet], tags: {status: oom}}]\n", "status"),
        ("runs: [{models: [timm:test_resnet], tags: [a]}]\n", "tags"),
        ("runs: [{models: [timm:test_resnet], colours: [red]}]\n", "colours"),
        ("models: [timm:test_resnet]\nfixd: {n_iters: 1}\n", "fixd"),
        ("models: [timm:test_resnet\n", "YAML"),
        # Each of these ended in a traceback, filled memory, or dropped half a plan unsaid.
        ("runs: " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
        ("runs:\n  - models: [resnet50]\n    models: [vit]\n", "'models' given twice"),
        ("models: [resnet50]\nbatch_sizes: [1, 1]\nmodels: [vit]\n", "given twice"),
        (
            "models: [resnet50, vit, swin, vgg16]\n"
            f"batch_sizes: {list(range(1, 1001))}\n"
            f"resolutions: {[[s, s] for s in range(32, 532)]}\n",
            "2,000,000 points, over 10,000",
        ),
    ],
)
def test_bad_plans_are_refused_before_any_point_runs(plan, needle):
    with pytest.raises(UserError, match=None) as caught:
        parse_plan(plan)
    assert needle in str(caught.value) and "\n" not in str(caught.value)


def test_repeats_that_grow_a_plan_past_its_limit_are_refused(dlbench, kept, tmp_path):
    plan = tmp_path / "grid.yaml"
    plan.write_text(f"models: [timm:test_resnet]\nbatch_sizes: {list(range(1, 101))}\n")
    refused(dlbench("sweep", plan, "--repeats", "101", "--output", kept), "10,100 points")


def test_a_plan_that_is_a_device_or_huge_is_refused_unread(dlbench, kept, tmp_path):
    from dlbench.sweep.plan_file import PLAN_MAX_BYTES

    refused(dlbench("sweep", "/dev/zero", "--output", kept), "PLAN", "not a regular file")
    huge = tmp_path / "huge.yaml"
    with huge.open("wb") as f:
        f.truncate(PLAN_MAX_BYTES + 1)
    refused(dlbench("sweep", huge, "--output", kept), "PLAN", "MiB")


def test_a_bad_plan_file_through_the_cli_writes_nothing(dlbench, tmp_path):
    plan = tmp_path / "plan.yaml"
    plan.write_text("models: mobilenet_v3\n")
    output = tmp_path / "sweep.csv"
    refused(dlbench("sweep", plan, "--output", output), "models")
    assert not output.exists()
    refused(dlbench("sweep", tmp_path / "missing.yaml"), "PLAN")
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\xff\xfe\x00\x01" * 64)
    refused(dlbench("sweep", binary), "PLAN")


@pytest.mark.parametrize(
    ("plan", "needle"),
    [
        ("models: [timm:test_resnet]\nfixed: {attention: 3}\n", "--attention"),
        ("models: [timm:test_resnet]\nfixed: {llm_impl: [hf]}\n", "llm_impl"),
        ("models: [timm:test_resnet]\nfixed: {usd_per_hour: cheap}\n", "usd_per_hour"),
        ("models: [timm:test_resnet]\nfixed: {usd_per_hour: -1}\n", "--usd-per-hour"),
        ("models: [timm:test_resnet]\nfixed: {cuda_graphs: sometimes}\n", "cuda_graphs"),
        ("models: [timm:test_resnet]\nfixed: {data_decode: tpu}\n", "--decode"),
        ("models: [timm:test_resnet]\nfixed: {strict: 2}\n", "strict"),
        ("models: ['=cmd|calc']\n", "=cmd|calc"),
    ],
)
def test_round_three_plan_keys_are_refused(plan, needle):
    with pytest.raises(UserError) as caught:
        parse_plan(plan)
    assert needle in str(caught.value) and "\n" not in str(caught.value)


def test_a_telemetry_log_no_run_could_write_is_refused_before_anything_is_measured(
    dlbench, kept, tmp_path
):
    """The log is written as each window ends: found then, a folder or an unwritable path cost
    the run its row (and a sweep every point's). A run and a sweep refuse it first."""
    folder = tmp_path / "logs"
    folder.mkdir()
    tiny = ["--accelerator", "cpu", "--batch-size", "2", "--width", "32", "--height", "32"]
    refused(dlbench("infer", *tiny, "--telemetry-log", folder, "--output", kept), "is a folder")
    blocked = tmp_path / "file"
    blocked.write_text("")
    refused(
        dlbench("infer", *tiny, "--telemetry-log", blocked / "log.csv", "--output", kept),
        "--telemetry-log",
    )
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        f"models: [timm:test_resnet]\nfixed: {{accelerator: cpu, telemetry_log: {folder}}}\n"
    )
    output = tmp_path / "sweep.csv"
    refused(dlbench("sweep", plan, "--output", output), "telemetry_log", "is a folder")
    assert not output.exists()  # refused before its first point
