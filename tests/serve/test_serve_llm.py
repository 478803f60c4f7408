"""`dlbench serve` of a decoder LLM end to end on the CPU: the real tiny Llama, MLPerf's real
LoadGen with its token latencies, a real clock. Each scenario writes one row with what LoadGen
said (its time to first token and per output token where it measures them, its tokens a
second), a bound passed is named, bad settings are one line before anything is built, and a
decode loop that fails mid-load ends the run with a row, never a hang."""

from __future__ import annotations

import math

import pytest

from dlbench.results.store import CsvStore
from tests.conftest import refused
from tests.serve.test_serve_failures import failed_mid_load

LLM = ["--accelerator", "cpu", "--model", "llm_tiny", "--precision", "32", "--no-compile",
       "--max-batch", "4", "--prompt-len", "16", "--new-tokens", "6"]  # fmt: skip
SHORT = ["--min-duration", "0.3", "--queries", "24"]


def _served(dlbench, out, scenario, *extra):
    code, _, err = dlbench("serve", *LLM, "--scenario", scenario, *SHORT, *extra,
                                 "--output", out)  # fmt: skip
    assert code == 0, err
    return CsvStore(out).rows()[-1]


@pytest.mark.parametrize(
    ("scenario", "extra"),
    [("single-stream", []), ("offline", []), ("server", ["--qps", "20"])],
)
def test_each_scenario_writes_a_row_with_loadgens_token_figures(dlbench, tmp_path, scenario, extra):
    row = _served(dlbench, tmp_path / "serve.csv", scenario, *extra)
    assert row["run_kind"] == "serve" and row["serve_scenario"] == scenario
    # as LoadGen says (a loaded CI host may be INVALID): its reasons named exactly when INVALID
    assert (row["serve_result"] == "VALID") == (row["serve_invalid_reasons"] == ""), row
    assert (row["verdict"] == "valid") == (row["serve_result"] == "VALID")
    assert row["serve_batching"] == "continuous" and row["serve_lengths"] == "fixed"
    assert row["prompt_len"] == "16" and row["new_tokens"] == "6"
    assert float(row["serve_output_tokens_per_s"]) > 0
    assert float(row["serve_output_tokens_mean"]) == 6
    assert float(row["serve_prompt_tokens_mean"]) == 16
    total = float(row["serve_output_tokens_per_s"]) * 22 / 6
    assert float(row["serve_total_tokens_per_s"]) == pytest.approx(total, rel=1e-3)
    assert int(row["serve_kv_slots"]) == 4 and float(row["serve_kv_cache_gb"]) > 0
    assert 1 <= float(row["serve_mean_batch"]) <= 4 and float(row["serve_warmup_s"]) >= 0
    # LoadGen measures token latencies but in offline, where the server's clock gives them
    assert row["serve_token_clock"] == ("server" if scenario == "offline" else "loadgen")
    for figure in ("ttft", "tpot", "itl", "e2el"):  # every latency a serving benchmark reports
        p50, p90, p99 = (float(row[f"serve_{figure}_p{q}_ms"]) for q in (50, 90, 99))
        assert 0 < p50 <= p90 <= p99, figure
    assert 0 < float(row["serve_itl_mean_ms"]) <= float(row["serve_e2el_p99_ms"])
    if scenario != "offline":
        assert float(row["serve_ttft_p50_ms"]) < float(row["serve_latency_p50_ms"])
    # goodput: the requests that met both bounds (MLPerf's Llama-3.1-8B bounds by default)
    bounds = (row["serve_ttft_p99_bound_ms"], row["serve_tpot_p99_bound_ms"])
    assert bounds == ("2000.0", "100.0") and row["serve_token_bounds"] == "mlperf"
    assert 0 < float(row["serve_goodput_pct"]) <= 100
    share = float(row["serve_goodput_tokens_per_s"]) / float(row["serve_goodput_qps"])
    assert share == pytest.approx(6)  # each request's 6 output tokens
    # the served tokens held against the model's own without a cache
    assert int(row["serve_tokens_checked"]) == 4 and row["serve_tokens_wrong"] == "0"
    assert row["serve_batch_timeout_ms"] == "" and row["cuda_graphs"] == "False"


def test_a_server_past_its_token_bound_is_invalid_and_the_bound_is_named(dlbench, tmp_path):
    bounds = ["--tpot-p99-ms", "0.001", "--ttft-p99-ms", "60000"]  # the second holds anywhere
    row = _served(dlbench, tmp_path / "serve.csv", "server", "--qps", "20", *bounds)
    assert row["serve_result"] == "INVALID" and "tpot_bound" in row["serve_invalid_reasons"]
    assert "ttft_bound" not in row["serve_invalid_reasons"]
    assert "tpot_bound" in row["verdict_reasons"] and row["serve_tpot_p99_bound_ms"] == "0.001"


