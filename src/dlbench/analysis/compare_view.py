"""`dlbench compare` in a terminal: one line per configuration, led by what identifies it.

As pytest-benchmark's and criterion's comparisons do, a line leads with the configuration and the
change. Only the key columns needed to tell the configurations apart are shown (model, mode and
batch always; another only where it splits configurations those leave together); the key columns
that hold one value are said once under the table, and those that vary only with the shown ones
are named there too (`--wide` and `--markdown` show every column). Long notes (an environment
that changed, an invalid side, a failure's error) become numbered footnotes, so that no line
wraps. Nothing but the identifying columns other than the model is ever cut, and only where the
terminal is too narrow for them whole."""

from __future__ import annotations

import textwrap

import pandas as pd

from dlbench.analysis.compare import NEW, NOT_PUBLISHED, OTHER_CODE, Comparison
from dlbench.results.pairing import key_text

ALWAYS_SHOWN = ("model", "mode", "batch_size")
HEADERS = {
    "batch_size": "batch",
    "seq_len": "seq",
    "cuda_graphs": "graphs",
    "prompt_len": "prompt",
    "new_tokens": "new",
    "world_size": "GPUs",
    "gpu_name": "gpu",
    "channels_last": "nhwc",
    "num_nodes": "nodes",
}
FIGURES = ("baseline", "candidate", "change", "interval", "verdict", "notes")
# where a line would not fit: the figures' headers shortened, before any column is cut
SHORT_HEADERS = {"baseline": "base", "candidate": "cand", "interval": "95 %"}
NUMERIC = {"batch_size", "width", "height", "seq_len", "prompt_len", "new_tokens", "world_size"}
NUMERIC.update({"devices", "num_nodes", "baseline", "candidate", "change"})
MIN_CUT_WIDTH = 4  # an identifying column is never cut narrower than this
GAPS = ("  ", " ")


def identifying_columns(table: pd.DataFrame, key: list[str]) -> list[str]:
    """Model, mode and batch, then each other key column (in key order) that tells apart
    configurations the columns before it leave together."""
    shown = [k for k in key if k in ALWAYS_SHOWN]
    for column in key:
        if column in shown or table[column].nunique(dropna=False) <= 1:
            continue
        if (
            not shown
            or (table.groupby(shown, dropna=False)[column].nunique(dropna=False) > 1).any()
        ):
            shown.append(column)
    return [k for k in key if k in shown]


def _figure(value: object) -> str:
    """A throughput as a reader compares them: whole above 1,000, else to four digits."""
    if value is None or pd.isna(value):
        return "-"
    v = float(value)
    return f"{v:,.0f}" if v >= 1000 else f"{v:,.1f}" if v >= 10 else f"{v:.2f}"


def _interval(r: pd.Series) -> str:
    """The change's interval (t_975) as its half-width after `±`, in % (its two ends: --wide,
    --markdown, --json; empty where the line has none)."""
    low, high = r.get("low_pct"), r.get("high_pct")
    if low is None or high is None or pd.isna(low) or pd.isna(high):
        return ""
    return f"±{(high - low) / 2:.1f}%"


def _verdict_and_detail(verdict: str) -> tuple[str, str]:
    """`failed (oom): CUDA out of ...` -> `failed`, and the rest as a note."""
    head, _, rest = verdict.partition(" (")
    return (head, f"{verdict}") if rest else (verdict, "")


def _footnotes(
    per_line: list[list[str]], measured: list[bool]
) -> tuple[list[str], list[str], list[str]]:
    """Each line's footnote numbers, the numbered texts, and the texts that every line measured
    on both sides has (said once instead)."""
    both = [texts for texts, m in zip(per_line, measured) if m]
    common = [t for t in both[0] if all(t in texts for texts in both)] if both else []
    numbered: list[str] = []
    refs = []
    for texts in per_line:
        own = [t for t in texts if t not in common]
        numbered += [t for t in own if t not in numbered]
        refs.append(",".join(str(n) for n in sorted(numbered.index(t) + 1 for t in own)))
    return refs, numbered, common


