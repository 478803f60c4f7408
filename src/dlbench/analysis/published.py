"""`dlbench compare CANDIDATE`: one file held against the published rows of its GPUs
(results.published), with the same table, verdicts and exit codes as against a baseline file."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from dlbench.analysis.compare import NOT_PUBLISHED, Comparison, compare_runs
from dlbench.analysis.load import finished_rows, load_published, with_releases
from dlbench.errors import UserError
from dlbench.results.pairing import GATE_THRESHOLD_PCT, machine
from dlbench.results.published import PUBLISHED_KEY


def compare_with_published(
    candidate: pd.DataFrame,
    threshold_pct: float = GATE_THRESHOLD_PCT,
    same_code: bool = False,
    folder: Path | None = None,
) -> Comparison:
    """Every configuration of the candidate against the published rows of its GPU model and
    configuration (results.published: the same experiment, power limit, torch and CUDA at
    major.minor), as against a baseline file; published configurations the candidate did not
    run are no one's failure. A configuration nothing was published for is `not published`,
    and the GPUs with no published row at all are named."""
    published = load_published(folder)
    sides = [published, with_releases(candidate)]
    key = [k for k in PUBLISHED_KEY if k in sides[0].columns and k in sides[1].columns]
    if published.empty:
        raise UserError("CANDIDATE: no published rows to compare with (the folder holds none)")
    result = compare_runs(sides[0], sides[1], key, threshold_pct, same_code)
    table = result.table[result.table["verdict"] != "missing"].copy()
    table.loc[table["verdict"] == "new", "verdict"] = NOT_PUBLISHED
    known = set(published.get("gpu_name", pd.Series(dtype=object)).dropna().astype(str))
    measured = finished_rows(candidate).get("gpu_name", pd.Series(dtype=object))
    unpublished = sorted({machine({"gpu_name": g}) for g in measured.fillna("")} - known)
    return Comparison(table.reset_index(drop=True), key, threshold_pct, tuple(unpublished))