@pytest.mark.e2e
def test_a_search_finds_the_highest_request_rate_valid_under_both_token_bounds(dlbench, tmp_path):
    """--find-qps over LoadGen's token latencies: 1,024 requests a load (fewer leave LoadGen's
    early stopping unmet at p99), a rate found VALID, its token figures in the row."""
    out = tmp_path / "serve.csv"
    search = ["--find-qps", "--search-budget", "40", "--min-duration", "1", "--queries", "1024"]
    code, printed, err = dlbench("serve", *LLM, "--scenario", "server", *search, "--output", out)
    assert code == 0, err
    row = CsvStore(out).rows()[-1]
    assert row["serve_find_qps"] == "True" and int(row["serve_points_tried"]) >= 1
    assert row["serve_result"] == "VALID" and float(row["serve_qps_found"]) > 0, row
    assert float(row["serve_ttft_p99_ms"]) <= 2000 and float(row["serve_tpot_p99_ms"]) <= 100
    assert "found " in printed and "/s in " in printed
    from dlbench.analysis.load import load_rows
    from dlbench.analysis.serving import search_points

    points = search_points(load_rows([out]))  # the report's rate curve: every point tried
    assert len(points) == int(row["serve_points_tried"]) and points["p99_ms"].gt(0).all()
    assert set(points["bound_ms"]) == {2000.0}


def test_a_served_path_that_answers_wrong_tokens_makes_the_row_invalid(dlbench, tmp_path):
    wrong = [a if a != "llm_tiny" else "llm_serve_wrong" for a in LLM]
    out = tmp_path / "serve.csv"
    code, printed, err = dlbench("serve", *wrong, "--scenario", "offline", *SHORT,
                                 "--output", out)  # fmt: skip
    assert code == 0, err
    row = CsvStore(out).rows()[-1]
    assert row["serve_tokens_checked"] == "4" and row["serve_tokens_wrong"] == "4"
    assert row["verdict"] == "invalid" and "wrong_tokens" in row["verdict_reasons"]
    if row["serve_result"] == "VALID":  # LoadGen counts tokens, it cannot read them: the check
        assert row["verdict_reasons"] == "wrong_tokens"  # alone (a loaded host's LoadGen may
    # call so short a load INVALID on its own, min_duration, beside it)
    assert "wrong token" in printed


def test_static_batching_serves_whole_batches_and_says_so(dlbench, tmp_path):
    row = _served(dlbench, tmp_path / "serve.csv", "offline", "--batching", "static")
    assert row["serve_batching"] == "static" and float(row["serve_output_tokens_per_s"]) > 0


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["--prompt-len", "2000", "--new-tokens", "49"], "context of 2,048"),
        (["--prompt-len", "1400", "--new-tokens", "6", "--lengths", "uniform"], "longest"),
        (["--kv-cache-gb", "0.000001"], "cannot hold one request"),
        (["--scenario", "server", "--qps", "5", "--ttft-p99-ms", "0"], "--ttft-p99-ms"),
        (["--scenario", "server", "--qps", "5", "--tpot-p99-ms", "-1"], "--tpot-p99-ms"),
        (["--scenario", "server", "--qps", "5", "--slo-p99-ms", "50"], "--slo-p99-ms"),
        (["--token-bounds", "strict"], "--token-bounds"),
        (["--width", "64"], "--width"),
        (["--no-channels-last"], "--no-channels-last"),
        (["--seq-len", "64"], "--seq-len"),
        (["--new-tokens", "1"], "--new-tokens"),
        (["--batching", "eager"], "--batching"),
        (["--lengths", "normal"], "--lengths"),
        (["--batch-timeout-ms", "5"], "--batch-timeout-ms"),
        (["--kv-cache-gb", "nan"], "--kv-cache-gb"),
        (["--precision", "fp8"], "FP8 tensor cores"),  # served on a GPU; the CPU has none
        (["--sweep-concurrency", "--run-id", "r1"], "--run-id"),  # a row a point, each its id
        (["--scenario", "server", "--qps", "5", "--sweep-concurrency"], "offline only"),
        (["--scenario", "single-stream", "--sweep-concurrency"], "--sweep-concurrency"),
    ],
)
def test_bad_llm_settings_are_one_line_and_the_csv_keeps_its_rows(dlbench, kept, args, names):
    refused(dlbench("serve", *LLM, "--scenario", "offline", *args, "--output", kept), names)


@pytest.mark.parametrize("flag", [["--prompt-len", "8"], ["--batching", "static"],
                                  ["--kv-cache-gb", "1"], ["--lengths", "uniform"],
                                  ["--token-bounds", "interactive"],
                                  ["--sweep-concurrency"]])  # fmt: skip
