"""Report documents people pass on, opened by real readers: the PDF's pages (pdftoppm, or the
page objects), the PPTX's slides (python-pptx); the input-pipeline section and the timeline."""

from __future__ import annotations

import csv
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from dlbench.analysis.report import build_report
from tests.analysis.rows import benchmark_row, write_rows
from tests.conftest import run_cli


def _loader_row(workers: int, rate: float) -> dict[str, object]:
    return benchmark_row(
        run_kind="loader",
        data="folder:/data",
        data_workers=workers,
        data_decode="cpu",
        samples_per_s=rate,
        batch_size=256,
    )


@pytest.fixture
def csvs(tmp_path) -> list[Path]:
    results = write_rows(
        tmp_path / "h100.csv",
        [
            benchmark_row(batch_size=256, samples_per_s=4000.0, data="synthetic"),
            # two GPUs, and another GPU: not the rate one device's loader must keep up with
            benchmark_row(batch_size=256, samples_per_s=9000.0, data="synthetic", world_size=2),
            benchmark_row(batch_size=256, samples_per_s=6000.0, gpu_name="NVIDIA H200"),
            benchmark_row(batch_size=128, samples_per_s=3800.0),
            benchmark_row(
                batch_size=256,
                samples_per_s=2800.0,
                data="folder:/data",
                data_workers=4,
                data_decode="cpu",
                data_wait_pct=40.0,
                verdict="invalid",
                verdict_reasons="input_bound",
            ),
            benchmark_row(
                batch_size=256,
                samples_per_s=3900.0,
                data="folder:/data",
                data_workers=8,
                data_decode="cpu",
                data_wait_pct=2.0,
            ),
        ],
    )
    loader = write_rows(
        tmp_path / "loader.csv",
        [_loader_row(w, r) for w, r in [(0, 600.0), (4, 2500.0), (8, 4800.0)]],
    )
    return [results, loader]


@pytest.fixture
def telemetry_log(tmp_path) -> Path:
    path = tmp_path / "telemetry.csv"
    fields = [
        "t",
        "device",
        "power_w",
        "temp_c",
        "gpu_util",
        "mem_util",
        "mem_used_mb",
        "sm_clock_mhz",
        "mem_clock_mhz",
        "throttle_bits",
    ]
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        for k in range(50):
            writer.writerow(
                {
                    "t": 100 + 0.1 * k,
                    "device": 0,
                    "power_w": 500 + k,
                    "temp_c": 60,
                    "gpu_util": 100,
                    "mem_util": 40,
                    "mem_used_mb": 1000,
                    "sm_clock_mhz": 1980 - 5 * k,
                    "mem_clock_mhz": 2619,
                    "throttle_bits": 4 if k > 40 else 0,
                }
            )
    return path


def _pdf_pages(path: Path) -> int:
    if shutil.which("pdftoppm"):
        out = path.parent / "pages"
        subprocess.run(["pdftoppm", "-png", "-r", "20", str(path), str(out)], check=True)
        return len(list(path.parent.glob("pages-*.png")))
    return len(re.findall(rb"/Type /Page\b", path.read_bytes()))


def test_pdf_and_pptx_hold_a_page_per_section_and_a_slide_per_figure(csvs, telemetry_log, tmp_path):
    from pptx import Presentation

    report = build_report(csvs, tmp_path / "report", timelines=[telemetry_log], pdf=True, pptx=True)
    pdf, pptx = report.documents
    assert pdf.read_bytes().startswith(b"%PDF")
    sections = re.findall(r"^## ", report.markdown.read_text(), re.M)
    assert _pdf_pages(pdf) == len(sections) + 1  # and the sources, last
    slides = Presentation(str(pptx)).slides
    assert len(slides) == 1 + len(report.pngs)  # the summary, then a slide per figure
    titles = [s.shapes.title.text for s in slides]
    assert titles[0] == "dlbench report" and "Input pipeline" in titles
    assert "Telemetry timeline" in titles
    table = next(sh for sh in slides[0].shapes if sh.has_table).table
    # the first section's table: the H200 row against the H100's (both synthetic data, one GPU)
    assert table.cell(0, 0).text == "machine" and table.cell(1, 0).text == "NVIDIA H200"


