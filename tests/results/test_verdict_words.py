"""A verdict's words name the checks that failed, and only those (issue 96): a noisy row says
which noise check it failed, never one that passed."""

from __future__ import annotations

import pytest

from dlbench.results.advice import advice
from dlbench.results.verdict import verdict_columns
from tests.analysis.rows import benchmark_row

QUIET = {"throughput_interval_pct": 0.5, "step_time_robust_spread_pct": 1.0, "step_outliers": 0,
         "step_outlier_time_pct": 0.0, "step_time_drift_pct": 0.0, "steps": 100}  # fmt: skip


@pytest.mark.parametrize(
    ("noisy", "said", "unsaid"),
    [
        ({"throughput_interval_pct": 7.0}, "known only to +/-7.0 % (over the 5 % allowed)",
         ("spread", "outlier")),
        ({"step_time_robust_spread_pct": 11.6}, "its steps spread 11.6 % (over 10)",
         ("known only", "outlier")),
        ({"step_outliers": 1, "step_outlier_time_pct": 3.0}, "1 outlier step(s) took 3.0 %",
         ("known only", "spread")),
    ],
)  # fmt: skip
def test_a_noisy_row_names_the_check_it_failed_and_no_other(noisy, said, unsaid):
    row = benchmark_row(**{**QUIET, **noisy})
    row.update(verdict_columns(row))
    words = advice(row)
    assert row["verdict_reasons"] == "noisy" and words.startswith("INVALID: ")
    assert said in words and not any(u in words for u in unsaid), words
    assert "0 outlier" not in words


def test_a_valid_row_says_so_first():
    row = benchmark_row(**QUIET)
    row.update(verdict_columns(row))
    assert advice(row) == "VALID"


@pytest.mark.parametrize("spread", [10.5, 11.6, 25.0, 80.0])
def test_a_cpus_step_spread_is_shown_not_judged_and_a_gpus_still_is(spread):
    """A shared host's scheduler spreads a CPU's steps whatever the window: the interval, which
    carries that spread, judges a CPU row, against a CPU's limit (results.stats.CPU_NOISE_PCT:
    the next run strays further than a GPU's 5 %); on a GPU the spread stays a reason."""
    from dlbench.results.stats import CPU_NOISE_PCT

    cpu = benchmark_row(**{**QUIET, "step_time_robust_spread_pct": spread, "accelerator": "cpu"})
    gpu = {**cpu, "accelerator": "cuda"}
    assert verdict_columns(cpu)["verdict"] == "valid" and advice(cpu).startswith("VALID; a CPU")
    assert verdict_columns(gpu)["verdict_reasons"] == "noisy"
    assert f"its steps spread {spread:.1f} %" in advice(gpu)
    six = {**cpu, "throughput_interval_pct": 6.0}  # within a CPU's limit, over a GPU's
    assert verdict_columns(six)["verdict"] == "valid"
    assert verdict_columns({**six, "accelerator": "cuda"})["verdict_reasons"] == "noisy"
    wide = {**cpu, "throughput_interval_pct": CPU_NOISE_PCT + 1}  # the interval judges a CPU row
    assert verdict_columns(wide)["verdict_reasons"] == "noisy"
    assert "spread" not in advice(wide) and "known only to +/-" in advice(wide)
