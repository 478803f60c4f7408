"""Markdown for job summaries and the report: text from rows made safe for a table, and a frame
as a GitHub-flavoured table."""

from __future__ import annotations

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


def markdown_table(frame: pd.DataFrame, digits: int = 1) -> str:
    """A GitHub-flavoured Markdown table (for job summaries and the report's summary); a
    missing value is an empty cell, text escaped (`markdown_text`)."""
    shown = frame.copy()
    for column in shown.columns:
        shown[column] = shown[column].map(lambda v: markdown_text(v) if isinstance(v, str) else v)
    shown.columns = [markdown_text(str(c)) for c in shown.columns]
    for column in WHOLE_NUMBER_COLUMNS.intersection(shown.columns):
        if pd.api.types.is_numeric_dtype(shown[column]):
            shown[column] = shown[column].map(lambda v: "" if pd.isna(v) else f"{int(v):,}")
    return shown.to_markdown(index=False, floatfmt=f",.{digits}f", missingval="")
