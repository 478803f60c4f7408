"""On a GPU with JPEG engines: nvJPEG's hardware decode made in a process of its own (its own
CUDA context: its device synchronisations and host calls no longer wait on or contend with
the step's), writing planar YUV into buffers the step's process shares with it (CUDA IPC),
beside the bare resnet50 step of nvjpeg_contention_probe (eager or graph, own stream); and
RGBI (nvJPEG's colour kernels, in that process's own memory), to see whether kernels of
another context stretch the step. Checks the shared buffer holds the same pixels as a decode
in the step's process. Request to reply latency per batch.
Usage: PYTHONPATH=src python3 benchmarks/nvjpeg_process_probe.py DIR"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import torch
import torch.multiprocessing as mp
from nvjpeg_contention_probe import BATCH, Decoder, Step, beside, step_line, yuv_bytes

SLOTS = 2


def files_of(folder: Path) -> list[bytes]:
    return [f.read_bytes() for f in sorted(folder.rglob("*.jpg"))[:BATCH]]


def serve(folder: str, buffers: list[torch.Tensor], requests, replies) -> None:
    """The decoding process: one decode per request, into the shared slot named (yuv) or its
    own memory (rgbi); replies when the decode is done on the device."""
    files = files_of(Path(folder))
    decoders = {("yuv", k): Decoder(files, "yuv", buffer) for k, buffer in enumerate(buffers)}
    decoders["rgbi", 0] = decoders["rgbi", 1] = Decoder(files, "rgbi")
    stream = torch.cuda.Stream()
    replies.put("ready")
    while (request := requests.get()) is not None:
        began = time.perf_counter()
        decoders[request].once(stream.cuda_stream)
        stream.synchronize()
        replies.put((time.perf_counter() - began) * 1e3)


def requests_of(requests, replies, output: str):
    """One decode a call in the decoding process, into the next slot, to its reply."""
    slot = [0]

    def work() -> None:
        requests.put((output, slot[0]))
        replies.get()
        slot[0] = (slot[0] + 1) % SLOTS

    return work


def main(folder: Path) -> None:
    files = files_of(folder)
    here = Decoder(files, "yuv")
    buffers = [torch.zeros(yuv_bytes(here.planes), dtype=torch.uint8, device="cuda")
               for _ in range(SLOTS)]  # fmt: skip
    ctx = mp.get_context("spawn")
    requests, replies = ctx.Queue(), ctx.Queue()
    began = time.perf_counter()
    server = ctx.Process(target=serve, args=(str(folder), buffers, requests, replies), daemon=True)
    server.start()
    replies.get(timeout=120)
    print(f"-- decoder process ready in {time.perf_counter() - began:.1f} s")
    side = torch.cuda.Stream()
    here.once(side.cuda_stream)
    torch.cuda.synchronize()
    for slot in range(SLOTS):
        requests.put(("yuv", slot))
        print(f"-- slot {slot}: decoded in {replies.get():.2f} ms there; same pixels as here: "
              f"{torch.equal(buffers[slot], here.buffer)}")  # fmt: skip
    calls = []
    for _ in range(10):
        t = time.perf_counter()
        requests.put(("yuv", 0))
        replies.get()
        calls.append((time.perf_counter() - t) * 1e3)
    print(f"-- yuv request to reply, GPU idle: median {statistics.median(calls):.2f} ms")
    step = Step()
    step.capture()
    own = torch.cuda.Stream(priority=-5)
    period = None
    for mode, run in (("eager", step.eager), ("graph", step.replay)):
        base = None
        for output in ("none", "yuv", "rgbi", "none", "yuv"):
            work = None if output == "none" else requests_of(requests, replies, output)
            times, latencies = beside(run, own, work, period)
            median = statistics.median(times)
            period = period or median / 1e3
            base = base or median
            print(step_line(f"{mode:5s} own {output:4s}", times, base, latencies, "reply"))
    requests.put(None)
    server.join(timeout=30)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
