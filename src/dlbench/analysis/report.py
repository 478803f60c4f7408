"""`dlbench report`: one self-contained HTML file (plots embedded), the PNGs, a Markdown summary."""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from dlbench.analysis import figures
from dlbench.analysis.compare import ENVIRONMENT, markdown_table
from dlbench.analysis.cost import cost_table
from dlbench.analysis.documents import write_pdf, write_pptx
from dlbench.analysis.latency import latency_table
from dlbench.analysis.load import (
    SHAPE_KEY,
    benchmark_rows,
    flag_column,
    load_rows,
    machine_labels,
    split_invalid,
)
from dlbench.analysis.pipeline import pipeline_table, saturation_notes
from dlbench.analysis.power import power_points, recommend_power
from dlbench.analysis.roofline import decode_table
from dlbench.analysis.scaling import scaling_table
from dlbench.analysis.timeline import load_timeline, throttle_summary
from dlbench.errors import UserError
from dlbench.results.store import writable_folder

SUMMARY_COLUMNS = {
    "model": "model",
    "mode": "mode",
    "precision": "precision",
    "batch_size": "batch",
    "data": "data",
    "data_workers": "workers",
    "purpose": "purpose",
    "world_size": "GPUs",
    "machine": "machine",
    "samples_per_s": "samples/s",
    "step_time_median_ms": "p50 ms",
    "step_time_p99_ms": "p99 ms",
    "step_time_stdev_pct": "spread %",
    "energy_per_sample_j": "J/sample",
    "mfu": "MFU",
    "gpu_busy_pct": "GPU busy %",
    "host_bound": "host-bound",
    "verdict": "verdict",
}
INVALID_COLUMNS = ["model", "mode", "batch_size", "machine", "verdict_reasons", "source"]
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


@dataclass
class Report:
    """What `build_report` wrote."""

    html: Path
    markdown: Path
    pngs: list[Path] = field(default_factory=list)
    documents: list[Path] = field(default_factory=list)  # report.pdf, report.pptx


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