def test_input_pipeline_section_says_where_the_loader_keeps_up(csvs, tmp_path):
    report = build_report(csvs, tmp_path / "report")
    text = report.markdown.read_text()
    assert "keeps up from 8 workers" in text  # 4,800/s >= the model's 4,000/s
    assert "fell more than 5 % short of that at 4 workers" not in text  # 2,800 vs min 2,500
    section = text.split("## Input pipeline")[1].split("## ")[0]
    assert "2,500" in section and "4,800" in section and "4,000" in section
    # the input-bound training row is left out of ratios, not out of this table
    assert "2,800" in section and "INVALID (input_bound)" in section


def test_timeline_marks_throttling_and_refuses_foreign_files(telemetry_log, csvs, tmp_path):
    report = build_report(csvs, tmp_path / "report", timelines=[telemetry_log])
    assert "Throttled in 18 % of samples (sw_power_cap)" in report.markdown.read_text()
    foreign = tmp_path / "foreign.csv"
    foreign.write_text("a,b\n1,2\n")
    out = run_cli("report", *csvs, "--timeline", foreign, "-o", tmp_path / "r2")
    assert out.returncode == 2 and "not a dlbench --telemetry-log file" in out.stderr
    assert "Traceback" not in out.stderr


def _overlaps(table) -> list[tuple[str, str]]:
    """Pairs of neighbouring cells in one row whose drawn texts overlap, or a text wider or
    taller than its cell."""
    fig = table.axes.figure
    renderer = fig.canvas.get_renderer()
    cells = table.get_celld()
    found = []
    for (row, col), cell in cells.items():
        text = cell.get_text().get_window_extent(renderer)
        box = cell.get_window_extent(renderer)
        if text.width > box.width + 0.5 or text.height > box.height + 0.5:
            found.append((cell.get_text().get_text(), "its cell"))
        right = cells.get((row, col + 1))
        if right is not None and right.get_text().get_text():
            other = right.get_text().get_window_extent(renderer)
            if text.x1 > other.x0 + 0.5 and text.y0 < other.y1 and other.y0 < text.y1:
                found.append((cell.get_text().get_text(), right.get_text().get_text()))
    return found


@pytest.mark.parametrize("columns", [6, 14, 24])
def test_a_pdf_table_as_wide_as_the_serving_one_draws_no_text_over_another(columns):
    """The serving table's 14-odd columns of long names overlapped on the PDF page (issue 96):
    each column as wide as its longest line, headers wrapped, the type shrunk to fit."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dlbench.analysis.documents import draw_table

    names = ["model", "serve_scenario", "serve_found_qps", "serve_ttft_p99_ms",
             "serve_tpot_p99_ms", "serve_output_tokens_per_s", "NVIDIA H200 (machine)"]  # fmt: skip
    values = {
        f"{names[k % len(names)]}_{k}": [f"{1234.5678 * (k + 1):,.2f}", "llm_1b server"]
        for k in range(columns)
    }
    cells = pd.DataFrame(values)
    fig = plt.figure(figsize=(11.69, 8.27))
    ax = fig.add_axes((0.04, 0.03, 0.92, 0.5))
    ax.axis("off")
    table = draw_table(ax, cells)
    fig.canvas.draw()
    assert not _overlaps(table), _overlaps(table)[:3]
    plt.close(fig)


def test_a_report_goes_beside_its_input_unless_told(csvs, tmp_path):
    """`report q.csv` writes q-report/ beside q.csv, `report FOLDER` FOLDER/report/, from any
    working directory (on 4c280ac: ./results/report/ wherever the input was)."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    first = csvs[0]
    out = run_cli("report", first, cwd=elsewhere)
    assert out.returncode == 0, out.stderr
    assert (first.with_name(f"{first.stem}-report") / "report.html").is_file()
    out = run_cli("report", first.parent, cwd=elsewhere)
    assert out.returncode == 0, out.stderr
    assert (first.parent / "report" / "report.md").is_file()
    assert not list(elsewhere.iterdir())  # nothing where the command ran
    told = tmp_path / "told"
    assert run_cli("report", first, "-o", told, cwd=elsewhere).returncode == 0
    assert (told / "report.html").is_file()
