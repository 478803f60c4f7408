"""Reading rows back: identifiers and versions stay the text that was written."""

from __future__ import annotations

from dlbench.analysis.load import load_rows
from dlbench.analysis.scaling import record_scaling
from dlbench.results.store import CsvStore
from tests.analysis.rows import benchmark_row, write_rows

# Ids a random hex id can be (all digits with a leading zero; digits around one "e", which
# pandas reads as a float) and versions whose trailing zero a float would drop.
NUMBER_LIKE = {"run_id": "012345678901", "cuda": "12.10", "nccl": "2.20", "timm": "1.0"}


def test_ids_and_versions_read_back_as_written(tmp_path):
    path = write_rows(tmp_path / "a.csv", [benchmark_row(**NUMBER_LIKE)])
    [row] = load_rows([path]).to_dict("records")
    assert {k: row[k] for k in NUMBER_LIKE} == NUMBER_LIKE


def test_a_scaling_rerun_adds_nothing_whatever_the_run_ids_look_like(tmp_path):
    runs = [
        benchmark_row(run_id="1234e5678901", world_size=1, strategy="single", samples_per_s=100.0),
        benchmark_row(run_id="0987654321e0", world_size=2, strategy="ddp", samples_per_s=190.0),
    ]
    store = CsvStore(write_rows(tmp_path / "bench.csv", runs))
    record_scaling(store, "resnet50", "train")
    [scaling] = [r for r in store.rows() if r["run_kind"] == "scaling"]
    assert (scaling["benchmark_run_id"], scaling["baseline_run_id"]) == (
        "0987654321e0",
        "1234e5678901",
    )
    record_scaling(store, "resnet50", "train")
    assert len(store.rows()) == 3


def test_a_row_counts_by_its_own_window_as_a_published_row_does():
    """One rule of what counts, for the rows a report or compare reads and the published rows
    (results.published.own_faults): a row below the published band, or a loader row that
    waited for its loader, is valid by its own window; a noisy one is not."""
    import pandas as pd

    from dlbench.analysis.load import split_invalid

    rows = pd.DataFrame(
        {
            "verdict": ["valid", "invalid", "invalid", "invalid", ""],
            "verdict_reasons": ["", "below_published", "input_bound", "noisy;input_bound", ""],
        }
    )
    valid, invalid = split_invalid(rows)
    assert list(valid.index) == [0, 1, 2, 4] and list(invalid.index) == [3]
