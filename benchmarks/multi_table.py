"""The README's "Several GPUs" table from the multi-GPU reference CSVs (`benchmarks/reference.sh
multi`): per host, dlbench's DDP rows beside the bare torch DDP loop at the same GPU counts
(benchmarks/bare_ddp.py), scaling efficiency of both, `validate` on every GPU, the two-launcher
row and what each GPU attains (dlbench peak): the first host on the front page, every host in
docs/reference.md; and docs/sharding.md's table of sharded training (FSDP2) beside it. Used by
readme_table.py, which writes them."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from dlbench.analysis.load import load_rows, verdict_labels
from dlbench.analysis.machines import code_labels
from dlbench.results.published import PACKAGED_DIR

BARE_NAMES = {"resnet50": "resnet50", "vit_base_patch16_224": "vit"}  # timm's -> dlbench's


def part_csvs(part: str) -> list[Path]:
    """A part's CSVs of every host (not their per-rank side files), H100 hosts first."""
    paths = [p for p in PACKAGED_DIR.glob(f"multi-{part}-*.csv") if ".per_rank" not in p.name]
    return sorted(paths, key=lambda p: ("h100" not in p.name, p))


def hosts() -> list[str]:
    """The hosts measured, as the CSVs name them (`<torch>-<cuda>-<gpu>x<count>`), H100 first."""
    prefix = "multi-scaling-"
    return [p.name.removeprefix(prefix).removesuffix(".csv") for p in part_csvs("scaling")]


def _csv(part: str, host: str) -> Path:
    return PACKAGED_DIR / f"multi-{part}-{host}.csv"


def _scaling(host: str) -> pd.DataFrame:
    rows = load_rows([_csv("scaling", host)])
    runs = rows[(rows["run_kind"] == "benchmark") & (rows["status"] == "ok")]
    plain = runs[(runs["world_size"] > 1) | (runs["strategy"].astype(str) == "single")]
    plain = plain.drop_duplicates(["model", "world_size"], keep="last")
    return plain.assign(verdict_label=verdict_labels(plain), code=code_labels(plain))


def _bare(host: str) -> pd.DataFrame:
    path = _csv("bare-ddp", host)
    if not path.exists():
        return pd.DataFrame(columns=["model", "world_size", "images_per_s"])
    bare = pd.read_csv(path)
    bare["model"] = bare["model"].map(lambda m: BARE_NAMES.get(m, m))
    return bare.drop_duplicates(["model", "world_size"], keep="last")


def scaling_lines(host: str) -> list[str]:
    """One line per model and GPU count."""
    runs, bare = _scaling(host), _bare(host)
    one = runs[runs["world_size"] == 1].set_index("model")["samples_per_s"]
    bare_one = bare[bare["world_size"] == 1].set_index("model")["images_per_s"]
    lines = []
    for r in runs.sort_values(["model", "world_size"]).to_dict("records"):
        n, model = int(r["world_size"]), r["model"]
        match = bare[(bare["model"] == model) & (bare["world_size"] == n)]
        yard = float(match["images_per_s"].iloc[0]) if len(match) else None
        cells = [
            model, str(n), f"{r['samples_per_s']:,.1f}",
            f"{r['samples_per_s'] / (n * one[model]):.3f}" if model in one else "",
            f"{yard:,.1f}" if yard else "",
            f"{yard / (n * bare_one[model]):.3f}" if yard and model in bare_one else "",
            f"{r['samples_per_s'] / yard:.3f}" if yard else "",
            r["verdict_label"],
        ]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def other_lines(host: str) -> list[str]:
    """validate on every GPU, the two launchers as two nodes, and what the GPUs attain."""
    lines = []
    if _csv("validate", host).exists():
        rows = load_rows([_csv("validate", host)])
        rows = rows.assign(verdict_label=verdict_labels(rows))
        for n, at in rows.groupby("world_size", sort=False):
            parts = [f"{r['model']} {r['harness_ratio']:.4f} ({r['verdict_label']})"
                     for r in at.to_dict("records")]  # fmt: skip
            lines.append(f"- `validate --devices {n}`: " + ", ".join(parts))
    if _csv("nodes", host).exists():
        runs = _scaling(host)
        nodes = load_rows([_csv("nodes", host)])
        for r in nodes.assign(verdict_label=verdict_labels(nodes)).to_dict("records"):
            same = (runs["model"] == r["model"]) & (runs["world_size"] == r["world_size"])
            one = runs[same]["samples_per_s"]
            ratio = f", {r['samples_per_s'] / one.iloc[0]:.3f} of one launcher" if len(one) else ""
            lines.append(
                f"- two torchrun launchers as {r['num_nodes']} nodes: {r['model']} "
                f"{r['samples_per_s']:,.1f}/s{ratio} ({r['verdict_label']})"
            )
    if _csv("peak", host).exists():
        p = load_rows([_csv("peak", host)])
        p = p.assign(verdict_label=verdict_labels(p))

        def each(column: str, digits: int) -> str:
            return " / ".join(f"{v:,.{digits}f}" for v in p[column])

        lines.append(
            f"- `dlbench peak`, GPU by GPU: bf16 {each('attained_bf16_tflops', 1)} TFLOP/s, read "
            f"{each('attained_read_tb_s', 2)} TB/s, to peers {each('attained_p2p_gb_s', 0)} GB/s "
            f"({', '.join(dict.fromkeys(p['verdict_label']))})"
        )
    return lines


