"""The README's FP8 table from the `fp8` part of the reference (`benchmarks/reference.sh fp8`):
each point of the fp8 plan in bf16 and in fp8 on one GPU (an fp8 row a recipe: "head fp8" where
the output head ran in float8 too), their ratio, the share of the FLOPs
that ran in FP8, and MFU against the bf16 peak for both (torchtitan's MFU of FP8 runs), so a
reader sees where FP8 pays and where it does not. Used by readme_table.py, which writes it."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from dlbench.analysis.load import load_rows, verdict_labels
from dlbench.analysis.machines import code_labels
from dlbench.results.published import PACKAGED_DIR
from dlbench.workloads import get_workload

POINT = ["model", "mode", "batch_size"]


def fp8_paths() -> list[Path]:
    """The fp8 part's CSVs, the H100's first."""
    return sorted(PACKAGED_DIR.glob("fp8-*.csv"), key=lambda p: "h100" not in p.name)


def _rate(row: dict) -> float:
    """Tokens a second for LLMs (what their users compare), samples otherwise."""
    for column in ("decode_tokens_per_s", "tokens_per_s"):
        if row["model"].startswith("llm") and pd.notna(row.get(column)):
            return float(row[column])
    return float(row["samples_per_s"])


def _unit(row: dict) -> str:
    if row["model"].startswith("llm"):
        return "decode token" if row["mode"] == "infer" else "token"
    return get_workload(row["model"]).sample_unit


def fp8_table(path: Path) -> str:
    """One line per point: bf16 and fp8 rates, their ratio, FP8's share of the FLOPs, MFU
    against the bf16 peak, the verdicts; and the line naming the code and the file."""
    rows = load_rows([path])
    rows = rows[(rows["status"] == "ok") & (rows["run_kind"] == "benchmark")]
    rows = rows.assign(verdict_label=verdict_labels(rows), code=code_labels(rows))
    # an fp8 row for each recipe (the output head in float8 too is a row of its own)
    fp8 = rows[rows["precision"] == "fp8"].drop_duplicates([*POINT, "fp8_recipe"], keep="last")
    bf16 = rows[rows["precision"] != "fp8"].drop_duplicates(POINT, keep="last")
    pairs = bf16.merge(fp8, on=POINT, suffixes=("_bf16", "_fp8"))
    gpu = str(rows["gpu_name"].iloc[0]).removeprefix("NVIDIA ")
    head = ["model", "mode", "batch", "unit", "bf16 /s", "fp8 /s", "fp8 / bf16", "FP8 FLOPs",
            "MFU bf16 (bf16 / fp8)", "verdict"]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|---|---|--:|---|--:|--:|--:|--:|--:|---|"]
    for r in pairs.to_dict("records"):
        one = {k.removesuffix("_bf16"): v for k, v in r.items() if not k.endswith("_fp8")}
        two = {k.removesuffix("_fp8"): v for k, v in r.items() if not k.endswith("_bf16")}
        share = two.get("fp8_flops_share")
        mfu = [m.get("mfu_bf16") for m in (one, two)]
        head = " (head fp8)" if str(two.get("fp8_recipe", "")).endswith("_with_head") else ""
        cells = [
            r["model"] + head, r["mode"], f"{int(r['batch_size']):,}", _unit(one),
            f"{_rate(one):,.1f}", f"{_rate(two):,.1f}", f"{_rate(two) / _rate(one):.2f}",
            f"{share:.0%}" if pd.notna(share) else "",
            " / ".join(f"{m:.3f}" for m in mfu) if all(pd.notna(m) for m in mfu) else "",
            " / ".join(dict.fromkeys([one["verdict_label"], two["verdict_label"]])),
        ]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    codes = " and ".join(sorted(set(rows["code"])))
    lines += ["", f"One {gpu}, measured by dlbench {codes} (`{path.name}`)."]
    return "\n".join(lines)
