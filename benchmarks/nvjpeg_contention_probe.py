"""On a GPU with JPEG engines: how much nvJPEG's hardware decode, made in a thread beside a bare
resnet50 training step (bs256, bf16 autocast, channels_last, SGD; no dlbench loop), stretches
that step. Per step, CUDA events on the step's stream; the step eager or replayed as one CUDA
graph, on CUDA's legacy default stream or on a non-blocking stream of its own; the thread
decodes 256 files of DIR once per synthetic step period (as a feed would), on a non-blocking
side stream, with nvJPEG writing interleaved RGB (rgbi: its colour conversion kernels) or
planar YUV (yuv). Also lists what one decode of each output puts on the GPU and on the host.
Usage: PYTHONPATH=src python3 benchmarks/nvjpeg_contention_probe.py DIR"""

from __future__ import annotations

import ctypes
import statistics
import sys
import threading
import time
from itertools import pairwise
from pathlib import Path

import timm
import torch
import torch.nn.functional as F
from nvjpeg_probe import cuda_calls, kernels  # the script's own folder is on the path

from dlbench.data import nvjpeg

BATCH, STEPS, WARM = 256, 40, 5
OUTPUT_YUV = 1  # nvjpegOutputFormat_t


def yuv_bytes(planes: list) -> int:
    return sum(h * w for p in planes for h, w in p)


class Decoder(nvjpeg.HardwareJpeg):
    """The direct call, writing RGBI into one buffer or YUV planes (per nvjpegGetImageInfo)."""

    def __init__(self, files: list[bytes], output: str, buffer: torch.Tensor | None = None) -> None:
        super().__init__()
        lib = self._lib
        lib.nvjpegGetImageInfo.restype = ctypes.c_int
        self.output = output
        self.flat = torch.frombuffer(bytearray(b"".join(files)), dtype=torch.uint8).pin_memory()
        self.lengths = torch.tensor([len(f) for f in files])
        sizes, planes = [], []
        for data in files:
            n, sub = ctypes.c_int(), ctypes.c_int()
            w, h = (ctypes.c_int * 4)(), (ctypes.c_int * 4)()
            status = lib.nvjpegGetImageInfo(self._handle, data, len(data), ctypes.byref(n),
                                            ctypes.byref(sub), w, h)  # fmt: skip
            assert status == 0, status
            sizes.append((h[0], w[0]))
            planes.append([(h[c], w[c]) for c in range(n.value)])
        self.sizes = torch.tensor(sizes)
        self.planes = planes
        if output == "yuv":
            lib.nvjpegDecodeBatchedInitialize(self._handle, self._state, len(files), 1, OUTPUT_YUV)
            self._batch = len(files)
            self.buffer = (
                buffer
                if buffer is not None
                else torch.empty(yuv_bytes(planes), dtype=torch.uint8, device="cuda")
            )
            images = torch.zeros(len(files), nvjpeg.IMAGE_INT64S, dtype=torch.int64)
            at = self.buffer.data_ptr()
            for k, p in enumerate(planes):
                for c, (h, w) in enumerate(p):
                    images[k, c], images[k, nvjpeg.MAX_COMPONENT + c] = at, w
                    at += h * w
            self.images = images
            self.sources = self.flat.data_ptr() + torch.cumsum(self.lengths, 0) - self.lengths
            self.sizes_t = self.lengths.to(torch.int64)

    def once(self, stream: int) -> None:
        if self.output == "rgbi":
            self.decode(self.flat, self.lengths, self.sizes, torch.device("cuda"), stream)
            return
        status = self._lib.nvjpegDecodeBatched(
            self._handle, self._state, self.sources.data_ptr(), self.sizes_t.data_ptr(),
            self.images.data_ptr(), ctypes.c_void_p(stream),
        )  # fmt: skip
        if status != 0:
            raise RuntimeError(f"nvJPEG {self.output}: {nvjpeg.STATUS.get(status, status)}")


def host_calls(fn, title: str) -> None:
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn()
    print(f"-- host CUDA calls, {title}: {cuda_calls(prof)}")


class Step:
    """A bare resnet50 training step, eager or as one CUDA graph, on a chosen stream."""

    def __init__(self) -> None:
        self.model = timm.create_model("resnet50").cuda().to(memory_format=torch.channels_last)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01, momentum=0.9)
        self.x = torch.randn(BATCH, 3, 224, 224, device="cuda").to(
            memory_format=torch.channels_last
        )
        self.y = torch.randint(0, 1000, (BATCH,), device="cuda")
        self.graph = None

    def eager(self) -> None:
        with torch.autocast("cuda", torch.bfloat16, cache_enabled=False):
            loss = F.cross_entropy(self.model(self.x), self.y)
        loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=False)

    def capture(self) -> None:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self.eager()
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.eager()

    def replay(self) -> None:
        self.graph.replay()


