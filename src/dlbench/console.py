"""What a run prints: a short table that says what the number means, and warnings."""

from __future__ import annotations

import json
import sys

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from dlbench.errors import number_or_none

stderr = Console(stderr=True, highlight=False, soft_wrap=True)


def shown_number(value: float) -> str:
    """A figure as a reader wants it, the one rule of the report's tables and serve's frontier:
    a count or anything of 100 and more whole (16, 4,694, not 16.0 or 4.69e+03), a ratio and
    what is under 100 to two decimals (1.10 beside 1.09, not 1.1), a small figure to three
    digits (0.00137)."""
    if value.is_integer() or abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.2f}" if abs(value) >= 0.01 else f"{value:.3g}"


def _fmt(value: object, digits: int = 1) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


def result_table(row: dict[str, object]) -> Table:
    """The headline numbers of one row, with the window they came from."""
    unit = row.get("sample_unit", "sample")
    title = (
        f"{row['model']} {row['mode']} · precision {row['precision']} · batch {row['batch_size']}"
        f" x {row.get('world_size', 1)} device(s) · {row.get('accelerator', '')}"
    )
    caption = (
        f"{row['steps']} measured steps after {row['warmup_steps']} warm-up steps; "
        "throughput = samples in the window / window time (device clock)"
    )
    table = Table(title=title, caption=caption, show_header=True)
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_row(f"{unit}s/s", _fmt(row.get("samples_per_s")))
    for key, label in (
        ("tokens_per_s", "tokens/s"),
        ("megapixels_per_s", "megapixels/s"),
        ("batches_per_s", "batches/s"),
        ("step_time_median_ms", "median step (ms)"),
        ("step_time_p99_ms", "p99 step (ms)"),
        ("throughput_interval_pct", "throughput +/- (%, 95 % interval)"),
        ("step_time_robust_spread_pct", "step spread (%, robust)"),
        ("step_outliers", "outlier steps"),
        ("warmup_s", "warm-up incl. compile (s)"),
        ("peak_memory_allocated_mb", "peak memory allocated (MiB)"),
        ("avg_power_w", "average power (W)"),
        ("energy_per_sample_j", f"energy per {unit} (J)"),
        ("mfu", "MFU"),
        ("harness_ratio", "dlbench / bare loop"),
        ("breakdown_hint", "breakdown (diagnostic pass)"),
    ):
        if row.get(key) not in (None, ""):
            table.add_row(label, _fmt(row[key], 3 if key in ("mfu", "harness_ratio") else 1))
    for phase in ("h2d", "forward", "backward", "optimizer"):
        if row.get(f"breakdown_{phase}_ms") is not None:
            table.add_row(f"  {phase} (ms, diagnostic)", _fmt(row[f"breakdown_{phase}_ms"], 2))
    return table


def warnings_for(row: dict[str, object]) -> list[str]:
    """Reasons not to trust the number as is."""
    notes = []  # noise is the verdict's to judge (results.verdict), against the row's limit
    if row.get("throttle_pct") not in (None, "", 0, 0.0):
        notes.append(
            f"the GPU throttled for {row['throttle_pct']}% of samples: "
            f"{row.get('throttle_reasons')}"
        )
    quality = row.get("energy_quality")
    if quality not in (None, "", "ok"):
        notes.append(f"no energy figure: {quality}")
    if row.get("other_gpu_processes") not in (None, "", 0):
        notes.append(f"{row['other_gpu_processes']} other process(es) used the GPU meanwhile")
    return notes


def show_result(row: dict[str, object], as_json: bool, headline: str = "") -> None:
    """Print the headline (the verdict) and the table, or the row as JSON on stdout; any
    warnings on stderr."""
    if as_json:
        json.dump(row, sys.stdout, default=str)
        sys.stdout.write("\n")
    else:
        if headline:
            Console(highlight=False, soft_wrap=True).print(escape(headline))
        Console(highlight=False).print(result_table(row))
    for note in warnings_for(row):
        stderr.print(f"[yellow]warning:[/yellow] {note}")


def show_scaling(table) -> None:
    """Throughput and both efficiencies per world size (a frame from `scaling_table`)."""
    out = Table(
        title="scaling efficiency = samples/s(N) / (N x samples/s(1)); vs DDP-wrapped 1: "
        "communication alone",
    )
    headers = ("model", "mode", "batch/device", "world size", "samples/s", "per device", "eff.")
    for column in (*headers, "eff. vs DDP 1", "DDP overhead", "verdict"):
        out.add_column(
            column, justify="left" if column in ("model", "mode", "verdict") else "right"
        )
    for line in table.to_dict("records"):
        out.add_row(
            str(line["model"]),
            str(line["mode"]),
            str(line["batch_size"]),
            str(line["world_size"]),
            _fmt(float(line["samples_per_s"])),
            _fmt(float(line["samples_per_s_per_device"])),
            _fmt(float(line["scaling_efficiency"]), 3),
            _fmt(number_or_none(line.get("scaling_efficiency_ddp")), 3),
            _fmt(number_or_none(line.get("ddp_overhead")), 3),
            str(line.get("verdict_label") or ""),
        )
    Console(highlight=False, width=max(Console().width, 160)).print(out)


def show_frame(frame, title: str) -> None:
    """Any small pandas frame as a rich table (analysis commands)."""
    out = Table(title=title)
    for column in frame.columns:
        out.add_column(str(column))
    for values in frame.itertuples(index=False):
        out.add_row(*(_fmt(v, 2) for v in values))
    Console(highlight=False, width=max(Console().width, 160)).print(out)


def error_line(message: str) -> None:
    """A user-facing failure as one `error:` line on stderr, whatever the message held."""
    from dlbench.errors import one_line

    stderr.print(f"[red]error:[/red] {escape(one_line(message))}")
