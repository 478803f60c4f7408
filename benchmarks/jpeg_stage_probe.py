"""On a GPU: where the GPU decode path's staging thread spends a batch while a real training
step runs beside it (resnet50 bs256 bf16, channels_last), against the same staging alone.
Times each phase of the staging thread (loader, nvJPEG call, crop kernel launch, the fence
wait), and how long the main thread cannot run Python during one nvJPEG call (the GIL).
Usage: PYTHONPATH=src python3 benchmarks/jpeg_stage_probe.py DIR [WORKERS]"""

from __future__ import annotations

import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import torch
from nvjpeg_probe import longest_stall_ms  # the script's own folder is on the path

from dlbench.config import DataSource
from dlbench.data import images as image_module
from dlbench.data import pipeline as pipeline_module
from dlbench.workloads import InputShape, get_workload

BATCH, STEPS = 256, 30
phases: dict[str, list[float]] = defaultdict(list)
last_decode: list[tuple] = []  # the arguments of the latest nvJPEG call, to call it again


def timed_phase(name: str, fn):
    def wrapper(*args, **kwargs):
        began = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            phases[name].append(time.perf_counter() - began)

    return wrapper


def instrument() -> None:
    feed, side, device_images = (
        pipeline_module.DataFeed, pipeline_module.SideStream, image_module.DeviceImages,
    )  # fmt: skip
    feed._next = timed_phase("loader next()", feed._next)
    decoded = timed_phase("nvJPEG call", device_images._decoded)

    def keep_arguments(self, *args):
        last_decode[:] = [args]
        return decoded(self, *args)

    device_images._decoded = keep_arguments
    from dlbench.data import crop_kernel

    crop_kernel.crop_normalise = timed_phase("crop kernel launch", crop_kernel.crop_normalise)
    side.stage = timed_phase("stage (fence + all)", side.stage)
    feed.fetch = timed_phase("step's fetch", feed.fetch)


def open_feed(folder: Path, workers: int):
    workload = get_workload("resnet50")
    shape = InputShape(224, 224, 0)
    pipeline = pipeline_module.open_pipeline(
        DataSource("folder", folder), workload, shape, BATCH, workers, "gpu", 0, pin_memory=True
    )
    on_device = pipeline_module.OnDevice(
        pipeline, shape, torch.device("cuda"), torch.bfloat16, torch.channels_last
    )
    return workload, shape, pipeline_module.DataFeed(pipeline, on_device)


def report(title: str, wall: float) -> None:
    print(f"-- {title}: {STEPS} batches in {wall:.2f} s ({STEPS * BATCH / wall:,.0f} img/s)")
    for name, times in phases.items():
        ms = [t * 1e3 for t in times[5:]] or [0.0]
        print(f"   {name:22s} median {statistics.median(ms):7.2f} ms  max {max(ms):7.2f} ms"
              f"  total {sum(ms):8.1f} ms")  # fmt: skip
    phases.clear()


def gil_blocked_ms(feed) -> float:
    """The longest stretch a Python thread could not run while one nvJPEG call ran."""
    (args,) = last_decode

    def decode() -> None:
        feed.prepare.images._decoded(*args)
        torch.cuda.synchronize()

    call, stall = longest_stall_ms(decode)
    print(f"-- one nvJPEG call: {call:.1f} ms; longest GIL stall of a Python thread {stall:.1f} ms")
    return stall


def main(folder: Path, workers: int) -> None:
    instrument()
    workload, shape, feed = open_feed(folder, workers)
    for _ in range(5):
        feed.fetch(0)
    phases.clear()
    torch.cuda.synchronize()
    began = time.perf_counter()
    for i in range(STEPS):
        feed.fetch(i)
    torch.cuda.synchronize()
    report("staging alone", time.perf_counter() - began)
    gil_blocked_ms(feed)

    model = workload.build(shape).cuda().to(memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step(i: int) -> None:
        inputs, targets = feed.fetch(i)
        with torch.autocast("cuda", torch.bfloat16):
            loss = loss_fn(model(inputs), targets.long() % 1000)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for i in range(8):
        step(i)
    torch.cuda.synchronize()
    phases.clear()
    began = time.perf_counter()
    for i in range(STEPS):
        step(i)
    torch.cuda.synchronize()
    report("staging beside resnet50 training", time.perf_counter() - began)
    synthetic = torch.randn(BATCH, 3, 224, 224, device="cuda").to(memory_format=torch.channels_last)
    labels = torch.zeros(BATCH, dtype=torch.long, device="cuda")
    torch.cuda.synchronize()
    began = time.perf_counter()
    for _ in range(STEPS):
        with torch.autocast("cuda", torch.bfloat16):
            loss = loss_fn(model(synthetic), labels)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    wall = time.perf_counter() - began
    print(f"-- training alone (synthetic): {STEPS * BATCH / wall:,.0f} img/s")
    feed.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 8)
