"""On a GPU with JPEG engines: the direct nvJPEG call (data.nvjpeg) against torchvision's
batched call, on 256 files of DIR packed as the workers pack them. Checks that both decode the
same pixels and that the model's input comes out the same either way; times each alone and
beside a thread that keeps the GPU busy with matrix products from Python (as a training step
would), to the batch being ready on the side stream; profiles what the direct call puts on
the GPU; and the longest a Python thread cannot run during one direct call (the GIL).
Usage: PYTHONPATH=src python3 benchmarks/nvjpeg_engine_probe.py DIR"""

from __future__ import annotations

import statistics
import sys
import threading
import time
from pathlib import Path

import torch
from nvjpeg_probe import (  # the script's own folder is on the path
    cuda_calls,
    kernels,
    longest_stall_ms,
)

from dlbench.data import nvjpeg
from dlbench.data.images import DeviceImages, ImageFolderSet, collate_encoded, scan_images

BATCH, REPEATS = 256, 20


def packed_batch(folder: Path):
    dataset = ImageFolderSet(scan_images(folder), (224, 224), decode_on_gpu=True)
    packed, *_ = collate_encoded([dataset[i] for i in range(BATCH)])
    return packed


def paths(packed):
    """(name, decode to ready) for both decoders: each queues the decode and crop on the side
    stream and waits for it there."""
    side = torch.cuda.Stream(priority=-1)
    engines = DeviceImages(torch.device("cuda"), torch.bfloat16, torch.channels_last, (224, 224))
    plain = DeviceImages(torch.device("cuda"), torch.bfloat16, torch.channels_last, (224, 224))
    plain._engines = False  # torchvision's call

    def ready(images: DeviceImages):
        def run():
            with torch.cuda.stream(side):
                out = images.decode(packed)
            side.synchronize()
            return out

        return run

    return [("direct", ready(engines)), ("torchvision", ready(plain))]


def host_calls(packed, flags: int) -> None:
    """The CUDA runtime calls one direct decode makes on the host (a cudaFree or a pinned
    allocation stalls every thread's launches), with nvJPEG created with `flags`."""
    from torch.profiler import ProfilerActivity, profile

    nvjpeg.CREATE_FLAGS = flags
    decoder = nvjpeg.HardwareJpeg()
    stream = torch.cuda.current_stream().cuda_stream
    for _ in range(3):
        decoder.decode(packed.flat, packed.lengths, packed.sizes, "cuda", stream)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        decoder.decode(packed.flat, packed.lengths, packed.sizes, "cuda", stream)
        torch.cuda.synchronize()
    print(f"-- host CUDA calls of one direct decode, flags {flags}: {cuda_calls(prof)}")
    nvjpeg.CREATE_FLAGS = 0


def crop_alone(packed) -> None:
    """The crop kernel's device time on the engines' interleaved buffer (CUDA events)."""
    from dlbench.data.crop_kernel import crop_normalise

    images = DeviceImages(torch.device("cuda"), torch.bfloat16, torch.channels_last, (224, 224))
    buffer, table = images._on_engines(packed)
    out = torch.empty(BATCH, 3, 224, 224, dtype=torch.bfloat16, device="cuda",
                      memory_format=torch.channels_last)  # fmt: skip
    scale, shift = images.scale.view(-1), images.shift.view(-1)
    crop_normalise(*table, out, scale, shift)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(REPEATS):
        crop_normalise(*table, out, scale, shift)
    end.record()
    end.synchronize()
    del buffer
    print(f"crop kernel on the interleaved buffer: {start.elapsed_time(end) / REPEATS:.3f} ms")


def timed(fn, repeats: int = REPEATS) -> list[float]:
    out = []
    for _ in range(repeats):
        began = time.perf_counter()
        fn()
        out.append((time.perf_counter() - began) * 1e3)
    return out


def busy_gpu(stop: threading.Event) -> None:
    """Keep the default stream full of matrix products, launched from Python."""
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    while not stop.is_set():
        for _ in range(4):
            a = (a @ a).clamp_(-1, 1)
        torch.cuda.current_stream().synchronize()  # about 4 products queued at most


def main(folder: Path) -> None:
    packed = packed_batch(folder)
    print(f"{BATCH} files, {int(packed.engine_ready.sum())} baseline colour; sizes "
          f"{packed.sizes.unique(dim=0).tolist()[:4]}")  # fmt: skip
    decoder = nvjpeg.HardwareJpeg()
    stream = torch.cuda.current_stream().cuda_stream
    buffer, starts = decoder.decode(packed.flat, packed.lengths, packed.sizes, "cuda", stream)
    from torchvision.io import ImageReadMode, decode_jpeg

    raws = list(torch.split(packed.flat, packed.lengths.tolist()))
    reference = decode_jpeg(raws, mode=ImageReadMode.RGB, device="cuda")
    torch.cuda.synchronize()
    worst = 0
    for k, image in enumerate(reference):
        h, w = packed.sizes[k].tolist()
        ours = buffer[int(starts[k]) : int(starts[k]) + h * w * 3].view(h, w, 3).permute(2, 0, 1)
        worst = max(worst, int((ours.int() - image.int()).abs().max()))
    print(f"decoded pixels, direct against torchvision: max |difference| {worst} grey levels")
    crop_alone(packed)
    for flags in (0, 1, 2, 3):  # 1: no hardware pipelining, 2: memory pools
        host_calls(packed, flags)
    (direct_name, direct), (tv_name, tv) = paths(packed)
    torch.manual_seed(0)
    a = direct().float()
    b = tv().float()
    print(f"model input, direct against torchvision: max |difference| "
          f"{float((a - b).abs().max()):.4f} (normalised)")  # fmt: skip
    for name, fn in ((direct_name, direct), (tv_name, tv)):
        fn()
        alone = timed(fn)
        print(f"{name:12s} alone: median {statistics.median(alone):6.2f} ms, max {max(alone):6.2f}")
    began = time.perf_counter()
    for _ in range(REPEATS):
        decoder.decode(packed.flat, packed.lengths, packed.sizes, "cuda", stream)
    host = (time.perf_counter() - began) / REPEATS * 1e3
    torch.cuda.synchronize()
    print(f"direct call on the host (queued, not waited for): {host:.2f} ms")
    kernels(lambda: decoder.decode(packed.flat, packed.lengths, packed.sizes, "cuda", stream),
            "direct nvJPEG call")  # fmt: skip
    call, stall = longest_stall_ms(lambda: (direct(), None)[1])
    print(f"direct decode + crop to ready: {call:.1f} ms; longest GIL stall {stall:.1f} ms")
    call, stall = longest_stall_ms(lambda: (tv(), None)[1])
    print(f"torchvision decode + crop to ready: {call:.1f} ms; longest GIL stall {stall:.1f} ms")
    stop = threading.Event()
    thread = threading.Thread(target=busy_gpu, args=(stop,))
    thread.start()
    time.sleep(1.0)
    for name, fn in ((direct_name, direct), (tv_name, tv)) * 2:
        beside = sorted(timed(fn))
        print(f"{name:12s} beside a busy GPU: median {statistics.median(beside):6.2f} ms, "
              f"p90 {beside[int(0.9 * len(beside))]:6.2f}, max {beside[-1]:6.2f}")  # fmt: skip
    stop.set()
    thread.join()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
