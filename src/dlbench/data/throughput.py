"""`dlbench data PATH`: the loader alone, at several worker counts, so a user sees where it
saturates and can set it beside the model's throughput on the same batch (the smaller of the
two is what training gets). Each worker count is one row (run_kind=loader)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from dlbench.data.feed import AsLoaded, DataFeed, Preparer
from dlbench.data.pipeline import Pipeline

MIN_WARMUP_BATCHES = 2


def worker_counts(most: int) -> list[int]:
    """0, 1, 2, 4, ... up to `most`, and `most` itself."""
    counts, n = [0], 1
    while n < most:
        counts.append(n)
        n *= 2
    return [*counts, most] if most > 0 else counts


def parse_worker_counts(text: str | None, most: int) -> list[int]:
    """--workers 0,2,8 as given, or the default ladder up to the CPUs."""
    from dlbench.config.limits import MAX_WORKERS
    from dlbench.errors import invalid

    if text is None:
        return worker_counts(most)
    try:
        counts = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise invalid("--workers", text, "comma-separated counts, e.g. 0,2,4") from None
    if not counts or min(counts) < 0 or max(counts) > MAX_WORKERS:
        raise invalid("--workers", text, f"comma-separated counts from 0 to {MAX_WORKERS}")
    return counts


@dataclass(frozen=True)
class LoaderResult:
    """One worker count: samples and bytes delivered per second, over at least `min_time`."""

    workers: int
    batches: int
    samples: int
    bytes_read: int
    seconds: float
    warmup_s: float

    @property
    def samples_per_s(self) -> float:
        return self.samples / self.seconds

    @property
    def mb_per_s(self) -> float:
        return self.bytes_read / self.seconds / 1e6


def measure_loader(
    pipeline: Pipeline, min_time_s: float, device: torch.device, prepare: Preparer | None = None
) -> LoaderResult:
    """Draw batches through the same feed a training run uses, for at least `min_time_s` after
    a warm-up that starts every worker (with GPU decode, `prepare` decodes on the device and
    the clock stops after a sync)."""
    feed = DataFeed(pipeline, prepare or AsLoaded())
    began = time.perf_counter()
    for i in range(max(MIN_WARMUP_BATCHES, pipeline.workers)):
        feed.fetch(i)
    _synchronize(device)
    warmup_s = time.perf_counter() - began
    batches = 0
    feed.begin_window()
    started = time.perf_counter()
    while batches < MIN_WARMUP_BATCHES or time.perf_counter() - started < min_time_s:
        feed.fetch(batches)
        batches += 1
    _synchronize(device)
    feed.end_window()
    feed.close()
    window = feed.window
    return LoaderResult(
        pipeline.workers, batches, window["samples"], window["bytes"], window["wall_s"], warmup_s
    )


def _synchronize(device: torch.device) -> None:
    """GPU decode finishes on the device: wait for it at the edges of the timing."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
