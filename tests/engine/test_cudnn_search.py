"""cuDNN's search chosen per point: a cold run times the heuristics and records what the search
bought, a second run of the same point in the same cache folder skips a search that bought
nothing, and a folder of another GPU or software, another point, or a second rank does not."""

from __future__ import annotations

import json
import time

import pytest
import torch

from dlbench.caches import use_caches
from dlbench.config import RunConfig
from dlbench.engine.cudnn_search import (
    CHOICES_FILE,
    SEARCH_MIN_GAIN_PCT,
    plan_cudnn_search,
    point_key,
)
from tests.engine.test_caches import ENVIRONMENT

GPU, CPU = torch.device("cuda"), torch.device("cpu")  # a device's type, no GPU needed
CONFIG = RunConfig(model="mobilenet_v3", batch_size=512, precision="bf16-mixed")


@pytest.fixture(autouse=True)
def _keep_cudnn_flag():
    before = torch.backends.cudnn.benchmark
    yield
    torch.backends.cudnn.benchmark = before


def sleeping_step(step_s: float):
    def step(i: int) -> None:
        time.sleep(step_s)

    return step


def cold_then_warm(folder, heuristics_s: float, searched_s: float):
    cold = plan_cudnn_search(CONFIG, GPU, True, folder, ranks=1)
    assert cold.search and cold.probe
    cold.apply()
    cold.time_heuristics(sleeping_step(heuristics_s), CPU)
    assert torch.backends.cudnn.benchmark  # the search is back on for the warm-up proper
    cold_row = cold.finish(searched_s)
    warm = plan_cudnn_search(CONFIG, GPU, True, folder, ranks=1)
    return cold_row, warm


def test_a_search_that_buys_nothing_is_skipped_on_the_second_run(tmp_path):
    folder = use_caches(tmp_path, ENVIRONMENT)
    cold_row, warm = cold_then_warm(folder, heuristics_s=0.02, searched_s=0.02)
    assert cold_row["cudnn_algorithms"] == "searched"
    assert abs(cold_row["cudnn_search_gain_pct"]) < SEARCH_MIN_GAIN_PCT + 10  # sleep's jitter
    recorded = json.loads((folder / CHOICES_FILE).read_text())
    assert list(recorded) == [point_key(CONFIG)]
    # the recorded gain decides, whatever sleep's jitter made of it: plant a small one
    (folder / CHOICES_FILE).write_text(json.dumps({point_key(CONFIG): 0.3}))
    warm = plan_cudnn_search(CONFIG, GPU, True, folder, ranks=1)
    assert warm.search is False and not warm.probe
    warm.apply()
    assert torch.backends.cudnn.benchmark is False
    assert warm.finish(0.02) == {"cudnn_algorithms": "heuristics", "cudnn_search_gain_pct": 0.3}


def test_a_search_that_buys_time_is_kept_and_says_what_it_bought(tmp_path):
    folder = use_caches(tmp_path, ENVIRONMENT)
    cold_row, warm = cold_then_warm(folder, heuristics_s=0.03, searched_s=0.015)
    assert cold_row["cudnn_search_gain_pct"] > 50  # heuristics ran each step about twice as long
    assert warm.search and not warm.probe
    assert warm.finish(0.015)["cudnn_algorithms"] == "searched"
    assert warm.finish(0.015)["cudnn_search_gain_pct"] == pytest.approx(
        cold_row["cudnn_search_gain_pct"], abs=0.01
    )


@pytest.mark.parametrize(
    ("column", "other"),
    [("gpu_name", "NVIDIA H200"), ("torch", "2.12.0+cu130"), ("dlbench", "0.3.0")],
)
def test_another_gpu_or_software_does_not_read_the_record(tmp_path, column, other):
    folder = use_caches(tmp_path, ENVIRONMENT)
    (folder / CHOICES_FILE).write_text(json.dumps({point_key(CONFIG): 0.0}))
    elsewhere = use_caches(tmp_path, {**ENVIRONMENT, column: other})
    assert elsewhere != folder
    choice = plan_cudnn_search(CONFIG, GPU, True, elsewhere, ranks=1)
    assert choice.search and choice.probe


def test_another_point_does_not_read_the_record(tmp_path):
    folder = use_caches(tmp_path, ENVIRONMENT)
    (folder / CHOICES_FILE).write_text(json.dumps({point_key(CONFIG): 0.0}))
    for changed in (CONFIG.replace(batch_size=256), CONFIG.replace(mode="infer"),
                    CONFIG.replace(precision="16-mixed")):  # fmt: skip
        assert plan_cudnn_search(changed, GPU, True, folder, ranks=1).probe


def test_cold_runs_ranks_and_explicit_flags_search_without_probing(tmp_path):
    folder = use_caches(tmp_path, ENVIRONMENT)
    (folder / CHOICES_FILE).write_text(json.dumps({point_key(CONFIG): 0.0}))
    cold = plan_cudnn_search(CONFIG, GPU, True, None, ranks=1)  # --no-cache: nothing recorded
    assert cold.search and not cold.probe
    ddp = plan_cudnn_search(CONFIG, GPU, True, folder, ranks=2)  # ranks must run equal steps
    assert ddp.search and not ddp.probe
    on = plan_cudnn_search(CONFIG.replace(cudnn_search="on"), GPU, True, folder, ranks=1)
    off = plan_cudnn_search(CONFIG.replace(cudnn_search="off"), GPU, True, folder, ranks=1)
    assert (on.search, off.search) == (True, False)
    assert off.finish(0.01) == {"cudnn_algorithms": "heuristics", "cudnn_search_gain_pct": None}


def test_no_gpu_or_no_convolution_leaves_the_column_empty(tmp_path):
    for device, convolutions in ((CPU, True), (GPU, False)):
        choice = plan_cudnn_search(CONFIG, device, convolutions, tmp_path, ranks=1)
        assert choice.search is None and choice.finish(0.01) == {"cudnn_algorithms": ""}


def test_an_unreadable_record_is_no_record(tmp_path):
    folder = use_caches(tmp_path, ENVIRONMENT)
    (folder / CHOICES_FILE).write_text("{not json")
    assert plan_cudnn_search(CONFIG, GPU, True, folder, ranks=1).probe
