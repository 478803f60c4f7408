"""LLM generation: a fixed prompt, a fixed number of new tokens (no early stop), a static cache.

Everything a step needs lives on the device in static buffers: the prompt, the last greedy token
and its position. A decode step reads them, writes the next token and advances the position in
place, so the host never waits and the steps can be captured as CUDA graphs (the decode step
on top of `torch.compile`d code) whose replay costs the host microseconds. Compilation and
capture happen in warm-up. One round is a unit of the shared measured loop: cache reset,
prefill, then `new_tokens - 1` decode steps; the reset is in the round's time, in no latency."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import torch

from dlbench.config import RunConfig
from dlbench.engine.acceleration.float8 import Float8Layers, apply_float8
from dlbench.engine.acceleration.graphs import capture
from dlbench.engine.acceleration.precision import PrecisionPlan
from dlbench.engine.scenarios.decoders import HfDecoder, NativeDecoder, greedy_token
from dlbench.engine.timing.loop import LoopResult, WindowObserver, run_measured_loop
from dlbench.engine.timing.settings import Agreement, LoopSettings
from dlbench.engine.timing.timer import synchronize
from dlbench.workloads import InputShape, Workload
from dlbench.workloads.float8_weights import stored_bytes

PREFILL_SAMPLES = 100  # TTFT percentiles from at least this many prefills (p99 is not a max)
RESET, PREFILL = 0, 1  # step positions inside a round; decode steps follow


@dataclass
class Generator:
    """A decoder with its static cache and the device buffers one round reads and writes."""

    decoder: HfDecoder | NativeDecoder
    prompts: torch.Tensor
    prompt_positions: torch.Tensor
    token: torch.Tensor
    position: torch.Tensor
    new_tokens: int
    autocast: Callable[[], Any]
    float8: Float8Layers | None = None  # --precision fp8: the layers whose weights are float8

    @property
    def steps_per_round(self) -> int:
        """Reset, prefill and the decode steps."""
        return self.new_tokens + 1

    def reset(self) -> None:
        """Clear the static cache."""
        self.decoder.reset()

    def prefill(self) -> None:
        """The prompt through the model; the first new token and its position stay on device."""
        with self.autocast():
            logits = self.decoder.prefill(self.prompts, self.prompt_positions)
        self.token.copy_(greedy_token(logits[:, -1]))
        self.position.fill_(self.prompt_positions.numel())

    def decode(self) -> None:
        """One new token from the last one: greedy, in place, no host sync."""
        with self.autocast():
            logits = self.decoder.decode(self.token, self.position)
        if self.decoder.kernel_decode:  # the step's last two kernels, as the rest: Triton's
            from dlbench.workloads.greedy_kernels import greedy_advance

            greedy_advance(logits[:, -1], self.token, self.position)
            return
        self.token.copy_(greedy_token(logits[:, -1]))
        self.position.add_(1)


@dataclass
class RoundSteps:
    """The three steps as run in the window: plain calls, compiled, or graph replays."""

    reset: Callable[[], None]
    prefill: Callable[[], None]
    decode: Callable[[], None]
    path: str  # eager, compiled, cuda_graph or compiled+cuda_graph

    def round_step(self, steps_per_round: int) -> Callable[[int], None]:
        """Step i of the rounds window: its position in the round picks the phase."""

        def step(i: int) -> None:
            phase = i % steps_per_round
            (self.reset if phase == RESET else self.prefill if phase == PREFILL else self.decode)()

        return step

    def prefill_step(self, i: int) -> None:
        """Step i of the prefill window: a reset, then a prefill, and again."""
        (self.reset if i % 2 == 0 else self.prefill)()

    def tokens(self, generator: Generator) -> torch.Tensor:
        """One round's greedy tokens, read back token by token (for checks, never timed)."""
        self.reset()
        self.prefill()
        out = [generator.token.clone()]
        for _ in range(generator.new_tokens - 1):
            self.decode()
            out.append(generator.token.clone())
        return torch.cat(out, dim=1)


