"""Ranks, not only ratios: each valid row of the CSVs given placed among every row of its GPU model
and configuration the report knows (the published rows and the CSVs given) that the same code
measured, as a percentile and a share of their median; and the GPUs and hosts that sit low in
more than one configuration: the fleet check across machines and time. Rows of other code are
never ranked together (`compare --same-code`'s rule): a move by the code is no GPU's."""

from __future__ import annotations

import pandas as pd

from dlbench.analysis.load import load_published, with_releases
from dlbench.analysis.machines import code_labels, keyed, workload_name
from dlbench.analysis.report_rows import Part, ReportRows, Section, named_line
from dlbench.results.pairing import GATE_THRESHOLD_PCT, key_text
from dlbench.results.published import PUBLISHED_KEY

LOW_SHARE = 1 - GATE_THRESHOLD_PCT / 100  # under its configuration's median by more than the gate
SEVERAL = 2  # configurations a GPU or host must sit low in to be named


def rank_table(runs: pd.DataFrame, published: pd.DataFrame) -> pd.DataFrame:
    """One line per valid row of the CSVs given whose configuration (and code) has other rows:
    its percentile among them (100: the fastest), its share of their median, whether it sits low."""
    given = with_releases(runs).assign(_given=True)
    known = pd.concat([given, published.assign(_given=False)], ignore_index=True, sort=False)
    known = known.drop_duplicates(subset=["run_id"], keep="first").copy()  # a published CSV given
    known["code"] = code_labels(known)
    key = [k for k in PUBLISHED_KEY if k in known.columns] + ["code"]
    grouped = keyed(known, key).groupby(key, dropna=False)
    lines = []
    for _, group in grouped:
        if len(group) < 2 or not group["_given"].any():
            continue
        rates = group["samples_per_s"].astype(float)
        median = rates.median()
        for index, row in group[group["_given"]].iterrows():
            below = int((rates.drop(index) < rates[index]).sum())
            lines.append(
                {
                    "workload": workload_name(row),
                    "machine": row.get("machine", ""),
                    "host": key_text(row.get("hostname"), "hostname"),
                    "GPU": key_text(row.get("gpu_uuid"), "gpu_uuid")[:8],
                    "code": row["code"],
                    "rows": len(group),
                    "percentile": 100.0 * below / (len(group) - 1),
                    "of median": rates[index] / median,
                }
            )
    table = pd.DataFrame(lines)
    if not table.empty:
        table["low"] = table["of median"] < LOW_SHARE
    return table


def low_in_several(table: pd.DataFrame) -> list[str]:
    """`host H GPU G (machine): low in N of M configurations (LOW-HIGH of their medians)` for
    each GPU (or host, where no GPU is named) low in more than one configuration."""
    if table.empty:
        return []
    named = []
    for (host, gpu, machine), rows in table.groupby(["host", "GPU", "machine"], dropna=False):
        low = rows[rows["low"]]
        if len(low) < SEVERAL:
            continue
        where = f"host {host or '?'}" + (f" GPU {gpu}" if gpu else "")
        span = f"{low['of median'].min():.2f}-{low['of median'].max():.2f}"
        named.append(
            f"{where} ({machine}): low in {len(low)} of {len(rows)} configurations "
            f"({span} of their medians)"
        )
    return named


def ranks_among_known_rows(r: ReportRows) -> Part | None:
    """The report's section: each row's rank among the rows of its configuration, and the GPUs
    and hosts named for sitting low in several."""
    table = rank_table(r.runs, load_published())
    if table.empty:
        return None
    verdict = named_line(low_in_several(table), "No GPU or host is named.")
    return (
        Section(
            "Ranks among every row of the same GPU and configuration",
            "Each valid row of these CSVs among every row of its GPU model and configuration "
            "measured by the same code (the published rows and these CSVs): its percentile "
            "(100: the fastest) and its share of their median; a configuration with one row is "
            f"left out. Low: under {LOW_SHARE:.2f} of the median. A GPU or host low in "
            f"{SEVERAL} or more configurations is named.\n{verdict}",
            table,
        ),
        None,
    )
