"""Bad input to the command line: flags, numbers, tags, repeats and warnings, refused by name
before anything runs: one `error:` line and exit 2 (1 for a sweep with failed points), no
traceback, and the CSV it names keeps every earlier byte."""

from __future__ import annotations

import pytest

from dlbench.errors import UserError
from dlbench.sweep.plan_file import parse_plan
from tests.conftest import refused

S = ["--accelerator", "cpu", "--model", "mobilenet_v3", "--batch-size", "2", "--width", "32"]
S += ["--height", "32", "--n-iters", "2", "--warmup-steps", "1"]


# typer/click parsing, for every command that takes flags.
@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["train", *S, "--bogus-flag", "3"], "--bogus-flag"),
        (["infer", *S, "--bogus"], "--bogus"),
        (["train", "--n-iters", "two"], "--n-iters"),
        (["train", "--precision"], "--precision"),
        (["train", "--channels-last", "yes"], "yes"),
        (["compare"], "[BASELINE] CANDIDATE"),
        (["compare", "a.csv"], "CANDIDATE: a.csv"),
        (["report"], "csv"),
        (["sweep"], "plan"),
        (["sweep", "quick", "--isolation"], "--isolation"),
        (["validate", "--repeats", "x"], "--repeats"),
        (["scaling", "--timeout", "soon"], "--timeout"),
        (["data"], "path"),
        (["make-data", "x", "--images", "many"], "--images"),
        (["models", "--params", "3", "--bogus"], "--bogus"),
        (["recommend-power"], "csv"),
        (["peak", "--max-time", "soon"], "--max-time"),
        (["peak", "--accelerator", "tpu"], "--accelerator"),
        (["peak", "--accelerator", "cpu", "--max-time", "0"], "--max-time"),
        (["no-such-command"], "no-such-command"),
    ],
)
def test_parse_errors_are_one_line_exit_2(dlbench, args, needle):
    refused(dlbench(*args), needle)


# NaN and infinity are refused by name.
@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["train", *S, "--ddp", "bucket_cap_mb=nan"], "--ddp"),
        (["train", *S, "--ddp", "bucket_cap_mb=inf"], "--ddp"),
        (["train", *S, "--ddp", "static_graph=maybe"], "--ddp"),
        (["train", *S, "--max-time", "inf"], "--max-time"),
        (["train", *S, "--min-time", "nan"], "--min-time"),
        (["train", *S, "--sample-interval", "inf"], "--sample-interval"),
        (["train", *S, "--max-noise", "nan"], "--max-noise"),
        (["train", *S, "--max-host-busy", "nan"], "--max-host-busy"),
        (["train", *S, "--max-host-busy", "-1"], "--max-host-busy"),
        (["infer", *S, "--max-host-busy", "100.5"], "--max-host-busy"),
        (["train", *S, "--collective-timeout", "0"], "--collective-timeout"),
        (["train", *S, "--cudnn-search", "sometimes"], "--cudnn-search"),
        (["train", *S, "--collective-timeout", "inf"], "--collective-timeout"),
        (["train", *S, "--collective-timeout", "nan"], "--collective-timeout"),
        (["compare", "{kept}", "{kept}", "--threshold", "nan"], "--threshold"),
        (["report", "{kept}", "--max-slowdown", "inf"], "--max-slowdown"),
        (["recommend-power", "{kept}", "--max-slowdown", "nan"], "--max-slowdown"),
        (["sweep", "quick", "--timeout", "nan"], "--timeout"),
        (["sweep", "quick", "--settle-s", "inf"], "--settle-s"),
        (["data", "{tmp}", "--min-time", "nan"], "--min-time"),
        (["peak", "--max-time", "inf"], "--max-time"),
    ],
)
def test_non_finite_numbers_are_refused(dlbench, kept, tmp_path, args, needle):
    args = [a.format(kept=kept, tmp=tmp_path) for a in args]
    refused(dlbench(*args, *(["--output", kept] if args[0] == "train" else [])), needle)