def timed(run, stream: torch.cuda.Stream) -> list[float]:
    with torch.cuda.stream(stream):
        for _ in range(WARM):
            run()
        events = [torch.cuda.Event(enable_timing=True) for _ in range(STEPS + 1)]
        events[0].record()
        for k in range(STEPS):
            run()
            events[k + 1].record()
    events[-1].synchronize()
    return [a.elapsed_time(b) for a, b in pairwise(events)]


def paced(work, period_s: float, stop: threading.Event, done: list) -> None:
    """`work()` once per period (as a feed decodes once a step) until stopped; the host time of
    each call, ms, into `done`."""
    while not stop.is_set():
        began = time.perf_counter()
        work()
        done.append((time.perf_counter() - began) * 1e3)
        time.sleep(max(0.0, period_s - (time.perf_counter() - began)))


def fenced_decodes(decoder: Decoder):
    """One decode a call on a side stream, after the previous one's work is done on the host
    (the fence: nvJPEG writes when called)."""
    side, last = torch.cuda.Stream(priority=0), []

    def work() -> None:
        if last:
            last.pop().synchronize()
        decoder.once(side.cuda_stream)
        last.append(torch.cuda.Event())
        last[0].record(side)

    return work


def beside(run, stream: torch.cuda.Stream, work, period_s: float | None) -> tuple[list, list]:
    """The step's times with `work` paced in a thread beside it (None: alone), and the host
    time of each of its calls."""
    stop, done = threading.Event(), []
    thread = None
    if work is not None:
        thread = threading.Thread(target=paced, args=(work, period_s, stop, done))
        thread.start()
    times = timed(run, stream)
    stop.set()
    if thread:
        thread.join()
    return times, done


def step_line(label: str, times: list[float], base: float, done: list, call: str) -> str:
    """One line: the step's median, mean and max, its stretch over `base`, and the median of
    the calls beside it (named `call`)."""
    median = statistics.median(times)
    noted = f"; {call} median {statistics.median(done):.1f} ms" if done else ""
    return (f"== {label}: median {median:6.2f} ms, mean {statistics.fmean(times):6.2f}, max "
            f"{max(times):6.2f}, x{median / base:.3f}{noted}, {len(done)} decodes")  # fmt: skip


def main(folder: Path) -> None:
    files = [f.read_bytes() for f in sorted(folder.rglob("*.jpg"))[:BATCH]]
    decoders = {out: Decoder(files, out) for out in ("rgbi", "yuv")}
    side = torch.cuda.Stream()
    print(f"planes of the first file: {decoders['yuv'].planes[0]}")
    for out, decoder in list(decoders.items()):
        try:
            decoder.once(side.cuda_stream)
        except RuntimeError as e:
            print(f"-- {out}: {e}; left out")
            del decoders[out]
            continue
        kernels(lambda d=decoder: (d.once(side.cuda_stream), torch.cuda.synchronize()),
                f"one {out} decode of {BATCH}")  # fmt: skip
        host_calls(lambda d=decoder: (d.once(side.cuda_stream), torch.cuda.synchronize()),
                   f"one {out} decode")  # fmt: skip
        calls = []
        for _ in range(10):
            began = time.perf_counter()
            decoder.once(side.cuda_stream)
            calls.append((time.perf_counter() - began) * 1e3)
            torch.cuda.synchronize()
        print(f"-- {out} call, GPU idle: median {statistics.median(calls):.2f} ms")
    step = Step()
    step.capture()
    streams = {"legacy": torch.cuda.default_stream(), "own": torch.cuda.Stream(priority=-5)}
    modes = {"eager": step.eager, "graph": step.replay}
    period = None
    for mode, run in modes.items():
        for name, stream in streams.items():
            base = None
            for background in ("none", *decoders, "none"):
                work = None if background == "none" else fenced_decodes(decoders[background])
                times, done = beside(run, stream, work, period)
                median = statistics.median(times)
                period = period or median / 1e3
                base = base or median
                label = f"{mode:5s} {name:6s} {background:4s}"
                print(step_line(label, times, base, done, "decode call"))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
