"""LLM generation: a fixed prompt, a fixed number of new tokens (no early stop), static KV cache.

One event per token, all read after the window: time to first token (prefill) and inter-token
latency (decode) come from the same rounds; greedy next tokens stay on the device."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import torch

from dlbench.analysis.stats import StepStats
from dlbench.config import RunConfig
from dlbench.engine.loop import LoopResult, WindowObserver
from dlbench.engine.precision import PrecisionPlan
from dlbench.engine.timer import StepTimer, synchronize
from dlbench.workloads import InputShape, Workload


@dataclass
class Generator:
    """A model on the device with its static cache, prompts and positions made once."""

    module: Any
    cache: Any
    prompts: torch.Tensor
    positions: torch.Tensor
    prompt_len: int
    new_tokens: int

    def round(self, timer: StepTimer | None = None) -> None:
        """Prefill then decode `new_tokens - 1` tokens; marks after prefill and each token."""
        self.cache.reset()
        p = self.prompt_len
        logits = self.module(
            input_ids=self.prompts,
            past_key_values=self.cache,
            cache_position=self.positions[:p],
            logits_to_keep=1,
            use_cache=True,
        ).logits
        token = logits[:, -1].argmax(-1, keepdim=True)
        if timer:
            timer.mark()
        for t in range(self.new_tokens - 1):
            logits = self.module(
                input_ids=token,
                past_key_values=self.cache,
                cache_position=self.positions[p + t : p + t + 1],
                use_cache=True,
            ).logits
            token = logits[:, -1].argmax(-1, keepdim=True)
            if timer:
                timer.mark()


def open_generator(
    config: RunConfig, workload: Workload, shape: InputShape, precision: PrecisionPlan, fabric
) -> tuple[Generator, int]:
    """Build the decoder on the device with a static cache sized prompt + new tokens."""
    from transformers import StaticCache

    precision.apply_matmul_settings()
    torch.manual_seed(config.seed)
    total = config.prompt_len + config.new_tokens
    with fabric.init_module():
        model = workload.build(InputShape(shape.width, shape.height, total))
    model.config.use_cache = True
    params = sum(p.numel() for p in model.parameters())
    module = fabric.setup_module(model)
    module.eval()
    gen = torch.Generator().manual_seed(config.seed)
    vocab = model.config.vocab_size
    prompts = torch.randint(0, vocab, (config.batch_size, config.prompt_len), generator=gen)
    cache = StaticCache(config=model.config, max_cache_len=total)
    return (
        Generator(
            module=module,
            cache=cache,
            prompts=fabric.to_device(prompts),
            positions=fabric.to_device(torch.arange(total)),
            prompt_len=config.prompt_len,
            new_tokens=config.new_tokens,
        ),
        params,
    )


def measure_generation(
    generator: Generator,
    device: torch.device,
    config: RunConfig,
    observer: WindowObserver | None,
) -> tuple[LoopResult, dict[str, object]]:
    """Warm-up rounds, then `n_iters` timed rounds; per-round times plus token statistics."""
    started = time.perf_counter()
    with torch.inference_mode():
        for _ in range(config.warmup_steps):
            generator.round()
        synchronize(device)
        warmup_s = time.perf_counter() - started
        timers = []
        if observer:
            observer.begin_window()
        wall_started = time.perf_counter()
        for _ in range(config.n_iters):
            timer = StepTimer(device, generator.new_tokens)
            timer.mark()
            generator.round(timer)
            timers.append(timer)
        synchronize(device)
        wall_s = time.perf_counter() - wall_started
        if observer:
            observer.end_window()
    per_token = [t.step_times_s() for t in timers]
    rounds = [sum(times) for times in per_token]
    loop = LoopResult(rounds, sum(rounds), wall_s, warmup_s, None, None)
    return loop, token_columns(per_token, config.batch_size, config.prompt_len)


def token_columns(
    per_token: list[list[float]], batch_size: int, prompt_len: int
) -> dict[str, object]:
    """TTFT and ITL percentiles; prefill, decode and end-to-end tokens/s (real tokens only)."""
    ttft = StepStats.from_values([times[0] for times in per_token])
    itl_values = [t for times in per_token for t in times[1:]]
    new_tokens = len(per_token[0])
    total_s = sum(sum(times) for times in per_token)
    row: dict[str, object] = {
        "prompt_len": prompt_len,
        "new_tokens": new_tokens,
        "ttft_p50_ms": ttft.median_s * 1e3,
        "ttft_p99_ms": ttft.p99_s * 1e3,
        "prefill_tokens_per_s": batch_size * prompt_len / ttft.median_s,
        "e2e_tokens_per_s": batch_size * new_tokens * len(per_token) / total_s,
        "tokens_per_s": batch_size * new_tokens * len(per_token) / total_s,
    }
    if itl_values:
        itl = StepStats.from_values(itl_values)
        row.update(
            itl_p50_ms=itl.median_s * 1e3,
            itl_p99_ms=itl.p99_s * 1e3,
            decode_tokens_per_s=batch_size / itl.median_s,
        )
    return row