def multi_table(shown: list[str]) -> str:
    """The tables and lines of the hosts `shown`, and where the figures come from."""
    head = ["model", "GPUs", "dlbench /s", "efficiency", "bare DDP /s", "bare efficiency",
            "dlbench / bare", "verdict"]  # fmt: skip
    out: list[str] = []
    for host in shown:
        gpu = str(_scaling(host)["gpu_name"].iloc[0])
        count = host.rsplit("x", 1)[-1]
        out += [f"**{count} x {gpu}** (`{host}`)", ""]
        out += ["| " + " | ".join(head) + " |", "|---|--:|--:|--:|--:|--:|--:|---|"]
        out += scaling_lines(host)
        out += ["", *other_lines(host), ""]
    codes = sorted({c for h in shown for c in _scaling(h)["code"]})
    out.append(f"Measured by dlbench {' and '.join(codes)} (`src/dlbench/published/multi-*.csv`).")
    return "\n".join(out)


def harness_table() -> str:
    """Every host's `validate` rows, DDP and sharded, by GPU count: dlbench's loop against a
    bare one on the same inputs (docs/reference.md)."""
    rows = load_rows(part_csvs("validate") + part_csvs("fsdp"))
    rows = rows[rows["run_kind"] == "validate"]
    rows = rows.assign(verdict_label=verdict_labels(rows), code=code_labels(rows))
    head = ["GPUs", "GPU", "model", "strategy", "dlbench / bare", "repeats", "verdict", "code"]
    out = ["| " + " | ".join(head) + " |", "|--:|---|---|---|--:|---|---|---|"]
    order = rows.sort_values(["world_size", "gpu_name", "strategy", "model"])
    for r in order.to_dict("records"):
        cells = [str(int(r["world_size"])), str(r["gpu_name"]).removeprefix("NVIDIA "),
                 r["model"], str(r["strategy"]), f"{r['harness_ratio']:.4f}",
                 str(r["harness_ratios"]), r["verdict_label"], r["code"]]  # fmt: skip
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def every_host_block() -> str:
    """docs/reference.md's block: every host's table, then every host's harness check."""
    return (
        multi_table(hosts())
        + "\n\nThe harness check on several GPUs (`validate`), every host:\n\n"
        + harness_table()
    )


def front_page_table() -> str:
    """The README's block: the first host's table (an H100 host first), and a link to every
    host's (docs/reference.md) where there are more; the front page keeps to its size."""
    found = hosts()
    more = len(found) - 1
    link = f"\n\nOther hosts ({more}): [reference](docs/reference.md#every-host)." if more else ""
    return multi_table(found[:1]) + link


def fsdp_table() -> str:
    """docs/sharding.md's table: each host's sharded rows (llm_8b), the harness check of the
    sharded loop, and the code that measured them."""
    out: list[str] = []
    head = ["model", "tokens", "batch / GPU", "recompute", "precision", "tokens/s", "x bf16",
            "MFU", "MFU (bf16 peak)", "peak GiB / GPU", "verdict"]  # fmt: skip
    shape = ["seq_len", "batch_size", "activation_checkpointing"]
    for path in part_csvs("fsdp"):
        rows = load_rows([path])
        rows = rows.assign(verdict_label=verdict_labels(rows), code=code_labels(rows))
        runs = rows[rows["run_kind"] == "benchmark"]
        host = path.name.removeprefix("multi-fsdp-").removesuffix(".csv")
        out += [f"**{host.rsplit('x', 1)[-1]} x {rows['gpu_name'].iloc[0]}** (`{host}`)", ""]
        if len(runs):  # a host of 2 has the harness check only (llm_8b does not fit)
            out += ["| " + " | ".join(head) + " |", "|---|--:|--:|---|---|--:|--:|--:|--:|--:|---|"]
        bf16 = runs[(runs["precision"] == "bf16-mixed") & (runs["status"] == "ok")]
        base = bf16.set_index(shape)["tokens_per_s"].to_dict()
        for r in runs.to_dict("records"):
            ok = r["status"] == "ok"
            memory = r["peak_memory_allocated_mb"] if ok else r.get("oom_needed_mb")
            same = base.get(tuple(r[c] for c in shape))
            ratio = f"{r['tokens_per_s'] / same:.3f}" if ok and same else ""
            cells = [
                r["model"], f"{int(r['seq_len']):,}", str(int(r["batch_size"])),
                str(r["activation_checkpointing"]), str(r["precision"]),
                f"{r['tokens_per_s']:,.0f}" if ok else "", ratio,
                f"{r['mfu']:.3f}" if ok else "", f"{r['mfu_bf16']:.3f}" if ok else "",
                f"{memory / 1024:.1f}" if pd.notna(memory) else "",
                r["verdict_label"] if ok else f"{r['status']}",
            ]  # fmt: skip
            out.append("| " + " | ".join(cells) + " |")
        for r in rows[rows["run_kind"] == "validate"].to_dict("records"):
            out += ["", f"`validate` of the sharded loop against a bare FSDP2 loop on "
                    f"{int(r['world_size'])} GPUs, {r['model']} at {int(r['seq_len']):,} tokens, "
                    f"batch {int(r['batch_size'])} a GPU: {r['harness_ratio']:.4f} (repeats "
                    f"{r['harness_ratios']}; {r['verdict_label']})"]  # fmt: skip
        out += ["", f"Measured by dlbench {' and '.join(sorted(set(rows['code'])))}.", ""]
    return "\n".join(out).rstrip()
