"""Where a decode token's time goes, on a GPU: for each variant of the native decode step, the
inter-token latency (graph replays, CUDA events), kernels per token, kernel time against the
latency, and the top kernels (torch profiler).

Variants (comma-separated, run one after another in this process):
  product     the decode step as dlbench runs it
  linear      norms and projections by torch's ops (inductor fuses the norms and, with
              coordinate-descent tuning, turns the GEMVs into its reductions), as before the
              Triton GEMV kernel
  nocdt       product without inductor's coordinate-descent tuning
  graph       the step not compiled, replayed as a CUDA graph: the Triton kernels launched
              as programmatic dependents (sm_90+), torch's ops between them eager
  graph_nopdl graph with plain launches

Usage: PYTHONPATH=src python3 benchmarks/decode_profile.py --model llm_1b --batch-size 1
       [--variants product,linear] [--no-compile] [--no-cuda-graphs] [--llm-impl native|hf]
"""

from __future__ import annotations

import argparse
import functools
import gc
import statistics
import time
from contextlib import ExitStack
from unittest import mock

import torch
from torch.profiler import ProfilerActivity, profile

from dlbench.config import RunConfig
from dlbench.engine import generation
from dlbench.engine.generation import open_generator, prepare_steps
from dlbench.engine.plan import make_plan
from dlbench.engine.profiled_pass import covered_us
from dlbench.engine.session import create_fabric
from dlbench.workloads import decode_kernels, llama

TOKENS = 100  # decode steps timed per round (a round has new_tokens - 1 of them)
ROUNDS = 5
PROFILED_TOKENS = 20


def variant_context(name: str) -> ExitStack:
    stack = ExitStack()
    if name == "linear":
        stack.enter_context(mock.patch.object(llama, "_one_vector", lambda x, weight: False))
    elif name == "nocdt":
        stack.enter_context(mock.patch.object(generation, "COORDINATE_DESCENT_MAX_BATCH", 0))
    elif name == "graph_nopdl":
        stack.enter_context(mock.patch.object(decode_kernels, "USE_PDL", False))
    elif name not in ("product", "graph"):
        raise SystemExit(f"unknown variant {name}")
    return stack


def measure(args: argparse.Namespace, variant: str) -> None:
    compiles = args.compile and not variant.startswith("graph")
    config = RunConfig(
        model=args.model,
        mode="infer",
        batch_size=args.batch_size,
        precision="bf16-true",
        accelerator="gpu",
        compile=compiles,
        cuda_graphs=args.cuda_graphs,
        llm_impl=args.llm_impl,
    )
    plan = make_plan(config)
    fabric = create_fabric(plan.devices, plan.precision)
    torch._dynamo.reset()
    with variant_context(variant):
        generator, _ = open_generator(
            plan.config, plan.workload, plan.shape, plan.precision, fabric
        )
        with torch.inference_mode():
            timings = _time_steps(args, generator, compiles)
    _report(args, variant, *timings)
    del generator
    gc.collect()
    torch.cuda.empty_cache()


def _time_steps(args: argparse.Namespace, generator, compiles: bool):
    """Compile and capture, time ROUNDS rounds of decode replays, profile a few."""
    began = time.perf_counter()
    steps = prepare_steps(generator, compiles, args.cuda_graphs, args.compile_mode)
    torch.cuda.synchronize()
    took = time.perf_counter() - began
    tokens = min(TOKENS, generator.new_tokens - 1)
    itls = []
    for _ in range(ROUNDS):
        steps.reset()
        steps.prefill()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(tokens):
            steps.decode()
        end.record()
        end.synchronize()
        itls.append(start.elapsed_time(end) / tokens)
    greedy = steps.tokens(generator)[0, :8].tolist()
    steps.reset()
    steps.prefill()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(PROFILED_TOKENS):
            steps.decode()
        torch.cuda.synchronize()
    return steps.path, took, itls, greedy, prof


def _report(args: argparse.Namespace, variant: str, path, took, itls, greedy, prof) -> None:
    itl_ms = statistics.median(itls)
    kernels = [e for e in prof.events() if e.device_type.name == "CUDA"]
    busy_ms = covered_us((e.time_range.start, e.time_range.end) for e in kernels) / 1e3
    busy_ms /= PROFILED_TOKENS
    print(
        f"== {variant}: path {path}, compile + capture {took:.1f} s; ITL {itl_ms:.3f} ms "
        f"(rounds {min(itls):.3f}-{max(itls):.3f}; {args.batch_size / itl_ms * 1e3:.1f} "
        f"tokens/s); kernels per token {len(kernels) / PROFILED_TOKENS:.0f}; kernel time per "
        f"token {busy_ms:.3f} ms ({100 * busy_ms / itl_ms:.0f} % of the ITL); first greedy "
        f"tokens {greedy}"
    )
    print(gemv_roles(kernels))
    print(
        prof.key_averages().table(sort_by="cuda_time_total", row_limit=14, max_name_column_width=70)
    )


