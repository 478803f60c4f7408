"""Random-resized-crop and flip for a whole batch on the device (the GPU decode path).

Each worker draws its image's box and flip as torchvision's RandomResizedCrop and
RandomHorizontalFlip draw them (the same calls on the worker's generator, in the CPU path's
order), from the image size in the JPEG header. On a GPU one Triton kernel then crops, flips
and normalises the whole batch (data.crop_kernel); elsewhere (the CPU, or no Triton) the
batch is cropped here, in one pair of batched matrix products over the images padded into one
tensor (the resize is separable). The weights are those of the CPU path's antialiased
bilinear resize: the same pixels up to rounding."""

from __future__ import annotations

import functools
import importlib.util
import math
from typing import NamedTuple

import torch

SCALE = (0.08, 1.0)  # RandomResizedCrop's defaults, as the CPU path uses them
RATIO = (3 / 4, 4 / 3)
FLIP_P = 0.5
_SOF = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}
BASELINE_SOF = 0xC0
_STANDALONE = {0x01, 0xD8, *range(0xD0, 0xD8)}  # markers without a length field
TIFF_MAGIC = (b"II*\x00", b"MM\x00*")  # little- and big-endian


class JpegFrame(NamedTuple):
    """What a JPEG's frame header says: size, the coding (its SOF marker) and components."""

    height: int
    width: int
    marker: int
    components: int

    @property
    def engine_ready(self) -> bool:
        """Baseline colour: what nvJPEG's batched decode on a GPU's JPEG engines takes."""
        return self.marker == BASELINE_SOF and self.components == 3


def jpeg_frame(data: bytes) -> JpegFrame:
    """The frame header of a JPEG, without decoding; ValueError when the bytes hold none (a
    truncated or foreign file)."""
    if data[:2] != b"\xff\xd8":
        raise ValueError("no JPEG start marker")
    at = 2
    while at + 4 <= len(data):
        if data[at] != 0xFF:
            raise ValueError(f"no marker at byte {at}")
        marker = data[at + 1]
        if marker == 0xFF:  # fill byte
            at += 1
            continue
        if marker in _STANDALONE:
            at += 2
            continue
        if marker in _SOF and at + 10 <= len(data):
            return JpegFrame(_u16(data, at + 5), _u16(data, at + 7), marker, data[at + 9])
        at += 2 + _u16(data, at + 2)
    raise ValueError("no frame header")


def jpeg_size(data: bytes) -> tuple[int, int]:
    """(height, width) from a JPEG's frame header (see `jpeg_frame`)."""
    frame = jpeg_frame(data)
    return frame.height, frame.width


def _u16(data: bytes, at: int) -> int:
    return int.from_bytes(data[at : at + 2], "big")


# PIL's decompression-bomb limit: a header that claims more is a bad file, not a photograph
# (docs/decisions.md#input-limits).
MAX_IMAGE_PIXELS = 2 * 89_478_485


def header_size(data: bytes) -> tuple[int, int]:
    """(height, width) of a JPEG, PNG or TIFF from its header; ValueError for a file without one
    or one that claims over MAX_IMAGE_PIXELS, so that the worker counts it as bad."""
    if data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) >= 24:  # IHDR: width, height
        height, width = int.from_bytes(data[20:24], "big"), int.from_bytes(data[16:20], "big")
    elif data[:4] in TIFF_MAGIC:
        height, width = _tiff_size(data)
    else:
        height, width = jpeg_size(data)
    if height * width > MAX_IMAGE_PIXELS:
        raise ValueError(f"{width}x{height} pixels claimed, over {MAX_IMAGE_PIXELS:,}")
    return height, width


def draw_crop(height: int, width: int) -> tuple[tuple[float, float, float, float], bool]:
    """A box [x0, y0, x1, y1] and whether to flip, for an image of (height, width), drawn as
    the CPU path's Compose draws them (crop parameters, then the flip)."""
    from torchvision.transforms import RandomResizedCrop

    top, left, h, w = RandomResizedCrop.get_params(torch.empty(1, height, width), SCALE, RATIO)
    return (left, top, left + w, top + h), bool(torch.rand(1) < FLIP_P)


