"""The report as documents people pass on: a PDF (a page per section: its text, its table and
its figure) and PowerPoint slides (a summary table first, then a slide per figure)."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable
from pathlib import Path

import pandas as pd

MAX_TABLE_ROWS = 28  # a PDF page holds this many; the HTML and Markdown keep them all
MAX_SLIDE_ROWS = 12
SLIDE_COLUMNS = ("model", "mode", "precision", "batch", "machine", "samples/s", "MFU", "host-bound")


def _cells(table: pd.DataFrame, limit: int, fmt: Callable[[object], object]) -> pd.DataFrame:
    """The first `limit` rows as text, numbers formatted, empty cells empty."""
    return table.head(limit).map(lambda v: "" if pd.isna(v) else str(fmt(v)))


TABLE_POINTS = 6.0  # the PDF table's type, shrunk where its widest row would not fit
HEADER_CHARACTERS = 14  # a header wraps at its underscores and spaces past this many
CHARACTER_EM = 0.65  # the widest average character (digits) of matplotlib's sans, in ems
LINE_EM = 1.35  # a line of text in a cell, in ems


def draw_table(ax, cells: pd.DataFrame):
    """The cells as a table filling `ax`'s width: each column as wide as its longest line (a
    header wrapped at its underscores), the type shrunk from TABLE_POINTS until the widest
    row fits, the header row as tall as its lines; so no text runs over another."""
    labels = [_wrapped(str(c)) for c in cells.columns]
    chars = [
        2 + max(len(line) for text in (label, *cells[c]) for line in str(text).split("\n"))
        for label, c in zip(labels, cells.columns, strict=True)
    ]
    figure = ax.figure
    box = ax.get_position()
    width_pt = box.width * figure.get_figwidth() * 72
    size = min(TABLE_POINTS, width_pt / (sum(chars) * CHARACTER_EM))
    line = size * LINE_EM / (box.height * figure.get_figheight() * 72)  # in axes' heights
    table = ax.table(
        cellText=cells.values,
        colLabels=labels,
        colWidths=[n / sum(chars) for n in chars],
        loc="upper center",
    )
    table.auto_set_font_size(False)
    table.set_fontsize(size)
    header = max(label.count("\n") + 1 for label in labels)
    for (row, _), cell in table.get_celld().items():
        cell.set_height(line * (header if row == 0 else 1) + line * 0.3)
    return table


def _wrapped(label: str) -> str:
    """`serve_output_tokens_per_s` as lines of at most HEADER_CHARACTERS, broken after its
    underscores and at its spaces (a longer word keeps a line of its own)."""
    words = re.findall(r"[^_\s]+_?|\s+", label)
    lines = [""]
    for word in (w for w in words if w.strip()):
        if lines[-1] and len(lines[-1]) + len(word) > HEADER_CHARACTERS:
            lines.append("")
        lines[-1] += word if lines[-1].endswith("_") or not lines[-1] else " " + word
    return "\n".join(lines)


def write_pdf(sections, sources: list[str], folder: Path, path: Path, fmt) -> Path:
    """A4-landscape pages: the title and the first section, one page per section, then the
    sources."""
    import matplotlib.image as mpimg
    import matplotlib.pyplot as plt
    from matplotlib.backends.backend_pdf import PdfPages

    with PdfPages(path) as pdf:
        for i, s in enumerate(sections):
            fig = plt.figure(figsize=(11.69, 8.27))
            top = 0.95
            if i == 0:
                fig.text(0.04, top, "dlbench report", fontsize=20, weight="bold", va="top")
                top -= 0.06
            fig.text(0.04, top - 0.03, s.title, fontsize=14, weight="bold", va="top")
            text = "\n".join(textwrap.fill(line, 160) for line in s.text.splitlines() if line)
            fig.text(0.04, top - 0.07, text, fontsize=8, va="top")
            body = top - 0.09 - 0.017 * (text.count("\n") + 1 if text else 0)
            has_table = s.table is not None and not s.table.empty
            if s.figure:
                height = body - (0.35 if has_table else 0.03)
                ax = fig.add_axes((0.04, body - height, 0.92, height))
                ax.imshow(mpimg.imread(folder / s.figure))
                ax.axis("off")
                body -= height + 0.02
            if has_table:
                cells = _cells(s.table, MAX_TABLE_ROWS, fmt)
                ax = fig.add_axes((0.04, 0.03, 0.92, max(0.05, body - 0.05)))
                ax.axis("off")
                draw_table(ax, cells)
                if len(s.table) > MAX_TABLE_ROWS:
                    ax.set_title(
                        f"first {MAX_TABLE_ROWS} of {len(s.table)} rows (all in the HTML)",
                        fontsize=7,
                        loc="left",
                    )
            pdf.savefig(fig)
            plt.close(fig)
        fig = plt.figure(figsize=(11.69, 8.27))  # the files it read, last, as the HTML has them
        fig.text(0.04, 0.92, "Sources", fontsize=14, weight="bold", va="top")
        fig.text(0.04, 0.88, textwrap.fill(", ".join(sources), 150), fontsize=8, va="top")
        pdf.savefig(fig)
        plt.close(fig)
    return path


def write_pptx(sections, sources: list[str], folder: Path, path: Path, fmt) -> Path:
    """Slides: a title slide with the summary table, then one slide per figure."""
    from pptx import Presentation
    from pptx.util import Inches, Pt

    deck = Presentation()
    deck.slide_width, deck.slide_height = Inches(13.33), Inches(7.5)
    blank = deck.slide_layouts[5]  # title only

    def titled(title: str):
        slide = deck.slides.add_slide(blank)
        slide.shapes.title.text = title
        slide.shapes.title.text_frame.paragraphs[0].font.size = Pt(28)
        return slide

    summary = sections[0].table if sections and sections[0].table is not None else None
    slide = titled("dlbench report")
    note = slide.shapes.add_textbox(Inches(0.5), Inches(1.3), Inches(12.3), Inches(0.5))
    note.text_frame.text = "Sources: " + ", ".join(sources)
    note.text_frame.paragraphs[0].font.size = Pt(11)
    if summary is not None and not summary.empty:
        cells = _cells(summary[[c for c in SLIDE_COLUMNS if c in summary]], MAX_SLIDE_ROWS, fmt)
        shape = slide.shapes.add_table(
            len(cells) + 1, len(cells.columns), Inches(0.5), Inches(1.9), Inches(12.3), Inches(5)
        )
        for j, column in enumerate(cells.columns):
            shape.table.cell(0, j).text = str(column)
        for i, row in enumerate(cells.itertuples(index=False), 1):
            for j, value in enumerate(row):
                shape.table.cell(i, j).text = str(value)
        for cell in (c for r in shape.table.rows for c in r.cells):
            cell.text_frame.paragraphs[0].font.size = Pt(10)
    for s in sections:
        if not s.figure:
            continue
        from PIL import Image

        slide = titled(s.title)
        with Image.open(folder / s.figure) as png:
            width, height = png.size
        scale = min(12.3 / width, 5.8 / height)  # inches per pixel that fit the slide
        slide.shapes.add_picture(
            str(folder / s.figure), Inches(0.5), Inches(1.4), Inches(width * scale)
        )
    deck.save(path)
    return path