def test_an_llms_own_flags_given_for_another_model_are_refused(dlbench, kept, flag):
    base = ["--accelerator", "cpu", "--model", "timm:test_resnet", "--scenario", "offline"]
    refused(dlbench("serve", *base, *flag, "--output", kept), flag[0])


@pytest.mark.parametrize("scenario", ["single-stream", "server", "offline"])
@pytest.mark.e2e
def test_a_decode_loop_that_fails_mid_load_ends_with_a_row_within_a_minute(tmp_path, scenario):
    failing = [a if a != "llm_tiny" else "llm_serve_fail" for a in LLM]
    # a load of 45 s at least; at a rate, few enough queries (900) that even a loaded host's
    # offline rate answers them in time, or the load is refused before it starts (exit 2)
    size = ["--qps", "20", "--queries", "1"] if scenario == "server" else ["--queries", "100000"]
    load = ["--scenario", scenario, *size, "--min-duration", "45"]
    rows = failed_mid_load(tmp_path / "serve.csv", [*failing, *load])
    assert "decode loop" in rows[1]["error"] and rows[1]["serve_scenario"] == scenario


def test_an_llm_row_is_reported_with_its_tokens_and_gated_like_any_serve_row(dlbench, tmp_path):
    """A real offline LLM row: the report's serving section shows its output tokens a second;
    compare holds it against a baseline of itself (the same within a CPU's run-to-run spread)
    and fails it with its rate halved, naming it (exit 1)."""
    import csv

    from dlbench.analysis.report import build_report

    base = tmp_path / "base.csv"
    row = _served(dlbench, base, "offline")
    report = build_report([base], tmp_path / "report")
    section = report.markdown.read_text().split("## Serving under load")[1].split("## ")[0]
    assert "llm_tiny" in section and "output tokens/s" in section and "TTFT p99 ms" in section
    # a loaded host's LoadGen may call so short a load INVALID, which compare rightly leaves
    # out ("nothing to compare", exit 2): the gate's arithmetic on the real row is what's tried
    row = {**row, "verdict": "valid", "verdict_reasons": "", "serve_result": "VALID",
           "serve_invalid_reasons": ""}  # fmt: skip
    for path, rate in ((base, 1.0), (tmp_path / "halved.csv", 0.5)):
        with path.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(row))
            writer.writeheader()
            writer.writerow({**row, "serve_achieved_qps": float(row["serve_achieved_qps"]) * rate})
    halved = tmp_path / "halved.csv"
    # a CPU's figure strays run to run by CPU_RUN_SPREAD_PCT: one run cannot be called the same
    # as another within 5 % (inconclusive, exit 5), within 80 % it can
    code, printed, err = dlbench("compare", base, base)
    assert code == 5 and "1 inconclusive" in printed, err
    code, printed, err = dlbench("compare", base, base, "--threshold", "80")
    assert code == 0, printed + err
    code, printed, _ = dlbench("compare", base, halved)
    assert code == 1 and "1 slower" in printed
    assert any("llm_tiny" in line and "-50.0" in line for line in printed.splitlines())


@pytest.mark.e2e
def test_an_llm_rows_energy_is_per_request_and_per_output_token(tmp_path):
    """Under a fake NVML at 250 W: the load's energy divided by its requests, and by their
    output tokens (every request's, not a batch's)."""
    from tests import fake_nvml
    from tests.conftest import cli_env, run_cli

    state = tmp_path / "nvml.json"
    fake_nvml.write_state(state, [{"power_w": 250.0, "processes": 0}])
    out = tmp_path / "serve.csv"
    env = {**cli_env(), **fake_nvml.environment(state)}
    load = ["--scenario", "offline", "--min-duration", "1", "--queries", "64"]
    done = run_cli("serve", *LLM, *load, "--output", out, env=env)
    assert done.returncode == 0, done.stderr
    [row] = CsvStore(out).rows()
    energy, requests = float(row["energy_j"]), int(row["serve_queries"])
    assert float(row["avg_power_w"]) == pytest.approx(250.0, rel=0.01)
    assert float(row["energy_per_sample_j"]) == pytest.approx(energy / requests)
    assert float(row["energy_per_token_j"]) == pytest.approx(energy / (requests * 6))


