"""`dlbench compare CANDIDATE`: one file held against the published rows of its GPUs, the same
table and exit codes as against a baseline file."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from dlbench.analysis.compare import NOT_PUBLISHED
from dlbench.analysis.compare_published import compare_with_published
from dlbench.analysis.load import load_rows
from dlbench.results.published import FOLDER_VARIABLE, PACKAGED_DIR
from dlbench.results.store import CsvStore
from tests.analysis.rows import benchmark_row, write_rows
from tests.conftest import cli_env, run_cli

H100_DEFAULT = PACKAGED_DIR / "default-pt2.11-cu13.0-h100-80gb-hbm3.csv"


def _default_plan_run(path, slower: dict[tuple[str, str, str], float]):
    """The published H100 default plan as a candidate run of it, some points scaled."""
    with open(H100_DEFAULT, newline="") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        factor = slower.get((row["model"], row["mode"], row["batch_size"]), 1.0)
        row["samples_per_s"] = str(float(row["samples_per_s"]) * factor)
        row["run_id"] = f"again-{row['run_id']}"
    return _written(path, rows)


def _written(path, rows: list[dict[str, str]]):
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def test_a_default_plan_run_with_one_row_at_077_fails_the_gate_naming_it(tmp_path):
    low = _default_plan_run(tmp_path / "low.csv", {("llm_1b", "infer", "1"): 0.77})
    out = run_cli("compare", str(low))
    assert out.returncode == 1, out.stderr
    assert "1 slower beyond 5%" in out.stdout
    [line] = [line for line in out.stdout.splitlines() if "slower" in line and "llm_1b" in line]
    assert "-23.0" in line


def test_a_default_plan_run_within_5_percent_is_never_slower_and_its_batch_1_rows_cannot_tell(
    tmp_path,
):
    """One run against one published run: a GPU-bound row 3 % lower is the same; a launch-bound
    (batch-1) row cannot tell a 10 % change from none in one run a side: inconclusive, exit 5,
    with how many runs would settle it."""
    near = _default_plan_run(
        tmp_path / "near.csv",
        {("resnet50", "train", "256"): 0.97, ("vit", "infer", "1"): 1.04},
    )
    out = run_cli("compare", str(near))
    assert out.returncode == 5, out.stdout + out.stderr
    assert "none slower beyond 5%" in out.stdout and "inconclusive" in out.stdout
    result = compare_with_published(load_rows([near])).table.set_index(["model", "batch_size"])
    assert set(result.loc[("resnet50", "256"), "verdict"]) == {"same"}  # train and infer
    assert result.loc[("vit", "1"), "verdict"] == "inconclusive"
    assert "runs a side would settle it" in result.loc[("vit", "1"), "note"]


def test_configurations_and_gpus_with_nothing_published_are_named_not_failed(tmp_path):
    published = tmp_path / "published"
    published.mkdir()
    write_rows(published / "default-x.csv", [benchmark_row(samples_per_s=1000.0, verdict="valid")])
    candidate = write_rows(
        tmp_path / "candidate.csv",
        [
            benchmark_row(samples_per_s=990.0),
            benchmark_row(samples_per_s=50.0, batch_size=8),  # never published
            benchmark_row(samples_per_s=500.0, gpu_name="NVIDIA A100-SXM4-80GB"),
        ],
    )
    result = compare_with_published(load_rows([candidate]), folder=published)
    verdicts = sorted(result.table["verdict"])
    assert verdicts == [NOT_PUBLISHED, NOT_PUBLISHED, "same"]
    assert result.unpublished_gpus == ("NVIDIA A100-SXM4-80GB",) and result.passed
    env = {**cli_env(), FOLDER_VARIABLE: str(published)}
    out = run_cli("compare", str(candidate), env=env)
    assert out.returncode == 0, out.stderr
    said = " ".join(out.stdout.split())  # the verdict line wraps at the terminal's width
    assert "2 configuration(s) not published" in said
    assert "nothing published for NVIDIA A100-SXM4-80GB" in said
    slow = write_rows(tmp_path / "slow.csv", [benchmark_row(samples_per_s=700.0)])
    assert run_cli("compare", str(slow), env=env).returncode == 1
    assert run_cli("compare", str(slow), "--threshold", "40", env=env).returncode == 0


def test_one_file_with_a_key_or_three_files_is_refused_in_one_line(tmp_path):
    candidate = write_rows(tmp_path / "c.csv", [benchmark_row()])
    for args in ((str(candidate), "--key", "model"), (str(candidate),) * 3):
        out = run_cli("compare", *args)
        assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
        assert out.stderr.startswith("error: ")


H100_SERVE = PACKAGED_DIR / "serve-pt2.11-cu13.0-h100-80gb-hbm3.csv"


def _serve_part_again(path, scale_rate_found: float):
    """The published H100 serve part as a candidate run of it, resnet50's rate found scaled."""
    with open(H100_SERVE, newline="") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        row["run_id"] = f"again-{row['run_id']}"
        if row["model"] == "resnet50" and row["serve_find_qps"] == "True":
            row["serve_qps_found"] = str(float(row["serve_qps_found"]) * scale_rate_found)
    return _written(path, rows)


def test_a_serve_part_with_its_rate_found_halved_fails_alone_and_against_the_part(tmp_path):
    """Serve rows are held like benchmark rows: by the published rows of their GPU, and by a
    baseline file; the gate saw neither before the serve kind had its experiment key."""
    same = _serve_part_again(tmp_path / "same.csv", 1.0)
    halved = _serve_part_again(tmp_path / "halved.csv", 0.5)
    assert run_cli("compare", str(same)).returncode == 0
    for args in ([str(halved)], [str(H100_SERVE), str(halved)]):
        out = run_cli("compare", *args)
        assert out.returncode == 1, (args, out.stdout, out.stderr)
        assert "1 slower" in out.stdout
        [line] = [x for x in out.stdout.splitlines() if "slower" in x and "resnet50" in x]
        assert "-50.0" in line


