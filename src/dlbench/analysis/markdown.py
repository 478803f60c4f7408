"""Markdown for job summaries and the report: text from rows made safe for a table, and a frame
as a GitHub-flavoured table."""

from __future__ import annotations

import numbers
from collections.abc import Callable

import numpy as np
import pandas as pd

# Counts and sizes: shown as whole numbers even where a missing value made the column float.
WHOLE_NUMBER_COLUMNS = {
    "batch",
    "batch_size",
    "GPUs",
    "world_size",
    "workers",
    "data_workers",
    "width",
    "height",
    "seq_len",
    "prompt_len",
    "new_tokens",
}


def markdown_text(text: str) -> str:
    """Text from rows (names, tags, run ids) as Markdown shows it: no HTML a viewer would
    render, no `|` that would split a table cell."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace("|", "\\|")


def markdown_table(
    frame: pd.DataFrame, digits: int = 1, number: Callable[[object], object] | None = None
) -> str:
    """A GitHub-flavoured Markdown table (for job summaries and the report); a missing value is
    an empty cell, text escaped (`markdown_text`); floats to `digits` decimals, or each cell
    as `number` writes it (the report's one rule for its HTML, PDF, slides and Markdown)."""
    shown = frame.copy()
    if number is not None:
        shown = frame.map(lambda v: "" if v is None or v is pd.NA or v != v else number(v))
    for column in shown.columns:
        shown[column] = shown[column].map(lambda v: markdown_text(v) if isinstance(v, str) else v)
    shown.columns = [markdown_text(str(c)) for c in shown.columns]
    for column in WHOLE_NUMBER_COLUMNS.intersection(shown.columns):
        if pd.api.types.is_numeric_dtype(shown[column]):
            shown[column] = shown[column].map(lambda v: "" if pd.isna(v) else f"{int(v):,}")
    if number is not None:  # cells already written: tabulate must not read "1.10" back as 1.1
        align = ["right" if _numbers(frame[c]) else "left" for c in frame.columns]
        return shown.to_markdown(index=False, missingval="", disable_numparse=True, colalign=align)
    return shown.to_markdown(index=False, floatfmt=f",.{digits}f", missingval="")


def _numbers(column: pd.Series) -> bool:
    """Whether a column holds numbers only (missing cells aside): it is aligned right."""
    present = column.dropna()
    return not present.empty and all(
        isinstance(v, numbers.Real) and not isinstance(v, bool | np.bool_) for v in present
    )