def open_generator(
    config: RunConfig, workload: Workload, shape: InputShape, precision: PrecisionPlan, fabric
) -> tuple[Generator, int]:
    """Build the decoder on the device with a static cache sized prompt + new tokens: the
    transformers model, or (`--llm-impl native`) the native one loaded with its weights."""
    precision.apply_matmul_settings()
    torch.manual_seed(config.measurement.seed)
    with fabric.init_module():
        model = workload.build(InputShape(shape.width, shape.height, shape.seq_len))
    model.config.use_cache = True
    model = fabric.to_device(model).eval()
    params = sum(p.numel() for p in model.parameters())
    if config.workload.llm_impl == "native":
        native = workload.native(model).eval()
        sdpa_only = config.acceleration.attention is not None
        decoder = NativeDecoder(native, config.workload.batch_size, shape.seq_len, sdpa_only)
        del model
    else:
        decoder = HfDecoder(model, shape.seq_len)
    float8 = apply_float8(decoder.model, precision.fp8, sharded=False)
    gen = torch.Generator().manual_seed(config.measurement.seed)
    vocab = workload.vocab_size
    prompts = torch.randint(
        0, vocab, (config.workload.batch_size, config.workload.prompt_len), generator=gen
    )
    generator = Generator(
        decoder=decoder,
        prompts=fabric.to_device(prompts),
        prompt_positions=fabric.to_device(torch.arange(config.workload.prompt_len)),
        token=fabric.to_device(torch.zeros(config.workload.batch_size, 1, dtype=torch.long)),
        position=fabric.to_device(torch.zeros(1, dtype=torch.long)),
        new_tokens=config.workload.new_tokens,
        autocast=_autocast(precision, fabric.device),
        float8=float8,
    )
    return generator, params


def _autocast(precision: PrecisionPlan, device: torch.device) -> Callable[[], Any]:
    """torch.autocast for a mixed precision (weights stay fp32), else nothing: plain torch
    context managers, which torch.compile traces."""
    dtype = precision.autocast_dtype
    if dtype is None:
        return nullcontext
    return lambda: torch.autocast(device.type, dtype=dtype)


# inductor's coordinate-descent tuning of its kernels' launch shapes, for the native decode step
# up to this batch: faster at batch 1, slower to warm up and to run at larger batches; it still
# applies where a batch-1 step compiles (--attention, fp32, autocast)
# (docs/decisions.md#coordinate-descent)
COORDINATE_DESCENT_MAX_BATCH = 1


def _tune_launches(generator: Generator) -> bool:
    native = generator.decoder.impl == "native"
    return native and generator.prompts.shape[0] <= COORDINATE_DESCENT_MAX_BATCH


def prepare_steps(
    generator: Generator, compile: bool, cuda_graphs: bool, compile_mode: str | None = None
) -> RoundSteps:
    """The steps for the chosen path, compiled (inductor's `compile_mode`) and captured now, in
    warm-up. One eager round first: it initialises the cache lazily, as compiled code must not."""
    reset, prefill, decode = generator.reset, generator.prefill, generator.decode
    for step in (reset, prefill, decode):
        step()
    compile = compile and not generator.decoder.kernel_decode  # nothing left for inductor
    if compile:  # decode only: its many small kernels are what fusing saves; prefill is big
        decode = torch.compile(decode, mode=compile_mode)
        # inductor compiles on the first calls, under this run's settings only (a sweep worker
        # compiles the next point's model with its own)
        with torch._inductor.config.patch(coordinate_descent_tuning=_tune_launches(generator)):
            for step in (reset, prefill, decode):
                step()
    if cuda_graphs:
        eager_prefill = prefill

        def after_prefill() -> None:
            reset()
            eager_prefill()

        prefill = capture(prefill, reset)
        decode = capture(decode, after_prefill)
        reset = capture(reset, lambda: None)
    path = "+".join(p for p, on in (("compiled", compile), ("cuda_graph", cuda_graphs)) if on)
    return RoundSteps(reset, prefill, decode, path or "eager")