def test_a_part_with_a_point_cut_short_fails_the_gate_on_it(tmp_path):
    """A part whose call's limit cut a point (its row `interrupted`, as `0f4709e`'s H200
    serve part shipped) fails the one-file gate, naming the point."""
    rows = list(csv.DictReader(H100_SERVE.read_text().splitlines()))
    rows[-1]["status"] = "interrupted"
    cut = _written(tmp_path / "cut.csv", rows)
    out = run_cli("compare", str(cut))
    assert out.returncode == 1 and "failed (interrupted)" in out.stdout, out.stdout


def test_each_published_csv_alone_ends_in_a_verdict_and_a_measured_part_passes(dlbench):
    """Every shipped CSV given alone to the one-file gate: a measured part passes (its rows are
    their own published rows; a row invalid by its own window is named, as no row is held
    against it); a side file (per rank, a bare loop's own CSV) is refused in one line or holds
    no figure a gate holds; nothing ends in a traceback."""
    from dlbench.results.published import published_files

    parts = published_files(PACKAGED_DIR)
    for path in sorted(PACKAGED_DIR.glob("*.csv")):
        code, out, err = dlbench("compare", path)
        assert "Traceback" not in err and "nan" not in out.split(), path.name
        if path in parts:
            assert code in (0, 5), (path.name, out, err)  # launch-bound rows: inconclusive
            assert "none slower beyond" in out or "nothing to compare" in out, path.name
            assert not any(line.split()[-1:] == ["slower"] for line in out.splitlines())
            for line in out.splitlines():
                if "not published" in line and "configuration(s)" not in line:
                    assert line.split()[-1].isdigit(), line  # it names why: the row is invalid
        elif path.name.endswith(".per_rank.csv"):  # dlbench's own side file: nothing to gate
            assert code == 0 and "no figure a gate holds" in out, (path.name, out, err)
        else:  # a bare loop's CSV beside the rows: not dlbench's, refused in one line
            assert code == 2 and len(err.splitlines()) == 1, (path.name, err)
            assert "not a dlbench CSV" in err


# Issue 87's H200 default plan as one forked worker measured it (b01362b; its rows name the
# lent machine's stale .git, 07318f0, dirty, so it is not published: docs/time-to-result.md),
# and the plan's batch-1 points measured again by the same code on another lent H200.
H200_DATA = Path(__file__).parent / "data"
H200_RERUN = H200_DATA / "h200-default-latency-rerun.csv"


def test_a_clean_rerun_of_the_h200_batch_1_points_reads_no_slower_and_one_far_slower_fails(
    tmp_path,
):
    """The gate on issue 87's H200 part: the default plan's batch-1 points measured again
    (the same code, three fresh processes each, another lent H200 than most of the part's)
    read `same`: each side pooled three processes, whose spread its interval holds
    (results.intervals; no prior between runs on top); resnet50's row 30 % slower fails,
    named."""
    part = tmp_path / "published"
    part.mkdir()
    (part / "default-pt2.11-cu13.0-h200.csv").write_bytes(
        (H200_DATA / "h200-default-part.csv").read_bytes()
    )
    env = {**cli_env(), FOLDER_VARIABLE: str(part)}
    clean = run_cli("compare", str(H200_RERUN), env=env)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "none slower beyond 5%" in clean.stdout
    verdicts = compare_with_published(load_rows([H200_RERUN]), folder=part).table
    assert set(verdicts["verdict"]) == {"same"}
    with open(H200_RERUN, newline="") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        if row["model"] == "resnet50":
            row["samples_per_s"] = str(float(row["samples_per_s"]) * 0.7)
    slower = run_cli("compare", str(_written(tmp_path / "slower.csv", rows)), env=env)
    assert slower.returncode == 1, slower.stdout + slower.stderr
    assert "1 slower beyond 5%" in slower.stdout
    [line] = [x for x in slower.stdout.splitlines() if "slower" in x and "resnet50" in x]
    assert "-30.4%" in line  # 0.7 of a row 0.994x the part's


@pytest.mark.e2e
def test_a_point_interrupted_then_measured_by_the_resumed_sweep_passes(tmp_path):
    """A sweep cut short writes the point in flight a row of its plan flags only (the sweep's
    own process, on the CPU); the rerun measures it. Its finished row answers for it: a
    failure row is the configuration's only where no finished row agrees with every setting
    the failure row gives."""
    from dlbench.results.environment import collect_environment
    from dlbench.results.row import failure_row

    run = _default_plan_run(tmp_path / "run.csv", {})
    with open(run, newline="") as handle:
        rows = list(csv.DictReader(handle))
    flags = {"model": "vit", "mode": "infer", "batch_size": 1, "precision": "bf16-mixed"}
    cut = failure_row({**flags, "run_id": "cut"}, "interrupted", "interrupted by SIGTERM",
                      collect_environment("cpu"))  # fmt: skip
    resumed = CsvStore(tmp_path / "resumed.csv")
    resumed.append_many([cut, *rows])  # as the sweep wrote them: the cut row, then the rerun's
    out = run_cli("compare", str(resumed.path))
    assert out.returncode == 5, out.stdout + out.stderr  # passed; batch-1 rows inconclusive
    assert "failed" not in out.stdout
    alone = CsvStore(tmp_path / "cut.csv")
    alone.append_many([cut, *(r for r in rows if (r["model"], r["batch_size"]) != ("vit", "1"))])
    failed = run_cli("compare", str(alone.path))
    assert failed.returncode == 1 and "failed (interrupted)" in failed.stdout
