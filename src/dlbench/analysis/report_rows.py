"""What every report section reads: the rows prepared once (machines and code labelled, invalid
rows set apart, the baseline picked and paired against), the columns the tables show, and the
notes on software that differs between the compared machines."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from dlbench.analysis.compare import ENVIRONMENT
from dlbench.analysis.load import finished_rows, machine_labels, split_invalid
from dlbench.analysis.machines import code_labels, machine_pairs
from dlbench.errors import UserError
from dlbench.results.pairing import key_text

SUMMARY_COLUMNS = {
    "model": "model",
    "mode": "mode",
    "precision": "precision",
    "batch_size": "batch",
    "data": "data",
    "data_workers": "workers",
    "purpose": "purpose",
    "world_size": "devices",
    "machine": "machine",
    "samples_per_s": "samples/s",
    "step_time_median_ms": "p50 ms",
    "step_time_p99_ms": "p99 ms",
    "step_time_robust_spread_pct": "step spread % (robust)",
    "energy_per_sample_j": "J/sample",
    "mfu": "MFU",
    "mfu_attained": "MFU of attained",
    "gpu_busy_pct": "GPU busy %",
    "host_bound": "host-bound",
    "verdict": "verdict",
}
# What tells a scaling line apart and what it found: the rest of its key is the same for all
SCALING_SHOWN = {
    "model": "model",
    "mode": "mode",
    "machine": "machine",
    "strategy": "strategy",
    "world_size": "GPUs",
    "samples_per_s": "samples/s",
    "scaling_efficiency": "efficiency",
    "scaling_efficiency_ddp": "against DDP on 1",
    "verdict_label": "verdict",
}
INVALID_COLUMNS = ["model", "mode", "batch_size", "machine", "verdict_reasons", "source"]
PAIR_COLUMNS = {
    "workload": "workload",
    "machine": "machine",
    "samples_per_s": "samples/s",
    "samples_per_s_baseline": "baseline samples/s",
    "speedup": "speed-up",
    "noise": "spread",
    "code": "code",
}
HOST_BOUND_NOTE = (
    "Marked host-bound: the GPU idled more than 10 % of each step, or the host waited for the "
    "input pipeline (--data) more than 10 % of the window, so these ratios measure the host's "
    "kernel launches or its loader, not the GPUs; compare GPUs on rows that are not marked."
)


@dataclass
class Section:
    """A titled part of the report: text, a table, and at most one figure."""

    title: str
    text: str = ""
    table: pd.DataFrame | None = None
    figure: str | None = None  # PNG file name
    keep: bool = False  # shown for its text alone (what was left out, and why)

    @property
    def shown(self) -> bool:
        """Whether it has something to show: a table or a figure (its text only explains them),
        or text that answers on its own."""
        return self.keep or self.table is not None or self.figure is not None


Part = tuple[Section, Figure | None]


def named_line(named: list[str], nobody: str) -> str:
    """A check's last line: what it names, or `nobody` where it names none."""
    return "Named: " + "; ".join(named) + "." if named else nobody


@dataclass
class ReportRows:
    """The rows every section reads: all of them (`rows`, failures included), the finished
    benchmark rows (`every`), the valid ones ratios are made of (`runs`), the invalid ones,
    the baseline machine and the pairs against it, and the report's options."""

    rows: pd.DataFrame
    every: pd.DataFrame
    runs: pd.DataFrame
    invalid: pd.DataFrame
    baseline: str
    pairs: pd.DataFrame
    prices: dict[str, float]
    max_slowdown: float
    timelines: list[Path]
    same_code: bool

    @classmethod
    def prepare(
        cls,
        rows: pd.DataFrame,
        baseline_wanted: str | None,
        max_slowdown: float,
        timelines: list[Path],
        prices: dict[str, float],
        same_code: bool,
    ) -> ReportRows:
        """Machines and code labelled, invalid rows set apart, the baseline picked."""
        every = finished_rows(rows)
        if every.empty:
            raise UserError("CSV: no finished benchmark rows (status ok) to report on")
        every["machine"] = machine_labels(every)
        every["code"] = code_labels(every)
        runs, invalid = split_invalid(every)  # ratios and figures: valid rows only
        baseline = pick_baseline(every, baseline_wanted)
        return cls(
            rows.assign(machine=machine_labels(rows)),
            every,
            runs,
            invalid,
            baseline,
            machine_pairs(runs, baseline),
            prices,
            max_slowdown,
            timelines,
            same_code,
        )

    @property
    def shown_pairs(self) -> pd.DataFrame:
        """The pairs the tables show: with --same-code, only those of one code."""
        return self.pairs if not self.same_code else self.pairs[self.pairs["same_code"]]


def pick_baseline(runs: pd.DataFrame, wanted: str | None) -> str:
    """The machine to compare against: matched by GPU name, source file or run id."""
    machines = sorted(runs["machine"].unique())
    if not wanted:
        return machines[0]
    needle = wanted.lower()
    for column in ("machine", "source", "run_id"):
        hits = runs[runs[column].astype(str).str.lower().str.contains(needle, regex=False)]
        if not hits.empty:
            return str(hits["machine"].iloc[0])
    raise UserError(
        f"--baseline: {wanted!r} matches no GPU, file or run; machines: {', '.join(machines)}"
    )


def environment_notes(runs: pd.DataFrame, baseline: str) -> str:
    """Where the compared machines' rows differ in software, so ratios are read with care."""
    notes = []
    base = runs[runs["machine"] == baseline]
    for machine, rows in runs[runs["machine"] != baseline].groupby("machine"):
        diffs = []
        for column in (c for c in ENVIRONMENT if c in runs and c != "gpu_name"):
            a = ", ".join(sorted({key_text(v, column) for v in base[column].dropna()}))
            b = ", ".join(sorted({key_text(v, column) for v in rows[column].dropna()}))
            if a != b:
                diffs.append(f"{column}: {a or '-'} vs {b or '-'}")
        if diffs:
            notes.append(f"{machine} vs {baseline} differ in " + "; ".join(diffs))
    return "\n".join(notes + shard_notes(runs))


def shard_notes(runs: pd.DataFrame) -> list[str]:
    """Rows measured by `sweep --shard` while other shards shared the host's CPUs and PCIe."""
    if "shard" not in runs:
        return []
    sharded = runs[runs["shard"].notna() & (runs["shard"].astype(str) != "")]
    return [
        f"{machine}: {len(rows)} row(s) measured while other shards ran on the same host "
        "(sweep --shard); not comparable with rows from a lone run"
        for machine, rows in sharded.groupby("machine")
    ]
