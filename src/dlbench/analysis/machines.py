"""How machines compare: speed-ups of each machine over a baseline machine, workload by workload,
with the code that measured each side and the spread between repeated rows; their summary per
workload family (the report's answer); and configurations whose figure moved between two
versions of the code on one GPU model (the code, not the GPU, moved them)."""

from __future__ import annotations

import math

import pandas as pd

from dlbench.analysis.load import flag_column
from dlbench.results.pairing import RUN_KEY, code_label, key_text, same_code

# Differences between rows of one configuration that repeats cannot resolve (clocks, heat,
# machines of one kind): a move by the code must be larger than this and the rows' own spread.
CODE_MOVE_FLOOR_PCT = 2.0
FAMILIES = (
    "CNN training",
    "CNN inference",
    "transformers",
    "LLM training",
    "LLM decode",
    "batch-1 latency",
)
# Where a row has no attention_backend (an older row): models known to run attention.
_ATTENTION_MODELS = ("vit", "swin", "deit", "bert")


def code_labels(rows: pd.DataFrame) -> pd.Series:
    """The code that measured each row (results.pairing.code_label)."""
    records = rows.reindex(columns=["dlbench", "dlbench_commit", "dlbench_dirty"])
    return pd.Series(
        [code_label(r) for r in records.to_dict("records")], index=rows.index, dtype=object
    )


def pairs_of_one_code(a: pd.Series, b: pd.Series) -> pd.Series:
    """Pair by pair, whether two sides' code labels name one known commit
    (results.pairing.same_code)."""
    return pd.Series([same_code(x, y) for x, y in zip(a, b)], index=a.index, dtype=bool)


def workload_family(row: pd.Series) -> str:
    """Which of FAMILIES a row's workload belongs to."""
    if row.get("family") == "llm":  # generation is decode at any batch
        return "LLM training" if row.get("mode") == "train" else "LLM decode"
    if row.get("mode") == "infer" and str(row.get("batch_size")) in ("1", "1.0"):
        return "batch-1 latency"
    attention = row.get("attention_backend")
    has_attention = isinstance(attention, str) and attention != ""
    if has_attention or row.get("family") == "text" or row["model"] in _ATTENTION_MODELS:
        return "transformers"
    return "CNN training" if row.get("mode") == "train" else "CNN inference"


def keyed(runs: pd.DataFrame, key: list[str]) -> pd.DataFrame:
    """The key columns as text that compares equal across files (64 and 64.0, True and
    "True"), so rows from two CSVs of one configuration group together."""
    return runs.assign(**{k: runs[k].map(lambda v, k=k: key_text(v, k)) for k in key})


def _spread_pct(values: pd.Series) -> float:
    """(largest - smallest) / median of repeated rows, in %; NaN for a single row."""
    if len(values) < 2:
        return math.nan
    return 100.0 * (values.max() - values.min()) / values.median()