def measure_generation(
    generator: Generator,
    device: torch.device,
    config: RunConfig,
    settings: LoopSettings,
    observer: WindowObserver | None,
    agree: Agreement,
) -> tuple[LoopResult, RoundSteps, dict[str, object]]:
    """Warm-up (compile, capture), a prefill window for TTFT, then the rounds window (under
    telemetry) for inter-token latency and throughput; the loop counts rounds as its steps."""
    per_round = generator.steps_per_round
    started = time.perf_counter()
    with torch.inference_mode():
        steps = prepare_steps(
            generator, config.acceleration.compile, config.acceleration.cuda_graphs
        )
        synchronize(device)
        prepare_s = time.perf_counter() - started
        prefills = max(PREFILL_SAMPLES, config.measurement.n_iters)
        prefill = run_measured_loop(
            steps.prefill_step, device, LoopSettings(2, 2 * prefills, steps_per_unit=2), None, agree
        )
        rounds_settings = LoopSettings(
            warmup_steps=per_round * config.measurement.warmup_steps,
            n_iters=per_round * config.measurement.n_iters,
            max_noise_pct=settings.max_noise_pct,
            max_time_s=settings.max_time_s,
            min_time_s=settings.min_time_s,
            steps_per_unit=per_round,
            nvtx=settings.nvtx,
            min_warmup_s=settings.min_warmup_s,
        )
        rounds = run_measured_loop(
            steps.round_step(per_round), device, rounds_settings, observer, agree
        )
    rounds = dataclasses.replace(rounds, warmup_s=prepare_s + rounds.warmup_s)
    columns = token_columns(prefill, rounds, config.workload.batch_size, config.workload.prompt_len)
    columns["generation_path"] = steps.path
    return rounds, steps, columns


def token_columns(
    prefill: LoopResult, rounds: LoopResult, batch_size: int, prompt_len: int
) -> dict[str, object]:
    """TTFT from the prefill window; ITL from the decode steps of the rounds; decode tokens/s
    from the mean ITL (the median hides slow tokens), end-to-end from the rounds' window."""
    ttft = _stats(prefill.step_times_s[PREFILL::2])
    per_round = rounds.steps_per_unit
    itl_values = [t for i, t in enumerate(rounds.step_times_s) if i % per_round > PREFILL]
    new_tokens = per_round - 1
    generated = batch_size * new_tokens * rounds.steps
    row: dict[str, object] = {
        "prompt_len": prompt_len,
        "new_tokens": new_tokens,
        "prefill_samples": ttft.count,
        "ttft_p50_ms": ttft.median_s * 1e3,
        "ttft_p99_ms": ttft.p99_s * 1e3 if ttft.count >= PREFILL_SAMPLES else None,
        "prefill_tokens_per_s": batch_size * prompt_len / ttft.median_s,
        "e2e_tokens_per_s": generated / rounds.window_s,
        "tokens_per_s": generated / rounds.window_s,
    }
    if itl_values:
        itl = _stats(itl_values)
        row.update(
            itl_mean_ms=itl.mean_s * 1e3,
            itl_p50_ms=itl.median_s * 1e3,
            itl_p99_ms=itl.p99_s * 1e3 if itl.count >= PREFILL_SAMPLES else None,
            decode_tokens_per_s=batch_size / itl.mean_s,
        )
    return row


def _stats(values: list[float]):
    from dlbench.results.stats import StepStats

    return StepStats.from_values(values)


def decode_bytes_per_step(generator: Generator, context: float) -> float:
    """Bytes a decode step must read from device memory: every weight once (the input embedding
    table is a lookup of a few rows, unless the output layer shares it) and each sequence's
    cached keys and values up to `context` tokens."""
    model = generator.decoder.model
    weights = sum(stored_bytes(p) for p in model.parameters())  # float8 weights as stored
    table = model.get_input_embeddings().weight
    output = model.get_output_embeddings()
    if output is None or output.weight is not table:
        weights -= stored_bytes(table)
    return weights + generator.prompts.shape[0] * context * kv_bytes_per_token(generator)


def kv_bytes_per_token(generator: Generator) -> int:
    """Cache bytes one token of context takes in one sequence, over all layers."""
    return generator.decoder.kv_bytes_per_token()