def speedup_table(runs: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """Each machine's samples/s over the baseline's, on the same model, mode, precision, batch,
    input size and world size (best row of each)."""
    key = [c for c in (*SHAPE_KEY, "world_size") if c in runs]
    runs = runs.assign(bound=host_bound(runs))
    groups = runs.groupby([*key, "machine"], dropna=False)
    best = groups.agg(samples_per_s=("samples_per_s", "max"), bound=("bound", "any"))
    best = best.reset_index()
    base = best[best["machine"] == baseline].drop(columns="machine")
    merged = best.merge(base, on=key, suffixes=("", "_baseline"))
    merged["speedup"] = merged["samples_per_s"] / merged["samples_per_s_baseline"]
    merged["workload"] = [_workload(row) for _, row in merged.iterrows()]
    return merged[merged["machine"] != baseline].reset_index(drop=True)


def host_bound(rows: pd.DataFrame) -> pd.Series:
    """The rows' host_bound flag as booleans (absent or empty: False)."""
    return flag_column(rows, "host_bound")


def _workload(row: pd.Series) -> str:
    size = f" {row['width']:.0f}x{row['height']:.0f}" if not pd.isna(row.get("width")) else ""
    bound = " (host-bound)" if row.get("bound") or row.get("bound_baseline") else ""
    return f"{row['model']} {row['mode']} {row['precision']} bs{row['batch_size']}{size}{bound}"


def environment_notes(runs: pd.DataFrame, baseline: str) -> str:
    """Where the compared machines' rows differ in software, so ratios are read with care."""
    notes = []
    base = runs[runs["machine"] == baseline]
    for machine, rows in runs[runs["machine"] != baseline].groupby("machine"):
        diffs = []
        for column in (c for c in ENVIRONMENT if c in runs and c != "gpu_name"):
            a = ", ".join(sorted(base[column].dropna().astype(str).unique()))
            b = ", ".join(sorted(rows[column].dropna().astype(str).unique()))
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


def _sections(
    rows: pd.DataFrame,
    baseline_wanted: str | None,
    max_slowdown: float,
    timelines: list[Path],
    prices: dict[str, float],
):
    every = benchmark_rows(rows)
    if every.empty:
        raise UserError("CSV: no finished benchmark rows (status ok) to report on")
    every["machine"] = machine_labels(every)
    runs, invalid = split_invalid(every)  # ratios and figures: valid rows only
    rows = rows.assign(machine=machine_labels(rows))
    baseline = pick_baseline(every, baseline_wanted)
    summary = every[[c for c in SUMMARY_COLUMNS if c in every]].rename(columns=SUMMARY_COLUMNS)
    speed = speedup_table(runs, baseline)
    scale = scaling_table(rows)
    scale["machine"] = machine_labels(scale)
    points = power_points(rows)
    picks = recommend_power(rows, max_slowdown)
    failures = rows[rows["status"] != "ok"]
    yield (
        Section(
            "Runs", f"{len(every)} finished runs from {rows['source'].nunique()} file(s).", summary
        ),
        None,
    )
    if not invalid.empty:
        cols = [c for c in INVALID_COLUMNS if c in invalid]
        yield (
            Section(
                "Rows left out of every ratio",
                "Their verdict is invalid; verdict_reasons says why (dlbench.results.verdict).",
                invalid[cols],
            ),
            None,
        )
    if prices:
        costs = cost_table(runs, prices)
        yield (
            Section(
                "Cost per million samples",
                "At the prices given (--usd-per-hour GPU=PRICE): price / 3600 / samples per "
                "second x 1e6, tokens for LLM rows; cheapest first for each workload.",
                costs if not costs.empty else None,
            ),
            None,
        )
    yield (
        Section(
            "Speed-up against the baseline",
            f"Baseline: {baseline}. Same model, mode, precision, batch, input size and GPU count.\n"
            + (HOST_BOUND_NOTE + "\n" if host_bound(runs).any() else "")
            + environment_notes(runs, baseline),
            speed[["workload", "machine", "samples_per_s", "samples_per_s_baseline", "speedup"]]
            if not speed.empty
            else None,
        ),
        figures.speedups(speed, baseline),
    )
    latency = latency_table(runs, baseline)
    if not latency.empty:
        yield (
            Section(
                "Latency at batch 1",
                "One query at a time (inference, batch 1): latency percentiles over the window's "
                f"queries, and how much faster each machine answers than {baseline}. Rows "
                "replayed as CUDA graphs and not host-bound compare the GPUs; eager rows at "
                "batch 1 compare the hosts' kernel launches.",
                latency,
            ),
            None,
        )
    decode = decode_table(runs, baseline)
    if not decode.empty:
        yield (
            Section(
                "Generation against memory bandwidth",
                "Decode reads every weight and the KV cache once per step: its bound is memory "
                "bandwidth. Share of peak = achieved bytes/s over the GPU's peak; the ratio to "
                f"the baseline ({baseline}) sits beside the ratio of their peak bandwidths.",
                decode,
            ),
            None,
        )
    inputs = pipeline_table(rows, every)
    if not inputs.empty:
        yield (
            Section(
                "Input pipeline",
                "Loader alone (dlbench data) and training fed by it (--data), per worker count, "
                "beside the model on synthetic data at the same batch: training can get the "
                "smaller of loader and model. wait % = share of the window the host waited for "
                "the next batch. Training rows are shown whatever their verdict (an input-bound "
                "row is what this table is for), with it beside them.\n" + saturation_notes(inputs),
                inputs,
            ),
            figures.input_pipeline(inputs),
        )
    yield Section("Throughput against batch size"), figures.throughput_vs_batch(runs)
    yield (
        Section("Energy efficiency", "GPU energy over the measured window."),
        (figures.samples_per_joule(runs)),
    )
    yield Section("Step-time percentiles"), figures.step_percentiles(runs)
    yield (
        Section(
            "Scaling efficiency",
            "samples/s(N) / (N x samples/s(1)).",
            scale if not scale.empty else None,
        ),
        figures.scaling(scale),
    )
    yield (
        Section(
            "Power limits",
            f"Recommended: least energy per sample within a {max_slowdown:g}% slowdown (red star).",
            picks if not picks.empty else None,
        ),
        figures.power_curves(points, picks),
    )
    if timelines:
        samples = load_timeline(timelines)
        yield (
            Section(
                "Telemetry timeline",
                f"Every sample of {', '.join(p.name for p in timelines)} (--telemetry-log), "
                "time from each file's first sample. " + throttle_summary(samples),
            ),
            figures.telemetry_timeline(samples),
        )
    if not failures.empty:
        cols = [c for c in ("model", "mode", "batch_size", "status", "error") if c in failures]
        yield Section("Runs that did not finish", table=failures[cols]), None


def build_report(
    paths: list[Path],
    out_dir: Path,
    baseline: str | None = None,
    max_slowdown: float = 10.0,
    timelines: list[Path] | None = None,
    pdf: bool = False,
    pptx: bool = False,
    prices: dict[str, float] | None = None,
) -> Report:
    """Read the CSVs (and telemetry logs), draw what they hold, write report.html, report.md
    and the PNGs, and report.pdf / report.pptx when asked."""
    rows = load_rows(paths)
    writable_folder(out_dir, "--out")
    try:
        return _write(rows, out_dir, baseline, max_slowdown, timelines or [], pdf, pptx, prices)
    except OSError as exc:
        where = exc.filename or out_dir
        raise UserError(f"--out: cannot write {where}: {exc.strerror or exc}") from None


def _write(rows, out_dir, baseline, max_slowdown, timelines, pdf, pptx, prices) -> Report:
    sections, pngs = [], []
    for section, figure in _sections(rows, baseline, max_slowdown, timelines, prices or {}):
        if figure is not None:
            png = out_dir / f"{len(pngs) + 1:02d}-{_slug(section.title)}.png"
            try:
                figure.savefig(png, dpi=110)
            finally:
                plt.close(figure)
            section.figure = png.name
            pngs.append(png)
        if section.text or section.table is not None or section.figure:
            sections.append(section)
    sources = sorted(rows["source"].unique())
    report = Report(out_dir / "report.html", out_dir / "report.md", pngs)
    report.html.write_text(_html(sections, sources, out_dir), encoding="utf-8")
    report.markdown.write_text(_markdown(sections, sources), encoding="utf-8")
    if pdf:
        report.documents.append(
            write_pdf(sections, sources, out_dir, out_dir / "report.pdf", _number)
        )
    if pptx:
        report.documents.append(
            write_pptx(sections, sources, out_dir, out_dir / "report.pptx", _number)
        )
    return report


def _number(value: object) -> object:
    """Floats as a reader wants them: 4,694 and 0.137, not 4.69e+03."""
    if not isinstance(value, float) or pd.isna(value):
        return value
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def _slug(title: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in title.lower()).strip("-")


def _html(sections: list[Section], sources: list[str], folder: Path) -> str:
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>dlbench report</title>",
        "<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto}"
        "table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ccc;"
        "padding:2px 6px;text-align:right}img{max-width:100%}</style></head><body>",
        f"<h1>dlbench report</h1><p>Sources: {html.escape(', '.join(sources))}</p>",
    ]
    for s in sections:
        parts.append(f"<h2>{html.escape(s.title)}</h2>")
        parts += [f"<p>{html.escape(line)}</p>" for line in s.text.splitlines() if line]
        if s.figure:
            data = base64.b64encode((folder / s.figure).read_bytes()).decode()
            parts.append(f"<img alt='{html.escape(s.title)}' src='data:image/png;base64,{data}'>")
        if s.table is not None:
            parts.append(s.table.map(_number).to_html(index=False, na_rep=""))
    parts.append("</body></html>")
    return "\n".join(parts)


def _markdown(sections: list[Section], sources: list[str]) -> str:
    parts = ["# dlbench report", "", f"Sources: {', '.join(sources)}", ""]
    for s in sections:
        parts += [f"## {s.title}", ""]
        parts += [line + "  " for line in s.text.splitlines() if line]
        if s.figure:
            parts += ["", f"![{s.title}]({s.figure})"]
        if s.table is not None:
            parts += ["", markdown_table(s.table, digits=3)]
        parts.append("")
    return "\n".join(parts)
