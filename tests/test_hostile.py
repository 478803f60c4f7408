"""Bad input from a careless or hostile user: every case ends as one `error:` line and exit 2
(1 for a sweep with failed points), no traceback, and the CSV it names keeps every earlier
byte. Most cases go through the real CLI in this process (`run_command`, the path a process
takes after its imports); the ones that need a process boundary run in real subprocesses."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from dlbench.cli import run_command
from dlbench.errors import UserError
from dlbench.sweep.plan_file import parse_plan
from tests.analysis.rows import benchmark_row, write_rows
from tests.conftest import read_rows, refused, tiny_run

S = ["--accelerator", "cpu", "--model", "mobilenet_v3", "--batch-size", "2", "--width", "32"]
S += ["--height", "32", "--n-iters", "2", "--warmup-steps", "1"]


# Class 1: typer/click parsing, for every command that takes flags.
@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["train", *S, "--bogus-flag", "3"], "--bogus-flag"),
        (["infer", *S, "--bogus"], "--bogus"),
        (["train", "--n-iters", "two"], "--n-iters"),
        (["train", "--precision"], "--precision"),
        (["train", "--channels-last", "yes"], "yes"),
        (["compare"], "baseline"),
        (["compare", "a.csv"], "candidate"),
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


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--accelerator", "gpu"], "--accelerator"),  # no GPU on this machine
        (["--accelerator", "cpu", "--devices", "0,x"], "--devices"),
        (["--accelerator", "cpu", "--cache-dir", "/proc/no/such"], "--cache-dir"),
    ],
)
def test_peak_refuses_what_it_cannot_measure_or_keep(dlbench, kept, args, needle):
    refused(dlbench("peak", *args, "--output", kept), needle)


# Class 9 and the numeric flags of every command: NaN and infinity are refused by name.
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


# Class 11: tags label rows; they never overwrite a measured or configured column.
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


# Class 10.
def test_batch_size_auto_on_a_cpu_is_refused_at_once(dlbench, kept):
    line = refused(dlbench("train", *S, "--batch-size", "auto", "--output", kept), "auto")
    assert "GPU" in line


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


def test_a_batch_the_host_cannot_allocate_is_an_oom_row_not_a_traceback(capsys, tmp_path):
    """The CPU allocator refuses with a plain RuntimeError, not OutOfMemoryError."""
    output = write_rows(tmp_path / "rows.csv", [benchmark_row()])
    [before] = read_rows(output)
    big = [*S, "--batch-size", "1000000000"]  # 600 TB of images: refused at once
    assert run_command(["infer", *big, "--output", str(output)]) == 3
    err = capsys.readouterr().err
    assert "Traceback" not in err and "does not fit; recorded as status=oom" in err
    earlier, oom = read_rows(output)  # the new row's columns join the header, values kept
    assert {k: earlier[k] for k in before} == before and oom["status"] == "oom"


def test_an_output_that_is_a_folder_is_refused(dlbench, tmp_path):
    refused(dlbench("train", *S, "--output", tmp_path), "--output")


def test_an_output_through_a_symlink_writes_the_file_it_names(capsys, tmp_path):
    """A rewrite (a row with new columns) replaced the link with a new file, and the rows
    after it never reached the file the link named."""
    real = write_rows(tmp_path / "real.csv", [benchmark_row()])
    link = tmp_path / "link.csv"
    link.symlink_to(real.name)
    for _ in range(2):  # the first rewrites with the union of the columns, the second appends
        assert run_command(["train", *S, "--output", str(link)]) == 0
    capsys.readouterr()
    assert link.is_symlink() and len(read_rows(real)) == 3


def _special_files(folder: Path) -> list[Path]:
    """A named pipe (reading it waits for a writer forever), and as root a copy of /dev/null's
    node: never the machine's own, which an unfixed run would replace."""
    made = [folder / "pipe.csv"]
    os.mkfifo(made[0])
    if os.geteuid() == 0:
        made.append(folder / "null.csv")
        os.mknod(made[1], 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    return made


def test_an_output_that_is_not_a_regular_file_is_refused_and_left_as_it_was(tmp_path):
    """Root in a container once replaced /dev/null with the CSV (written beside, renamed over),
    and read /dev/full for a header until memory ran out; a pipe would hang the run."""
    for special in _special_files(tmp_path):
        before = os.stat(special)
        result = tiny_run(output=special, timeout=120)
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
        assert result.stderr.strip().splitlines() == [
            f"error: --output: {special} is not a regular file; name a .csv file"
        ]
        after = os.stat(special)
        assert (after.st_mode, after.st_rdev) == (before.st_mode, before.st_rdev)


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="Linux /proc")
@pytest.mark.parametrize("command", ["train", "sweep"])
def test_an_output_on_a_filesystem_that_takes_no_files_is_refused_at_once(dlbench, command):
    """os.access says yes to root on /proc and /sys; the lock file then retried for two minutes,
    and a sweep blamed another sweep. A real file in the folder is the test."""
    import time

    first = [*S] if command == "train" else ["quick"]
    began = time.monotonic()
    line = refused(dlbench(command, *first, "--output", "/proc/dlbench.csv"), "not writable")
    assert time.monotonic() - began < 30 and "another sweep" not in line


