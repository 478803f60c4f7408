"""A DataLoader for a data source and a workload, and the feed that hands its batches to the
measured step: the time the step waits for the loader, and the files and bytes it read, are
counted over the window (host clock around `next()`, no device sync)."""

from __future__ import annotations

import contextlib
import queue
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch.utils.data import DataLoader, Dataset

from dlbench.config import DataSource
from dlbench.console import stderr
from dlbench.data.images import (
    DeviceImages,
    ImageFolderSet,
    collate_decoded,
    collate_encoded,
    scan_images,
)
from dlbench.data.text import TokenSet, read_samples, train_tokenizer
from dlbench.errors import UserError, invalid
from dlbench.signals import raise_if_interrupted
from dlbench.workloads import InputShape, Workload

PREFETCH_BATCHES = 4  # batches each worker prepares ahead
# Batches staged on the device ahead of the step (decoded, cropped). nvJPEG's call waits for
# its small kernels behind the step's, now and then for two steps' time
# (docs/decisions.md#staging-depth).
STAGED_AHEAD = 8
QUEUE_POLL_S = 0.2  # how often a wait for the staging thread looks for an interrupt
CLOSE_WAIT_S = 5.0  # the longest close waits for the staging thread's batch in progress
# The side stream's priority (lower is sooner; CUDA maps it into the device's range): its few
# short kernels are not queued behind the blocks of a step that fills every SM; nvJPEG's own
# stream, torchvision's, keeps the default priority (docs/decisions.md#stream-priority).
SIDE_STREAM_PRIORITY = -1
# The step's own stream with GPU decode (engine.session.own_stream): above every other, so that
# nvJPEG's small colour-conversion kernels (default priority, streams of its own) take SMs only
# where the step's kernels leave them free (CUDA clamps it to the device's range).
STEP_STREAM_PRIORITY = -5
# Python's thread switch interval while a GPU-decode feed runs. torchvision's batched nvJPEG
# call takes the GIL back many times, each time waiting up to the interval for a thread that
# runs Python, here the step's (docs/decisions.md#gil-switch-interval).
GPU_DECODE_SWITCH_S = 0.0002
# A window whose host waited longer than this share for batches measures the loader, not the GPU.
INPUT_BOUND_WAIT_PCT = 10.0


@dataclass
class Pipeline:
    """A loader over a data set, and what the row says about it."""

    loader: DataLoader
    source: DataSource
    workers: int
    decode: str
    files: int  # samples (files, lines or packed sequences) in the data set
    skipped: int  # files skipped when the folder was scanned
    data_bytes: int


def _image_set(
    source: DataSource, workload: Workload, shape: InputShape, batch_size: int, decode: str
):
    index = scan_images(source.path, need=batch_size, classes=workload.num_classes)
    if decode == "gpu" and index.formats != {"jpeg"}:
        others = ", ".join(sorted(index.formats - {"jpeg"})).upper()
        stderr.print(
            f"[yellow]warning:[/yellow] --decode gpu: {source.path} also holds {others}; nvJPEG "
            "decodes JPEG only, the workers decode the rest on the CPU"
        )
    dataset = ImageFolderSet(index, (shape.height, shape.width), decode == "gpu")
    return dataset, len(index.unreadable), index.total_bytes


def _text_set(source: DataSource, workload: Workload, shape: InputShape, batch_size: int):
    causal = workload.family == "llm"
    samples = read_samples(source.path, None if causal else workload.num_classes)
    tokenizer = train_tokenizer(samples, workload.vocab_size or 30000)
    dataset = TokenSet(samples, tokenizer, shape.seq_len, causal=causal)
    if len(dataset) < batch_size:
        raise UserError(
            f"--data: {source.path} makes {len(dataset)} samples of {shape.seq_len} tokens, "
            f"fewer than one batch ({batch_size})"
        )
    return dataset, 0, sum(samples.sizes)


