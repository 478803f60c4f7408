"""Bad input to report and compare on odd, damaged or hand-edited CSVs, and where their documents
go: one `error:` line and exit 2 (1 for a sweep with failed points), no traceback, and the CSV
it names keeps every earlier byte."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.analysis.rows import benchmark_row, write_rows
from tests.conftest import read_rows, refused

S = ["--accelerator", "cpu", "--model", "mobilenet_v3", "--batch-size", "2", "--width", "32"]
S += ["--height", "32", "--n-iters", "2", "--warmup-steps", "1"]


# report and compare on odd CSVs.
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


# where the report goes, and its timelines.
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