def batched_crop(
    images: list[torch.Tensor], boxes: torch.Tensor, flips: torch.Tensor, size: tuple[int, int]
) -> torch.Tensor:
    """uint8 CHW images of any sizes (on one device) to a batch of `size` (0-255), each cropped
    to its box [x0, y0, x1, y1] (whole pixels; boxes and flips on the host), resized with the
    antialiased bilinear filter the CPU path's resize uses, and flipped where `flips` says. The
    resize is separable, so the whole batch is a few batched matrix products, each image times
    its own column weights, then its row weights, on the tensor cores (half precision on a GPU:
    0-255 are exact, the weights keep 11 bits). Returned as an (N, C, H, W) view of a (C, N, H, W)
    tensor: the normaliser's one kernel lays it out for the model."""
    device = images[0].device
    dtype = torch.float16 if device.type == "cuda" else torch.float32
    count, (out_h, out_w) = len(images), size
    height = _aligned(max(img.shape[1] for img in images))
    width = _aligned(max(img.shape[2] for img in images))
    padded = _padded(images, height, width, dtype)
    spans = (boxes[:, 2:] - boxes[:, :2]).float().amax(dim=0).tolist()  # widest box, tallest box
    # one copy each: a copy from pageable memory waits for the stream
    boxes = boxes.to(device, torch.float32, non_blocking=True)
    flips = flips.to(device, non_blocking=True)
    rows = resize_weights(boxes[:, 1], boxes[:, 3], out_h, height, spans[1], None, dtype)
    columns = resize_weights(boxes[:, 0], boxes[:, 2], out_w, width, spans[0], flips, dtype)
    across = torch.bmm(padded.view(count, 3 * height, width), columns.transpose(1, 2))
    across = across.view(count, 3, height, out_w)
    out = torch.empty(3, count, out_h, out_w, dtype=dtype, device=device)
    for channel in range(3):  # the row weights apply to each channel: no copy of them per channel
        torch.bmm(rows, across[:, channel], out=out[channel])
    return out.transpose(0, 1)


@functools.cache  # asked for every batch the staging thread crops
def has_triton() -> bool:
    """Whether Triton can be imported (GPU builds of torch ship it; CPU ones do not)."""
    return importlib.util.find_spec("triton") is not None


def _padded(images: list[torch.Tensor], height: int, width: int, dtype) -> torch.Tensor:
    """The images in one zero-padded batch of (height, width), with torch's own copies."""
    padded = torch.empty(len(images), 3, height, width, dtype=dtype, device=images[0].device)
    if all(img.shape == images[0].shape for img in images):  # one copy for a uniform batch
        _, h, w = images[0].shape
        padded[:, :, h:], padded[..., w:] = 0, 0
        padded[:, :, :h, :w] = torch.stack(images)
    else:  # zeros beyond an image get no weight: every box lies inside its image
        padded.zero_()
        for k, img in enumerate(images):
            padded[k, :, : img.shape[1], : img.shape[2]] = img
    return padded


# Tensor-core matrix products want rows in whole 16-byte steps (8 halves); unaligned rows made
# the crop slow (docs/decisions.md#crop-kernel)
ALIGN = 8


def _aligned(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def resize_weights(
    start: torch.Tensor,
    end: torch.Tensor,
    out: int,
    length: int,
    widest: float,
    flips: torch.Tensor | None,
    dtype: torch.dtype,
) -> torch.Tensor:
    """(images, out, length) weights of torch's antialiased bilinear resize (PIL's filter:
    a triangle as wide as the scale when shrinking) from each image's span [start, end) (on
    the device; `widest` the longest span, known on the host) of `length` pixels to `out`
    pixels; output pixel i reads mirrored where `flips` says. Only each output pixel's few taps
    are computed, then scattered into zeros: the dense matrix is written once."""
    device = start.device
    taps = math.ceil(2 * max(widest / out, 1.0)) + 2
    start, end = start[:, None, None], end[:, None, None]
    scale = (end - start) / out
    support = scale.clamp(min=1.0)
    at = torch.arange(out, device=device, dtype=torch.float32).view(1, -1, 1)
    if flips is not None:
        flipped = flips.bool().view(-1, 1, 1)
        at = torch.where(flipped, out - 1 - at, at)
    center = start + scale * (at + 0.5)
    first = torch.floor(center - support - 0.5)
    pixel = first + torch.arange(taps, device=device, dtype=torch.float32)
    weights = (1 - ((pixel + 0.5 - center) / support).abs()).clamp(min=0)
    weights = weights * ((pixel >= start) & (pixel < end))
    weights = weights / weights.sum(dim=2, keepdim=True)
    index = pixel.clamp(0, length - 1).long()  # clamped taps carry weight 0
    dense = torch.zeros(len(weights), out, length, dtype=dtype, device=device)
    return dense.scatter_add_(2, index, weights.to(dtype))


def _tiff_size(data: bytes) -> tuple[int, int]:
    """(height, width) of a TIFF: PIL reads the first directory, nothing is decoded."""
    import io

    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as image:
            width, height = image.size
    except (OSError, Image.DecompressionBombError) as exc:
        raise ValueError(str(exc)) from None
    return height, width
