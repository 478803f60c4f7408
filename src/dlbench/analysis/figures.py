"""The report's plots, one function each: a pandas frame in, a matplotlib figure out (or None
when the rows hold nothing to plot). Measured points only, never interpolated curves."""

from __future__ import annotations

from collections.abc import Callable

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import LogFormatter, MaxNLocator

from dlbench.results.pairing import EXPERIMENT_KEY, key_text

WIDE = (10, 4.5)


def _log_scale(ax, which: str, base: float = 10) -> None:
    """A log scale whose tick labels are plain numbers: the report parses no mathtext (labels
    from rows stay literal), and matplotlib's own log labels are mathtext, which then printed as
    raw `$\\mathdefault{...}$` text. Minor ticks are labelled where the axis spans too little
    for the major ones alone, as matplotlib's own formatter chooses."""
    getattr(ax, f"set_{which}scale")("log", base=base)
    axis = getattr(ax, f"{which}axis")
    axis.set_major_formatter(LogFormatter(base=base, labelOnlyBase=False))
    axis.set_minor_formatter(LogFormatter(base=base, labelOnlyBase=False))


def _label(row: pd.Series) -> str:
    return f"{row['model']} {row['mode']}"


PANELS_A_ROW = 3  # a figure of several panels wraps after this many: sized for a page
PANEL_IN = (4.2, 3.4)  # one panel's width and height, inches
MAX_BARS = 24  # a bar chart of more rows shows the largest (its title says how many)


