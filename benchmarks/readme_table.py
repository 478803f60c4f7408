"""The README's reference table from the default plan's reference CSVs (benchmarks/reference.sh),
one column of figures per GPU, so the front page's figures are the CSVs', never retyped; the
line under it names the code and the files (tests/test_readme.py checks both). Usage:
PYTHONPATH=src python3 benchmarks/readme_table.py [--write] [DEFAULT_CSV ...]
(default: every src/dlbench/published/default-*.csv, the first one's GPU the baseline; --write
replaces the README's generated block, as `benchmarks/reference.sh docs` does, its "Several
GPUs" block from the multi-GPU reference's CSVs, benchmarks/multi_table.py, and its FP8 block
from the fp8 part's, benchmarks/fp8_table.py)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pandas as pd

from dlbench.analysis.load import load_rows
from dlbench.analysis.machines import code_labels
from dlbench.results.advice import verdict_label
from dlbench.results.published import BELOW, PACKAGED_DIR, own_faults
from dlbench.workloads import get_workload

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCK = re.compile(r"(<!-- generated: [^>]*-->\n)(.*?)(\n<!-- end generated -->)", re.S)
# The "Several GPUs" block, from the multi-GPU reference (benchmarks/multi_table.py).
MULTI_BLOCK = re.compile(
    r"(<!-- generated multi: [^>]*-->\n)(.*?)(\n<!-- end generated multi -->)", re.S
)
# The FP8 block, from the fp8 part of the reference (benchmarks/fp8_table.py).
FP8_BLOCK = re.compile(r"(<!-- generated fp8: [^>]*-->\n)(.*?)(\n<!-- end generated fp8 -->)", re.S)
# docs/sharding.md's table, from the sharded part of the multi-GPU reference.
SHARDING = README.parent / "docs" / "sharding.md"
# docs/reference.md's tables of every several-GPU host, in a block of the same markers.
REFERENCE_DOC = README.parent / "docs" / "reference.md"
FSDP_BLOCK = re.compile(
    r"(<!-- generated fsdp: [^>]*-->\n)(.*?)(\n<!-- end generated fsdp -->)", re.S
)
POINT = ["model", "mode", "batch_size", "precision"]


def _rows(path: Path) -> pd.DataFrame:
    """A part's finished rows, one a point, in the plan's order: the plan's own row (a sweep's
    recheck of a point, `recheck_of`, is a second look that the part keeps beside it)."""
    rows = load_rows([path])
    if "recheck_of" in rows:
        rows = rows[rows["recheck_of"].isna()]
    rows = rows[rows["status"] == "ok"].drop_duplicates(POINT, keep="last")
    return rows.assign(verdict_label=own_verdict_labels(rows), code=code_labels(rows))


def own_verdict_labels(rows: pd.DataFrame) -> pd.Series:
    """A published row's verdict by its own window (results.published.own_faults): a row held
    below only the part it replaced says so, and stays valid (it is the reference now)."""
    labels = []
    for row in rows.to_dict("records"):
        faults = sorted(own_faults(row))
        below = BELOW in str(row.get("verdict_reasons") or "")
        label = verdict_label({"verdict": "valid", "verdict_reasons": ";".join(faults)})
        labels.append(label + (" (below the part it replaced)" if below and not faults else ""))
    return pd.Series(labels, index=rows.index, dtype=object)


def table(paths: list[Path]) -> str:
    """The Markdown table and the line that says where its figures come from."""
    sides = [_rows(p) for p in paths]
    gpus = [str(s["gpu_name"].iloc[0]).removeprefix("NVIDIA ") for s in sides]
    base = sides[0]
    merged = base
    for i, side in enumerate(sides[1:], 1):
        merged = merged.merge(side[[*POINT, "samples_per_s", "verdict_label"]], on=POINT,
                              how="left", suffixes=("", f"_{i}"))  # fmt: skip
    head = ["model", "mode", "batch", "precision", "unit", *(f"{g} /s" for g in gpus)]
    head += [f"{g} / {gpus[0]}" for g in gpus[1:]]
    head += [f"p50 ms ({gpus[0]})", "MFU", "GPU busy %", "verdict"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(_align(h) for h in head) + "|"]
    for r in merged.to_dict("records"):
        figures = [r["samples_per_s"], *(r[f"samples_per_s_{i}"] for i in range(1, len(sides)))]
        verdicts = [r["verdict_label"], *(r[f"verdict_label_{i}"] for i in range(1, len(sides)))]
        latency = r["batch_size"] == 1 and pd.notna(r.get("latency_p50_ms"))
        cells = [
            r["model"], r["mode"], str(r["batch_size"]), r["precision"],
            get_workload(r["model"]).sample_unit,
            *(f"{f:,.1f}" for f in figures),
            *(f"{f / figures[0]:.2f}" for f in figures[1:]),
            f"{r['latency_p50_ms']:.3f}" if latency else "",
            f"{r['mfu']:.3f}" if pd.notna(r.get("mfu")) else "",
            f"{r['gpu_busy_pct']:.0f}",
            " / ".join(dict.fromkeys(verdicts)),
        ]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    codes = sorted({c for s in sides for c in s["code"]})
    files = ", ".join(f"`{p.name}`" for p in paths)
    lines += ["", f"Measured by dlbench {' and '.join(codes)} ({files})."]
    return "\n".join(lines)


def _align(header: str) -> str:
    return "--:" if header.endswith(("/s", "%", ")", "MFU")) or " / " in header else "---"


def default_paths() -> list[Path]:
    """The default plan's reference CSVs, the H100's first where there is one."""
    paths = sorted(PACKAGED_DIR.glob("default-*.csv"))
    return sorted(paths, key=lambda p: "h100" not in p.name)


def write_block(path: Path, block: re.Pattern, new: str) -> None:
    """`path` with its generated `block` replaced by `new`."""
    text = path.read_text()
    if not block.search(text):
        raise SystemExit(f"{path}: no block {block.pattern[:30]}")
    path.write_text(block.sub(lambda m: m.group(1) + new + m.group(3), text, count=1))


def write_readme(text: str, multi: str | None = None, fp8: str | None = None) -> None:
    """The README with its generated block replaced by `text`, its "Several GPUs" block by
    `multi` and its FP8 block by `fp8` where given."""
    readme = README.read_text()
    blocks = [(BLOCK, text), *([(MULTI_BLOCK, multi)] if multi is not None else [])]
    blocks += [(FP8_BLOCK, fp8)] if fp8 is not None else []
    for block, new in blocks:
        if not block.search(readme):
            raise SystemExit(f"{README}: no block {block.pattern[:30]}")
        readme = block.sub(lambda m, new=new: m.group(1) + new + m.group(3), readme, count=1)
    README.write_text(readme)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from fp8_table import fp8_paths, fp8_table
    from multi_table import every_host_block, front_page_table, fsdp_table, hosts

    args = sys.argv[1:]
    write = "--write" in args
    text = table([Path(p) for p in args if p != "--write"] or default_paths())
    multi = front_page_table() if hosts() else None
    fp8 = fp8_table(fp8_paths()[0]) if fp8_paths() else None
    if write:
        write_readme(text, multi, fp8)
    else:
        print(text, multi or "", fp8 or "", sep="\n\n")
    if write:  # docs/sharding.md's table of sharded training, every host's in the reference
        write_block(SHARDING, FSDP_BLOCK, fsdp_table())
        if hosts():  # every host's tables, and every host's harness check
            write_block(REFERENCE_DOC, MULTI_BLOCK, every_host_block())
