"""Where a training step's time goes, on a GPU: for each variant, the step time (CUDA events
over timed steps, after warm-up and compilation), MFU from the workload's FLOPs, and the
device time of the profiled steps by kind of kernel (GEMM, attention, optimizer, inductor's
fused kernels, other) with the top kernels (torch profiler).

Variants (comma-separated, run one after another in this process):
  product       the step as dlbench runs it (`--compile`: model and loss compiled)
  eager_loss    the model compiled, its loss not (as before round ten)
  chunk=N       product with the LLM loss formed N tokens at a time

Usage: PYTHONPATH=src python3 benchmarks/train_profile.py --model llm_1b --batch-size 8
       [--seq-len 2048] [--variants product,eager_loss,chunk=8192]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from contextlib import ExitStack
from unittest import mock

import torch
from torch.profiler import ProfilerActivity, profile

from dlbench.config import RunConfig
from dlbench.engine import session as session_module
from dlbench.engine.plan import make_plan
from dlbench.engine.session import create_fabric, open_session
from dlbench.hardware import PEAKS
from dlbench.workloads import llama
from dlbench.workloads.flops import flops_per_sample

WARMUP, TIMED, PROFILED = 4, 10, 2
KINDS = (  # (kind, markers in the kernel name); the first match wins
    ("attention", ("fmha", "flash", "attention", "cudnn_generated")),
    ("optimizer", ("multi_tensor", "fused_adam", "adam")),
    ("gemm", ("gemm", "nvjet", "cutlass", "xmma", "sm90_", "splitk")),
    ("inductor", ("triton_",)),
)


def variant_context(name: str) -> ExitStack:
    stack = ExitStack()
    if name == "eager_loss":
        stack.enter_context(
            mock.patch.object(session_module, "compiled", lambda m, loss: (torch.compile(m), loss))
        )
    elif name.startswith("chunk="):
        stack.enter_context(mock.patch.object(llama, "LOSS_CHUNK_TOKENS", int(name[6:])))
    elif name != "product":
        raise SystemExit(f"unknown variant {name}")
    return stack


def kind_of(kernel: str) -> str:
    low = kernel.lower()
    return next((k for k, marks in KINDS if any(m in low for m in marks)), "other")


def measure(args: argparse.Namespace, variant: str) -> None:
    config = RunConfig(
        model=args.model,
        mode="train",
        batch_size=args.batch_size,
        seq_len=args.seq_len,
        precision="bf16-mixed",
        accelerator="gpu",
        compile=True,
    )
    plan = make_plan(config)
    fabric = create_fabric(plan.devices, plan.precision)
    torch._dynamo.reset()
    torch.cuda.reset_peak_memory_stats()
    with variant_context(variant):
        session = open_session(plan.config, plan.workload, plan.shape, plan.precision, fabric)
        began = time.perf_counter()
        for i in range(WARMUP):
            session.step(i)
        torch.cuda.synchronize()
        warm = time.perf_counter() - began
        times = []
        for i in range(TIMED):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(True)
            start.record()
            session.step(i)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for i in range(PROFILED):
                session.step(i)
            torch.cuda.synchronize()
    step_ms = statistics.median(times)
    flops = flops_per_sample(plan.workload, plan.shape, "train").per_sample * args.batch_size
    peak = PEAKS[torch.cuda.get_device_name().lower()].bf16
    mfu = flops / (step_ms / 1e3) / 1e12 / peak
    print(
        f"== {variant}: step {step_ms:.1f} ms (min {min(times):.1f}, max {max(times):.1f}), "
        f"MFU {mfu:.3f}, warm-up {warm:.0f} s, peak memory "
        f"{torch.cuda.max_memory_allocated() / 2**30:.1f} GiB"
    )
    by_kind: dict[str, float] = {}
    for e in prof.events():
        if e.device_type.name == "CUDA":
            kind = kind_of(e.name)
            by_kind[kind] = by_kind.get(kind, 0.0) + e.time_range.end - e.time_range.start
    total = sum(by_kind.values())
    print(
        "device ms per step by kind: "
        + ", ".join(f"{k} {v / PROFILED / 1e3:.1f}" for k, v in sorted(by_kind.items()))
        + f"; sum {total / PROFILED / 1e3:.1f}"
    )
    print(
        prof.key_averages().table(sort_by="cuda_time_total", row_limit=25, max_name_column_width=80)
    )
    del session
    gc.collect()
    torch.cuda.empty_cache()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="llm_1b")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--seq-len", type=int, default=2048)
    parser.add_argument("--variants", default="product")
    args = parser.parse_args()
    for variant in args.variants.split(","):
        measure(args, variant)


if __name__ == "__main__":
    main()
