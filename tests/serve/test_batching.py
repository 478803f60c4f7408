"""The serving side's pure pieces and LoadGen's own words: the batcher's policy, the system
under test handing queries from LoadGen's callback to the model server and back, the rate search
over LoadGen's verdicts, and LoadGen's detail log read back (real LoadGen, a planted server)."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

from dlbench.serve.batching import BatchPolicy
from dlbench.serve.loadgen import Load, run_load
from dlbench.serve.model_server import buckets
from dlbench.serve.sut import SystemUnderTest


def test_a_batch_leaves_full_or_when_its_oldest_query_has_waited_the_timeout():
    policy = BatchPolicy(max_batch=4, timeout_s=0.002)
    assert policy.batch_now(9, 0.0) == 4  # a full batch at once
    assert policy.batch_now(3, 0.001) == 0  # waits for company
    assert policy.wait_s(0.0015) == pytest.approx(0.0005)
    assert policy.batch_now(3, 0.002) == 3  # the oldest waited the timeout
    assert policy.batch_now(0, 1.0) == 0 and policy.wait_s(1.0) == 0.0


def _queries(ids):
    return [SimpleNamespace(id=i) for i in ids]


def test_single_stream_answers_in_loadgens_call_and_the_others_on_the_serving_thread():
    answered, sizes, threads = [], [], []

    def run_batch(n):
        sizes.append(n)
        threads.append(threading.current_thread().name)

    inline = SystemUnderTest(run_batch, answered.extend, BatchPolicy(4, 0.001), inline=True)
    inline.issue_queries(_queries([7]))
    assert answered == [7] and threads == [threading.current_thread().name]
    inline.close()

    answered.clear(), sizes.clear(), threads.clear()
    queued = SystemUnderTest(run_batch, answered.extend, BatchPolicy(4, 0.001), inline=False)
    queued.issue_queries(_queries(range(10)))  # LoadGen's call returns at once
    deadline = time.monotonic() + 5
    while len(answered) < 10 and time.monotonic() < deadline:
        time.sleep(0.001)
    queued.close()
    assert sorted(answered) == list(range(10)) and answered == list(range(10))  # in order
    assert sizes == [4, 4, 2] and set(threads) == {"dlbench-sut"}
    split = queued.split.columns()
    assert split["serve_mean_batch"] == pytest.approx(10 / 3)
    assert split["serve_queue_ms"] >= 0 and split["serve_issue_us"] > 0


def test_buckets_are_powers_of_two_up_to_the_largest_batch():
    assert buckets(1) == [1] and buckets(8) == [1, 2, 4, 8] and buckets(12) == [1, 2, 4, 8, 12]


def _planted(scenario: str):
    """A system under test over a planted server of 0.3 ms a batch, as serve.services makes
    one for whole queries."""

    def make(answers):
        inline = scenario == "single-stream"
        return SystemUnderTest(
            lambda n: time.sleep(0.0003), answers.queries, BatchPolicy(8, 0.001), inline
        )

    return make


@pytest.mark.parametrize(
    ("scenario", "extra"),
    [
        ("server", {"expected": 1000.0, "bound_ms": 50.0}),
        ("single-stream", {"expected": 0.5}),  # ms a query
        ("offline", {"expected": 30000.0}),  # the planted server's own rate
    ],
)
def test_loadgen_runs_each_scenario_and_its_log_is_read_back(tmp_path, scenario, extra):
    """The real LoadGen against a planted server of 0.3 ms a batch: VALID, its rates and
    percentiles as its detail log gives them, the queries' time split by where it went."""
    pytest.importorskip("mlperf_loadgen")
    load = Load(scenario, min_duration_s=0.5, min_queries=64, **extra)
    result, served = run_load(_planted(scenario), load, 8, tmp_path)
    split = served.columns()
    assert result.valid and result.reasons == (), (scenario, result)
    assert result.queries >= 64 and result.completed_qps > 0
    assert 0.2 < result.latency_ms[50] <= result.latency_ms[90] <= result.latency_ms[99]
    assert result.latency_ms[99] < (5000 if scenario == "offline" else 50)  # offline: one query
    assert (result.scheduled_qps is not None) == (scenario == "server")
    assert (tmp_path / "mlperf_log_summary.txt").read_text().count("Result is : VALID") == 1
    assert split["serve_batch_ms"] >= 0.3 and split["serve_mean_batch"] >= 1
    columns = result.columns()
    assert columns["serve_result"] == "VALID" and columns["serve_latency_p99_ms"] > 0


def test_a_server_loadgen_calls_invalid_says_why(tmp_path):
    """A bound no server meets: INVALID, the latency bound named (and early stopping, whose
    estimate is of the same percentile)."""
    pytest.importorskip("mlperf_loadgen")
    load = Load("server", 0.3, 32, expected=200.0, bound_ms=0.01)
    result, _ = run_load(_planted("server"), load, 8, tmp_path)
    assert not result.valid and "latency_bound" in result.reasons
