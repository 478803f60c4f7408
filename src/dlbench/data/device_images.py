"""Images on the device: decode (GPU decode only), crop, normalise and lay out a uint8 batch for
the model; the half of the image pipeline that runs where the model does (data.images is the
workers' half)."""

from __future__ import annotations

import torch

from dlbench.data.crop import batched_crop, has_triton
from dlbench.data.images import IMAGENET_MEAN, IMAGENET_STD, EncodedBatch
from dlbench.errors import UserError


class DeviceImages:
    """On the device: decode (GPU decode only), crop, normalise and lay out a uint8 batch for
    the model, in the run's input dtype and memory format."""

    def __init__(
        self,
        device: torch.device,
        dtype: torch.dtype,
        fmt: torch.memory_format,
        size: tuple[int, int],
    ) -> None:
        self.device, self.dtype, self.fmt = device, dtype, fmt
        self.size = size
        self.failed_files: set[int] = set()  # files whose decode failed on the device
        self._engines = None  # nvjpeg.HardwareJpeg, False where the GPU has no JPEG engine
        self._reading: torch.Tensor | None = None  # the batch the engines may still read
        shape = (1, 3, 1, 1)
        mean, std = (
            torch.tensor(v, device=device).view(shape) for v in (IMAGENET_MEAN, IMAGENET_STD)
        )
        self.scale, self.shift = 1 / (255 * std), -mean / std  # (x / 255 - mean) / std

    def normalise(self, images: torch.Tensor) -> torch.Tensor:
        """0-255 NCHW images (uint8 pinned on the host, or cropped on the device) to the model's
        input: normalised in float32, written in its dtype and memory format by one kernel."""
        x = images.to(self.device, non_blocking=True)
        out = torch.empty(x.shape, dtype=self.dtype, device=self.device, memory_format=self.fmt)
        return torch.addcmul(self.shift, x, self.scale, out=out)

    def decode(self, packed: EncodedBatch) -> torch.Tensor:
        """The batch decoded, cropped, flipped and normalised in the caller's stream. On a GPU:
        nvJPEG on the JPEG engines (data.nvjpeg; torchvision's batched call where the GPU has
        none or a file needs another decoder), then one Triton kernel (data.crop_kernel);
        elsewhere torchvision's decode, the matrix-product crop (data.crop) and `normalise`.
        A file that fails to decode is counted and its place (and crop) taken by another
        image of the batch."""
        if self.device.type != "cuda" or not has_triton():
            images, boxes, flips = self._decoded(packed)
            return self.normalise(batched_crop(images, boxes, flips, self.size))
        from dlbench.data.crop_kernel import crop_normalise, image_table

        # the decoded images stay referenced until the crop is queued: freed before, their
        # memory could be handed to `out` on this stream and overwritten before it is read
        decoded, table = self._on_engines(packed)
        if decoded is None:
            decoded, boxes, flips = self._decoded(packed)
            table = image_table(decoded), boxes, flips
        shape = (len(packed.lengths), 3, *self.size)
        out = torch.empty(shape, dtype=self.dtype, device=self.device, memory_format=self.fmt)
        return crop_normalise(*table, out, self.scale.view(-1), self.shift.view(-1))

    def _on_engines(self, packed: EncodedBatch):
        """(buffer, (image table, boxes, flips)) with the batch's decode queued on the JPEG
        engines into `buffer`, or (None, None) where they cannot take it."""
        from dlbench.data import nvjpeg
        from dlbench.data.crop_kernel import interleaved_table

        if self._engines is None:
            try:
                self._engines = nvjpeg.HardwareJpeg()
            except (nvjpeg.Unavailable, OSError):
                self._engines = False
        if not self._engines or not bool(packed.engine_ready.all()):
            return None, None
        stream = torch.cuda.current_stream(self.device).cuda_stream
        try:
            buffer, starts = self._engines.decode(
                packed.flat, packed.lengths, packed.sizes, self.device, stream
            )
        except RuntimeError:  # a file the engines refuse: torchvision decodes file by file
            return None, None
        self._reading = packed.flat  # the API may return before reading it (H100s did not)
        table = interleaved_table(buffer, starts, packed.sizes)
        return buffer, (table, packed.boxes, packed.flips)

    def _decoded(self, packed: EncodedBatch):
        """torchvision's decode of the batch: (images, boxes, flips)."""
        from torchvision.io import ImageReadMode, decode_jpeg

        raws = list(torch.split(packed.flat, packed.lengths.tolist()))
        decoded: list[torch.Tensor | None] = [None] * len(raws)
        for k in packed.decoded.nonzero().flatten().tolist():  # a worker's pixels
            decoded[k] = raws[k].view(3, *packed.sizes[k].tolist()).to(self.device)
        jpegs = [k for k, image in enumerate(decoded) if image is None]
        try:
            images = [raws[k] for k in jpegs]
            images = (
                decode_jpeg(images, mode=ImageReadMode.RGB, device=self.device) if jpegs else []
            )
            for k, image in zip(jpegs, images):
                decoded[k] = image
        except RuntimeError:  # one bad file fails the batched call: decode one by one
            for k in jpegs:
                try:
                    decoded[k] = decode_jpeg(raws[k], mode=ImageReadMode.RGB, device=self.device)
                except RuntimeError:
                    self.failed_files.add(int(packed.files[k]))
        if all(image is not None for image in decoded):
            return decoded, packed.boxes, packed.flips
        good = [k for k, img in enumerate(decoded) if img is not None]
        if not good:
            raise UserError("--data: no file of a whole batch could be decoded on the GPU")
        take = [k if decoded[k] is not None else good[k % len(good)] for k in range(len(raws))]
        return [decoded[k] for k in take], packed.boxes[take], packed.flips[take]