# Class 2: report and compare on odd CSVs.
def test_analysis_refuses_odd_csvs(dlbench, kept, tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    header_only = tmp_path / "header.csv"
    header_only.write_text(kept.read_text().splitlines()[0] + "\n")
    no_rate = write_rows(tmp_path / "no_rate.csv", [{**benchmark_row()}])
    no_rate.write_text(
        "\n".join(
            ",".join(
                f for i, f in enumerate(line.split(",")) if i != _column(kept, "samples_per_s")
            )
            for line in no_rate.read_text().splitlines()
        )
        + "\n"
    )
    binary = tmp_path / "binary.csv"
    binary.write_bytes(bytes(range(256)) * 4)
    foreign = tmp_path / "foreign.csv"
    foreign.write_text("a,b\n1,2\n")
    refused(dlbench("report", empty, "-o", tmp_path / "r1"), "empty")
    refused(dlbench("compare", empty, kept), "BASELINE", "empty")
    refused(dlbench("compare", kept, no_rate), "CANDIDATE", "samples_per_s")
    refused(dlbench("compare", kept, kept, "--key", ","), "--key")
    refused(dlbench("compare", kept, kept, "--key", "no_such_column"), "--key")
    refused(dlbench("compare", header_only, kept), "BASELINE")
    refused(dlbench("compare", kept, header_only), "CANDIDATE")
    refused(dlbench("report", binary), "binary.csv")
    refused(dlbench("report", foreign), "not a dlbench CSV")
    refused(dlbench("report", tmp_path / "missing.csv"), "missing.csv")
    refused(
        dlbench("report", kept, "--baseline", "no-such-gpu", "-o", tmp_path / "r2"), "--baseline"
    )
    refused(dlbench("recommend-power", kept), "power limits")


def _edited(path: Path, edit) -> Path:
    """A copy of a real CSV of two rows with its lines passed through `edit`."""
    lines = write_rows(path, [benchmark_row(), benchmark_row()]).read_text().splitlines()
    path.write_text("\n".join(edit(lines)) + "\n")
    return path


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda lines: [lines[0] + ",status", *(line + ",ok" for line in lines[1:])], "twice"),
        (lambda lines: [lines[0], lines[1] + ",extra,fields", lines[2]], "line 2 holds"),
        (lambda lines: [lines[0], lines[1].replace(",", ',"', 1), lines[2]], "quote left open"),
    ],
    ids=["a column named twice", "a line with extra fields", "an unclosed quote"],
)
def test_a_damaged_csv_is_refused_by_analysis_and_never_appended_to(
    dlbench, kept, tmp_path, edit, needle
):
    """A row appended after an unclosed quote became part of its field: lost to every reader.
    A line with extra fields shifted every column, and the report found no finished rows."""
    damaged = _edited(tmp_path / "damaged.csv", edit)
    before = damaged.read_bytes()
    refused(dlbench("report", damaged, "-o", tmp_path / "r"), "CSV", needle)
    refused(dlbench("train", *S, "--output", damaged), "--output", needle)
    assert damaged.read_bytes() == before


def test_a_csv_saved_by_a_spreadsheet_with_a_byte_order_mark_still_reads_and_appends(
    dlbench, tmp_path
):
    saved = _edited(tmp_path / "excel.csv", lambda lines: ["\ufeff" + lines[0], *lines[1:]])
    assert dlbench("train", *S, "--output", saved)[0] == 0
    assert len(read_rows(saved)) == 3
    assert dlbench("report", saved, "-o", tmp_path / "r")[0] == 0


