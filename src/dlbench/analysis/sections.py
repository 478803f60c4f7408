"""The report's sections, one function each, named as the reader finds them, in the order
`SECTIONS` lists them: the answer first (how the machines compare), then the detail, the raw
rows last. Each takes the rows as `ReportRows` prepared them and returns its section and
figure, or None where the rows hold nothing for it."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pandas as pd

from dlbench.analysis import figures
from dlbench.analysis.cost import cost_table
from dlbench.analysis.fleet import RULE, fleet_table, named_gpus
from dlbench.analysis.latency import latency_table
from dlbench.analysis.load import machine_labels
from dlbench.analysis.machines import (
    CODE_DIFFERS,
    CODE_MOVE_FLOOR_PCT,
    code_moves,
    family_summary,
    noise_text,
    speedup_matrix,
)
from dlbench.analysis.pipeline import pipeline_table, saturation_notes
from dlbench.analysis.power import power_points, recommend_power
from dlbench.analysis.ranks import ranks_among_known_rows
from dlbench.analysis.report_rows import (
    HOST_BOUND_NOTE,
    INVALID_COLUMNS,
    PAIR_COLUMNS,
    SCALING_SHOWN,
    SUMMARY_COLUMNS,
    Part,
    ReportRows,
    Section,
    environment_notes,
    named_line,
)
from dlbench.analysis.roofline import decode_table
from dlbench.analysis.scaling import scaling_table
from dlbench.analysis.serving_sections import serving_frontier, serving_under_load
from dlbench.analysis.timeline import load_timeline, throttle_summary


def how_these_machines_compare(r: ReportRows) -> Part:
    """Per workload family: the median and range of the speed-ups over the baseline."""
    families, left_out = family_summary(r.pairs, r.baseline)
    return (
        Section(
            "How these machines compare",
            f"Speed-up over {r.baseline} (samples/s ratio) per workload family: the median over "
            "the family's workloads and their range, from valid rows not host-bound, measured by "
            "the same code on both machines where a machine has such pairs. 'within noise': "
            "workloads whose speed-up lies inside the spread of the repeated rows of either "
            "machine."
            + (CODE_DIFFERS if "differs" in set(families.get("code", ())) else "")
            + "".join(f"\nLeft out: {line}." for line in left_out)
            + ("\n" + environment_notes(r.runs, r.baseline) if len(r.pairs) else ""),
            families if not families.empty else None,
            keep=not r.pairs.empty,
        ),
        None,
    )


def speed_up_per_workload(r: ReportRows) -> Part:
    """The heat map: each machine's speed-up on each workload."""
    matrix = speedup_matrix(r.shown_pairs)
    return (
        Section(
            "Speed-up per workload",
            f"Each machine's samples/s over {r.baseline}'s on the same workload (same code on "
            "both sides); a cell is empty where a machine has no such row.",
            matrix.rename_axis("workload").reset_index() if not matrix.empty else None,
        ),
        figures.speedup_heatmap(matrix, r.baseline),
    )


def speed_up_pair_by_pair(r: ReportRows) -> Part | None:
    """Every pair with its code, spread and host-bound mark."""
    shown = r.shown_pairs
    if shown.empty:
        return None
    bound = shown["bound"] | shown["bound_baseline"]
    detail = shown.assign(
        workload=shown["workload"].where(~bound, shown["workload"] + " (host-bound)"),
        code=[
            "same" if same else f"{a} vs {b}"  # marked where shown
            for same, a, b in zip(shown["same_code"], shown["code"], shown["code_baseline"])
        ],
        noise=[noise_text(row) for _, row in shown.iterrows()],
    )
    return (
        Section(
            "Speed-up against the baseline, pair by pair",
            f"Baseline: {r.baseline}. Same model, mode, precision, batch, input size and "
            "device count; the median row of each side. code: 'same' where one version of "
            "dlbench measured both sides, else both versions (--same-code leaves those out)."
            + ("\n" + HOST_BOUND_NOTE if bool(bound.any()) else ""),
            detail[[*PAIR_COLUMNS]].rename(columns=PAIR_COLUMNS),
        ),
        None,
    )


def moved_by_the_code(r: ReportRows) -> Part | None:
    """One configuration on one GPU model whose figure moved with dlbench's version."""
    moves = code_moves(r.runs)
    if moves.empty:
        return None
    return (
        Section(
            "Moved by the code, not the GPU",
            "One configuration on one GPU model, measured by different versions of dlbench, "
            f"whose figures differ by more than their spread and {CODE_MOVE_FLOOR_PCT:g} %: "
            "read these rows together, never as a difference between GPUs.",
            moves,
        ),
        None,
    )


def rows_left_out(r: ReportRows) -> Part | None:
    """Rows whose verdict is invalid, with the reasons."""
    if r.invalid.empty:
        return None
    cols = [c for c in INVALID_COLUMNS if c in r.invalid]
    return (
        Section(
            "Rows left out of every ratio",
            "Their verdict is invalid: the verdict column says why (each reason is in "
            "docs/columns.md, under verdict_reasons); they count in no ratio above.",
            r.invalid[cols],
        ),
        None,
    )


def cost_per_million_samples(r: ReportRows) -> Part | None:
    """At the prices given, cheapest first for each workload."""
    if not r.prices:
        return None
    costs = cost_table(r.runs, r.prices)
    return (
        Section(
            "Cost per million samples",
            "At the prices given (--usd-per-hour GPU=PRICE): price / 3600 / samples per "
            "second x 1e6, tokens for LLM rows; cheapest first for each workload.",
            costs if not costs.empty else None,
        ),
        None,
    )


