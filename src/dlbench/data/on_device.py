"""Loader batches made ready on the step's device: copied, normalised or GPU-decoded and
cropped on a side stream beside the step, handed to the step's stream when it asks."""

from __future__ import annotations

import torch

from dlbench.data.device_images import DeviceImages
from dlbench.data.pipeline import Pipeline
from dlbench.workloads import InputShape

# The side stream's priority (lower is sooner; CUDA maps it into the device's range): its few
# short kernels are not queued behind the blocks of a step that fills every SM; nvJPEG's own
# stream, torchvision's, keeps the default priority (docs/decisions.md#stream-priority).
SIDE_STREAM_PRIORITY = -1
# The step's own stream with GPU decode (engine.scenarios.streams.own_stream): above every
# other, so that nvJPEG's small colour-conversion kernels (default priority, streams of its own)
# take SMs only where the step's kernels leave them free (CUDA clamps it to the device's range).
STEP_STREAM_PRIORITY = -5


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