ROLES = ("qkv", "o", "gate_up", "down")  # the native layer's GEMVs in call order; head last


def gemv_roles(kernels) -> str:
    """Mean time of the GEMV kernel by its role in the token (the native Llama calls them
    q/k/v, o, gate/up, down per layer, then the output head)."""
    calls = sorted(
        (e for e in kernels if e.name == "gemv_kernel"), key=lambda e: e.time_range.start
    )
    per_token = len(calls) // PROFILED_TOKENS
    if not calls or (per_token - 1) % len(ROLES):
        return "GEMV kernel: not used"
    times: dict[str, list[float]] = {role: [] for role in (*ROLES, "head")}
    for i, event in enumerate(calls):
        spot = i % per_token
        role = "head" if spot == per_token - 1 else ROLES[spot % len(ROLES)]
        times[role].append(event.time_range.end - event.time_range.start)
    means = {role: statistics.mean(values) for role, values in times.items()}
    return "GEMV by role, mean us: " + ", ".join(f"{r} {t:.2f}" for r, t in means.items())


def gemv_sweep(model: str) -> None:
    """Every launch shape of the GEMV kernel on each of the model's decode GEMVs, timed alone
    (triton's do_bench, L2 flushed before each run), against the autotuner's picks so far."""
    import triton
    from triton.testing import do_bench

    from dlbench.workloads.decode_kernels import CONFIGS, gemv_kernel
    from dlbench.workloads.text import LLAMA_SIZES

    size = LLAMA_SIZES[model]
    hidden, head_dim = size.hidden, size.hidden // size.heads
    qkv = (size.heads + 2 * size.kv_heads) * head_dim
    shapes = {  # role: (outputs, inputs, gated, norm, residual)
        "qkv": (qkv, hidden, False, True, False),
        "o": (hidden, size.heads * head_dim, False, False, True),
        "gate_up": (2 * size.intermediate, hidden, False, True, False),
        "down": (hidden, size.intermediate, True, False, True),
        "head": (size.vocab, hidden, False, True, False),
    }
    print("autotuner picks:", {k: str(v) for k, v in gemv_kernel.cache.items()})
    for role, (n, k, gated, norm, residual) in shapes.items():
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        x = torch.randn(2 * k if gated else k, device="cuda", dtype=torch.bfloat16)
        gain, res = torch.ones(k, device="cuda", dtype=torch.bfloat16), torch.zeros_like(w[:, 0])
        y = torch.empty(n, device="cuda", dtype=torch.bfloat16)
        times = []
        for c in CONFIGS:
            launch = functools.partial(
                gemv_kernel.fn[(triton.cdiv(n, c.kwargs["BLOCK_N"]),)],
                x, w, y, gain, res, n, k, 1e-5, GATED=gated, NORM=norm, RESIDUAL=residual,
                PDL=False, num_warps=c.num_warps, **c.kwargs,
            )  # fmt: skip
            times.append((do_bench(launch, warmup=20, rep=100) * 1e3, str(c)))
        times.sort()
        tb_s = n * k * 2 / (times[0][0] * 1e-6) / 1e12
        best = "; ".join(f"{t:.2f} us {c}" for t, c in times[:3])
        print(f"{role} ({n}x{k}): best {best} ({tb_s:.2f} TB/s); worst {times[-1][0]:.2f} us")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="llm_1b")
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--variants", default="product")
    parser.add_argument("--gemv-sweep", action="store_true", help="time every GEMV launch shape")
    parser.add_argument("--compile", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--cuda-graphs", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--compile-mode", default=None, help="e.g. max-autotune-no-cudagraphs")
    parser.add_argument("--llm-impl", default="native", choices=["native", "hf"])
    args = parser.parse_args()
    print(torch.__version__, torch.cuda.get_device_name())
    for variant in args.variants.split(","):
        measure(args, variant)
    if args.gemv_sweep:
        gemv_sweep(args.model)


if __name__ == "__main__":
    main()