# tags label rows; they never overwrite a measured or configured column.
@pytest.mark.parametrize("key", ["status", "model", "run_id", "schema_version", "samples_per_s"])
def test_a_tag_cannot_name_a_result_column(dlbench, kept, key):
    refused(dlbench("train", *S, "--tag", f"{key}=x", "--output", kept), "--tag", key)


def test_tags_need_a_key_and_a_value(dlbench, kept):
    refused(dlbench("train", *S, "--tag", "novalue", "--output", kept), "--tag")
    refused(dlbench("train", *S, "--tag", "1abc=x", "--output", kept), "--tag")
    twice = ("--tag", "site=a", "--tag", "site=b")  # one value would be lost without a word
    refused(dlbench("train", *S, *twice, "--output", kept), "--tag", "site given twice")


@pytest.mark.parametrize("command", ["validate", "sweep"])
def test_repeats_past_a_thousand_are_refused(dlbench, kept, command):
    first = [*S] if command == "validate" else ["quick"]
    refused(dlbench(command, *first, "--repeats", "10" * 10, "--output", kept), "--repeats")
    if command == "sweep":
        with pytest.raises(UserError, match="repeats.*at most 1,000"):
            parse_plan("repeats: 1001\nruns: [{models: [resnet50]}]")


# Run flags that are wrong before anything is built.
@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--accelerator", "tpu"], "--accelerator"),
        (["--devices", "abc"], "--devices"),
        (["--model", "timm:no_such_net"], "--model"),
        (["--data", "folder:/no/such/folder"], "--data"),
        (["--data", "ftp:x"], "--data"),
        (["--workers", "-1"], "--workers"),
        (["--decode", "tpu"], "--decode"),
        (["--strategy", "fsdp"], "--strategy"),
        (["--optimizer", "lion"], "--optimizer"),
        (["--attention", "fast"], "--attention"),
        (["--attention", "cudnn"], "needs a CUDA GPU"),  # S runs on the CPU
        (["--batch-size", "-3"], "--batch-size"),
        (["--batch-size", "1e9x"], "--batch-size"),
        # Past a C integer each of these ended in an OverflowError traceback; a million
        # loader workers is a fork bomb.
        (["--batch-size", "99999999999999999999"], "at most 2,147,483,647"),
        (["--n-iters", "99999999999999999999"], "--n-iters"),
        (["--warmup-steps", "99999999999999999999"], "--warmup-steps"),
        (["--seed", "99999999999999999999"], "--seed"),
        (["--width", "99999999999999999999"], "--width"),
        (["--workers", "1000000"], "at most 256"),
    ],
)
def test_bad_run_flags_are_refused(dlbench, kept, args, needle):
    refused(dlbench("train", *S, *args, "--output", kept), needle)


def test_the_rest_of_the_checks_name_their_flag(dlbench, kept):
    refused(dlbench("validate", *S, "--repeats", "0", "--output", kept), "--repeats")
    refused(dlbench("sweep", "quick", "--repeats", "0", "--output", kept), "--repeats")
    refused(dlbench("sweep", "quick", "--shard", "1/0", "--output", kept), "--shard")
    refused(dlbench("sweep", "quick", "--isolation", "threads", "--output", kept), "--isolation")
    refused(dlbench("scaling", *S[:2], "--devices", "0", "--output", kept), "--devices")
    refused(dlbench("data", kept), "--data")


# flags added in round three (issue 45), text shared with other commands.
@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--llm-impl", "hf"], "is no LLM workload"),
        (["--llm-impl", "fast"], "--llm-impl"),
        (["--cuda-graphs"], "CUDA graphs need a CUDA GPU"),
        (["--usd-per-hour", "0"], "--usd-per-hour"),
        (["--usd-per-hour", "-2"], "--usd-per-hour"),
        (["--usd-per-hour", "inf"], "--usd-per-hour"),
        (["--usd-per-hour", "cheap"], "--usd-per-hour"),
        (["--attention", "flash", "--attention", "math"], ""),  # the last one given wins
        (["--decode", "nvjpeg"], "--decode"),
        (["--strategy", "single", "--devices", "2"], "--strategy"),
        (["--prompt-len", "5"], "--prompt-len"),  # generation flags belong to infer
    ],
)
def test_round_three_flags_are_refused_by_name(dlbench, kept, tmp_path, args, needle):
    if needle:
        refused(dlbench("train", *S, *args, "--output", kept), needle)
    else:
        assert dlbench("train", *S, *args, "--output", tmp_path / "ok.csv")[0] == 0


