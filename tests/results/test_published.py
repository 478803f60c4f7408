"""Every row held against the published rows of its GPU model and configuration: the ratio, where
it came from, the band, and the verdict it gives; the rows shipped with the package read as a
run reads them."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from dlbench.results import published
from dlbench.results.advice import advice
from dlbench.results.pairing import code_label, finished, key_text, machine, release
from dlbench.results.published import (
    PACKAGED_DIR,
    forget_published,
    matching_rows,
    published_columns,
    published_line,
    published_rows,
)
from dlbench.results.stats import t_975, window_dof
from dlbench.results.store import CsvStore
from dlbench.results.upgrade import upgraded
from dlbench.results.verdict import verdict_columns
from tests.analysis.rows import benchmark_row, write_rows

H100 = "NVIDIA H100 80GB HBM3"


def _published(folder: Path, *rows: dict[str, object]) -> Path:
    folder.mkdir(exist_ok=True)
    write_rows(folder / "default-pt2.11-cu13.0-h100-80gb-hbm3.csv", list(rows))
    forget_published()
    return folder


def _row(**columns: object) -> dict[str, object]:
    usual = {"cuda": "13.0", "torch": "2.11.0+cu130", "dlbench_commit": "18695e1" * 6}
    usual.update(throughput_interval_pct=0.5, verdict="valid")
    return benchmark_row(**{**usual, **columns})


def _judged(row: dict[str, object], folder: Path) -> dict[str, object]:
    """A new row as the engine finishes it: its published columns, then its verdict."""
    row = {**row, **published_columns(row, folder)}
    return {**row, **verdict_columns(row)}


def test_a_row_at_077_of_the_published_row_is_flagged_below_and_invalid(tmp_path):
    folder = _published(tmp_path / "published", _row(samples_per_s=1000.0))
    row = _judged(_row(samples_per_s=770.0, throughput_interval_pct=0.3), folder)
    assert row["published_ratio"] == pytest.approx(0.77)
    assert row["published_rows"] == 1
    assert row["published_source"] == "default-pt2.11-cu13.0-h100-80gb-hbm3.csv@18695e1"
    assert row["published_band_pct"] == 5.0  # the gate's threshold: the intervals are narrower
    assert row["verdict"] == "invalid" and row["verdict_reasons"] == "below_published"
    assert "0.77x the median of the published rows" in advice(row)
    assert "below its band" in published_line(row)


def test_within_the_band_is_valid_and_above_it_a_note_only(tmp_path):
    folder = _published(tmp_path / "published", _row(samples_per_s=1000.0))
    within = _judged(_row(samples_per_s=960.0), folder)
    assert within["verdict"] == "valid" and within["verdict_notes"] == ""
    assert "0.960x" in published_line(within) and "within" in published_line(within)
    above = _judged(_row(samples_per_s=1100.0), folder)
    assert above["verdict"] == "valid" and above["verdict_notes"] == "above_published"
    assert "newer code or software" in advice(above)


def test_a_row_nothing_was_published_for_has_empty_columns_never_an_error(tmp_path):
    folder = _published(tmp_path / "published", _row(samples_per_s=1000.0))
    others = (
        _row(gpu_name="NVIDIA A100-SXM4-80GB"),  # another GPU model
        _row(batch_size=128),  # another configuration
        _row(torch="2.14.1+cu130"),  # another torch release
        _row(world_size=2),  # another process count
        _row(status="oom", samples_per_s=None),  # a failed run
        _row(run_kind="validate"),  # another kind of row
    )
    for row in others:
        assert published_columns(row, folder) == {}, row
        assert verdict_columns(row)["verdict_notes"] == ""
    gpu = _row(gpu_name="NVIDIA A100-SXM4-80GB")
    assert published_line(gpu) == (
        "published: no published row of NVIDIA A100-SXM4-80GB measured this configuration"
    )
    assert published_columns(_row(torch="2.11.1+cu130"), folder)  # a patch release matches
    assert published_columns(_row(batch_size="64"), folder)  # as a CSV reader gives it


def test_only_rows_valid_by_their_own_window_are_published_references(tmp_path):
    """A noisy published row is no reference; one called below only by the publication before
    it (a regenerated part) still is."""
    folder = _published(
        tmp_path / "published",
        _row(samples_per_s=100.0, verdict="invalid", verdict_reasons="noisy"),
        _row(samples_per_s=1000.0, verdict="invalid", verdict_reasons="below_published"),
    )
    assert [float(r["samples_per_s"]) for r in matching_rows(_row(), folder)] == [1000.0]


def test_the_band_widens_with_the_intervals_and_the_published_rows_spread(tmp_path):
    folder = _published(
        tmp_path / "published",
        _row(samples_per_s=1000.0, throughput_interval_pct=1.0),
        _row(samples_per_s=1040.0, throughput_interval_pct=2.0),
        _row(samples_per_s=980.0, throughput_interval_pct=0.5),
    )
    row = _judged(_row(samples_per_s=940.0, throughput_interval_pct=0.5), folder)
    assert row["published_rows"] == 3
    assert row["published_ratio"] == pytest.approx(0.94)
    rates = [1000.0, 1040.0, 980.0]  # their deviation between machines, 1.96 sigma of it
    between = 1.959964 * 100 * statistics.stdev(rates) / statistics.fmean(rates)
    # each window's interval (t over its 9 batch means' degrees of freedom, results.intervals)
    # as the normal half-width of its standard deviation: one statement of an interval
    normal = 1.959964 / t_975(window_dof(50))
    expected = ((0.5 * normal) ** 2 + (2.0 * normal) ** 2 + between**2) ** 0.5  # independent
    assert row["published_band_pct"] == pytest.approx(expected)
    assert row["verdict"] == "valid"  # 6 % slower: inside the rows' own spread
    lower = _judged(_row(samples_per_s=925.0, throughput_interval_pct=0.5), folder)
    assert lower["verdict_reasons"] == "below_published"  # 7.5 %: beyond it


def test_a_cpu_row_is_held_against_published_rows_of_its_processor(tmp_path):
    cpu = {"gpu_name": "", "cpu": "AMD EPYC 7B13", "accelerator": "cpu", "cuda": ""}
    folder = _published(tmp_path / "published", _row(**cpu))
    assert published_columns(_row(**cpu), folder)["published_ratio"] == 1.0
    assert published_columns(_row(**{**cpu, "cpu": "Intel Xeon"}), folder) == {}


def test_the_folder_comes_from_the_environment_or_the_package(tmp_path, monkeypatch):
    monkeypatch.delenv(published.FOLDER_VARIABLE, raising=False)
    assert published.published_folder() == PACKAGED_DIR
    monkeypatch.setenv(published.FOLDER_VARIABLE, str(tmp_path))
    assert published.published_folder() == tmp_path


def _as_the_engine_types_it(row: dict[str, str]) -> dict[str, object]:
    """A CSV row with its values as a run holds them before they are written: numbers as int
    or float (a power limit of 700.0 W), True and False as bools."""
    typed: dict[str, object] = {}
    for key, text in row.items():
        if text in ("True", "False"):
            typed[key] = text == "True"
            continue
        try:
            number = float(text)
        except ValueError:
            typed[key] = text if text != "" else None
            continue
        typed[key] = int(number) if text.isdigit() else number
    return typed


def test_a_new_row_typed_as_the_engine_types_it_finds_its_published_rows():
    """The run's own row holds numbers, the published CSV their text ("700.0"): an H100 run of
    the default plan found nothing published for any of its rows until they compared alike."""
    shipped = [
        r
        for r in published_rows(PACKAGED_DIR)
        if r["gpu_name"] == H100 and finished(r, "benchmark")
    ]
    assert all(r["power_limit_w"] == "700.0" for r in shipped if r["model"] == "resnet50")
    for row in shipped:
        fresh = {**_as_the_engine_types_it(row), "run_id": "fresh"}
        assert published_columns(fresh, PACKAGED_DIR), (row["model"], row["batch_size"])


def test_a_shipped_row_measured_again_finds_its_rows_and_10_percent_slower_is_caught():
    """The package's own published rows, read as a run reads them: the H100's default plan is
    there, and each row measured again 10 % slower reads below its band (the band is no
    wider than the gate's 5 % where the part's own rows agree), as it must to be a gate."""
    shipped = published_rows(PACKAGED_DIR)
    assert {r["published_file"] for r in shipped} >= {
        "default-pt2.11-cu13.0-h100-80gb-hbm3.csv",
        "default-pt2.11-cu13.0-h200.csv",
    }
    h100 = [
        r for r in shipped if r["published_file"].startswith("default-") and r["gpu_name"] == H100
    ]
    assert len(h100) >= 20
    for row in h100:
        slower = {**row, "run_id": "again", "samples_per_s": float(row["samples_per_s"]) * 0.9}
        columns = published_columns(slower, PACKAGED_DIR)
        assert columns["published_ratio"] < 0.95, row["model"]
        reasons = verdict_columns({**slower, **columns})["verdict_reasons"].split(";")
        assert "below_published" in reasons, row["model"]


def test_rows_pair_on_one_key_text_releases_machines_and_code():
    """A run's own cells, a CSV's text and pandas' floats give one text; versions and ids keep
    theirs."""
    given = (64, 64.0, "64", "64.0", 700.0, "700.0", None, float("nan"), True, "True", "0.5")
    assert [key_text(v) for v in given] == [
        "64", "64", "64", "64", "700", "700", "", "", "True", "True", "0.5"
    ]  # fmt: skip
    assert key_text("bf16-mixed") == "bf16-mixed" and key_text("inf") == "inf"
    assert key_text("13.0", "cuda") == "13.0" and key_text("12.10", "cuda") == "12.10"
    assert key_text("1234e10", "dlbench_commit") == "1234e10"
    assert (
        code_label({"dlbench": "0.2.0", "dlbench_commit": "1234e10", "dlbench_dirty": "False"})[6:]
        == "1234e10"
    )
    assert release("2.11.0+cu130") == "2.11" and release("13.0") == "13.0" and release(None) == ""
    assert machine({"gpu_name": H100, "cpu": "x"}) == H100
    assert machine({"gpu_name": "", "cpu": "AMD EPYC"}) == "CPU AMD EPYC"
    commit = {"dlbench": "0.2.0", "dlbench_commit": "18695e1aaaa", "dlbench_dirty": "False"}
    assert code_label(commit) == "0.2.0 18695e1"
    assert code_label({**commit, "dlbench_dirty": True}) == "0.2.0 18695e1+dirty"
    assert code_label({**commit, "dlbench_commit": "unknown"}) == "0.2.0 (commit unknown)"
    assert finished(upgraded({"status": "ok"}), "benchmark")  # a row from before run_kind
    assert not finished(upgraded({"status": "ok"}), "serve")
    assert finished({"status": "ok", "run_kind": "serve"}, "serve")
    assert not finished({"status": "oom", "run_kind": "benchmark"}, "benchmark")


def test_a_folder_of_published_csvs_skips_side_files_and_failed_rows(tmp_path):
    folder = _published(tmp_path / "published", _row(), _row(status="oom"))
    CsvStore(folder / "multi-scaling-x.per_rank.csv").append(
        {
            "schema_version": 1,
            "run_id": "r",
            "timestamp": "t",
            "status": "ok",
            "run_kind": "per_rank",
        }
    )
    forget_published()
    assert len(published_rows(folder)) == 1


def test_every_published_csv_holds_against_itself():
    """Each reference row of every published CSV finds itself among the published rows of its
    kind (benchmark and serve rows alike) and reads 1.0 where it is its configuration's only
    row, within the published rows' spread where it has company (a recheck, repeats)."""
    from dlbench.results.pairing import figure_of
    from dlbench.results.published import PACKAGED_DIR, band_pct, is_reference, published_files

    kinds = set()
    for path in published_files(PACKAGED_DIR):
        for row in CsvStore(path).rows():
            if not is_reference(row):
                continue
            kinds.add(row.get("run_kind") or "benchmark")
            held = published_columns(row, PACKAGED_DIR)
            assert held, (path.name, row["run_id"])
            matches = matching_rows(row, PACKAGED_DIR)
            assert any(m["run_id"] == row["run_id"] for m in matches)
            others = [m for m in matches if m["run_id"] != row["run_id"]]
            if not others:
                assert held["published_ratio"] == pytest.approx(1.0)
                continue
            # against the rows of its configuration but itself: a part agrees with itself
            median = statistics.median(float(m[figure_of(m)[0]]) for m in others)
            ratio = float(row[figure_of(row)[0]]) / median
            assert abs(100 * (ratio - 1)) <= band_pct(row, others), (path.name, row["model"])
    assert kinds == {"benchmark", "serve"}


def test_a_loader_row_is_a_reference_and_is_held_to_its_band(tmp_path):
    """A row fed by a real input pipeline that waited for its loader measures the loader
    (issue 88): published before as `invalid: input_bound`, it is a reference all the same, and
    a row of it 10 % slower is below its band; one noisy by its own window is no reference."""
    loader = dict(data="folder:/data", data_workers=8, data_decode="cpu", input_bound="True")
    old = _row(samples_per_s=3700.0, verdict="invalid", verdict_reasons="input_bound", **loader)
    noisy = _row(samples_per_s=3000.0, verdict="invalid", verdict_reasons="noisy;input_bound",
                 **{**loader, "data_workers": 4})  # fmt: skip
    folder = _published(tmp_path / "published", old, noisy)
    same = _judged(_row(samples_per_s=3650.0, **loader), folder)
    assert same["published_rows"] == 1 and same["verdict"] == "valid"
    assert same["verdict_notes"] == "input_bound"  # what a loader row found, not a fault
    slower = _judged(_row(samples_per_s=3330.0, **loader), folder)
    assert slower["verdict_reasons"] == "below_published"
    assert (
        published_columns(_row(samples_per_s=3000.0, **{**loader, "data_workers": 4}), folder) == {}
    )
