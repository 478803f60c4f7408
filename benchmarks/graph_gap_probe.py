"""On a GPU: where a replayed batch-1 step's idle time goes, and what one replay costs the host.

For each model: the bare loop (compiled, one CUDA graph per batch, as `dlbench validate` builds
it) replayed 1,000 times on the device clock; the host's time for one replay with the GPU idle
(no queue in front of it) and for 20 and 200 back-to-back replays (what `host_issue_pct`
times); then a profiled pass of 50 replays: kernels per replay, kernel time, the gaps between
consecutive kernels (the GPU's idle time inside a step and between steps), and the kernel pairs
with the largest total gap.
`--no-cudnn-sdp` first: PyTorch's cuDNN attention off (SDPA picks flash or efficient instead).
Usage: PYTHONPATH=src python3 benchmarks/graph_gap_probe.py [--no-cudnn-sdp] MODEL[:SEQ] ...
(e.g. vit resnet50 distilbert:128)"""

from __future__ import annotations

import statistics
import sys
import time
from collections import defaultdict
from itertools import pairwise

import torch
from torch.profiler import ProfilerActivity, profile

from dlbench.config import RunConfig
from dlbench.engine.bare import BareLoop
from dlbench.engine.plan import make_plan

PROFILED = 50


def host_ms(loop: BareLoop, replays: int, idle: bool) -> float:
    """Median host time of `replays` back-to-back replays (ms per replay); `idle`: one replay
    at a time, the GPU drained before each."""
    times = []
    for i in range(30 if idle else 5):
        torch.cuda.synchronize()
        began = time.perf_counter()
        for k in range(1 if idle else replays):
            loop.timed_step(i + k)
        times.append((time.perf_counter() - began) / (1 if idle else replays))
        torch.cuda.synchronize()
    return 1e3 * statistics.median(times)


def short(name: str) -> str:
    return name if len(name) < 60 else name[:57] + "..."


def probe(spec: str) -> None:
    model, _, seq = spec.partition(":")
    config = RunConfig(
        model=model,
        mode="infer",
        batch_size=1,
        precision="bf16-mixed",
        accelerator="gpu",
        compile=True,
        cuda_graphs=True,
        **({"seq_len": int(seq)} if seq else {}),
    )
    plan = make_plan(config)
    loop = BareLoop(plan.workload, plan.shape, plan.config, plan.precision, torch.device("cuda"))
    with torch.inference_mode():
        loop.window_s(10, 10)  # compile and capture
        step_ms = 1e3 * loop.window_s(0, 1000) / 1000
        idle, twenty, burst = (host_ms(loop, n, n == 1) for n in (1, 20, 200))
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for i in range(PROFILED):
                loop.timed_step(i)
            torch.cuda.synchronize()
    events = sorted(
        (e.start_ns() / 1e3, e.end_ns() / 1e3, e.name())
        for e in prof.profiler.kineto_results.events()
        if e.device_type().name == "CUDA" and e.end_ns() > e.start_ns()
    )
    busy = sum(end - start for start, end, _ in events)
    span = events[-1][1] - events[0][0]
    gaps: dict[tuple[str, str], list[float]] = defaultdict(list)
    for (_, end, before), (start, _, after) in pairwise(events):
        gaps[(short(before), short(after))].append(max(0.0, start - end))
    all_gaps = sorted(g for v in gaps.values() for g in v)
    print(
        f"\n== {spec}: device step {step_ms:.4f} ms; host per replay: GPU idle "
        f"{idle:.4f} ms, 20 back-to-back {twenty:.4f} ms, 200 back-to-back {burst:.4f} ms"
    )
    print(
        f"profiled {PROFILED} replays: {len(events) / PROFILED:.1f} kernels per replay, kernel "
        f"time {busy / PROFILED:.1f} us, span {span / PROFILED:.1f} us per replay "
        f"({100 * busy / span:.1f} % busy); gap median {statistics.median(all_gaps):.2f} us, "
        f"p90 {all_gaps[int(0.9 * len(all_gaps))]:.2f} us, max {all_gaps[-1]:.2f} us"
    )
    worst = sorted(gaps.items(), key=lambda kv: -sum(kv[1]))[:12]
    for (before, after), values in worst:
        print(
            f"  {sum(values) / PROFILED:7.2f} us/replay over {len(values) / PROFILED:4.1f} gaps "
            f"(mean {statistics.mean(values):5.2f}): {before} -> {after}"
        )


if __name__ == "__main__":
    specs = sys.argv[1:]
    if specs[:1] == ["--no-cudnn-sdp"]:
        torch.backends.cuda.enable_cudnn_sdp(False)
        specs = specs[1:]
        print("cuDNN attention off")
    for spec in specs:
        probe(spec)