def check_data(source: DataSource, workload: Workload, decode: str) -> None:
    """A UserError when the data cannot feed the workload (before anything is built)."""
    given = f"{source.kind}:{source.path}"
    if source.kind == "folder" and workload.family != "vision":
        raise invalid("--data", given, f"{workload.name} does not classify images")
    if source.kind == "text" and workload.is_image:
        raise invalid("--data", given, f"{workload.name} takes images")
    if decode == "gpu" and source.kind != "folder":
        raise invalid("--decode", decode, "GPU decode is for image folders")


def open_pipeline(
    source: DataSource,
    workload: Workload,
    shape: InputShape,
    batch_size: int,
    workers: int,
    decode: str,
    seed: int,
    pin_memory: bool,
) -> Pipeline:
    """Check the data against the workload, index or tokenise it, and build the loader."""
    check_data(source, workload, decode)
    dataset: Dataset
    if source.kind == "folder":
        dataset, skipped, size = _image_set(source, workload, shape, batch_size, decode)
    else:
        dataset, skipped, size = _text_set(source, workload, shape, batch_size)
    loader = DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=True,
        drop_last=True,
        num_workers=workers,
        pin_memory=pin_memory,
        prefetch_factor=PREFETCH_BATCHES if workers else None,
        persistent_workers=workers > 0,
        generator=torch.Generator().manual_seed(seed),
        collate_fn=collate_encoded if decode == "gpu" else collate_decoded,
    )
    return Pipeline(loader, source, workers, decode, len(dataset), skipped, size)


