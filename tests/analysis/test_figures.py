"""The report's figures as the report draws them (no mathtext parsed, so a row's label stays
literal): every tick label of a log axis is a plain number, not raw `$\\mathdefault{...}$`."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from dlbench.analysis import figures


def _tick_labels(fig) -> list[str]:
    fig.canvas.draw()
    labels = []
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for tick in [*axis.get_major_ticks(), *axis.get_minor_ticks()]:
                if tick.label1.get_visible() and tick.label1.get_text():
                    labels.append(tick.label1.get_text())
    return labels


def _number(text: str) -> float:
    return float(text.replace(",", "").replace("\N{MINUS SIGN}", "-"))


RUNS = pd.DataFrame(
    {
        "model": ["resnet50"] * 4 + ["vit"] * 4,
        "mode": ["infer"] * 8,
        "machine": ["H100 $x$"] * 8,  # a label from the rows, with mathtext's own sign
        "precision": ["bf16-mixed"] * 8,
        "batch_size": [1, 8, 64, 256] * 2,
        "samples_per_s": [2500.0, 9000.0, 12000.0, 13000.0, 1700.0, 5000.0, 8000.0, 8600.0],
        "step_time_median_ms": [0.4, 0.9, 5.3, 19.7, 0.6, 1.6, 8.0, 29.8],
        "step_time_p90_ms": [0.41, 0.95, 5.5, 20.0, 0.62, 1.7, 8.2, 30.1],
        "step_time_p99_ms": [0.45, 1.0, 5.9, 21.0, 0.7, 1.9, 8.9, 31.0],
        "energy_per_sample_j": [0.05, 0.03, 0.02, 0.02, 0.08, 0.05, 0.04, 0.04],
    }
)
POINTS = pd.DataFrame(
    {
        "model": ["resnet50"] * 5,
        "machine": ["H100"] * 5,
        "qps": [2000.0, 8000.0, 14000.0, 17000.0, 18500.0],
        "p99_ms": [6.0, 6.5, 7.2, 12.7, 60.0],  # less than a decade but for one point
        "passed": [True, True, True, True, False],
        "bound_ms": [15.0] * 5,
    }
)


@pytest.mark.parametrize(
    "draw",
    [
        lambda: figures.throughput_vs_batch(RUNS),
        lambda: figures.latency_against_rate(POINTS),
        lambda: figures.latency_against_rate(POINTS.iloc[:3]),  # within one decade
        lambda: figures.step_percentiles(RUNS),
        lambda: figures.samples_per_joule(RUNS),
    ],
)
def test_every_tick_label_of_a_log_axis_is_a_plain_number(draw):
    with plt.rc_context({"text.parse_math": False}):  # as the report draws
        fig = draw()
        labels = _tick_labels(fig)
    numeric = [t for t in labels if not any(c.isalpha() for c in t.replace("e", ""))]
    assert numeric, labels
    assert not [t for t in labels if "$" in t.replace("H100 $x$", "") or "\\" in t], labels
    for text in numeric:
        _number(text)  # a number as written, no mathtext
    plt.close(fig)


def _lines(fig) -> dict[str, list[tuple[float, float]]]:
    return {
        line.get_label(): list(zip(line.get_xdata(), line.get_ydata()))
        for ax in fig.axes
        for line in ax.get_lines()
    }


def test_a_line_of_throughput_against_batch_is_one_experiment_named_by_what_differs():
    """Two image sizes of one model on one machine (read back from a CSV: 224.0, 64.0): two
    lines, each a curve one setting drew, named by the size as a whole number; a batch run
    twice is one point (its mean), not a vertical segment."""
    rows = pd.DataFrame(
        {
            "model": ["vit"] * 6,
            "mode": ["infer"] * 6,
            "machine": ["H100"] * 6,
            "precision": ["bf16-mixed"] * 6,
            "width": [224.0, 224.0, 224.0, 384.0, 384.0, 384.0],
            "batch_size": [64.0, 256.0, 256.0, 64.0, 128.0, 256.0],
            "samples_per_s": [8000.0, 8500.0, 8700.0, 2000.0, 2100.0, 2150.0],
        }
    )
    fig = figures.throughput_vs_batch(rows)
    lines = _lines(fig)
    assert sorted(lines) == ["width 224", "width 384"], lines
    assert lines["width 224"] == [(64.0, 8000.0), (256.0, 8600.0)]
    assert [x for x, _ in lines["width 384"]] == [64.0, 128.0, 256.0]
    plt.close(fig)


def test_lines_that_differ_by_the_machine_alone_are_named_by_it():
    fig = figures.throughput_vs_batch(
        RUNS.assign(machine=["H100"] * 2 + ["H200"] * 2 + ["H100"] * 4)
    )
    labels = sorted({line.get_label() for ax in fig.axes for line in ax.get_lines()})
    assert labels == ["H100", "H200"]
    plt.close(fig)
