"""A CPU row's verdict holds on the next run, tried on rows measured on a 2-core shared host: ten
runs of the README's quick start one after another, then ten while another process kept a core
busy (data/cpu-quick-start-runs-quiet-then-busy.csv; how they were measured:
docs/decisions.md#cpu-rows). Each verdict is decided again by today's rules from the row's own
columns, and every pair of VALID rows is compared as `dlbench compare` would."""

from __future__ import annotations

import itertools
from pathlib import Path

import pandas as pd
import pytest

from dlbench.analysis.change import SLOWER
from dlbench.analysis.compare import compare_runs
from dlbench.analysis.load import load_rows
from dlbench.config.limits import HOST_OTHER_CPU_PCT
from dlbench.results.verdict import verdict_columns

RUNS = Path(__file__).parent / "data" / "cpu-quick-start-runs-quiet-then-busy.csv"


@pytest.fixture(scope="module")
def judged() -> pd.DataFrame:
    rows = load_rows([RUNS])
    assert len(rows) == 20 and set(rows["accelerator"]) == {"cpu"}
    verdicts = pd.DataFrame([verdict_columns(r) for r in rows.to_dict("records")], rows.index)
    return rows.assign(**verdicts)


def test_nine_of_ten_quiet_runs_are_valid_and_no_busy_one(judged):
    quiet, busy = judged.iloc[:10], judged.iloc[10:]
    assert (quiet["host_other_cpu_pct"] <= HOST_OTHER_CPU_PCT).all()
    assert (busy["host_other_cpu_pct"] > HOST_OTHER_CPU_PCT).all()
    assert (quiet["verdict"] == "valid").sum() >= 9, quiet["verdict_reasons"].tolist()
    assert (busy["verdict"] == "invalid").all()
    assert busy["verdict_reasons"].str.contains("host_busy").all()
    # the busy runs ran at a third of the quiet ones' rate: a figure the next run contradicts
    assert busy["samples_per_s"].max() < 0.5 * quiet["samples_per_s"].min()


def test_no_pair_of_valid_runs_of_one_command_reads_slower(judged):
    """On 4c280ac a CPU row had a GPU-bound row's 1 % prior between runs: pairs of these runs
    read slower (the lowest ratio here is about 0.8)."""
    valid = judged[judged["verdict"] == "valid"]
    verdicts = []
    for (_, a), (_, b) in itertools.permutations(valid.iterrows(), 2):
        line = compare_runs(a.to_frame().T, b.to_frame().T).table.iloc[0]
        verdicts.append(line["verdict"])
    assert len(verdicts) >= 72 and SLOWER not in verdicts and "faster" not in verdicts
    ratios = valid["samples_per_s"].min() / valid["samples_per_s"].max()
    assert ratios < 0.9  # the runs do stray: the test would catch a 1 % prior
