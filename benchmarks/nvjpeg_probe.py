"""On a GPU: what one batched nvJPEG call and one batched crop put on the GPU (kernels from
the profiler), how long a Python thread cannot run during the nvJPEG call (whether it holds
the GIL), and how long the call takes while another stream keeps every SM busy.
Usage: PYTHONPATH=src python3 benchmarks/nvjpeg_probe.py DIR"""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile
from torchvision.io import ImageReadMode, decode_jpeg

from dlbench.data.crop import batched_crop, draw_crop, jpeg_size

BATCH = 256


def kernels(fn, title: str) -> None:
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    total, count = Counter(), Counter()
    for event in prof.profiler.kineto_results.events():
        if event.device_type() == torch.autograd.DeviceType.CUDA:
            total[event.name()[:70]] += (event.end_ns() - event.start_ns()) / 1e3
            count[event.name()[:70]] += 1
    print(f"-- {title}: {sum(count.values())} GPU ops, {sum(total.values()):,.0f} us in all")
    for name, us in total.most_common(8):
        print(f"   {us:9.1f} us  x{count[name]:<4d} {name}")


def cuda_calls(prof, top: int = 8) -> str:
    """The CUDA runtime calls a profile caught on the host: name, count and time, most first."""
    calls, spent = Counter(), Counter()
    for e in prof.profiler.kineto_results.events():
        if e.name().startswith("cu"):
            calls[e.name()] += 1
            spent[e.name()] += e.duration_ns() / 1e6
    return ", ".join(f"{n} x{calls[n]} {spent[n]:.2f} ms" for n, _ in spent.most_common(top))


def longest_stall_ms(fn) -> tuple[float, float]:
    """(call ms, longest gap of a pure-Python thread during it, ms)."""
    stop, gaps = threading.Event(), [0.0]

    def ticker() -> None:
        last = time.perf_counter()
        while not stop.is_set():
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    thread = threading.Thread(target=ticker)
    thread.start()
    time.sleep(0.02)
    began = time.perf_counter()
    fn()
    call = time.perf_counter() - began
    time.sleep(0.02)
    stop.set()
    thread.join()
    return call * 1e3, max(gaps) * 1e3


def main(folder: Path) -> None:
    files = sorted(folder.rglob("*.jpg"))[:BATCH]
    datas = [f.read_bytes() for f in files]
    raws = [torch.frombuffer(bytearray(d), dtype=torch.uint8) for d in datas]
    crops = [draw_crop(*jpeg_size(d)) for d in datas]
    boxes = torch.tensor([c[0] for c in crops])
    flips = torch.tensor([c[1] for c in crops])

    def decode():
        return decode_jpeg(raws, mode=ImageReadMode.RGB, device="cuda")

    images = decode()
    kernels(decode, f"nvJPEG batched decode of {BATCH}")
    kernels(lambda: batched_crop(images, boxes, flips, (224, 224)), f"batched crop of {BATCH}")
    for _ in range(2):
        call, stall = longest_stall_ms(decode)
        print(f"-- nvJPEG call alone: {call:.1f} ms, a Python thread stalled up to {stall:.1f} ms")
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    busy = torch.cuda.Stream()
    torch.cuda.synchronize()
    with torch.cuda.stream(busy):  # ~2 s of GEMMs keeping every SM busy
        for _ in range(1500):
            a @ a
    for _ in range(2):
        call, stall = longest_stall_ms(decode)
        print(f"-- nvJPEG call beside GEMMs: {call:.1f} ms, Python stalled up to {stall:.1f} ms")
    call, stall = longest_stall_ms(lambda: busy.synchronize())
    print(f"-- control, waiting for the GEMMs: {call:.1f} ms, Python stalled up to {stall:.1f} ms")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