def test_an_offline_cpu_load_warms_each_step_on_its_own_line_and_says_its_verdict_once(
    dlbench, tmp_path
):
    """On the CPU an offline LLM load is not sized by memory (that is a GPU's KV cache; here it
    meant 4,096 slots and minutes of reference), compiles nothing by default, prints a line per
    step warmed, says its verdict once and why it answered more queries than asked."""
    import re

    out = tmp_path / "serve.csv"
    code, printed, err = dlbench(
        "serve", "--accelerator", "cpu", "--model", "llm_tiny", "--prompt-len", "16",
        "--new-tokens", "6", "--scenario", "offline", "--min-duration", "0.5", "--queries", "8",
        "--output", out,
    )  # fmt: skip
    assert code == 0, err
    row = CsvStore(out).rows()[-1]
    assert row["serve_kv_slots"] == "64" and row["serve_max_batch"] == "64"
    assert row["compile"] == "False" and row["accelerator"] == "cpu"
    steps = int(re.search(r"warming 64 slots, (\d+) steps", err).group(1))
    warmed = re.findall(
        r"warmed (\d+)/(\d+): (decode of \d+ rows|prefill of \d+ x \d+ tokens)", err
    )
    assert [int(k) for k, _, _ in warmed] == list(range(1, steps + 1))
    verdicts = [line for line in printed.splitlines() if line.startswith(("VALID", "INVALID"))]
    assert len(verdicts) == 1 and "(LoadGen)" not in printed, printed
    answered = int(row["serve_queries"])  # half a second at the reference's rate: more than 8
    assert answered > 8
    assert f"{answered:,} queries (8 asked: LoadGen issues as many as last 0.5 s" in printed


@pytest.mark.e2e
def test_a_concurrency_sweep_writes_the_frontier_a_row_a_concurrency_each_a_servers_of_as_many(
    dlbench, tmp_path
):
    """--sweep-concurrency: one warm-up, then an offline load at 1, 2 and 4 requests at once,
    each with its own offline reference; each row reads as a server of that many slots (the
    rows a `--max-batch` of it would write: compare pairs them), its tokens a second per user
    1 / its median time per output token; the table of the frontier after the rows."""
    out = tmp_path / "serve.csv"
    code, printed, err = dlbench(
        "serve", *LLM, "--scenario", "offline", "--min-duration", "0.3", "--sweep-concurrency",
        "--output", out,
    )  # fmt: skip
    assert code == 0, err
    rows = CsvStore(out).rows()
    for row in rows:  # least queries: 1.5 times the least duration at the point's own rate
        concurrency, rate = int(row["serve_max_batch"]), float(row["serve_offline_samples_per_s"])
        least = max(2 * concurrency, math.ceil(1.5 * rate * 0.3))
        assert int(row["serve_min_queries"]) == least < 1024  # not a thousand one at a time
        assert int(float(row["serve_queries"])) >= least
    assert [r["serve_max_batch"] for r in rows] == ["1", "2", "4"]
    assert [r["batch_size"] for r in rows] == ["1", "2", "4"]
    assert [r["serve_kv_slots"] for r in rows] == ["1", "2", "4"]
    assert len({r["run_id"] for r in rows}) == 3 and err.count("warmed 1/") == 1  # warmed once
    cache = [float(r["serve_kv_cache_gb"]) for r in rows]
    assert cache[1] == pytest.approx(2 * cache[0]) and cache[2] == pytest.approx(4 * cache[0])
    for row in rows:
        assert row["serve_scenario"] == "offline" and row["run_kind"] == "serve"
        assert 1 <= float(row["serve_mean_batch"]) <= float(row["serve_max_batch"])
        per_user = 1e3 / float(row["serve_tpot_p50_ms"])
        assert float(row["serve_tokens_per_s_per_user"]) == pytest.approx(per_user, rel=1e-6)
        assert int(row["serve_tokens_checked"]) >= 1 and row["serve_tokens_wrong"] == "0"
    references = {r["serve_offline_samples_per_s"] for r in rows}
    assert len(references) == 3  # each concurrency's own
    assert len({r["serve_batch1_p50_ms"] for r in rows}) == 1  # one request alone: measured once
    assert printed.count("LoadGen's logs:") == 3
    table = printed[printed.index("the serving frontier of llm_tiny (3 concurrencies):") :]
    assert [line.split()[0] for line in table.splitlines()[2:]] == ["1", "2", "4"]
    # a point of the frontier is the row a server capped at its concurrency writes
    least = ["--min-duration", "0.3", "--queries", rows[1]["serve_min_queries"]]
    code, _, err = dlbench(
        "serve", *[a if a != "4" else "2" for a in LLM], "--scenario", "offline", *least,
        "--output", out,
    )  # fmt: skip
    assert code == 0, err
    from dlbench.results.pairing import SERVE_EXPERIMENT_KEY

    keys = [tuple(r.get(c) for c in SERVE_EXPERIMENT_KEY) for r in CsvStore(out).rows()]
    assert keys[3] == keys[1] and len(set(keys[:3])) == 3
