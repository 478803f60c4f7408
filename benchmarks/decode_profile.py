"""Where a decode token's time goes, on a GPU: the top kernels of a few decode steps (torch
profiler), kernel count and kernel time per token against the measured inter-token latency.

Usage: PYTHONPATH=src python3 benchmarks/decode_profile.py --model llm_1b --batch-size 1
       [--no-compile] [--no-cuda-graphs] [--llm-impl native|hf]
"""

from __future__ import annotations

import argparse
import time

import torch
from torch.profiler import ProfilerActivity, profile

from dlbench.config import RunConfig
from dlbench.engine.generation import open_generator, prepare_steps
from dlbench.engine.plan import make_plan
from dlbench.engine.profiled_pass import covered_us
from dlbench.engine.session import create_fabric

TOKENS = 20


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="llm_1b")
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--compile", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--cuda-graphs", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--compile-mode", default=None, help="e.g. max-autotune-no-cudagraphs")
    parser.add_argument("--llm-impl", default="native", choices=["native", "hf"])
    args = parser.parse_args()
    config = RunConfig(
        model=args.model,
        mode="infer",
        batch_size=args.batch_size,
        precision="bf16-true",
        accelerator="gpu",
        compile=args.compile,
        cuda_graphs=args.cuda_graphs,
        llm_impl=args.llm_impl,
    )
    plan = make_plan(config)
    fabric = create_fabric(plan.devices, plan.precision)
    generator, _ = open_generator(plan.config, plan.workload, plan.shape, plan.precision, fabric)
    with torch.inference_mode():
        began = time.perf_counter()
        steps = prepare_steps(generator, config.compile, config.cuda_graphs, args.compile_mode)
        torch.cuda.synchronize()
        took = time.perf_counter() - began
        print(
            f"path {steps.path} ({args.compile_mode or 'default'}): compile + capture {took:.1f} s"
        )
        steps.reset()
        steps.prefill()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(TOKENS):
            steps.decode()
        end.record()
        end.synchronize()
        itl_ms = start.elapsed_time(end) / TOKENS
        steps.reset()
        steps.prefill()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(TOKENS):
                steps.decode()
            torch.cuda.synchronize()
    kernels = [e for e in prof.events() if e.device_type.name == "CUDA"]
    busy_ms = covered_us((e.time_range.start, e.time_range.end) for e in kernels) / 1e3 / TOKENS
    print(
        f"ITL {itl_ms:.3f} ms ({args.batch_size / itl_ms * 1e3:.0f} tokens/s); kernels per token "
        f"{len(kernels) / TOKENS:.0f}; kernel time per token {busy_ms:.3f} ms "
        f"({100 * busy_ms / itl_ms:.0f} % of the ITL); the rest is gaps between kernels"
    )
    print(
        prof.key_averages().table(sort_by="cuda_time_total", row_limit=15, max_name_column_width=60)
    )


if __name__ == "__main__":
    main()
