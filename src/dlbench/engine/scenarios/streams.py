"""The step's own CUDA stream, where nvJPEG decodes beside it (--decode gpu): at the highest
priority, so that the decoder's copies and kernels take SMs only where the step leaves them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

import torch

from dlbench.data.feed import DataFeed
from dlbench.data.on_device import STEP_STREAM_PRIORITY


def needs_own_stream(feed: DataFeed | None, device: torch.device) -> bool:
    """Whether the step runs on a stream of its own: where nvJPEG decodes beside it."""
    return device.type == "cuda" and feed is not None and feed.prepare.gpu_decode


@contextmanager
def own_stream(device: torch.device) -> Iterator[None]:
    """The step (and its timing events) on a stream of its own, at the highest priority.
    nvJPEG's hardware decode puts a copy and a small kernel per image on streams of its own at
    default priority, and they cost the step more than their own time; at the highest
    priority they take SMs only where the step leaves them free
    (docs/decisions.md#stream-priority)."""
    default = torch.cuda.current_stream(device)
    stream = torch.cuda.Stream(device, priority=STEP_STREAM_PRIORITY)
    stream.wait_stream(default)  # the model and its weights, made on the default stream
    with torch.cuda.stream(stream):
        yield
    default.wait_stream(stream)


def with_own_stream(
    inner: Callable[[], AbstractContextManager], device: torch.device
) -> Callable[[], AbstractContextManager]:
    @contextmanager
    def both() -> Iterator[None]:
        with inner(), own_stream(device):
            yield

    return both
