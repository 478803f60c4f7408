"""One DDP step of the dlbench loop against one of the bare DDP loop, profiled on every rank:
step time, GPU busy time, NCCL time and host time per step, and each variant's top ops.

Run under a launcher, one process per GPU (settings as `--ddp KEY=VALUE`):
  torchrun --nproc-per-node 2 benchmarks/ddp_profile.py --model resnet50 --batch-size 256
Each rank prints one summary line per variant; rank 0 writes the top-op tables to --out.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from dlbench.config import RunConfig
from dlbench.engine.bare import BareLoop
from dlbench.engine.plan import make_plan
from dlbench.engine.profiled_pass import covered_us
from dlbench.engine.session import create_fabric, open_session
from dlbench.engine.timer import synchronize

STEPS = 10


def _profile(step, device: torch.device) -> tuple[profile, float]:
    for i in range(STEPS):  # warm
        step(i)
    synchronize(device)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        began = time.perf_counter()
        for i in range(STEPS):
            step(i)
        synchronize(device)
        wall_ms = (time.perf_counter() - began) * 1e3 / STEPS
    return prof, wall_ms


def _summary(prof: profile, wall_ms: float) -> str:
    kernels = [e for e in prof.events() if e.device_type.name == "CUDA"]
    nccl = [e for e in kernels if "nccl" in e.name.lower()]
    busy = covered_us((e.time_range.start, e.time_range.end) for e in kernels) / 1e3 / STEPS
    comm = covered_us((e.time_range.start, e.time_range.end) for e in nccl) / 1e3 / STEPS
    host = sum(e.self_cpu_time_total for e in prof.key_averages()) / 1e3 / STEPS
    return (
        f"step {wall_ms:.2f} ms (profiled); kernels busy {busy:.2f} ms; NCCL {comm:.2f} ms; "
        f"kernels per step {len(kernels) / STEPS:.0f}; host ops {host:.2f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--devices", default="2")
    parser.add_argument("--accelerator", default="gpu")
    parser.add_argument("--size", type=int, default=None, help="image side (default: model's)")
    parser.add_argument("--ddp", action="append", default=[])
    parser.add_argument("--out", type=Path, default=Path("ddp-profile.txt"))
    args = parser.parse_args()
    config = RunConfig(
        model=args.model,
        batch_size=args.batch_size,
        precision="bf16-mixed",
        accelerator=args.accelerator,
        devices=args.devices,
        width=args.size,
        height=args.size,
        ddp=tuple(args.ddp),
        telemetry=False,
    )
    plan = make_plan(config)
    fabric = create_fabric(plan.devices, plan.precision, plan.config.strategy, plan.ddp)
    session = open_session(plan.config, plan.workload, plan.shape, plan.precision, fabric)
    bare = BareLoop(
        plan.workload, plan.shape, plan.config, plan.precision, session.device, plan.ddp
    )
    tables = []
    for name, step in (("dlbench", session.step), ("bare", bare.step)):
        prof, wall_ms = _profile(step, session.device)
        print(f"rank {fabric.global_rank} {name:8s} {_summary(prof, wall_ms)}", flush=True)
        table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=20)
        tables.append(f"== {name} (rank {fabric.global_rank}) ==\n{table}")
    if fabric.global_rank == 0:
        args.out.write_text("\n".join(tables))


if __name__ == "__main__":
    main()
