"""The generate scenario: a decoder LLM's inference as prompt and generated tokens
(engine.scenarios.generation), bound by memory bandwidth: its row has the decode's roofline
instead of MFU, and a sample's tokens are those it generated."""

from __future__ import annotations

import time
from pathlib import Path

import torch

from dlbench.engine.distribution.ranks import agree_max
from dlbench.engine.scenarios.base import (
    Measured,
    Planned,
    counted_energy,
    gpu_name,
    quiet_baseline,
)
from dlbench.engine.scenarios.generation import (
    decode_bytes_per_step,
    kv_bytes_per_token,
    measure_generation,
    open_generator,
)
from dlbench.engine.timing.loop import loop_settings
from dlbench.engine.timing.profiled_pass import profile_after_window
from dlbench.results.efficiency import bandwidth_columns
from dlbench.results.row import RowBuilder
from dlbench.startup import lap
from dlbench.workloads.launch_shapes import forget_launches, launch_columns


class GenerateScenario:
    """Generation: prefill, then decode steps, in rounds."""

    name = "generate"
    samples_are_inputs = False

    def measure(self, plan: Planned, fabric, monitor, cache: Path | None) -> Measured:
        """Generation rounds, then the profiled pass over whole rounds and the decode
        roofline."""
        config = plan.config
        agree = agree_max(fabric)
        lap("setup_s")
        forget_launches()  # a sweep worker's earlier points launched their own
        generator, params = open_generator(
            config, plan.workload, plan.shape, plan.precision, fabric
        )
        build_s = lap("build_s")
        quiet_baseline(fabric.device, monitor)
        fabric.barrier()
        lap("baseline_s")
        settings = loop_settings(config, fabric.device.type, counted_energy(monitor, agree))
        loop, steps, columns = measure_generation(
            generator, fabric.device, config, settings, monitor, agree
        )
        parts = RowBuilder().add("the generation", columns)
        parts.add("the GEMV's launch shapes", launch_columns())
        per_round = generator.steps_per_round
        with torch.inference_mode():
            after = (loop.warmup_steps + loop.steps) * per_round
            began = time.perf_counter()
            round_step = steps.round_step(per_round)
            parts.add(
                "the profiled pass",
                profile_after_window(round_step, fabric.device, after, loop, agree),
            )
            parts.add("the profiled pass", {"profile_s": time.perf_counter() - began})
            lap("measure")  # warmup_s, the window and profile_s say how it divides
        parts.add("the build", {"build_s": build_s})
        if generator.float8 is not None:
            parts.add("fp8", {"fp8_linear_layers": len(generator.float8.names)})
        work = config.workload
        context = work.prompt_len + work.new_tokens / 2  # mean context of the decode steps
        itl = columns.get("itl_mean_ms")
        bandwidth = bandwidth_columns(
            decode_bytes_per_step(generator, context),
            kv_bytes_per_token(generator),
            itl / 1e3 if itl else None,
            gpu_name(fabric.device),
        )
        parts.add("the decode's bandwidth", bandwidth)
        return Measured(loop, params, parts)

    def tokens_per_sample(self, plan: Planned, parts: RowBuilder) -> int | None:
        """The tokens each sequence generated (as the generation ran them)."""
        generated = parts.get("new_tokens")
        if isinstance(generated, int) and generated:
            return generated
        return plan.workload.tokens_per_sample(plan.shape)