def _cells(
    comparison: Comparison, shown: list[str]
) -> tuple[list[dict[str, str]], list[list[str]]]:
    """Each line's cells, and its note texts."""
    lines, texts = [], []
    for _, r in comparison.table.iterrows():
        cells = {k: key_text(r[k], k) or "-" for k in shown}
        verdict, detail = _verdict_and_detail(str(r["verdict"]))
        change = r.get("change_pct")
        measured = change is not None and not pd.isna(change)
        own = [t for t in str(r.get("note") or "").split("; ") if t]
        texts.append([*own, *([detail] if detail else [])])
        cells.update(
            baseline=_figure(r["baseline"]),
            candidate=_figure(r["candidate"]),
            change=f"{change:+.1f}%" if measured else "",
            interval=_interval(r) if measured else "",
            verdict=verdict,
        )
        lines.append(cells)
    return lines, texts


def _layout(
    lines: list[dict[str, str]], columns: list[str], width: int, cuttable: list[str]
) -> tuple[dict[str, str], dict[str, int], str]:
    """Headers, column widths and the gap between columns: the roomiest layout that fits,
    else the tightest with the widest cuttable columns narrowed until it does."""
    for short in (False, True):
        header = {c: HEADERS.get(c, c) for c in columns}
        if short:
            header.update({c: h for c, h in SHORT_HEADERS.items() if c in header})
        widths = {c: max(len(header[c]), *(len(line[c]) for line in lines)) for c in columns}
        for gap in GAPS:
            if sum(widths.values()) + len(gap) * (len(columns) - 1) <= width:
                return header, widths, gap
    return header, _cut(widths, width, cuttable, GAPS[-1]), GAPS[-1]


def _cut(widths: dict[str, int], width: int, cuttable: list[str], gap: str) -> dict[str, int]:
    """Narrow the widest cuttable column until the line fits (or none can be cut more)."""
    widths = dict(widths)
    while sum(widths.values()) + len(gap) * (len(widths) - 1) > width:
        candidates = [c for c in cuttable if widths[c] > MIN_CUT_WIDTH]
        if not candidates:
            break
        widest = max(candidates, key=lambda c: widths[c])
        widths[widest] -= 1
    return widths


def _cell(text: str, width: int, column: str) -> str:
    if len(text) > width:
        text = text[: width - 1] + "…"
    return text.rjust(width) if column in NUMERIC else text.ljust(width)


def terminal_lines(comparison: Comparison, width: int) -> list[str]:
    """The comparison as lines of at most `width` characters (where the identifying columns
    can be narrowed that far): the table, its footnotes, what is the same for all."""
    table = comparison.table
    if table.empty:
        return []  # the verdict line says there was nothing to compare
    shown = identifying_columns(table, comparison.key)
    lines, texts = _cells(comparison, shown)
    refs, numbered, common = _footnotes(texts, [bool(line["change"]) for line in lines])
    for line, ref in zip(lines, refs):
        line["notes"] = ref
    columns = [c for c in (*shown, *FIGURES) if c != "notes" or any(refs)]
    cuttable = [c for c in shown if c != "model"]
    header, widths, gap = _layout(lines, columns, width, cuttable)
    out = [gap.join(_cell(header[c], widths[c], c) for c in columns).rstrip()]
    out += [gap.join(_cell(line[c], widths[c], c) for c in columns).rstrip() for line in lines]
    for number, text in enumerate(numbered, start=1):
        out += textwrap.wrap(text, width, initial_indent=f"[{number}] ", subsequent_indent="    ")
    for text in common:
        out += textwrap.wrap(f"every line compared: {text}", width, subsequent_indent="  ")
    out += _key_lines(table, comparison.key, shown, width)
    return out


