"""`dlbench compare CANDIDATE`: one file held against the published rows of its GPUs (results.
published.matching_rows: the same experiment, GPU model, power limit and software releases), with
the same statistic, table, verdicts and exit codes as a comparison against a baseline file: the
published rows of a configuration are the baseline's runs (several leases: their spread; one: its
window and its kind's spread between runs), the candidate's latest row its one run. Benchmark and
serve rows alike, each on its kind's key."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pandas as pd

from dlbench.analysis.change import change_columns, judge, settle_note
from dlbench.analysis.compare import (
    FAILED_STATUSES,
    INVALID,
    NOISE_REASONS,
    NOT_PUBLISHED,
    OTHER_CODE,
    Comparison,
    evidence_of,
    failed_verdict,
    invalid_verdict,
)
from dlbench.analysis.load import finished_rows, latest
from dlbench.errors import UserError, number_or_none
from dlbench.results.pairing import (
    COMPARED_KINDS,
    EXPERIMENT_KEY,
    GATE_THRESHOLD_PCT,
    code_label,
    figure_of,
    key_text,
    kind_of,
    machine,
    same_code,
)
from dlbench.results.published import (
    FOLDER_VARIABLE,
    matching_rows,
    own_faults,
    published_columns,
    published_files,
    published_folder,
    published_key,
    published_rows,
)
from dlbench.results.serve_columns import SERVE_KEY


def compare_with_published(
    candidate: pd.DataFrame,
    threshold_pct: float = GATE_THRESHOLD_PCT,
    one_code: bool = False,
    folder: Path | None = None,
) -> Comparison:
    """Every configuration of the candidate (its latest finished row) against the published
    rows of its GPU model and configuration, judged as analysis.change.judge says (`same`,
    `faster`, `slower`, `inconclusive`); `not published` where nothing was, and the GPUs with
    nothing published at all named. With `one_code`, a row held against published rows of other
    code is `other code`."""
    folder = folder or published_folder()
    if not published_files(folder) or not published_rows(folder):
        raise UserError(_no_published_rows(folder))
    rows = _comparable(candidate)
    key = [k for k in (*EXPERIMENT_KEY, *SERVE_KEY) if k in candidate.columns]
    lines = [_line(r, key, threshold_pct, one_code, folder) for r in rows.to_dict("records")]
    lines += [_failed(r, key) for r in _failures(candidate, rows).to_dict("records")]
    columns = [*key, "baseline", "candidate", "runs_baseline", "runs_candidate", "verdict", "note"]
    figures = ["change_pct", "low_pct", "high_pct", "runs_to_settle"]
    table = pd.DataFrame(lines, columns=[*columns, *figures])
    known = {key_text(r.get("gpu_name")) for r in published_rows(folder)}
    measured = {key_text(g) for g in rows.get("gpu_name", pd.Series(dtype=object))}
    unpublished = sorted(machine({"gpu_name": g}) for g in measured - known)
    return Comparison(table, key, threshold_pct, tuple(unpublished))


def _no_published_rows(folder: Path) -> str:
    """Which folder held no published rows, and how it was chosen."""
    given = os.environ.get(FOLDER_VARIABLE)
    where = f"{FOLDER_VARIABLE}={given}" if given else f"the package's folder {folder}"
    state = "does not exist" if not folder.is_dir() else "holds no dlbench CSV with a valid row"
    return (
        f"CANDIDATE: nothing to compare with: {where} {state}; give BASELINE CANDIDATE, or "
        f"point {FOLDER_VARIABLE} at a folder of published rows"
    )


def _comparable(candidate: pd.DataFrame) -> pd.DataFrame:
    """The candidate's finished rows of the kinds a gate holds, the latest of each
    configuration."""
    kinds = [finished_rows(candidate, kind) for kind in COMPARED_KINDS]
    rows = pd.concat([k for k in kinds if not k.empty] or [candidate.iloc[0:0]], sort=False)
    if rows.empty:
        return rows
    records = rows.to_dict("records")
    rows = rows.assign(_config=[_configuration(r) for r in records])
    return latest(rows, ["_config"]).drop(columns="_config")


def _configuration(row: dict) -> str:
    kind = kind_of(row)
    return "|".join([kind, *(key_text(row.get(k), k) for k in published_key(kind)), machine(row)])


def _line(row: dict, key: list[str], threshold_pct: float, one_code: bool, folder: Path) -> dict:
    """One configuration's line: its figure against the published median, judged as the row's
    own published columns are; a row invalid for a reason of its own (not the comparison,
    not noise alone) is that."""
    figure, lower = figure_of(row)
    value = number_or_none(row.get(figure))
    line: dict[str, object] = {k: key_text(row.get(k), k) for k in key}
    note = figure.removeprefix("serve_") if kind_of(row) != "benchmark" else ""
    line.update(candidate=value, runs_candidate=1, note=note + (" (lower is better)" * lower))
    faults = own_faults(row) if _invalid(row) else set()
    own = faults - set(NOISE_REASONS)  # noise alone: the band around the published rows says
    invalid = invalid_verdict(";".join(sorted(own))) if own else ""
    published = published_columns(row, folder)
    if not published:  # an invalid row says so; only valid rows are ever published references
        why = f"the row is {invalid_verdict(';'.join(sorted(faults)))}" if faults else ""
        note = "; ".join(n for n in (line["note"], why) if n)
        return {**line, "baseline": math.nan, "verdict": NOT_PUBLISHED, "note": note}
    ratio = float(published["published_ratio"])
    median = value * ratio if lower else value / ratio  # type: ignore[operator]
    line.update(baseline=median, runs_baseline=published["published_rows"])
    if invalid:
        return {**line, "verdict": invalid, "change_pct": 100.0 * (ratio - 1.0)}
    matches = matching_rows(row, folder)
    codes = {code_label(r) for r in matches}
    if one_code and not any(same_code(code_label(row), c) for c in codes):
        return {**line, "verdict": OTHER_CODE, "change_pct": 100.0 * (ratio - 1.0)}
    base, head = (evidence_of(_as_runs(rows, figure)) for rows in (matches, [row]))
    change = change_columns(judge(base, head, threshold_pct, lower))
    note = settle_note(change["runs_to_settle"])
    return {**line, **change, "note": "; ".join(n for n in (line["note"], note) if n)}


def _as_runs(rows: list[dict], figure: str) -> pd.DataFrame:
    """Rows as analysis.compare reads a configuration's runs: each one's figure as
    `samples_per_s`."""
    frame = pd.DataFrame(rows)
    return frame.assign(samples_per_s=pd.to_numeric(frame[figure], errors="coerce"))


def _invalid(row: dict) -> bool:
    return key_text(row.get("verdict")) == INVALID


def _failures(candidate: pd.DataFrame, finished: pd.DataFrame) -> pd.DataFrame:
    """The candidate's failure rows (oom, error, timeout, interrupted) of configurations that
    have no finished row: a point that failed fails the gate, published or not. A sweep
    writes a failure row of the point's plan flags only (its own process, on the CPU), so a
    finished row answers for it where it agrees with every setting the failure row gives."""
    status = candidate.get("status", pd.Series("", index=candidate.index)).astype(str)
    failed = candidate[status.isin(FAILED_STATUSES)]
    done = finished.to_dict("records")
    keep = [not any(_answers(r, d) for d in done) for r in failed.to_dict("records")]
    return failed[keep] if len(failed) else failed


def _answers(failure: dict, finished: dict) -> bool:
    """Whether a finished row is of the configuration a failure row gives."""
    given = [k for k in published_key(kind_of(failure)) if key_text(failure.get(k), k)]
    return all(key_text(failure.get(k), k) == key_text(finished.get(k), k) for k in given)


def _failed(row: dict, key: list[str]) -> dict:
    error = key_text(row.get("error"))
    verdict = failed_verdict(row["status"], error)
    line = {k: key_text(row.get(k), k) for k in key}
    return {**line, "verdict": verdict, "runs_candidate": 1, "note": ""}