def machine_pairs(runs: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """One line per workload and machine other than `baseline`: the median samples/s of each
    side over its repeated rows, their spreads, both sides' code, the speed-up, its uncertainty
    (the two spreads combined; NaN without repeats) and whether the speed-up lies inside it.
    `runs`: valid benchmark rows with `machine` and `code` columns."""
    key = [c for c in (*RUN_KEY, "world_size") if c in runs]
    runs = keyed(runs, key).assign(
        bound=flag_column(runs, "host_bound"), family=runs.apply(workload_family, axis=1)
    )
    grouped = runs.groupby([*key, "machine"], dropna=False)
    sides = grouped.agg(
        samples_per_s=("samples_per_s", "median"),
        spread_pct=("samples_per_s", _spread_pct),
        rows=("samples_per_s", "size"),
        code=("code", lambda c: ", ".join(sorted(set(c)))),
        bound=("bound", "any"),
        family=("family", "first"),
    ).reset_index()
    base = sides[sides["machine"] == baseline].drop(columns=["machine", "family"])
    pairs = sides[sides["machine"] != baseline].merge(base, on=key, suffixes=("", "_baseline"))
    pairs["speedup"] = pairs["samples_per_s"] / pairs["samples_per_s_baseline"]
    spreads = pairs[["spread_pct", "spread_pct_baseline"]]
    pairs["noise_pct"] = spreads.pow(2).sum(axis=1, min_count=1).pow(0.5)
    pairs["within_noise"] = 100.0 * (pairs["speedup"] - 1).abs() <= pairs["noise_pct"]
    # one known commit on both sides; rows that name no commit may come from any code
    pairs["same_code"] = pairs_of_one_code(pairs["code"], pairs["code_baseline"])
    pairs["workload"] = [workload_name(r) for _, r in pairs.iterrows()]
    return pairs.reset_index(drop=True)


def workload_name(row: pd.Series) -> str:
    """The workload as one label: model, mode, precision, batch, image size and data."""
    size = ""
    if row.get("width") not in (None, "") and not pd.isna(row.get("width")):
        size = f" {float(row['width']):.0f}x{float(row['height']):.0f}"
    data = str(row.get("data") or "synthetic").split(":")[0]
    fed = "" if data in ("synthetic", "nan", "") else f" ({data}, {row.get('data_decode')} decode)"
    batch = key_text(row.get("batch_size"), "batch_size")  # a count: 256, not 256.0
    return f"{row['model']} {row['mode']} {row['precision']} bs{batch}{size}{fed}"


def noise_text(pair: pd.Series) -> str:
    """A pair's spread as shown beside its speed-up, and whether the speed-up lies inside."""
    if pd.isna(pair["noise_pct"]):
        return ""
    inside = " (within noise)" if pair["within_noise"] else ""
    return f"±{pair['noise_pct']:.1f} %{inside}"


CODE_DIFFERS = (
    "\nWhere code reads 'differs', every pair of that machine was measured by different code "
    "on the two machines (a run set beside another GPU's published rows): its speed-ups hold "
    "the code's changes too; the pairs below name both versions."
)


def family_summary(pairs: pd.DataFrame, baseline: str) -> tuple[pd.DataFrame, list[str]]:
    """Per machine and workload family: how many workloads, the median speed-up over
    `baseline` and its range, from pairs not host-bound and measured by the same code on both
    sides; a machine whose every pair was measured by other code is compared on those, its
    `code` column saying that the code differs (a fresh run set beside published rows of
    another GPU). And a line per kind of pair left out, with how many."""
    unbound = ~pairs["bound"] & ~pairs["bound_baseline"]
    same = pairs["same_code"] & unbound
    only_other = ~pairs["machine"].isin(set(pairs.loc[same, "machine"]))
    used = same | (only_other & unbound)
    lines = []
    for (machine, family), group in pairs[used].groupby(["machine", "family"]):
        within, known = int(group["within_noise"].sum()), int(group["noise_pct"].notna().sum())
        lines.append(
            {
                "machine": machine,
                "family": family,
                "workloads": len(group),
                f"median speed-up vs {baseline}": group["speedup"].median(),
                "range": f"{group['speedup'].min():.2f}-{group['speedup'].max():.2f}",
                "within noise": f"{within} of {known}" if known else "",
                "code": "same" if bool(group["same_code"].all()) else "differs",
            }
        )
    table = pd.DataFrame(lines)
    if not table.empty:
        order = {f: i for i, f in enumerate(FAMILIES)}
        table = table.sort_values(
            ["machine", "family"],
            key=lambda c: c.map(order).fillna(len(order)) if c.name == "family" else c,
        )
    left_out = []
    other_code = int((~pairs["same_code"] & ~used & unbound).sum())
    if other_code:
        left_out.append(
            f"{other_code} pair(s) measured by different code on the two machines, or by code "
            "that names no commit, where the machine has pairs of one code"
        )
    bound = int((~unbound).sum())
    if bound:
        left_out.append(f"{bound} pair(s) host-bound on either machine (they measure the host)")
    return table.reset_index(drop=True), left_out


def code_moves(runs: pd.DataFrame) -> pd.DataFrame:
    """Configurations on one GPU model measured by two or more versions of the code whose
    median figures differ by more than their rows' spread and CODE_MOVE_FLOOR_PCT: one line per
    version, so the rows are read together, not as a difference between GPUs."""
    key = [c for c in (*RUN_KEY, "world_size", "machine") if c in runs]
    runs = keyed(runs, key)
    lines = []
    for _, group in runs.groupby(key, dropna=False):
        if group["code"].nunique() < 2:
            continue
        by_code = group.groupby("code")["samples_per_s"]
        medians, spreads = by_code.median(), by_code.agg(_spread_pct).fillna(0.0)
        moved = 100.0 * (medians.max() / medians.min() - 1)
        if moved <= max(CODE_MOVE_FLOOR_PCT, spreads.max()):
            continue
        first = group.iloc[0]
        for code, median in medians.items():
            lines.append(
                {
                    "workload": workload_name(first),
                    "machine": first["machine"],
                    "code": code,
                    "rows": int(by_code.size()[code]),
                    "samples_per_s": median,
                    "moved %": moved,
                }
            )
    return pd.DataFrame(lines)


def speedup_matrix(pairs: pd.DataFrame) -> pd.DataFrame:
    """Workload x machine: the speed-up over the baseline, same-code pairs only."""
    same = pairs[pairs["same_code"]]
    if same.empty:
        return pd.DataFrame()
    matrix = same.pivot_table(index="workload", columns="machine", values="speedup")
    return matrix.rename_axis(index=None, columns=None)