@pytest.mark.parametrize(
    ("mode", "args", "named"),
    [
        ("train", ["--decode", "gpu"], "--decode gpu (synthetic data"),
        ("train", ["--workers", "3"], "--workers 3 (synthetic data needs no loader)"),
        ("infer", ["--prompt-len", "5"], "--prompt-len 5 (not LLM generation)"),
        ("infer", ["--new-tokens", "7", "--optimizer", "adamw"], "--optimizer adamw (inference)"),
        ("train", ["--seq-len", "64"], "--seq-len 64"),
    ],
)
def test_a_flag_the_run_ignores_is_named_in_one_warning(dlbench, tmp_path, mode, args, named):
    code, _, err = dlbench(mode, *S, *args, "--output", tmp_path / "ok.csv")
    warnings = [line for line in err.splitlines() if line.startswith("warning: this run ignores")]
    assert code == 0 and len(warnings) == 1 and named in warnings[0], err


def test_a_run_that_uses_every_flag_it_is_given_warns_of_nothing(dlbench, tmp_path):
    _, _, err = dlbench("train", *S, "--output", tmp_path / "ok.csv")
    assert "ignores" not in err


def test_train_help_groups_its_flags_and_leaves_generation_to_infer():
    from tests.conftest import cli_env, run_cli

    env = {**cli_env(), "COLUMNS": "80", "TERM": "dumb"}
    train, infer = (run_cli(c, "--help", env=env).stdout for c in ("train", "infer"))
    for panel in ("Workload", "Precision and compilation", "Measurement", "Devices", "Data",
                  "Output", "Telemetry"):  # fmt: skip
        assert f"─ {panel} " in train, panel
    assert "--prompt-len" not in train and "--prompt-len" in infer
    assert all(len(line) <= 80 for line in train.splitlines())
    assert len(train.splitlines()) < 140  # 196 lines in one list before


@pytest.mark.parametrize("threshold", ["-1", "100", "150", "1e9"])
@pytest.mark.parametrize("command", ["compare", "gate"])
def test_a_threshold_no_change_can_be_is_refused_before_anything_runs(
    dlbench, kept, tmp_path, command, threshold
):
    """A negative threshold would call an unchanged configuration slower; at 100 % and over
    the verdict's arithmetic has no slowdown to call (it ended in a math-domain traceback)."""
    sides = ["--base", "python3 -m dlbench", "--head", "python3 -m dlbench"]
    gate = ["gate", "quick", *sides, "--output", tmp_path / "g.csv"]
    args = ["compare", kept, kept] if command == "compare" else gate
    refused(dlbench(*args, "--threshold", threshold), "--threshold")
    assert not list(tmp_path.glob("g.*.csv"))  # the gate measured nothing


def test_the_json_says_the_exit_the_command_gives(dlbench, tmp_path):
    """--json's exit_code is the command's, --inconclusive-fails included."""
    import json

    from tests.analysis.rows import benchmark_row, write_rows

    base = write_rows(tmp_path / "b.csv", [benchmark_row(samples_per_s=1000.0, host_bound=True)])
    head = write_rows(tmp_path / "h.csv", [benchmark_row(samples_per_s=970.0, host_bound=True)])
    for extra, code in (([], 5), (["--inconclusive-fails"], 1)):
        got, out, _ = dlbench("compare", base, head, "--json", *extra)
        assert got == code and json.loads(out)["exit_code"] == code
