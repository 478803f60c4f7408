"""The yardstick for dlbench's DDP rows: a plain torch DDP training loop under torchrun, written
as a careful user writes one, with nothing of dlbench in it. timm's model, bf16 autocast,
channels_last, SGD (momentum 0.9, foreach), synthetic bf16 images made once on each GPU, torch's
DistributedDataParallel with its defaults; every rank times its steps between two CUDA events on its
own GPU, and the global rate divides all ranks' samples by the slowest rank's window. On one GPU
it is the plain loop (no DDP), the baseline a user's scaling efficiency is counted from.

    torchrun --nproc-per-node 4 benchmarks/bare_ddp.py --model resnet50 --batch-size 256 \
        --output src/dlbench/published/bare-ddp-....csv

Rank 0 appends one row (model, batch, world size, images/s in all and per GPU, window) to
--output; benchmarks/reference.sh runs it beside `dlbench scaling` at 1, 2 and 4 GPUs."""

from __future__ import annotations

import argparse
import csv
import os
import time
from pathlib import Path

import timm
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def seconds(steps: int, step, device: torch.device) -> float:
    """Seconds of `steps` steps between two CUDA events on this rank's GPU (the host's clock on
    the CPU), the GPU drained before the first."""
    if device.type != "cuda":
        began = time.perf_counter()
        for i in range(steps):
            step(i)
        return time.perf_counter() - began
    torch.cuda.synchronize(device)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for i in range(steps):
        step(i)
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3


def measure(name: str, args: argparse.Namespace, device: torch.device, distributed: bool):
    """One model's global images/s and the slowest rank's window."""
    torch.manual_seed(0)
    model = timm.create_model(name, num_classes=1000)
    model = model.to(device, memory_format=torch.channels_last)
    size = model.pretrained_cfg["input_size"]
    if distributed:
        ids = [device.index] if device.type == "cuda" else None
        model = DistributedDataParallel(model, device_ids=ids)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, foreach=True)
    loss_fn = torch.nn.CrossEntropyLoss()
    batches = [
        (
            torch.randn(args.batch_size, *size, device=device, dtype=torch.bfloat16).contiguous(
                memory_format=torch.channels_last
            ),
            torch.randint(0, 1000, (args.batch_size,), device=device),
        )
        for _ in range(2)
    ]

    def step(i: int) -> None:
        inputs, targets = batches[i % 2]
        with torch.autocast(device.type, dtype=torch.bfloat16):
            loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for i in range(args.warmup):
        step(i)
    if distributed:
        dist.barrier()
    window = torch.tensor([seconds(args.steps, step, device)], device=device, dtype=torch.float64)
    if distributed:
        dist.all_reduce(window, op=dist.ReduceOp.MAX)
    world = dist.get_world_size() if distributed else 1
    slowest = window.item()
    return args.batch_size * args.steps * world / slowest, slowest


def append(path: Path, row: dict) -> None:
    """One row appended to a CSV, its header written first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    new = not path.exists()
    with path.open("a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(row))
        if new:
            writer.writeheader()
        writer.writerow(row)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--model", default="resnet50", help="timm model names, comma-separated: one row each"
    )
    parser.add_argument("--batch-size", type=int, default=256, help="images per GPU per step")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args()

    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    cuda = torch.cuda.is_available()  # the CPU (gloo) only for this script's own test
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1  # one GPU: the plain loop, no DDP
    if distributed:
        dist.init_process_group("nccl" if cuda else "gloo", device_id=device if cuda else None)
    torch.backends.cudnn.benchmark = True
    for name in args.model.split(","):
        rate, slowest = measure(name, args, device, distributed)
        if dist.is_initialized() and dist.get_rank() != 0:
            continue
        world = dist.get_world_size() if distributed else 1
        row = {
            "loop": "bare_torch_ddp",
            "model": name,
            "batch_size": args.batch_size,
            "precision": "bf16-mixed",
            "world_size": world,
            "num_nodes": world // int(os.environ.get("LOCAL_WORLD_SIZE", world)),
            "steps": args.steps,
            "window_s": slowest,
            "images_per_s": rate,
            "images_per_s_per_device": rate / world,
            "gpu_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "",
            "torch": torch.__version__,
            "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        print(f"{name} x{world}: {rate:,.1f} images/s ({rate / world:,.1f} a GPU)")
        if args.output:
            append(args.output, row)
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