def latency_at_batch_1(r: ReportRows) -> Part | None:
    """One query at a time: percentiles and the speed-up in answering."""
    latency = latency_table(r.runs, r.baseline)
    if latency.empty:
        return None
    return (
        Section(
            "Latency at batch 1",
            "One query at a time (inference, batch 1): latency percentiles over the window's "
            f"queries, and how much faster each machine answers than {r.baseline}. Rows "
            "replayed as CUDA graphs and not host-bound compare the GPUs; eager rows at "
            "batch 1 compare the hosts' kernel launches.",
            latency,
        ),
        None,
    )


def generation_against_bandwidth(r: ReportRows) -> Part | None:
    """Decode's bytes per second against the GPU's peak memory bandwidth."""
    decode = decode_table(r.runs, r.baseline)
    if decode.empty:
        return None
    return (
        Section(
            "Generation against memory bandwidth",
            "Decode reads every weight and the KV cache once per step: its bound is memory "
            "bandwidth. Share of peak = achieved bytes/s over the GPU's peak; the ratio to "
            f"the baseline ({r.baseline}) sits beside the ratio of their peak bandwidths.",
            decode,
        ),
        None,
    )


def fleet_check(r: ReportRows) -> Part | None:
    """Each GPU's measured peak beside its datasheet and its siblings."""
    return fleet_part(r.rows)


def fleet_part(rows: pd.DataFrame) -> Part | None:
    """The fleet check from any rows (a report of peak rows alone has only this section)."""
    table = fleet_table(rows)
    if table.empty:
        return None
    verdict = named_line(named_gpus(table), "No GPU is named.")
    return (
        Section(
            "Fleet check: measured peaks",
            "Each GPU's latest dlbench peak row (by UUID): dense bf16 matmul and memory read "
            f"as measured, beside its datasheet and its siblings. {RULE}\n{verdict}",
            table,
        ),
        None,
    )


def input_pipeline(r: ReportRows) -> Part | None:
    """The loader alone and training fed by it, beside synthetic data."""
    inputs = pipeline_table(r.rows, r.every)
    if inputs.empty:
        return None
    return (
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


def throughput_against_batch_size(r: ReportRows) -> Part:
    return Section("Throughput against batch size"), figures.throughput_vs_batch(r.runs)


def energy_efficiency(r: ReportRows) -> Part:
    return (
        Section("Energy efficiency", "GPU energy over the measured window."),
        figures.samples_per_joule(r.runs),
    )


def step_time_percentiles(r: ReportRows) -> Part:
    return Section("Step-time percentiles"), figures.step_percentiles(r.runs)


def scaling_efficiency(r: ReportRows) -> Part:
    """Throughput with N devices over N times one device's."""
    scale = scaling_table(r.rows)
    scale["machine"] = machine_labels(scale)
    shown = {column: name for column, name in SCALING_SHOWN.items() if column in scale}
    table = scale[list(shown)].rename(columns=shown) if not scale.empty else None
    return (
        Section("Scaling efficiency", "samples/s(N) / (N x samples/s(1)).", table),
        figures.scaling(scale),
    )


def power_limits(r: ReportRows) -> Part:
    """Energy per sample against throughput per power limit, and the recommended limit."""
    picks = recommend_power(r.rows, r.max_slowdown)
    return (
        Section(
            "Power limits",
            f"Recommended: least energy per sample within a {r.max_slowdown:g}% slowdown "
            "(red star).",
            picks if not picks.empty else None,
        ),
        figures.power_curves(power_points(r.rows), picks),
    )


def telemetry_timeline(r: ReportRows) -> Part | None:
    """Every sample of the --telemetry-log files given, over time."""
    if not r.timelines:
        return None
    samples = load_timeline(r.timelines)
    return (
        Section(
            "Telemetry timeline",
            f"Every sample of {', '.join(p.name for p in r.timelines)} (--telemetry-log), "
            "time from each file's first sample. " + throttle_summary(samples),
        ),
        figures.telemetry_timeline(samples),
    )


def runs_that_did_not_finish(r: ReportRows) -> Part | None:
    failures = r.rows[r.rows["status"] != "ok"]
    if failures.empty:
        return None
    cols = [c for c in ("model", "mode", "batch_size", "status", "error") if c in failures]
    return Section("Runs that did not finish", table=failures[cols]), None


def runs(r: ReportRows) -> Part:
    """Every finished row, summarised: the raw material, last."""
    summary = r.every[[c for c in SUMMARY_COLUMNS if c in r.every]].rename(columns=SUMMARY_COLUMNS)
    text = f"{len(r.every)} finished runs from {r.rows['source'].nunique()} file(s)."
    return Section("Runs", text, summary), None


SECTIONS: tuple[Callable[[ReportRows], Part | None], ...] = (
    how_these_machines_compare,
    speed_up_per_workload,
    speed_up_pair_by_pair,
    moved_by_the_code,
    rows_left_out,
    cost_per_million_samples,
    latency_at_batch_1,
    serving_under_load,
    serving_frontier,
    generation_against_bandwidth,
    fleet_check,
    ranks_among_known_rows,
    input_pipeline,
    throughput_against_batch_size,
    energy_efficiency,
    step_time_percentiles,
    scaling_efficiency,
    power_limits,
    telemetry_timeline,
    runs_that_did_not_finish,
    runs,
)


def report_sections(rows: ReportRows) -> Iterator[Part]:
    """The sections the rows hold something for, in the reader's order."""
    for section in SECTIONS:
        part = section(rows)
        if part is not None:
            yield part
