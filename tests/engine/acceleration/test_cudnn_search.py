"""cuDNN's search chosen per point: auto runs the heuristics until one run of each has been
recorded for the point in its cache folder and the search won by more than the threshold; a
folder of another GPU or software, another point, or no cache at all does not decide."""

from __future__ import annotations

import json

import pytest
import torch

from dlbench.caches import use_caches
from dlbench.config import RunConfig
from dlbench.engine.acceleration.cudnn_search import CUDNN_CHOICE, plan_cudnn_search
from dlbench.engine.acceleration.measured_choice import MIN_GAIN_PCT
from dlbench.engine.acceleration.measured_choice import point_key as key_of
from tests.engine.acceleration.test_caches import ENVIRONMENT


def point_key(config: RunConfig) -> str:
    return key_of(config, "cudnn_search")


GPU, CPU = torch.device("cuda"), torch.device("cpu")  # a device's type, no GPU needed
CONFIG = RunConfig.of(model="mobilenet_v3", batch_size=512, precision="bf16-mixed")


@pytest.fixture(autouse=True)
def _keep_cudnn_flag():
    before = torch.backends.cudnn.benchmark
    yield
    torch.backends.cudnn.benchmark = before


def run_point(config: RunConfig, folder, median_s: float, rank: int = 0) -> dict:
    """What a run of the point does: choose, set cuDNN, and record its window's median."""
    choice = plan_cudnn_search(config, GPU, True, folder, rank)
    choice.apply()
    assert torch.backends.cudnn.benchmark is choice.search
    return choice.finish(median_s)


def test_auto_runs_the_heuristics_until_the_search_is_measured_to_pay(tmp_path):
    folder = use_caches(tmp_path, ENVIRONMENT)
    first = run_point(CONFIG, folder, 0.0625)
    assert first == {"cudnn_algorithms": "heuristics", "cudnn_search_gain_pct": None}
    searched = run_point(CONFIG.replace(cudnn_search="on"), folder, 0.05)
    assert searched["cudnn_algorithms"] == "searched"
    assert searched["cudnn_search_gain_pct"] == pytest.approx(25.0)
    again = run_point(CONFIG, folder, 0.05)  # auto now searches: the record says it pays
    assert again == {"cudnn_algorithms": "searched", "cudnn_search_gain_pct": pytest.approx(25.0)}
    recorded = json.loads((folder / CUDNN_CHOICE.file).read_text())
    assert recorded == {point_key(CONFIG): {"heuristics": 0.0625, "searched": 0.05}}


def test_a_search_that_buys_less_than_the_threshold_is_not_run(tmp_path):
    folder = use_caches(tmp_path, ENVIRONMENT)
    run_point(CONFIG.replace(cudnn_search="on"), folder, 0.05)
    small = 0.05 * (1 + MIN_GAIN_PCT / 100 / 2)
    run_point(CONFIG.replace(cudnn_search="off"), folder, small)
    auto = run_point(CONFIG, folder, small)
    assert auto["cudnn_algorithms"] == "heuristics"
    assert auto["cudnn_search_gain_pct"] == pytest.approx(MIN_GAIN_PCT / 2)


@pytest.mark.parametrize(
    ("column", "other"),
    [("gpu_name", "NVIDIA H200"), ("torch", "2.12.0+cu130"), ("dlbench", "0.3.0")],
)
def test_another_gpu_or_software_does_not_read_the_record(tmp_path, column, other):
    folder = use_caches(tmp_path, ENVIRONMENT)
    (folder / CUDNN_CHOICE.file).write_text(
        json.dumps({point_key(CONFIG): {"heuristics": 0.1, "searched": 0.05}})
    )
    assert plan_cudnn_search(CONFIG, GPU, True, folder, 0).search is True
    elsewhere = use_caches(tmp_path, {**ENVIRONMENT, column: other})
    assert elsewhere != folder
    assert plan_cudnn_search(CONFIG, GPU, True, elsewhere, 0).search is False


def test_another_point_does_not_read_the_record(tmp_path):
    folder = use_caches(tmp_path, ENVIRONMENT)
    (folder / CUDNN_CHOICE.file).write_text(
        json.dumps({point_key(CONFIG): {"heuristics": 0.1, "searched": 0.05}})
    )
    for changed in (CONFIG.replace(batch_size=256), CONFIG.replace(mode="infer"),
                    CONFIG.replace(precision="16-mixed"), CONFIG.replace(devices="2")):  # fmt: skip
        assert plan_cudnn_search(changed, GPU, True, folder, 0).search is False


def test_no_cache_and_other_ranks_record_nothing(tmp_path):
    assert run_point(CONFIG, None, 0.05)["cudnn_algorithms"] == "heuristics"
    folder = use_caches(tmp_path, ENVIRONMENT)
    run_point(CONFIG, folder, 0.05, rank=1)
    assert not (folder / CUDNN_CHOICE.file).exists()


def test_no_gpu_or_no_convolution_leaves_the_column_empty(tmp_path):
    for device, convolutions in ((CPU, True), (GPU, False)):
        choice = plan_cudnn_search(CONFIG, device, convolutions, tmp_path, 0)
        assert choice.search is None and choice.finish(0.01) == {"cudnn_algorithms": ""}


@pytest.mark.parametrize("text", ["[1, 2]", '{"x": {"searched": "fast"}}', "null"])
def test_a_record_of_another_shape_is_no_record(tmp_path, text):
    folder = use_caches(tmp_path, ENVIRONMENT)
    (folder / CUDNN_CHOICE.file).write_text(text)
    assert run_point(CONFIG, folder, 0.05)["cudnn_algorithms"] == "heuristics"


def test_an_unreadable_record_is_no_record(tmp_path):
    folder = use_caches(tmp_path, ENVIRONMENT)
    (folder / CUDNN_CHOICE.file).write_text("{not json")
    row = run_point(CONFIG.replace(cudnn_search="on"), folder, 0.05)
    assert row["cudnn_search_gain_pct"] is None
    recorded = json.loads((folder / CUDNN_CHOICE.file).read_text())
    assert recorded == {point_key(CONFIG): {"searched": 0.05}}
