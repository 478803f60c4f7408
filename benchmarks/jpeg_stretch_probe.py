"""On a GPU: why some GPU-decode training steps take longer than the synthetic ones. Runs the
real CLI loop (resnet50 bs256 bf16-mixed, 8 workers, 120 steps) with hooks that note, for
every measured step: its device time, the host's wait for the batch, the staged queue's depth,
whether the batch's side-stream work was done when it was handed over, how long the host took
to launch the step, whether the device had done all it was given when the host began the step
(idle: the host set the pace), and whether it had finished the step before when the host
finished launching this one (under a step ahead). Then
sums the time over the synthetic median by cause. Variants (in order, alternating as given):
synthetic, gpu (as committed), torchvision (its batched nvJPEG call instead of the direct
one), cached (nvJPEG called for the first batch only, its images reused), flags=N (nvJPEG's
handle made with these flags), nopin (no pinned host copy of the encoded batch), switch=S (the
thread switch interval while staging); graphs:V is V with the step replayed as a CUDA graph,
legacy:V V with the step on CUDA's legacy default stream, stream-synthetic synthetic on a
stream of its own.
Rows go to OUTPUT.
Usage: PYTHONPATH=src python3 benchmarks/jpeg_stretch_probe.py DIR OUTPUT VARIANT [VARIANT...]"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

from dlbench.config import RunConfig
from dlbench.data import images, nvjpeg, pipeline
from dlbench.engine import session, timer
from dlbench.run import execute
from dlbench.startup import set_cuda_work_queues

STEPS = int(os.environ.get("STEPS", "120"))
MODEL, BATCH = os.environ.get("MODEL", "resnet50"), int(os.environ.get("BATCH", "256"))
DECODE = os.environ.get("DECODE", "gpu")  # cpu: a check of the probe itself on a CPU host
steps: list[dict] = []  # one per fetch; the measured ones get "gpu_ms"
marks: list[dict] = []  # the steps whose end a timer marked, in order
staging: list[float] = []  # the staging thread's time per batch (loader next()), ms
decoding: list[float] = []  # its time per batch in DeviceImages.decode (nvJPEG + crop launch)
timers: list = []  # the chunk's StepTimer


def hook() -> None:
    fetch, hand_over, stage_one = (
        pipeline.DataFeed.fetch, pipeline.SideStream.hand_over, pipeline.DataFeed._next,
    )  # fmt: skip
    mark, times = timer.StepTimer.mark, timer.StepTimer.step_times_s
    decode = images.DeviceImages.decode

    def timed_decode(self, packed):
        began = time.perf_counter()
        try:
            return decode(self, packed)
        finally:
            decoding.append((time.perf_counter() - began) * 1e3)

    def timed_fetch(self, i):
        record = {"queued": self._ready.qsize(), "began": time.perf_counter()}
        if timers and timers[-1]._cuda and timers[-1]._marks:
            record["idle"] = timers[-1]._events[timers[-1]._marks - 1].query()
        steps.append(record)
        out = fetch(self, i)
        record["wait_ms"] = (time.perf_counter() - record["began"]) * 1e3  # incl. hand-over
        return out

    def noted_hand_over(self, staged):
        _, done = staged
        if steps and done is not None:
            steps[-1]["batch_ready"] = done.query()
        return hand_over(self, staged)

    def timed_next(self):
        began = time.perf_counter()
        try:
            return stage_one(self)
        finally:
            staging.append((time.perf_counter() - began) * 1e3)

    def noted_mark(self):
        now = time.perf_counter()
        if not self._marks:
            timers[:] = [self]
        elif not steps or "mark" in steps[-1]:  # synthetic data: no fetch of ours
            steps.append({"began": timers[-1].last_mark, "queued": 0, "wait_ms": 0.0})
        if self._marks:
            record = steps[-1]
            record["launch_ms"] = (now - record["began"]) * 1e3
            record["ran_dry"] = self._cuda and self._events[self._marks - 1].query()
            record["mark"] = True
            marks.append(record)
        self.last_mark = now
        mark(self)

    def noted_times(self):
        out = times(self)
        for record, t in zip(marks[len(marks) - len(out) :], out):
            record["gpu_ms"] = t * 1e3
        return out

    pipeline.DataFeed.fetch = timed_fetch
    pipeline.SideStream.hand_over = noted_hand_over
    pipeline.DataFeed._next = timed_next
    images.DeviceImages.decode = timed_decode
    timer.StepTimer.mark = noted_mark
    timer.StepTimer.step_times_s = noted_times


ENGINES, OWN_STREAM = nvjpeg.HardwareJpeg, session.needs_own_stream


class CachedEngines(ENGINES):
    """The direct call once; every later batch gets that first buffer (same-size images): the
    feed without nvJPEG's work, to tell its cost from the rest's."""

    def decode(self, flat, lengths, sizes, device, stream):
        if not hasattr(self, "first"):
            self.first = super().decode(flat, lengths, sizes, device, stream)
        return self.first


class NoEngines:
    def __init__(self) -> None:
        raise nvjpeg.Unavailable("the probe's torchvision variant")


def variant_settings(variant: str) -> None:
    """Patch in one variant (the patches of the one before are undone first)."""
    pipeline.GPU_DECODE_SWITCH_S = 0.0002
    session.open_pipeline = pipeline.open_pipeline
    nvjpeg.HardwareJpeg = ENGINES
    nvjpeg.CREATE_FLAGS = 0
    if variant.startswith("flags="):
        nvjpeg.CREATE_FLAGS = int(variant.split("=")[1])
    if variant == "torchvision":
        nvjpeg.HardwareJpeg = NoEngines
    if variant == "cached":
        nvjpeg.HardwareJpeg = CachedEngines
    if variant == "nopin":

        def unpinned(*args, **kwargs):
            return pipeline.open_pipeline(*args, **{**kwargs, "pin_memory": False})

        session.open_pipeline = unpinned
    elif variant.startswith("switch="):
        pipeline.GPU_DECODE_SWITCH_S = float(variant.split("=")[1])


def summary(variant: str, baseline_ms: float | None) -> float:
    measured = [r for r in marks if "gpu_ms" in r]
    gpu = [r["gpu_ms"] for r in measured]
    median = statistics.median(gpu)
    print(f"== {variant}: {len(gpu)} steps, median {median:.2f} ms, mean "
          f"{statistics.fmean(gpu):.2f}, p90 {sorted(gpu)[int(0.9 * len(gpu))]:.2f}, "
          f"max {max(gpu):.2f}; loader next() median "
          f"{statistics.median(staging or [0]):.1f} ms, max {max(staging or [0]):.1f}; decode "
          f"median {statistics.median(decoding or [0]):.1f}, "
          f"max {max(decoding or [0]):.1f}")  # fmt: skip
    if baseline_ms is None:
        return median
    causes: dict[str, list[float]] = {}
    for r in measured:
        extra = r["gpu_ms"] - baseline_ms
        if r.get("batch_ready") is False:
            cause = "batch not ready"
        elif r.get("idle"):
            cause = "device idle at fetch"
        elif r["ran_dry"]:
            cause = "under a step ahead"
        else:
            cause = "neither"
        causes.setdefault(cause, []).append(extra)
    for cause, extras in causes.items():
        long = [e for e in extras if e > 3.0]
        print(f"   {cause:28s} {len(extras):4d} steps, {sum(extras):8.1f} ms over the synthetic "
              f"median; {len(long)} steps > 3 ms over, {sum(long):8.1f} ms")  # fmt: skip
    print("   slowest steps: gpu_ms wait_ms launch_ms queued batch_ready idle under_a_step")
    for r in sorted(measured, key=lambda r: -r["gpu_ms"])[:12]:
        print(f"   {r['gpu_ms']:8.2f} {r['wait_ms']:7.2f} {r['launch_ms']:8.2f} {r['queued']:5d} "
              f"{r.get('batch_ready')!s:>6} {r.get('idle')!s:>6} {r['ran_dry']!s:>6}")  # fmt: skip
    launch = [r["launch_ms"] for r in measured]
    print(f"   host launch per step: median {statistics.median(launch):.2f} ms, max "
          f"{max(launch):.2f}")  # fmt: skip
    return median


def main(folder: Path, output: Path, variants: list[str]) -> None:
    hook()
    baseline = None
    for variant in variants:
        steps.clear(), marks.clear(), staging.clear(), decoding.clear()
        graphs = variant.startswith("graphs:")  # graphs:V: V with the step as a CUDA graph
        base = variant.removeprefix("graphs:")
        base, legacy = base.removeprefix("legacy:"), base.startswith("legacy:")
        session.needs_own_stream = OWN_STREAM
        if legacy:  # legacy:V: V with the step on CUDA's legacy default stream
            session.needs_own_stream = lambda feed, device: False
        elif base == "stream-synthetic":  # synthetic on a stream of its own
            session.needs_own_stream = lambda feed, device: device.type == "cuda"
        variant_settings(base)
        data = {} if base.endswith("synthetic") else {
            "data": f"folder:{folder}", "data_workers": 8, "data_decode": DECODE}  # fmt: skip
        config = RunConfig(model=MODEL, batch_size=BATCH, precision="bf16-mixed",
                           n_iters=STEPS, warmup_steps=5, output=output,
                           cuda_graphs=True if graphs else None,
                           extra={"probe_variant": variant}, **data)  # fmt: skip
        execute(config)
        median = summary(variant, baseline)
        if variant.endswith("synthetic"):
            baseline = median


if __name__ == "__main__":
    set_cuda_work_queues()  # as the CLI does, before CUDA starts
    main(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:])
