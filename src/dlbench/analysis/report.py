"""`dlbench report`: one self-contained HTML file (plots embedded), the PNGs, a Markdown summary,
and a PDF or slides when asked; what each section says is analysis.sections'."""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from dlbench.analysis.documents import write_pdf, write_pptx
from dlbench.analysis.load import finished_rows, load_rows
from dlbench.analysis.markdown import markdown_table, markdown_text
from dlbench.analysis.report_rows import ReportRows, Section
from dlbench.analysis.sections import fleet_part, report_sections
from dlbench.analysis.serving_sections import frontier_part, serving_part
from dlbench.console import shown_number
from dlbench.errors import UserError
from dlbench.results.store import writable_folder


@dataclass
class Report:
    """What `build_report` wrote."""

    html: Path
    markdown: Path
    pngs: list[Path] = field(default_factory=list)
    documents: list[Path] = field(default_factory=list)  # report.pdf, report.pptx


def build_report(
    paths: list[Path],
    out_dir: Path,
    baseline: str | None = None,
    max_slowdown: float = 10.0,
    timelines: list[Path] | None = None,
    pdf: bool = False,
    pptx: bool = False,
    prices: dict[str, float] | None = None,
    same_code: bool = False,
) -> Report:
    """Read the CSVs (and telemetry logs), draw what they hold, write report.html, report.md
    and the PNGs, and report.pdf / report.pptx when asked. `same_code`: pair rows across
    machines only where one version of dlbench measured both."""
    rows = load_rows(paths, foreign=True)  # the published folder as it ships: side files skipped
    writable_folder(out_dir, "--out")
    try:
        return _write(
            rows, out_dir, baseline, max_slowdown, timelines or [], pdf, pptx, prices, same_code
        )
    except OSError as exc:
        where = exc.filename or out_dir
        raise UserError(f"--out: cannot write {where}: {exc.strerror or exc}") from None


def _write(*args) -> Report:
    # Labels come from the rows (machine names, tags): text, never mathtext to parse.
    with plt.rc_context({"text.parse_math": False}):
        return _write_files(*args)


def _write_files(
    rows, out_dir, baseline, max_slowdown, timelines, pdf, pptx, prices, same_code
) -> Report:
    sections, pngs, empty = [], [], []
    parts_alone = (fleet_part(rows), serving_part(rows), frontier_part(rows))
    alone = [p for p in parts_alone if p is not None]
    if alone and finished_rows(rows).empty:  # peak rows of a fleet or serve rows, no benchmark
        parts = iter(alone)
    else:
        prepared = ReportRows.prepare(
            rows, baseline, max_slowdown, timelines, prices or {}, same_code
        )
        parts = report_sections(prepared)
    for section, figure in parts:
        if figure is not None:
            png = out_dir / f"{len(pngs) + 1:02d}-{_slug(section.title)}.png"
            try:
                figure.savefig(png, dpi=110)
            finally:
                plt.close(figure)
            section.figure = png.name
            pngs.append(png)
        (sections if section.shown else empty).append(section)
    if empty:  # a heading with nothing under it says nothing; one line says what is not here
        titles = ", ".join(s.title.lower() for s in empty)
        sections[0].text += f"\nNot shown, nothing in these rows for them: {titles}."
    sources = sorted(rows["source"].unique())
    report = Report(out_dir / "report.html", out_dir / "report.md", pngs)
    report.html.write_text(_html(sections, sources, out_dir), encoding="utf-8")
    report.markdown.write_text(_markdown(sections, sources), encoding="utf-8")
    if pdf:
        report.documents.append(
            write_pdf(sections, sources, out_dir, out_dir / "report.pdf", _number)
        )
    if pptx:
        report.documents.append(
            write_pptx(sections, sources, out_dir, out_dir / "report.pptx", _number)
        )
    return report


def _number(value: object) -> object:
    """Floats as a reader wants them (console.shown_number); anything else as it is."""
    if not isinstance(value, float) or pd.isna(value):
        return value
    return shown_number(value)


def _slug(title: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in title.lower()).strip("-")


# The page: its width holds every figure and table (a wide table scrolls in its own box, never
# the page); the runs table sorts by a click on a heading and filters by a word typed above it,
# by the few lines of script below: no server, no network.
STYLE = (
    "body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}"
    "table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ccc;"
    "padding:2px 6px;text-align:right}th{cursor:pointer;background:#f4f4f4}"
    ".wide{max-width:100%;overflow-x:auto}img{max-width:100%;height:auto}"
    "input.filter{margin:0.5em 0;width:20em}"
)
SCRIPT = """
document.querySelectorAll('table.runs').forEach(function (table) {
  var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
  var filter = table.parentNode.previousElementSibling;
  filter.addEventListener('input', function () {
    var word = filter.value.toLowerCase();
    rows.forEach(function (r) {
      r.hidden = word && r.textContent.toLowerCase().indexOf(word) < 0;
    });
  });
  table.tHead.querySelectorAll('th').forEach(function (th, column) {
    th.addEventListener('click', function () {
      var down = th.dataset.down !== '1'; th.dataset.down = down ? '1' : '0';
      function key(r) { var t = r.cells[column].textContent.replace(/,/g, '');
        return isNaN(parseFloat(t)) ? t : parseFloat(t); }
      rows.sort(function (a, b) { var x = key(a), y = key(b);
        return (x < y ? -1 : x > y ? 1 : 0) * (down ? 1 : -1); });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
});
"""


def _html(sections: list[Section], sources: list[str], folder: Path) -> str:
    """The report as one page: the answer first, each section's text, figure and table, the
    files it read last."""
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>dlbench report</title>",
        f"<style>{STYLE}</style></head><body><h1>dlbench report</h1>",
    ]
    for number, s in enumerate(sections):
        parts.append(f"<h2>{html.escape(s.title)}</h2>")
        answer = number == 0 and s.table is not None  # the answer first, what it means after
        if answer:
            parts.append(f"<div class='wide'>{s.table.map(_number).to_html(index=False)}</div>")
        parts += [f"<p>{html.escape(line)}</p>" for line in s.text.splitlines() if line]
        if s.figure:
            data = base64.b64encode((folder / s.figure).read_bytes()).decode()
            parts.append(f"<img alt='{html.escape(s.title)}' src='data:image/png;base64,{data}'>")
        if s.table is not None and not answer:
            runs = s.title == "Runs"
            if runs:
                parts.append("<input class='filter' placeholder='filter: a model, a GPU ...'>")
            table = s.table.map(_number).to_html(
                index=False, na_rep="", classes="runs" if runs else None, border=0
            )
            parts.append(f"<div class='wide'>{table}</div>")
    parts.append(f"<h2>Sources</h2><p>{html.escape(', '.join(sources))}</p>")
    parts.append(f"<script>{SCRIPT}</script></body></html>")
    return "\n".join(parts)


def _markdown(sections: list[Section], sources: list[str]) -> str:
    parts = ["# dlbench report", ""]
    for s in sections:
        parts += [f"## {s.title}", ""]
        parts += [markdown_text(line) + "  " for line in s.text.splitlines() if line]
        if s.figure:
            parts += ["", f"![{s.title}]({s.figure})"]
        if s.table is not None:
            parts += ["", markdown_table(s.table, number=_number)]
        parts.append("")
    parts += [f"Sources: {markdown_text(', '.join(sources))}", ""]
    return "\n".join(parts)
