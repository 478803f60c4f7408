"""The gate's verdicts (`dlbench gate`): one line for each point of its plan, whatever its rows
say. A point's runs are its rows on each side (tagged `gate_point` by the gate); its line is

- `failed (STATUS, SIDE): error` where any run of a side failed (an oom, a crash, a timeout, a
  run that left no row): a failure is the gate's to report, never averaged away;
- `invalid (REASONS, SIDE)` where a side has no usable row (every run invalid for a reason other
  than its noise: a noisy run is compared with its own wide interval, as compare does);
- else analysis.change's verdict of head against base over the rounds, the note naming what the
  two sides ran differently (a head whose graph capture fell back to eager is the head's line,
  not a missing configuration and a base's failure).

Any failed or invalid line fails the gate (exit 1), as a slower one does."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from dlbench.analysis.change import change_columns, judge, settle_note
from dlbench.analysis.compare import (
    FAILED_STATUSES,
    Comparison,
    comparable_rows,
    failed_verdict,
    invalid_verdict,
    resolve_key,
    summarise,
)
from dlbench.analysis.load import load_rows, split_invalid, text_column
from dlbench.analysis.machines import code_labels
from dlbench.results.label_columns import GATE_POINT, gate_point
from dlbench.results.pairing import key_text

SIDES = ("base", "head")
# what a side ran, as the row says it ran: where the two differ, the line says so
AS_RUN = ("cuda_graphs", "compile", "graph_fallback", "attention_backend", "code")


def gate_comparison(
    base_csv: Path, head_csv: Path, threshold_pct: float, labels: Sequence[str]
) -> Comparison:
    """Head against base, one line for each of the plan's points (`labels`, in the plan's
    order)."""
    rows = {side: _side_rows(path, side) for side, path in zip(SIDES, (base_csv, head_csv))}
    key = resolve_key(rows["base"], rows["head"], None)
    lines = [
        _point_line(gate_point(k), label, rows, key, threshold_pct)
        for k, label in enumerate(labels)
    ]
    return Comparison(pd.DataFrame(lines), ["point", *key], threshold_pct)


def _side_rows(path: Path, side: str) -> pd.DataFrame:
    """A side's rows (none where its file was never written: no run of it left a row), each
    with the code that measured it."""
    if not path.exists() or path.stat().st_size == 0:
        return pd.DataFrame(columns=["status", GATE_POINT])
    rows = load_rows([path], side.upper(), "warn")
    return rows.assign(code=code_labels(rows))


def _of_point(rows: pd.DataFrame, point: str) -> pd.DataFrame:
    return rows[text_column(rows, GATE_POINT) == point]


def _point_line(
    point: str, label: str, rows: dict[str, pd.DataFrame], key: list[str], threshold_pct: float
) -> dict[str, object]:
    sides = {side: _of_point(r, point) for side, r in rows.items()}
    usable = {side: _usable(r) for side, r in sides.items()}
    shown = next((u for u in usable.values() if not u.empty), None)
    first = shown if shown is not None else next(iter(sides.values()))
    line: dict[str, object] = {"point": label}
    line.update({k: key_text(first[k].iloc[-1], k) if not first.empty else "" for k in key})
    line.update(baseline=float("nan"), candidate=float("nan"))
    line.update(runs_baseline=len(usable["base"]), runs_candidate=len(usable["head"]))
    why = _side_failure(sides, usable)
    if why:
        line.update(verdict=why, note="")
        return line
    summary = {side: summarise(r, [GATE_POINT]).iloc[0] for side, r in sides.items()}
    base, head = summary["base"], summary["head"]
    line.update(baseline=base["samples_per_s"], candidate=head["samples_per_s"])
    change = judge(base["evidence"], head["evidence"], threshold_pct, bool(base["lower_is_better"]))
    line.update(change_columns(change))
    notes = [*_differences(usable), settle_note(line.get("runs_to_settle"))]
    line["note"] = "; ".join(n for n in notes if n)
    return line


def _usable(rows: pd.DataFrame) -> pd.DataFrame:
    """A side's finished rows of a point that a comparison reads: valid, or invalid for their
    noise alone (compared with their own interval)."""
    runs = comparable_rows(rows)
    valid, invalid = split_invalid(runs)
    reasons = text_column(invalid, "verdict_reasons")
    noisy = reasons.map(lambda text: bool(text) and set(text.split(";")) <= {"noisy", "drift"})
    return pd.concat([valid, invalid[noisy.astype(bool)].assign(noisy=True)], sort=False)


def _side_failure(sides: dict[str, pd.DataFrame], usable: dict[str, pd.DataFrame]) -> str:
    """The line's failure, base first: a run of a side that failed, or a side with no usable
    row (its rows' reasons, or none at all); '' where both sides can be compared."""
    for side, rows in sides.items():
        status = text_column(rows, "status")
        failed = rows[status.isin(FAILED_STATUSES)]
        if not failed.empty:
            row = failed.iloc[0]
            return _named(failed_verdict(row["status"], key_text(row.get("error"))), side)
    for side, rows in sides.items():
        if not usable[side].empty:
            continue
        if rows.empty:
            return _named(failed_verdict("error", "no row"), side)
        _, invalid = split_invalid(comparable_rows(rows))
        said = text_column(invalid, "verdict_reasons")
        reasons = ";".join(sorted({r for text in said for r in text.split(";") if r}))
        return _named(invalid_verdict(reasons or "no figure"), side)
    return ""


def _named(verdict: str, side: str) -> str:
    """`failed (error): why` -> `failed (error, base): why`."""
    head, _, rest = verdict.partition(")")
    return f"{head}, {side}){rest}"


def _differences(usable: dict[str, pd.DataFrame]) -> list[str]:
    """What the two sides ran differently, as their latest rows say (`head ran cuda_graphs
    False`); a noisy side's runs."""
    notes = []
    base, head = (usable[s].iloc[-1] for s in SIDES)
    for column in AS_RUN:
        was, now = key_text(base.get(column), column), key_text(head.get(column), column)
        if was != now:
            notes.append(f"head ran {column} {now or '(none)'} where base ran {was or '(none)'}")
    for side in SIDES:
        if "noisy" in usable[side] and usable[side]["noisy"].fillna(False).astype(bool).any():
            notes.append(f"{side} noisy")
    return notes
