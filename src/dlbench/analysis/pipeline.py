"""The input pipeline beside the model: loader-alone throughput per worker count (`dlbench
data` rows), training from the same data at each count, and the model on synthetic data at the
same batch. The smaller of loader and model is what training can get; the loader saturates the
model at the first worker count whose rate reaches the model's."""

from __future__ import annotations

import pandas as pd

from dlbench.analysis.load import finished_rows, split_invalid, text_column, verdict_labels
from dlbench.results.pairing import key_text

COLUMNS = ["data", "model", "batch_size", "decode", "workers", "loader", "training", "wait %"]
COLUMNS += ["training verdict"]


def _data(runs: pd.DataFrame) -> pd.Series:
    """Each row's --data (results.upgrade fills it for rows from before the column)."""
    return text_column(runs, "data")


def _model_rate(runs: pd.DataFrame, model: str, batch: int, gpus: set[str]) -> float | None:
    """Best synthetic-data throughput of the model at this batch (any precision) on one device:
    of the GPU the data-fed runs used, when they name one (a loader feeds one device, so a
    DDP row or another GPU's row is not the rate it has to keep up with)."""
    one_device = runs.get("world_size", pd.Series(1, index=runs.index)).fillna(1) == 1
    same = runs[
        (runs["model"] == model)
        & (runs["batch_size"] == batch)
        & (_data(runs) == "synthetic")
        & one_device
    ]
    if gpus and "gpu_name" in same:
        same = same[same["gpu_name"].isin(gpus)]
    same = same[same["mode"] == "train"] if (same["mode"] == "train").any() else same
    return None if same.empty else float(same["samples_per_s"].max())


def pipeline_table(rows: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """One line per data set, model, batch, decoder and worker count. Training from data is
    shown whatever its verdict (an input-bound row is what this table is for), with the
    verdict beside it; the model's synthetic rate comes from valid rows only."""
    loader = finished_rows(rows, "loader")
    fed = runs[_data(runs) != "synthetic"]
    fed = fed.assign(_verdict=verdict_labels(fed))
    needed = ["data", "model", "batch_size", "data_decode", "data_workers", "samples_per_s"]
    needed += ["data_wait_pct", "_verdict"]
    parts = [
        frame.reindex(columns=needed).assign(_side=side)
        for side, frame in (("loader", loader), ("training", fed))
        if not frame.empty
    ]
    if not parts:
        return pd.DataFrame(columns=COLUMNS)
    both = pd.concat(parts, ignore_index=True)
    both = both.assign(
        decode=text_column(both, "data_decode", empty="cpu"), workers=both["data_workers"]
    )
    lines = []
    keys = ["data", "model", "batch_size", "decode", "workers"]
    for key, group in both.groupby(keys, dropna=False):
        best = group.groupby("_side")["samples_per_s"].max()
        training = group[group["_side"] == "training"]
        fastest = None if training.empty else training.loc[training["samples_per_s"].idxmax()]
        lines.append(
            {
                **dict(zip(keys, key)),
                "loader": best.get("loader"),
                "training": best.get("training"),
                "wait %": None if fastest is None else float(fastest["data_wait_pct"]),
                "training verdict": None if fastest is None else fastest["_verdict"],
            }
        )
    table = pd.DataFrame(lines)
    table["workers"] = table["workers"].astype("Int64")
    gpus = set(fed["gpu_name"].dropna().astype(str)) - {""} if "gpu_name" in fed else set()
    valid, _invalid = split_invalid(runs)
    table["model (synthetic)"] = [
        _model_rate(valid, m, b, gpus) for m, b in zip(table["model"], table["batch_size"])
    ]
    table["training can get"] = table[["loader", "model (synthetic)"]].min(axis=1, skipna=False)
    return table.sort_values(["data", "model", "batch_size", "decode", "workers"]).reset_index(
        drop=True
    )


def saturation_notes(table: pd.DataFrame) -> str:
    """Where the loader first keeps up with the model, per data set, model and decoder."""
    notes = []
    for (data, model, batch, decode), group in table.groupby(
        ["data", "model", "batch_size", "decode"], dropna=False
    ):
        target = group["model (synthetic)"].dropna()
        measured = group.dropna(subset=["loader"])
        if target.empty or measured.empty:
            continue
        enough = measured[measured["loader"] >= target.iloc[0]]
        where = (
            f"keeps up from {int(enough['workers'].min())} workers"
            if not enough.empty
            else f"stays below the model up to {int(measured['workers'].max())} workers"
        )
        short = group[group["training"] < 0.95 * group["training can get"]]
        shortfall = (
            f" Training fed by it fell more than 5 % short of that at "
            f"{', '.join(str(int(w)) for w in short['workers'])} workers: the loader's workers and "
            "the training loop share the host's CPUs."
            if not short.empty
            else ""
        )
        notes.append(
            f"{data} ({decode} decode) for {model} bs{key_text(batch)}: the loader {where} "
            f"(model on synthetic data: {target.iloc[0]:,.0f}/s).{shortfall}"
        )
    return "\n".join(notes)