def _key_lines(table: pd.DataFrame, key: list[str], shown: list[str], width: int) -> list[str]:
    """The key columns with one value ("same for all") and those that vary only with the
    shown ones."""
    constant = [k for k in key if k not in shown and table[k].nunique(dropna=False) <= 1]
    values = {k: key_text(table[k].iloc[0], k) for k in constant}
    same = ", ".join(f"{k}={v}" for k, v in values.items() if v)
    implied = [k for k in key if k not in shown and k not in constant]
    lines = textwrap.wrap(f"same for all: {same}", width, subsequent_indent="  ") if same else []
    if implied:
        text = f"vary with the columns shown (--wide shows them): {', '.join(implied)}"
        lines += textwrap.wrap(text, width, subsequent_indent="  ")
    return lines


def display_table(comparison: Comparison) -> tuple[pd.DataFrame, str]:
    """The table to print, without key columns that hold one value throughout (returned as a
    caption line instead) and without empty columns."""
    table = comparison.table.copy()
    always = {"model", "mode", "batch_size"}
    constant = [k for k in comparison.key if k not in always and table[k].nunique() == 1]
    caption = ", ".join(f"{k}={table[k].iloc[0]}" for k in constant if table[k].iloc[0] != "")
    table["runs"] = [
        "/".join("-" if pd.isna(n) else str(int(n)) for n in pair)
        for pair in zip(table["runs_baseline"], table["runs_candidate"])
    ]
    figures = ["baseline", "candidate", "change_pct", "low_pct", "high_pct", "verdict", "runs"]
    figures.append("note")
    keys = [k for k in comparison.key if k not in constant]
    shown = table[keys + [c for c in figures if c in table]].astype(object)
    shown = shown.where(shown.notna(), "")
    return shown, (f"same for all: {caption}" if caption else "")


def verdict_line(comparison: Comparison) -> str:
    """One line for the log and the CI summary."""
    if comparison.table.empty:
        return (
            "nothing to compare: no finished benchmark or serve row (a loader, peak, validate "
            "or scaling row has no figure a gate holds)"
        )
    bad, failed = len(comparison.slower), len(comparison.failures)
    unsure = len(comparison.inconclusive)
    threshold = f"{comparison.threshold_pct:g}%"
    parts = [f"{bad} slower beyond {threshold}" if bad else f"none slower beyond {threshold}"]
    if unsure:
        parts.append(
            f"{unsure} inconclusive: the evidence cannot tell (measure again as each line's "
            "note says)"
        )
    other = int((comparison.table["verdict"] == OTHER_CODE).sum())
    if other:
        parts.append(f"{other} configuration(s) left out: measured by other code (--same-code)")
    unpublished = int((comparison.table["verdict"] == NOT_PUBLISHED).sum())
    if unpublished:
        parts.append(f"{unpublished} configuration(s) not published")
    if comparison.unpublished_gpus:
        names = ", ".join(comparison.unpublished_gpus)
        parts.append(f"nothing published for {names}: nothing to hold its rows against")
    if failed:
        parts.append(f"{failed} configuration(s) failed or missing in the candidate")
        if failed == len(comparison.table[comparison.table["verdict"] != NEW]):
            parts.append("none matched: is the baseline from this machine and plan?")
    return "; ".join(parts)


def comparison_json(comparison: Comparison, verdict: str, inconclusive_fails: bool = False) -> str:
    """Every line as JSON: its key, both figures, the change and its interval (as ratios,
    above 1 faster), the verdict and note; and the overall line and the command's exit code."""
    import json
    import math

    def plain(value: object) -> object:
        if isinstance(value, float) and math.isnan(value):
            return None
        return value.item() if hasattr(value, "item") else value

    lines = []
    for record in comparison.table.to_dict("records"):
        line = {k: plain(v) for k, v in record.items()}
        for end in ("change", "low", "high"):
            pct = line.pop(f"{end}_pct", None)
            line["ratio" if end == "change" else f"ratio_{end}"] = (
                None if pct is None else 1.0 + float(pct) / 100.0  # type: ignore[arg-type]
            )
        lines.append(line)
    exit_code = comparison.exit_code(inconclusive_fails)
    summary = {"verdict": verdict, "exit_code": exit_code, "lines": lines}
    return json.dumps(summary, indent=2, default=str)