def _panels(count: int) -> tuple[Figure, list]:
    """A figure of `count` panels, at most PANELS_A_ROW a row: each panel a readable size on a
    page, never a strip of many shrunk to its width."""
    columns = min(count, PANELS_A_ROW)
    rows = -(-count // columns)
    fig, axes = plt.subplots(
        rows, columns, figsize=(PANEL_IN[0] * columns, PANEL_IN[1] * rows), squeeze=False
    )
    flat = list(axes.flat)
    for ax in flat[count:]:
        ax.set_visible(False)
    return fig, flat[:count]


def _batch(value: object) -> str:
    """A batch size as written: 256, not 256.0."""
    number = float(value)  # type: ignore[arg-type]
    return f"{number:.0f}" if number.is_integer() else f"{number:g}"


# What a line of throughput against batch size holds the same: the experiment (results.pairing
# .EXPERIMENT_KEY) but for its axis, and the machine; a panel is a model and mode.
LINE_KEY = tuple(c for c in EXPERIMENT_KEY if c not in ("model", "mode", "batch_size", "gpu_name"))


def throughput_vs_batch(runs: pd.DataFrame) -> Figure | None:
    """Samples/s against batch size, a panel per workload, one line per experiment (every
    setting but the batch size the same, repeats averaged); the legend names what differs
    between a panel's lines."""
    groups = [(k, g) for k, g in runs.groupby(["model", "mode"]) if g["batch_size"].nunique() > 1]
    if not groups:
        return None
    fig, axes = _panels(len(groups))
    for ax, ((model, mode), g) in zip(axes, groups):
        key = ["machine", *(c for c in LINE_KEY if c in g)]
        text = pd.DataFrame({c: [key_text(v, c) for v in g[c]] for c in key}, index=g.index)
        varying = [c for c in key if text[c].nunique() > 1] or ["machine"]
        for _, line in g.assign(_line=text.agg("|".join, axis=1)).groupby("_line", sort=True):
            points = line.groupby("batch_size")["samples_per_s"].mean().sort_index()
            first = line.iloc[0]
            label = ", ".join(_setting(c, first[c]) for c in varying)
            ax.plot(points.index, points.to_numpy(), "o-", label=label)
        ax.set(title=f"{model} {mode}", xlabel="batch size per device (log scale)")
        ax.set(ylabel="samples/s", ylim=(0, None))  # a rate: from zero
        _log_scale(ax, "x", base=2)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _setting(column: str, value: object) -> str:
    """A legend's word for one setting: the machine as itself, a count as an integer."""
    if column == "machine":
        return str(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"{column} {value}"


def speedup_heatmap(matrix: pd.DataFrame, baseline: str) -> Figure | None:
    """Workload x machine, each cell the speed-up over the baseline, coloured around 1."""
    if matrix.empty:
        return None
    import numpy as np

    values = matrix.to_numpy(dtype=float)
    spread = max(0.05, float(np.nanmax(np.abs(np.log2(values)))))
    size = (max(7.0, 4 + 1.6 * matrix.shape[1]), 1.2 + 0.32 * len(matrix))
    fig, ax = plt.subplots(figsize=size, layout="constrained")
    image = ax.imshow(np.log2(values), cmap="RdYlGn", vmin=-spread, vmax=spread, aspect="auto")
    for (i, j), value in np.ndenumerate(values):
        if not np.isnan(value):
            ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=8)
    ax.set_xticks(range(matrix.shape[1]), matrix.columns, fontsize=8)
    ax.set_yticks(range(len(matrix)), matrix.index, fontsize=8)
    ax.set_title(f"speed-up over {baseline} (green: faster)", fontsize=9)
    fig.colorbar(image, ax=ax, label="log2 speed-up", shrink=0.8)
    return fig


def samples_per_joule(runs: pd.DataFrame) -> Figure | None:
    """Samples (images or sequences) per joule of GPU energy, per workload and machine."""
    rows = runs.dropna(subset=["energy_per_sample_j"]) if "energy_per_sample_j" in runs else None
    if rows is None or rows.empty:
        return None
    rows = rows.assign(workload=rows.apply(_label, axis=1), per_j=1 / rows["energy_per_sample_j"])
    pivot = rows.pivot_table(index="workload", columns="machine", values="per_j", aggfunc="max")
    return _bars(
        pivot, "samples per joule of GPU energy (log scale: workloads differ a thousandfold)"
    )


def step_percentiles(runs: pd.DataFrame) -> Figure | None:
    """How heavy each run's tail is: its p90 and p99 step over its median, from zero (1: every
    step alike), the runs with the heaviest tails when there are more than MAX_BARS."""
    columns = ["step_time_median_ms", "step_time_p90_ms", "step_time_p99_ms"]
    if runs.empty or any(c not in runs for c in columns):
        return None
    labels = runs.apply(
        lambda r: f"{_label(r)}, batch {_batch(r['batch_size'])} · {r['machine']}", axis=1
    )
    median = runs["step_time_median_ms"].astype(float)
    frame = pd.DataFrame(
        {
            "p90 / p50": runs["step_time_p90_ms"].astype(float) / median,
            "p99 / p50": runs["step_time_p99_ms"].astype(float) / median,
        }
    ).set_index(labels)
    frame = frame.dropna().sort_values("p99 / p50", ascending=False)
    title = f"the {MAX_BARS} heaviest tails of {len(frame)} runs" if len(frame) > MAX_BARS else ""
    return _bars(frame, "step time over the run's median (1: no tail)", False, title)


def _bars(frame: pd.DataFrame, xlabel: str, log: bool = True, title: str = "") -> Figure:
    """Horizontal bars, one row per label (at most MAX_BARS: the caller says which), the legend
    beside them; a log scale where values span orders of magnitude (its label says so), else
    from zero."""
    frame = frame.head(MAX_BARS)
    ax = frame.plot.barh(figsize=(10, max(2.5, 0.28 * len(frame) + 1.2)))
    ax.set(xlabel=xlabel, ylabel="", title=title)
    if log:
        _log_scale(ax, "x")
    else:
        ax.set_xlim(left=0)
    ax.invert_yaxis()
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    ax.figure.tight_layout()
    return ax.figure


def scaling(table: pd.DataFrame) -> Figure | None:
    """Scaling efficiency against world size, ideal = 1."""
    if table.empty or table["world_size"].nunique() < 2:
        return None
    fig, ax = plt.subplots(figsize=(6, 4))
    for (model, mode, machine), line in table.groupby(["model", "mode", "machine"]):
        ax.plot(
            line["world_size"],
            line["scaling_efficiency"],
            "o-",
            label=f"{model} {mode} · {machine}",
        )
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set(xlabel="GPUs (world size)", ylabel="scaling efficiency", ylim=(0, 1.1))
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def power_curves(points: pd.DataFrame, picks: pd.DataFrame) -> Figure | None:
    """Throughput and energy per sample against the power limit; the recommendation marked."""
    if picks.empty:
        return None
    fig, axes = plt.subplots(1, 2, figsize=WIDE)
    for _, pick in picks.iterrows():
        curve = points[(points["model"] == pick["model"]) & (points["mode"] == pick["mode"])]
        curve = curve.sort_values("limit_w")
        name = f"{pick['model']} {pick['mode']}"
        axes[0].plot(curve["limit_w"], curve["samples_per_s"], "o-", label=name)
        axes[1].plot(curve["limit_w"], curve["energy_per_sample_j"], "o-", label=name)
        chosen = curve[curve["limit_w"] == pick["within_slowdown_w"]]
        axes[1].plot(
            chosen["limit_w"],
            chosen["energy_per_sample_j"],
            "*",
            ms=16,
            color="red",
            label=f"recommended {pick['within_slowdown_w']:g} W",
        )
    axes[0].set(xlabel="power limit (W)", ylabel="samples/s")
    axes[1].set(xlabel="power limit (W)", ylabel="energy per sample (J)")
    for ax in axes:
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def input_pipeline(table: pd.DataFrame) -> Figure | None:
    """Samples/s against loader workers: the loader alone, training fed by it, and the model on
    synthetic data (dashed); one panel per data set, model, batch and decoder."""
    if table.empty:
        return None
    groups = list(table.groupby(["data", "model", "batch_size"], dropna=False))
    fig, axes = _panels(len(groups))
    for ax, ((data, model, batch), g) in zip(axes, groups):
        for decode, line in g.groupby("decode"):
            line = line.sort_values("workers")
            alone = line.dropna(subset=["loader"])
            ax.plot(
                alone["workers"], alone["loader"], "o-", label=f"loader alone ({decode} decode)"
            )
            fed = line.dropna(subset=["training"])
            ax.plot(fed["workers"], fed["training"], "s--", label=f"training ({decode} decode)")
        target = g["model (synthetic)"].dropna()
        if not target.empty:
            ax.axhline(target.iloc[0], color="grey", ls=":", label="model, synthetic data")
        source = str(data).rstrip("/").rsplit("/", 1)[-1]  # the data's own name, not its path
        ax.set(title=f"{model}, batch {_batch(batch)}: {source}", xlabel="loader workers")
        ax.set(ylabel="samples/s", ylim=(0, None))  # a rate: from zero
        ax.set_xlim(-0.5, max(float(g["workers"].max()), 1.0) + 0.5)  # whole workers, from none
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def telemetry_timeline(samples: pd.DataFrame) -> Figure | None:
    """Power, SM clock, utilisation and temperature over time, throttled samples shaded."""
    if samples.empty:
        return None
    titles = {
        "power_w": "power (W)",
        "sm_clock_mhz": "SM clock (MHz)",
        "gpu_util": "GPU utilisation (%)",
        "temp_c": "temperature (°C)",
    }
    fig, axes = plt.subplots(len(titles), 1, figsize=(10, 8), sharex=True)
    for ax, (field, title) in zip(axes, titles.items()):
        for (source, device), line in samples.groupby(["source", "device"]):
            ax.plot(line["seconds"], line[field], lw=1, label=f"{source} GPU {device}")
        for t in samples.loc[samples["throttled"], "seconds"]:
            ax.axvspan(t - 0.05, t + 0.05, color="red", alpha=0.15, lw=0)
        ax.set_ylabel(title, fontsize=8)
    axes[0].legend(fontsize=7)
    axes[-1].set_xlabel("seconds from the first sample")
    fig.tight_layout()
    return fig


def _panel_per_model(
    points: pd.DataFrame, draw: Callable[[Axes, pd.DataFrame], None], xlabel: str, ylabel: str
) -> Figure:
    """A panel per model, `draw` given each panel's rows; its y axis logarithmic."""
    models = sorted(points["model"].unique())
    fig, axes = _panels(len(models))
    for ax, model in zip(axes, models):
        draw(ax, points[points["model"] == model])
        ax.set(title=model, xlabel=xlabel, ylabel=ylabel)
        _log_scale(ax, "y")
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def latency_against_rate(points: pd.DataFrame) -> Figure | None:
    """p99 latency against the rate a search tried, a panel per model, a line per machine,
    the bound dashed: the rate found is the last point under it."""
    if points.empty:
        return None

    def draw(ax: Axes, panel: pd.DataFrame) -> None:
        for machine, line in panel.groupby("machine"):
            line = line.sort_values("qps")
            ax.plot(line["qps"], line["p99_ms"], "o-", label=str(machine))
        bound = panel["bound_ms"].dropna()
        if not bound.empty:
            ax.axhline(float(bound.iloc[0]), color="grey", linestyle="--", label="p99 bound")

    return _panel_per_model(points, draw, "queries/s (Poisson arrivals)", "p99 latency (ms)")


def serving_frontier(points: pd.DataFrame) -> Figure | None:
    """Output tokens a second per GPU against each user's, a panel per model, a line per
    machine and setting (analysis.serving.frontier_points), each point labelled with its
    concurrency: up and to the right is better, and a line's bend is where batching stops
    paying each user."""
    if points.empty:
        return None

    def draw(ax: Axes, panel: pd.DataFrame) -> None:
        for _, line in panel.groupby("line"):
            line = line.sort_values("serve_max_batch")
            label = f"{line['machine'].iloc[0]} {line['precision'].iloc[0]}"
            x, y = line["serve_tokens_per_s_per_user"], line["tokens_per_s_per_gpu"]
            ax.plot(x, y, "o-", label=label)
            for xi, yi, c in zip(x, y, line["serve_max_batch"]):
                ax.annotate(
                    _batch(c), (xi, yi), fontsize=6, xytext=(3, 3), textcoords="offset points"
                )

    return _panel_per_model(points, draw, "output tokens/s per user", "output tokens/s per GPU")
