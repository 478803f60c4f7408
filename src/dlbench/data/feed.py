"""The feed that hands a loader's batches to the measured step: a thread stages them ahead,
and the time the step waits for them, the files and bytes read, are counted over the window
(host clock around the hand-over, no device sync)."""

from __future__ import annotations

import contextlib
import queue
import sys
import threading
import time
from typing import Any, Protocol

import torch

from dlbench.data.pipeline import Pipeline, worker_message
from dlbench.errors import UserError
from dlbench.host import cpu_busy_pct, cpu_times
from dlbench.signals import raise_if_interrupted

# Batches staged on the device ahead of the step (decoded, cropped). nvJPEG's call waits for
# its small kernels behind the step's, now and then for two steps' time
# (docs/decisions.md#staging-depth).
STAGED_AHEAD = 8
QUEUE_POLL_S = 0.2  # how often a wait for the staging thread looks for an interrupt
CLOSE_WAIT_S = 5.0  # the longest close waits for the staging thread's batch in progress
# Python's thread switch interval while a GPU-decode feed runs. torchvision's batched nvJPEG
# call takes the GIL back many times, each time waiting up to the interval for a thread that
# runs Python, here the step's (docs/decisions.md#gil-switch-interval).
GPU_DECODE_SWITCH_S = 0.0002
# A window whose host waited longer than this share for batches measures the loader, not the GPU.
INPUT_BOUND_WAIT_PCT = 10.0


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

    def as_run(self) -> dict[str, Any]:
        """The loader's settings as they ran (the default worker count resolved), over the
        settings asked for."""
        return {"data_workers": self.pipeline.workers, "data_decode": self.pipeline.decode}

    def columns(self, gpu_idle: bool | None = None) -> dict[str, Any]:
        """The row's data columns: source, loader settings, and the window's reads and waits.
        `gpu_idle`: whether the profiled pass found the GPU idle for part of the step (None
        without one, on a CPU). The row is input-bound where the host waited for batches and
        the GPU did not stay busy: under CUDA graphs the host also waits inside nvJPEG's device
        synchronisation, which this count cannot tell from a wait for data."""
        p, w = self.pipeline, self.window
        columns: dict[str, Any] = {
            "data_path": str(p.source.path),
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