def cpu_times() -> tuple[float, float] | None:
    """(busy, total) jiffies of all the host's cores (Linux /proc/stat), None elsewhere."""
    try:
        with open("/proc/stat") as stat:
            fields = [float(v) for v in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def cpu_busy_pct(start: tuple[float, float] | None, end: tuple[float, float] | None):
    """Share of all cores' time spent busy between two `cpu_times` readings, in %."""
    if start is None or end is None or end[1] <= start[1]:
        return None
    return 100.0 * (end[0] - start[0]) / (end[1] - start[1])


def worker_message(text: str) -> str:
    """A user error raised in a DataLoader worker, without the worker's traceback that the
    loader wraps it in (the last line: `dlbench.errors.UserError: MESSAGE`)."""
    lines = [line for line in text.splitlines() if line.strip()]
    marker = "UserError: "
    last = lines[-1] if lines else text
    return last.split(marker, 1)[1] if marker in last else last


class DataFeed:
    """Endless batches from the pipeline (a new epoch when one ends), made ready for the model
    by `prepare`; a window observer, so that its counters cover the measured window only.

    A thread draws the next batches from the loader and stages them (copy, GPU decode and crop
    on a side stream) up to `ahead` batches before the step asks for them: the host's wait
    for the loader and nvJPEG's own wait for its stream overlap the steps instead of sitting
    between them. `fetch` counts only the time the step itself waited."""

    def __init__(self, pipeline: Pipeline, prepare: Preparer, ahead: int = STAGED_AHEAD) -> None:
        self.pipeline = pipeline
        self.prepare = prepare
        self._iterator = iter(pipeline.loader)
        self._ready: queue.Queue = queue.Queue(maxsize=ahead)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.wait_s = 0.0
        self.bytes_read = 0
        self.samples = 0
        self.failed_files: set[int] = set()
        self._mark: tuple[float, int, int, float] = (0.0, 0, 0, 0.0)
        self._cpu: tuple[float, float] | None = None
        self.window: dict[str, float] = {}
        self._switch_s: float | None = None  # the switch interval before start() lowered it

    def _next(self):
        try:
            try:
                return next(self._iterator)
            except StopIteration:
                self._iterator = iter(self.pipeline.loader)
                return next(self._iterator)
        except UserError as exc:  # raised in a worker: DataLoader adds its traceback
            raise UserError(worker_message(str(exc))) from None

    def _stage_batches(self, cuda_index: int | None) -> None:
        """The thread: load, stage, queue; an exception is queued for `fetch` to raise."""
        while not self._stop.is_set():
            item: object
            try:
                if cuda_index is not None:  # the step's GPU (a thread starts on GPU 0)
                    torch.cuda.set_device(cuda_index)
                    cuda_index = None
                inputs, targets, sizes, failed = self._next()
                staged = self.prepare.stage(inputs, targets)
                item = (staged, int(sizes.sum()), len(targets), failed.tolist())
            except BaseException as exc:  # handed to the step's thread, raised there
                item = exc
            while not self._stop.is_set():
                try:
                    self._ready.put(item, timeout=QUEUE_POLL_S)
                    break
                except queue.Full:
                    continue
            if isinstance(item, BaseException):
                return

    def start(self) -> None:
        """Start staging batches (the first `fetch` does, if nothing did before)."""
        if self._thread is None:
            device = self.prepare.device
            index = device.index if device.index is not None else None
            if device.type == "cuda" and index is None:
                index = torch.cuda.current_device()
            if self.prepare.gpu_decode:
                self._switch_s = sys.getswitchinterval()
                sys.setswitchinterval(GPU_DECODE_SWITCH_S)
            self._thread = threading.Thread(
                target=self._stage_batches, args=(index,), name="dlbench-data", daemon=True
            )
            self._thread.start()

    def fetch(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The next batch on the device; the host's wait for it is counted."""
        self.start()
        began = time.perf_counter()
        while True:
            try:
                item = self._ready.get(timeout=QUEUE_POLL_S)
                break
            except queue.Empty:
                raise_if_interrupted()
                if not self._thread.is_alive() and self._ready.empty():
                    raise RuntimeError("the data staging thread ended without a batch") from None
        self.wait_s += time.perf_counter() - began
        if isinstance(item, BaseException):
            raise item
        staged, read, samples, failed = item
        self.bytes_read += read
        self.samples += samples
        self.failed_files.update(failed)
        return self.prepare.hand_over(staged)

    def begin_window(self) -> None:
        self._cpu = cpu_times()
        self._mark = (self.wait_s, self.bytes_read, self.samples, time.perf_counter())

    def end_window(self) -> None:
        wait, read, samples, began = self._mark
        wall = time.perf_counter() - began
        self.window = {
            "wait_s": self.wait_s - wait,
            "bytes": self.bytes_read - read,
            "samples": self.samples - samples,
            "wall_s": wall,
            "cpu_pct": cpu_busy_pct(self._cpu, cpu_times()),
        }

    def columns(self, gpu_idle: bool | None = None) -> dict[str, Any]:
        """The row's data columns: source, loader settings, and the window's reads and waits.
        `gpu_idle`: whether the profiled pass found the GPU idle for part of the step (None
        without one, on a CPU). The row is input-bound where the host waited for batches and
        the GPU did not stay busy: under CUDA graphs the host also waits inside nvJPEG's device
        synchronisation, which this count cannot tell from a wait for data."""
        p, w = self.pipeline, self.window
        columns: dict[str, Any] = {
            "data_path": str(p.source.path),
            "data_workers": p.workers,
            "data_decode": p.decode,
            "data_files": p.files,
            "data_bytes": p.data_bytes,
            "data_skipped": p.skipped + len(self.failed_files | self.prepare.failed_files),
            "data_mean_file_kb": p.data_bytes / p.files / 1e3 if p.files else None,
        }
        if w and w["wall_s"] > 0:
            columns.update(
                data_files_read=w["samples"],
                data_bytes_read=w["bytes"],
                data_mb_per_s=w["bytes"] / w["wall_s"] / 1e6,
                data_wait_pct=100.0 * w["wait_s"] / w["wall_s"],
                host_cpu_pct=w["cpu_pct"],
            )
            waited = columns["data_wait_pct"] > INPUT_BOUND_WAIT_PCT
            columns["input_bound"] = waited and gpu_idle is not False
        return columns

    def close(self) -> None:
        """Stop the staging thread, then the loader's worker processes (a sweep worker runs
        the next point next)."""
        self._stop.set()
        give_up = time.monotonic() + CLOSE_WAIT_S  # a loader that hangs does not hang the run
        if self._thread is not None:
            while self._thread.is_alive() and time.monotonic() < give_up:
                with contextlib.suppress(queue.Empty):
                    self._ready.get(timeout=QUEUE_POLL_S)  # frees a put that waits
                self._thread.join(timeout=QUEUE_POLL_S)
        shutdown = getattr(self._iterator, "_shutdown_workers", None)
        if shutdown:
            shutdown()
        if self._switch_s is not None:
            sys.setswitchinterval(self._switch_s)
            self._switch_s = None


class SideStream:
    """Makes batches ready on a side CUDA stream: a batch's copy (and with GPU decode its
    crop) runs beside the step before it instead of queued behind it; the step's stream waits
    for the batch, and the batch's memory stays the step's until the step is done with it.

    `fence`: wait on the host (the staging thread) for the previous batch's work before the
    next starts (GPU decode: torchvision's call and data.nvjpeg's allocate nvJPEG's output on
    this stream, but nvJPEG's hardware path writes it when called, not in the stream's order,
    so memory the previous crop still reads must not be handed out again). The
    wait is for the side stream only, never for the model's."""

    def __init__(self, device: torch.device, fence: bool) -> None:
        self.device = device
        self.stream = None
        if device.type == "cuda":
            self.stream = torch.cuda.Stream(device, priority=SIDE_STREAM_PRIORITY)
        self.fence = fence
        self._done: torch.cuda.Event | None = None

    def stage(self, make, *args) -> tuple[tuple[torch.Tensor, ...], object]:
        """`make(*args)` on the side stream (any thread), and the event that ends it."""
        if self.stream is None:
            return make(*args), None
        if self.fence and self._done is not None:
            self._done.synchronize()
        with torch.cuda.stream(self.stream):
            ready = make(*args)
            done = torch.cuda.Event()
            done.record(self.stream)
        self._done = done
        return ready, done

    def hand_over(self, staged: tuple[tuple[torch.Tensor, ...], object]):
        """The staged tensors for the calling thread's stream, which waits for them."""
        ready, done = staged
        if done is None:
            return ready
        current = torch.cuda.current_stream(self.device)
        current.wait_event(done)
        for tensor in ready:
            tensor.record_stream(current)
        return ready


class Preparer(Protocol):
    """Turns a loader batch into the step's (inputs, targets): `stage` in the staging thread,
    `hand_over` in the step's; the files whose decode failed on the way."""

    device: torch.device
    failed_files: set[int]
    gpu_decode: bool  # the staging thread calls nvJPEG (see GPU_DECODE_SWITCH_S)

    def stage(self, inputs, targets: torch.Tensor) -> object: ...

    def hand_over(self, staged: object) -> tuple[torch.Tensor, torch.Tensor]: ...


class AsLoaded:
    """Batches as the loader gives them (the loader alone, measured on the host)."""

    device = torch.device("cpu")
    gpu_decode = False

    def __init__(self) -> None:
        self.failed_files: set[int] = set()

    def stage(self, inputs, targets):
        return inputs, targets

    def hand_over(self, staged):
        return staged


class OnDevice:
    """Loader batches to the step's device, dtype and layout, made ready on a side stream:
    token ids copied; images copied and normalised, or with GPU decode decoded, cropped and
    normalised there."""

    def __init__(self, pipeline: Pipeline, shape: InputShape, device, dtype, fmt) -> None:
        self.device = device
        self.gpu_decode = pipeline.decode == "gpu"
        self.images = None
        if pipeline.source.kind != "text":
            self.images = DeviceImages(device, dtype, fmt, (shape.height, shape.width))
        self.failed_files = self.images.failed_files if self.images else set()
        self.side = SideStream(device, fence=self.gpu_decode)

    def _ready(self, inputs, targets: torch.Tensor):
        targets = targets.to(self.device, non_blocking=True)
        if self.images is None:
            return inputs.to(self.device, non_blocking=True), targets
        if self.gpu_decode:
            return self.images.decode(inputs), targets
        return self.images.normalise(inputs), targets

    def stage(self, inputs, targets: torch.Tensor):
        return self.side.stage(self._ready, inputs, targets)

    def hand_over(self, staged):
        return self.side.hand_over(staged)
