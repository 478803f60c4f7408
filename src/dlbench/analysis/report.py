"""`dlbench report`: one self-contained HTML file (plots embedded), the PNGs, a Markdown summary."""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from dlbench.analysis import figures
from dlbench.analysis.compare import ENVIRONMENT, markdown_table, markdown_text
from dlbench.analysis.cost import cost_table
from dlbench.analysis.documents import write_pdf, write_pptx
from dlbench.analysis.latency import latency_table
from dlbench.analysis.load import (
    benchmark_rows,
    load_rows,
    machine_labels,
    split_invalid,
)
from dlbench.analysis.machines import (
    CODE_MOVE_FLOOR_PCT,
    code_labels,
    code_moves,
    family_summary,
    machine_pairs,
    speedup_matrix,
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
    "world_size": "devices",
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
    same_code: bool,
):
    every = benchmark_rows(rows)
    if every.empty:
        raise UserError("CSV: no finished benchmark rows (status ok) to report on")
    every["machine"] = machine_labels(every)
    every["code"] = code_labels(every)
    runs, invalid = split_invalid(every)  # ratios and figures: valid rows only
    rows = rows.assign(machine=machine_labels(rows))
    baseline = pick_baseline(every, baseline_wanted)
    pairs = machine_pairs(runs, baseline)
    yield from _comparison_sections(runs, pairs, baseline, same_code)
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
    yield from _detail_sections(rows, runs, every, baseline, prices, max_slowdown, timelines)
    summary = every[[c for c in SUMMARY_COLUMNS if c in every]].rename(columns=SUMMARY_COLUMNS)
    yield (
        Section(
            "Runs", f"{len(every)} finished runs from {rows['source'].nunique()} file(s).", summary
        ),
        None,
    )


def _comparison_sections(runs: pd.DataFrame, pairs: pd.DataFrame, baseline: str, same_code: bool):
    """The answer first: machines against the baseline per workload family, then per workload
    (heat map and table), then what the code moved."""
    families, left_out = family_summary(pairs, baseline)
    yield (
        Section(
            "How these machines compare",
            f"Speed-up over {baseline} (samples/s ratio) per workload family: the median over "
            "the family's workloads and their range, from valid rows measured by the same code "
            "on both machines and not host-bound. 'within noise': workloads whose speed-up lies "
            "inside the spread of the repeated rows of either machine."
            + "".join(f"\nLeft out: {line}." for line in left_out)
            + ("\n" + environment_notes(runs, baseline) if len(pairs) else ""),
            families if not families.empty else None,
            keep=not pairs.empty,
        ),
        None,
    )
    shown = pairs if not same_code else pairs[pairs["same_code"]]
    matrix = speedup_matrix(shown)
    yield (
        Section(
            "Speed-up per workload",
            f"Each machine's samples/s over {baseline}'s on the same workload (same code on both "
            "sides); a cell is empty where a machine has no such row.",
            matrix.rename_axis("workload").reset_index() if not matrix.empty else None,
        ),
        figures.speedup_heatmap(matrix, baseline),
    )
    if not shown.empty:
        bound = shown["bound"] | shown["bound_baseline"]
        detail = shown.assign(
            workload=shown["workload"].where(~bound, shown["workload"] + " (host-bound)"),
            code=[
                "same" if same else f"{a} vs {b}"  # marked where shown
                for same, a, b in zip(shown["same_code"], shown["code"], shown["code_baseline"])
            ],
            noise=[_noise(r) for _, r in shown.iterrows()],
        )
        yield (
            Section(
                "Speed-up against the baseline, pair by pair",
                f"Baseline: {baseline}. Same model, mode, precision, batch, input size and "
                "device count; the median row of each side. code: 'same' where one version of "
                "dlbench measured both sides, else both versions (--same-code leaves those out)."
                + ("\n" + HOST_BOUND_NOTE if bool(bound.any()) else ""),
                detail[[*PAIR_COLUMNS]].rename(columns=PAIR_COLUMNS),
            ),
            None,
        )
    moves = code_moves(runs)
    if not moves.empty:
        yield (
            Section(
                "Moved by the code, not the GPU",
                "One configuration on one GPU model, measured by different versions of dlbench, "
                f"whose figures differ by more than their spread and {CODE_MOVE_FLOOR_PCT:g} %: "
                "read these rows together, never as a difference between GPUs.",
                moves,
            ),
            None,
        )


def _noise(pair: pd.Series) -> str:
    if pd.isna(pair["noise_pct"]):
        return ""
    inside = " (within noise)" if pair["within_noise"] else ""
    return f"±{pair['noise_pct']:.1f} %{inside}"


def _detail_sections(rows, runs, every, baseline, prices, max_slowdown, timelines):
    """Everything after the comparison: cost, latency, decode, input pipeline, energy,
    percentiles, scaling, power, timeline, failures."""
    scale = scaling_table(rows)
    scale["machine"] = machine_labels(scale)
    points = power_points(rows)
    picks = recommend_power(rows, max_slowdown)
    failures = rows[rows["status"] != "ok"]
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
    same_code: bool = False,
) -> Report:
    """Read the CSVs (and telemetry logs), draw what they hold, write report.html, report.md
    and the PNGs, and report.pdf / report.pptx when asked. `same_code`: pair rows across
    machines only where one version of dlbench measured both."""
    rows = load_rows(paths)
    writable_folder(out_dir, "--out")
    try:
        return _write(
            rows, out_dir, baseline, max_slowdown, timelines or [], pdf, pptx, prices, same_code
        )
    except OSError as exc:
        where = exc.filename or out_dir
        raise UserError(f"--out: cannot write {where}: {exc.strerror or exc}") from None


def _write(*args) -> Report:
    # Labels come from the rows (machine names, tags): text, never mathtext to parse.
    with plt.rc_context({"text.parse_math": False}):
        return _write_files(*args)


def _write_files(
    rows, out_dir, baseline, max_slowdown, timelines, pdf, pptx, prices, same_code
) -> Report:
    sections, pngs, empty = [], [], []
    for section, figure in _sections(
        rows, baseline, max_slowdown, timelines, prices or {}, same_code
    ):
        if figure is not None:
            png = out_dir / f"{len(pngs) + 1:02d}-{_slug(section.title)}.png"
            try:
                figure.savefig(png, dpi=110)
            finally:
                plt.close(figure)
            section.figure = png.name
            pngs.append(png)
        (sections if section.shown else empty).append(section)
    if empty:  # a heading with nothing under it says nothing; one line says what is not here
        titles = ", ".join(s.title.lower() for s in empty)
        sections[0].text += f"\nNot shown, nothing in these rows for them: {titles}."
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
    parts = ["# dlbench report", "", f"Sources: {markdown_text(', '.join(sources))}", ""]
    for s in sections:
        parts += [f"## {s.title}", ""]
        parts += [markdown_text(line) + "  " for line in s.text.splitlines() if line]
        if s.figure:
            parts += ["", f"![{s.title}]({s.figure})"]
        if s.table is not None:
            parts += ["", markdown_table(s.table, digits=3)]
        parts.append("")
    return "\n".join(parts)
