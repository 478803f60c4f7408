"""The gate's verdicts (`dlbench gate`): the head side's rows against the base side's by
analysis.compare, each configuration over its rounds; a point a side failed says which side
failed it, never a slowdown."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from dlbench.analysis.compare import (
    NEW,
    Comparison,
    comparable_rows,
    compare_runs,
    failure_verdict_of,
    resolve_key,
    summarise,
)
from dlbench.analysis.load import load_rows
from dlbench.analysis.machines import code_labels


def gate_comparison(base_csv: Path, head_csv: Path, threshold_pct: float) -> Comparison:
    """Head against base; a line whose failure is a side's names that side (`failed (error,
    base): ...`), and a configuration only the head finished is the base's failure, not new."""
    base, head = (
        load_rows([path], name, "warn") for path, name in ((base_csv, "BASE"), (head_csv, "HEAD"))
    )
    if comparable_rows(base).empty:  # the base finished nothing: every point is its failure
        return _all_failed(base, head, threshold_pct)
    comparison = compare_runs(base, head, threshold_pct=threshold_pct)
    table = comparison.table.copy()
    verdicts = []
    for _, line in table.iterrows():
        verdict = str(line["verdict"])
        if verdict == NEW:
            verdict = _side(failure_verdict_of(base, comparison.key, line), "base")
        elif verdict.startswith("failed ("):
            verdict = _side(verdict, "head")
        verdicts.append(verdict)
    table["verdict"] = pd.Series(verdicts, index=table.index, dtype=object)
    return Comparison(table, comparison.key, threshold_pct)


def _side(verdict: str, side: str) -> str:
    """`failed (error): why` -> `failed (error, base): why`; `missing` -> `failed (base)`."""
    if not verdict.startswith("failed ("):
        return f"failed ({side})"
    head, _, rest = verdict.partition(")")
    return f"{head}, {side}){rest}"


def _all_failed(base: pd.DataFrame, head: pd.DataFrame, threshold_pct: float) -> Comparison:
    """Every configuration the head measured, failed by the base (its failure row named)."""
    key = resolve_key(head, head, None)
    lines = summarise(head.assign(code=code_labels(head)), key)
    table = lines[key].assign(
        baseline=float("nan"),
        candidate=lines["samples_per_s"],
        runs_baseline=0,
        runs_candidate=lines["runs"],
        verdict=[_side(failure_verdict_of(base, key, r), "base") for _, r in lines.iterrows()],
        note="",
    )
    return Comparison(table, key, threshold_pct)
