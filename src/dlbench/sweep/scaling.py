"""`dlbench scaling`: the same run at 1, 2, 4 ... devices, each point isolated, then efficiency."""

from __future__ import annotations

import pandas as pd

from dlbench.analysis.load import load_rows
from dlbench.analysis.scaling import scaling_table
from dlbench.engine.devices import plan_devices
from dlbench.errors import UserError
from dlbench.results.row import identity
from dlbench.results.store import CsvStore
from dlbench.sweep.plan import SweepPlan


def device_counts(spec: str, accelerator: str) -> list[int]:
    """`1,2,4` as given (checked against what is visible), or `all`: 1, 2, 4 ... and the total."""
    if spec == "all":
        available = plan_devices(accelerator, "all").count
        counts = [1]
        while counts[-1] * 2 <= available:
            counts.append(counts[-1] * 2)
        return sorted({*counts, available})
    try:
        counts = sorted({int(part) for part in spec.split(",")})
    except ValueError:
        raise UserError(f"--devices: invalid value {spec!r}; e.g. 1,2,4 or all") from None
    if counts[0] < 1:
        raise UserError(f"--devices: invalid value {spec!r}; counts must be positive")
    plan_devices(accelerator, str(counts[-1]))  # a UserError when too many
    if counts[0] != 1:
        counts.insert(0, 1)  # efficiency needs the one-device run
    return counts


def scaling_plan(
    flags: dict[str, object], mode: str, counts: list[int], timeout_s: float
) -> SweepPlan:
    """A sweep over the device counts, plus one DDP-wrapped run on one device (the baseline
    that separates DDP's own cost from communication); `flags` are the other CLI flags."""
    fixed = {k: v for k, v in flags.items() if k not in ("model", "batch_size", "precision")}
    block = {
        "models": [flags["model"]],
        "modes": [mode],
        "batch_sizes": [flags["batch_size"]],
        "precisions": [flags["precision"]],
        "devices": counts,
    }
    wrapped = {**block, "devices": [1], "fixed": {"strategy": "ddp"}}
    return SweepPlan(name="scaling", runs=[block, wrapped], fixed=fixed, timeout_s=timeout_s)


def record_scaling(store: CsvStore, model: str, mode: str) -> pd.DataFrame:
    """Compute efficiency from the stored rows and append one `scaling` row per world size > 1
    that has none yet (so a rerun adds only what is new); returns this model's table."""
    rows = load_rows([store.path], "--output")
    table = scaling_table(rows)
    if table.empty:
        return table
    table = table[(table["model"] == model) & (table["mode"] == mode)]
    recorded = set()
    if "benchmark_run_id" in rows:
        recorded = set(rows["benchmark_run_id"].dropna().astype(str))
    new = []
    for line in table[table["world_size"] > 1].to_dict("records"):
        if str(line["run_id"]) in recorded:
            continue
        run_id = str(line.pop("run_id"))
        columns = {k: v for k, v in line.items() if not pd.isna(v)}
        new.append(
            {**identity(None, "ok"), "run_kind": "scaling", **columns, "benchmark_run_id": run_id}
        )
    if new:
        store.append_many(new)
    return table
