"""LLM generation on the tiny decoder: what the row's token figures mean, the compiled path's
tokens, and compilation kept out of the window."""

from __future__ import annotations

import pytest
import torch

from dlbench.config import RunConfig
from dlbench.engine.distribution.fabric import create_fabric
from dlbench.engine.plan import make_plan
from dlbench.engine.scenarios import generation
from dlbench.engine.scenarios.generation import (
    PREFILL_SAMPLES,
    measure_generation,
    open_generator,
    prepare_steps,
    token_columns,
)
from dlbench.engine.timing.loop import LoopResult, loop_settings
from tests.conftest import read_rows, run_cli


def _loop(step_times: list[float], per_unit: int) -> LoopResult:
    return LoopResult(step_times, sum(step_times), sum(step_times), 0.0, None, None, per_unit)


def test_token_figures_come_from_the_right_steps():
    # prefill window: (reset, prefill) pairs; rounds: reset, prefill, 3 decode steps
    prefill = _loop([0.9, 0.050] * 50 + [0.9, 0.060] * 50, 2)
    rounds = _loop([0.5, 0.05, 0.010, 0.010, 0.040, 0.5, 0.05, 0.010, 0.010, 0.010], 5)
    row = token_columns(prefill, rounds, batch_size=4, prompt_len=100)
    assert row["prefill_samples"] == 100
    assert row["ttft_p50_ms"] == pytest.approx(55.0)  # resets (0.9 s) are in neither latency
    assert row["ttft_p99_ms"] == pytest.approx(60.0)
    assert row["itl_p50_ms"] == pytest.approx(10.0)
    assert row["itl_mean_ms"] == pytest.approx(90.0 / 6)
    assert row["decode_tokens_per_s"] == pytest.approx(4 / 0.015)  # mean ITL, not median
    assert row["itl_p99_ms"] is None  # 6 values: a p99 would be their maximum
    assert row["e2e_tokens_per_s"] == pytest.approx(4 * 4 * 2 / sum(rounds.step_times_s))
    assert row["new_tokens"] == 4 and rounds.steps == 2


@pytest.mark.slow
def test_generation_row_records_context_prefills_path_and_attention(csv_path):
    out = run_cli(
        "infer",
        "--model",
        "llm_tiny",
        "--accelerator",
        "cpu",
        "--batch-size",
        "2",
        "--prompt-len",
        "8",
        "--new-tokens",
        "5",
        "--n-iters",
        "3",
        "--warmup-steps",
        "1",
        "--output",
        csv_path,
    )
    assert out.returncode == 0, out.stderr
    [row] = read_rows(csv_path)
    assert (row["prompt_len"], row["new_tokens"], row["seq_len"]) == ("8", "5", "13")
    assert row["steps"] == "3" and int(row["prefill_samples"]) == PREFILL_SAMPLES
    assert row["generation_path"] == "eager" and row["compile"] == "False"
    assert row["attention_backend"] in ("math", "flash_cpu")
    assert float(row["ttft_p99_ms"]) >= float(row["ttft_p50_ms"]) > 0
    assert float(row["decode_tokens_per_s"]) == pytest.approx(2e3 / float(row["itl_mean_ms"]))
    assert int(row["kv_cache_bytes_per_token"]) == 2 * 2 * 2 * 16 * 4  # K+V, layers, heads, dim
    assert float(row["decode_bytes_per_step"]) > 0


@pytest.mark.e2e
def test_compiled_steps_give_eager_tokens_and_compile_stays_in_warmup(monkeypatch):
    monkeypatch.setattr(generation, "COORDINATE_DESCENT_MAX_BATCH", 2)  # tuned at this batch
    config = RunConfig.of(
        model="llm_tiny",
        mode="infer",
        accelerator="cpu",
        batch_size=2,
        prompt_len=8,
        new_tokens=6,
        n_iters=2,
        warmup_steps=1,
    )
    plan = make_plan(config)
    fabric = create_fabric(plan.devices, plan.fabric_precision)
    generator, _ = open_generator(plan.config, plan.workload, plan.shape, plan.precision, fabric)
    with torch.inference_mode():
        eager = prepare_steps(generator, compile=False, cuda_graphs=False).tokens(generator)
    compiled_config = plan.config.replace(compile=True)
    settings = loop_settings(compiled_config, "cpu")
    tuning = torch._inductor.config.coordinate_descent_tuning
    loop, steps, columns = measure_generation(
        generator, fabric.device, compiled_config, settings, None, lambda v: v
    )
    # inductor's settings for the decode step stay with it: a sweep worker compiles the next
    # point's model with its own (a leaked tuning flag: the default plan's batch-1 warm-ups on
    # an H100 took 31.6 / 28.1 / 24.8 s with it, 9.5 / 7.5 / 6.9 s once mended)
    assert torch._inductor.config.coordinate_descent_tuning == tuning
    with torch.inference_mode():
        assert torch.equal(steps.tokens(generator), eager)
    assert columns["generation_path"] == "compiled"
    # inductor's compilation happened in the warm-up (however warm its on-disk cache) ...
    assert loop.warmup_s > 10 * max(loop.step_times_s)
    assert max(loop.step_times_s) < 0.5  # ... and in no measured step


@pytest.mark.slow
def test_the_two_stage_greedy_token_is_argmax_ties_included():
    """The greedy token in two stages is argmax's first index of the maximum, eager and
    compiled, with many tied maxima across and inside blocks (logits in a few levels), and
    a vocabulary that is no multiple of the block."""
    from dlbench.engine.scenarios.decoders import GREEDY_BLOCK, greedy_token

    torch.manual_seed(0)
    tied = torch.randint(0, 4, (6, 4 * GREEDY_BLOCK)).float()
    tied[0, GREEDY_BLOCK + 3] = 9.0  # one maximum away from the first block
    ragged = torch.randn(2, GREEDY_BLOCK + 5)
    compiled = torch.compile(greedy_token)
    for logits in (tied, ragged):
        expected = logits.argmax(-1, keepdim=True)
        assert torch.equal(greedy_token(logits), expected)
        assert torch.equal(compiled(logits), expected)


def test_transformers_gets_its_cache_by_the_name_its_release_takes():
    """`cache` supersedes `past_key_values` (gone in transformers 5.40, a FutureWarning before);
    a release without it (the GPU image's) still gets `past_key_values`."""
    from dlbench.engine.scenarios.decoders import cache_argument

    class New:
        def forward(self, input_ids=None, cache=None, **kwargs): ...

    class Old:
        def forward(self, input_ids=None, past_key_values=None, **kwargs): ...

    assert cache_argument(New()) == "cache" and cache_argument(Old()) == "past_key_values"