def test_a_hand_edited_number_is_named_where_arithmetic_met_it(dlbench, kept, tmp_path):
    """Text in a number column of a finished row ended the report in a TypeError; a failed
    point's row may hold text there (a sweep's `auto` batch size) and still reads."""
    edited = write_rows(tmp_path / "edited.csv", [benchmark_row(), benchmark_row()])
    text = edited.read_text().splitlines()
    at = text[0].split(",").index("samples_per_s")
    cells = text[2].split(",")
    cells[at] = "fast"
    edited.write_text("\n".join([*text[:2], ",".join(cells)]) + "\n")
    needle = "samples_per_s holds 'fast' (line 3), not a number"
    refused(dlbench("report", edited, "-o", tmp_path / "r"), needle)
    refused(dlbench("compare", kept, edited), "CANDIDATE", needle)
    failed = benchmark_row(status="error", batch_size="auto", samples_per_s="")
    mixed = write_rows(tmp_path / "mixed.csv", [benchmark_row(), failed])
    code, _, err = dlbench("report", mixed, "-o", tmp_path / "r2")
    assert code == 0, err


def _column(path: Path, name: str) -> int:
    return path.read_text().splitlines()[0].split(",").index(name)


# Class 3: where the report goes, and its timelines.
def test_report_outputs_that_cannot_be_written_are_refused(dlbench, kept, tmp_path):
    existing = tmp_path / "a_file"
    existing.write_text("keep me")
    refused(dlbench("report", kept, "-o", existing), "--out", "not a folder")
    assert existing.read_text() == "keep me"
    refused(dlbench("report", kept, "-o", "/proc/self/dlbench-report"), "--out")
    refused(dlbench("report", kept, "-o", "/proc/self", "--pdf"), "--out")
    timeline = tmp_path / "timeline.csv"
    timeline.write_text(
        "t,device,power_w,sm_clock_mhz,gpu_util,temp_c\nnoon,0,1,1,1,1\nlater,0,1,1,1,1\n"
    )
    refused(dlbench("report", kept, "-o", tmp_path / "r", "--timeline", timeline), "--timeline")
    refused(dlbench("report", kept, "-o", tmp_path / "r", "--timeline", kept), "--timeline")


# Class 4: make-data.
@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--size", "99999999x99999999"], "--size"),
        (["--size", "0x10"], "--size"),
        (["--size", "big"], "--size"),
        (["--images", "0"], "nothing to make"),
        (["--images", "-1"], "--images"),
        (["--images", "100000000000"], "--images"),
        (["--quality", "0"], "--quality"),
        (["--classes", "0"], "--classes"),
        (["--format", "gif"], "--format"),
    ],
)
def test_make_data_refuses_bad_sizes_and_counts(dlbench, tmp_path, args, needle):
    refused(dlbench("make-data", tmp_path / "set", *args), needle)
    assert not (tmp_path / "set").exists()


def test_make_data_into_a_read_only_place_is_refused(dlbench, tmp_path):
    refused(dlbench("make-data", "/proc/self/set", "--images", "2"), "/proc/self")
    afile = tmp_path / "afile"
    afile.write_text("x")
    refused(dlbench("make-data", afile, "--images", "2"), "not a folder")


def test_make_data_with_text_only_says_only_what_it_wrote(dlbench, tmp_path):
    code, out, err = dlbench("make-data", tmp_path / "set", "--images", "0", "--text-lines", "5")
    assert code == 0, err
    assert "images" not in out and "5 lines" in out
    assert not (tmp_path / "set" / "images").exists()


# Class 7: plans checked against the schema before any point runs.
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


# Class 5: text labels are checked against the model's classes before the first step.
@pytest.mark.parametrize(
    ("label", "needle"),
    [
        ("1e999", "not an integer"),
        ("7", "outside"),
        ('"x"', "not an integer"),
        ("-1", "outside"),
        ("[" * 100_000 + "]" * 100_000, "nests too deeply"),  # a RecursionError traceback
    ],
)
def test_text_labels_outside_the_model_are_refused(dlbench, kept, tmp_path, label, needle):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"text": "a b c", "label": 0}\n' + f'{{"text": "d e", "label": {label}}}\n')
    args = ["--model", "distilbert", "--data", f"text:{corpus}", "--seq-len", "8"]
    text = [a for a in S if a not in ("--width", "--height", "32")]  # no image flags for text
    line = refused(dlbench("train", *text, *args, "--workers", "0", "--output", kept), needle)
    assert "corpus.jsonl:2" in line


