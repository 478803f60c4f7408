"""On a GPU: where the time of stretched GPU-decode training steps goes, from a profiler trace
of the real CLI run (resnet50 bs256 bf16-mixed, 8 workers). On the step's stream (the one with
the most kernel time): kernel time per step against the synthetic run's, and the gaps between
its kernels; for the longest gaps, what the other streams ran meanwhile and which host calls
of any thread were in progress when the gap began (a call that blocks everyone, or a launch
that waited); what ran on the other streams (by how many ops; the legacy default stream
always). Variants: synthetic, gpu.
Usage: PYTHONPATH=src python3 benchmarks/jpeg_trace_probe.py DIR OUTPUT VARIANT [VARIANT...]"""

from __future__ import annotations

import sys
from collections import Counter
from itertools import pairwise
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from dlbench.config import RunConfig
from dlbench.engine import benchmark
from dlbench.run import execute
from dlbench.startup import set_cuda_work_queues

STEPS, GAP_MS = 60, 1.0
LEGACY = 7  # the profiler's id for CUDA's legacy default stream
CUDA = torch.autograd.DeviceType.CUDA


def analyse(prof, variant: str) -> None:
    events = list(prof.profiler.kineto_results.events())
    gpu = [e for e in events if e.device_type() == CUDA]
    host = [e for e in events if e.device_type() != CUDA and e.duration_ns() > 0]
    busy = Counter()
    for e in gpu:
        busy[e.device_resource_id()] += e.duration_ns()
    main = busy.most_common(1)[0][0]
    mine = sorted((e for e in gpu if e.device_resource_id() == main), key=lambda e: e.start_ns())
    mine = mine[len(mine) // 3 :]  # past the warm-up
    span = (mine[-1].end_ns() - mine[0].start_ns()) / 1e6
    kernel = sum(e.duration_ns() for e in mine) / 1e6
    gaps = []
    for before, after in pairwise(mine):
        gap = (after.start_ns() - before.end_ns()) / 1e6
        if gap > GAP_MS:
            gaps.append((gap, before.end_ns(), after.start_ns(), before.name(), after.name()))
    print(f"== {variant}: step stream {main}: {span:.0f} ms spanned, kernels {kernel:.0f} ms "
          f"({100 * kernel / span:.1f} %); {len(gaps)} gaps over {GAP_MS} ms, "
          f"{sum(g[0] for g in gaps):.0f} ms in all; streams by busy ms: "
          f"{[(s, round(t / 1e6)) for s, t in busy.most_common(5)]}")  # fmt: skip
    window = [e for e in gpu if e.start_ns() >= mine[0].start_ns()]
    for stream in sorted({e.device_resource_id() for e in window} - {main}):
        ops = Counter(e.name()[:40] for e in window if e.device_resource_id() == stream)
        if sum(ops.values()) >= 10 or stream == LEGACY:  # nvJPEG's many small streams: by name
            print(f"   stream {stream}: {sum(ops.values())} ops, {ops.most_common(3)}")
    for gap, began, ended, before, after in sorted(gaps, reverse=True)[:8]:
        print(f"   gap {gap:6.2f} ms after {before[:50]!r}, before {after[:50]!r}")
        others = Counter()
        for e in gpu:
            if e.device_resource_id() != main and e.start_ns() < ended and e.end_ns() > began:
                overlap = min(e.end_ns(), ended) - max(e.start_ns(), began)
                others[f"stream {e.device_resource_id()}: {e.name()[:40]}"] += overlap / 1e6
        for name, ms in others.most_common(3):
            print(f"      other GPU work {ms:6.2f} ms  {name}")
        calls = [e for e in host if e.start_ns() <= began <= e.end_ns()
                 and e.duration_ns() > 0.5e6]  # fmt: skip
        for e in sorted(calls, key=lambda e: -e.duration_ns())[:5]:
            print(f"      host call in progress: thread {e.start_thread_id()} "
                  f"{e.name()[:50]!r} {e.duration_ns() / 1e6:.2f} ms")  # fmt: skip


def main(folder: Path, output: Path, variants: list[str]) -> None:
    benchmark.profile_after_window = lambda *args: {}  # this probe's profiler runs instead
    for variant in variants:
        data = {} if variant == "synthetic" else {
            "data": f"folder:{folder}", "data_workers": 8, "data_decode": "gpu"}  # fmt: skip
        config = RunConfig(model="resnet50", batch_size=256, precision="bf16-mixed",
                           n_iters=STEPS, warmup_steps=5, output=output,
                           extra={"probe_variant": f"trace {variant}"}, **data)  # fmt: skip
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            execute(config)
        analyse(prof, variant)


if __name__ == "__main__":
    set_cuda_work_queues()  # as the CLI does, before CUDA starts
    main(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:])