def test_an_image_folder_with_more_classes_than_the_model_is_refused(dlbench, kept, tmp_path):
    from dlbench.data.make import ImageSpec, make_images

    root = tmp_path / "many"
    make_images(root, ImageSpec(1, 8, 8, classes=1), workers=1)
    jpeg = next(root.rglob("*.jpg")).read_bytes()
    for k in range(1001):
        (root / f"c{k:04d}").mkdir()
        (root / f"c{k:04d}" / "x.jpg").write_bytes(jpeg)
    refused(
        dlbench("train", *S, "--data", f"folder:{root}", "--workers", "0", "--output", kept),
        "class folders",
    )


def test_a_named_pipe_among_the_images_is_skipped_not_waited_for(tmp_path):
    from dlbench.data.images import scan_images
    from dlbench.data.make import ImageSpec, make_images

    root = tmp_path / "set"
    make_images(root, ImageSpec(4, 16, 16, classes=1), workers=1)
    os.mkfifo(root / "class_00" / "x.jpg")
    index = scan_images(root)
    assert len(index.files) == 4 and [p.name for p in index.unreadable] == ["x.jpg"]


def test_the_rest_of_the_checks_name_their_flag(dlbench, kept):
    refused(dlbench("validate", *S, "--repeats", "0", "--output", kept), "--repeats")
    refused(dlbench("sweep", "quick", "--repeats", "0", "--output", kept), "--repeats")
    refused(dlbench("sweep", "quick", "--shard", "1/0", "--output", kept), "--shard")
    refused(dlbench("sweep", "quick", "--isolation", "threads", "--output", kept), "--isolation")
    refused(dlbench("scaling", *S[:2], "--devices", "0", "--output", kept), "--devices")
    refused(dlbench("data", kept), "--data")


@pytest.mark.e2e
@pytest.mark.parametrize("earlier", ["same_columns", "fewer_columns"])
def test_a_disk_that_fills_during_the_append_leaves_no_half_row(tmp_path, earlier):
    """A full disk writes part of the row and then refuses: the run once exited 0 with half a
    row after the earlier ones. A file-size limit (RLIMIT_FSIZE, Python ignores SIGXFSZ) is
    the same refusal from the kernel, without a full disk."""
    import resource
    import subprocess
    import sys

    from tests.conftest import TINY, cli_env

    output = tmp_path / "rows.csv"
    args = ["train", "--model", "timm:test_resnet", *TINY, "--n-iters", "2", "--warmup-steps", "0"]
    if earlier == "same_columns":  # the row is appended in place
        assert tiny_run(output=output).returncode == 0
    else:  # the file is rewritten with the union of the columns
        write_rows(output, [benchmark_row()] * 3)
    before = output.read_bytes()

    def little_room() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (len(before) + 100, resource.RLIM_INFINITY))

    result = subprocess.run(
        [sys.executable, "-m", "dlbench", *args, "--output", str(output)],
        capture_output=True, text=True, timeout=240, env=cli_env(), preexec_fn=little_room,
    )  # fmt: skip
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: --output: cannot write") and "row was not written" in line
    assert output.read_bytes() == before


@pytest.mark.e2e
def test_a_cache_path_the_environment_points_nowhere_is_one_line(tmp_path):
    """Torch creates its compile cache while Lightning imports; a path that cannot be made
    raised FileNotFoundError through every layer."""
    from tests.conftest import cli_env, run_cli

    env = {**cli_env(), "TORCHINDUCTOR_CACHE_DIR": "/proc/dlbench-cache"}
    result = tiny_run(output=tmp_path / "rows.csv", env=env)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip().splitlines() == [
        "error: FileNotFoundError: [Errno 2] No such file or directory: '/proc/dlbench-cache'"
    ]
    ascii_only = run_cli("train", "--help", env={**cli_env(), "PYTHONIOENCODING": "ascii"})
    assert ascii_only.returncode == 0 and "Traceback" not in ascii_only.stderr


# Round three (issue 45): flags and plan keys added since round two, text shared with others.
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


FORMULAS = {
    "note": '=HYPERLINK("http://x","y")',
    "branch": "+cmd|' /C calc'!A0",
    "title": "-2+3",
    "who": "@SUM(1+1)",
    "quoted": "'=already quoted",
}


def test_text_a_spreadsheet_would_run_is_written_as_text_and_read_back_as_given(dlbench, tmp_path):
    """CSV injection (OWASP): a cell that starts with = + - @ (or tab, CR) is a live formula
    when the CSV is opened in a spreadsheet; tags come from branch names and commit titles."""
    tags = [w for k, v in FORMULAS.items() for w in ("--tag", f"{k}={v}")]
    run = ["--run-id", "=1+1", "--tag", "number=-1.5", *tags]
    kept = write_rows(tmp_path / "shared.csv", [benchmark_row()])
    assert dlbench("train", *S, *run, "--output", kept)[0] == 0
    with kept.open(newline="") as f:
        import csv

        [*_, raw] = list(csv.DictReader(f))
    assert raw["note"] == "'" + FORMULAS["note"] and raw["run_id"] == "'=1+1"
    assert raw["quoted"] == "''=already quoted" and raw["number"] == "-1.5"
    for cell in raw.values():
        assert not cell.startswith(("=", "+", "@", "\t", "\r")), cell
        assert not cell.startswith("-") or cell.replace(".", "").lstrip("-").isdigit(), cell

    from dlbench.analysis.load import load_rows
    from dlbench.results.store import CsvStore

    [*_, stored] = CsvStore(kept).rows()
    loaded = load_rows([kept]).iloc[-1]
    for key, value in {**FORMULAS, "run_id": "=1+1"}.items():
        assert stored[key] == value and loaded[key] == value, key

    assert dlbench("report", kept, "-o", tmp_path / "report")[0] == 0
    assert dlbench("compare", kept, kept)[0] == 0


def test_a_report_escapes_row_text_in_html_and_markdown(dlbench, tmp_path):
    rows = [benchmark_row(gpu_name="<img src=x onerror=alert(1)>|GPU", samples_per_s=10.0),
            benchmark_row(gpu_name="B", samples_per_s=20.0)]  # fmt: skip
    csv = write_rows(tmp_path / "rows.csv", rows)
    out = tmp_path / "report"
    assert dlbench("report", csv, "-o", out, "--pdf", "--pptx")[0] == 0
    page, markdown = (out / "report.html").read_text(), (out / "report.md").read_text()
    assert "<img src=x" not in page and "&lt;img src=x" in page
    assert "<img src=x" not in markdown and "&lt;img src=x onerror=alert(1)>\\|GPU" in markdown
    assert (out / "report.pdf").stat().st_size > 0 and (out / "report.pptx").stat().st_size > 0


def test_a_label_with_dollar_signs_reaches_every_document_as_text(dlbench, tmp_path):
    """matplotlib parses $...$ as mathtext: a machine named with dollars ended the PDF in a
    ValueError."""
    rows = [benchmark_row(gpu_name=r"$\frac{a}{$ GPU", samples_per_s=10.0),
            benchmark_row(gpu_name="B", samples_per_s=20.0)]  # fmt: skip
    csv = write_rows(tmp_path / "rows.csv", rows)
    assert dlbench("report", csv, "-o", tmp_path / "r", "--pdf", "--pptx")[0] == 0


def test_a_window_too_short_for_a_spread_is_invalid_and_says_what_to_raise(dlbench, tmp_path):
    kept = tmp_path / "short.csv"
    code, out, _ = dlbench("train", *S, "--output", kept)  # S: 2 measured steps
    assert code == 0 and out.startswith("INVALID: 2 measured steps, under the 10")
    assert "--n-iters" in out.splitlines()[0]
    from dlbench.results.store import CsvStore

    row = CsvStore(kept).rows()[-1]
    assert row["verdict"] == "invalid" and "few_steps" in row["verdict_reasons"].split(";")


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


def test_a_report_on_one_cpu_row_shows_no_empty_sections(dlbench, tmp_path):
    row = benchmark_row(gpu_name="", cpu_model="AMD EPYC", world_size=1, energy_per_sample_j="")
    csv = write_rows(tmp_path / "one.csv", [row])
    out = tmp_path / "report"
    assert dlbench("report", csv, "-o", out)[0] == 0
    markdown = (out / "report.md").read_text()
    sections = markdown.split("\n## ")[1:]
    for section in sections:
        body = section.split("\n", 1)[1]
        assert "|" in body or "![" in body, section  # a table or a figure under each heading
    assert "Not shown, nothing in these rows for them: how these machines compare" in markdown
    assert "GPUs" not in markdown.split("## Runs")[1].split("\n##")[0]
