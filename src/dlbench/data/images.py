"""Image folders: an ImageFolder-style tree (a sub-folder per class, or files at the top) of JPEG
and PNG files, read and decoded in DataLoader workers, augmented with torchvision.transforms.v2
(random resized crop to the model's size, flip) and handed on as uint8: the device normalises
(a quarter of the bytes over PCIe, as timm's prefetcher does). With `--decode gpu` the workers
only read the files and draw each image's crop from its header; nvJPEG decodes on the GPU."""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import torch
from torch.utils.data import Dataset

from dlbench.console import stderr
from dlbench.data.crop import (
    TIFF_MAGIC,
    draw_crop,
    header_size,
    jpeg_frame,
)
from dlbench.errors import UserError

# torchvision 0.29 deprecates its image decoders in favour of TorchCodec; dlbench keeps them
# until TorchCodec decodes images on the CPU and the GPU alike (docs/input-pipelines.md), and a
# user's run is not the place for the library's notice.
warnings.filterwarnings(
    "ignore", "The image decoding and encoding capabilities of TorchVision", DeprecationWarning
)
SUFFIXES = {".jpg", ".jpeg", ".png", ".tif", ".tiff"}
MAGIC = {b"\xff\xd8\xff": "jpeg", b"\x89PNG": "png", **dict.fromkeys(TIFF_MAGIC, "tiff")}
# PIL modes of a single channel wider than 8 bits: integers are taken as 16-bit data (a 32-bit
# "I" TIFF holds 16-bit scans in practice), floats as 0-1; both scaled to 0-255.
WIDE_GREY = {"I": 65535.0, "I;16": 65535.0, "I;16B": 65535.0, "I;16L": 65535.0, "F": 1.0}
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
RETRIES = 16  # a corrupt file is replaced by the next readable one, up to this many tries


@dataclass
class ImageIndex:
    """The readable files of a folder, their class labels, and what was skipped."""

    root: Path
    files: list[Path] = field(default_factory=list)
    labels: list[int] = field(default_factory=list)
    classes: list[str] = field(default_factory=list)
    formats: set[str] = field(default_factory=set)
    unreadable: list[Path] = field(default_factory=list)
    total_bytes: int = 0


def _format(path: Path) -> str | None:
    """jpeg, png or tiff from the file's first bytes, None for anything else: an unreadable file, or
    no regular file at all (a named pipe would block the scan forever)."""
    if not path.is_file():
        return None
    try:
        with path.open("rb") as f:
            head = f.read(4)
    except OSError:
        return None
    return next((kind for magic, kind in MAGIC.items() if head.startswith(magic)), None)


def scan_images(root: Path, need: int = 1, classes: int | None = None) -> ImageIndex:
    """Index the images under `root` (classes: its sub-folders, sorted); files whose first bytes
    are no JPEG, PNG or TIFF are skipped with one warning. A UserError when fewer than `need` (one
    batch) are readable, or there are more class folders than the model's `classes`, so
    nothing is built for a run that cannot start."""
    index = ImageIndex(root)
    found: list[tuple[str, Path]] = []
    for folder, dirs, names in os.walk(root):
        dirs.sort()
        label = os.path.relpath(folder, root).split(os.sep)[0]
        found += [
            ("" if label == "." else label, Path(folder) / n)
            for n in sorted(names)
            if Path(n).suffix.lower() in SUFFIXES
        ]
    if not found:
        raise UserError(f"--data: no JPEG, PNG or TIFF files under {root}")
    index.classes = sorted({label for label, _ in found})
    if classes is not None and len(index.classes) > classes:
        raise UserError(
            f"--data: {root} has {len(index.classes)} class folders; the model has {classes} "
            "classes"
        )
    number = {name: i for i, name in enumerate(index.classes)}
    for label, path in found:
        kind = _format(path)
        if kind is None:
            index.unreadable.append(path)
            continue
        index.files.append(path)
        index.labels.append(number[label])
        index.formats.add(kind)
        index.total_bytes += path.stat().st_size
    if index.unreadable:
        stderr.print(
            f"[yellow]warning:[/yellow] skipped {len(index.unreadable)} unreadable or "
            f"non-image file(s) under {root}, e.g. {index.unreadable[0].name}"
        )
    if not index.files:
        raise UserError(f"--data: none of the {len(found)} image files under {root} is readable")
    if len(index.files) < need:
        raise UserError(
            f"--data: {root} holds {len(index.files)} readable images, fewer than one batch "
            f"({need}); give a smaller --batch-size or more images"
        )
    return index


def augmentation(size: tuple[int, int]):
    """The training augmentation, the same on the CPU (workers) and on the GPU (after nvJPEG):
    a random resized crop to the model's (height, width) and a horizontal flip."""
    from torchvision.transforms import v2

    return v2.Compose([v2.RandomResizedCrop(size, antialias=True), v2.RandomHorizontalFlip()])


class ImageFolderSet(Dataset):
    """One sample: (uint8 CHW image at the crop size, or the file's encoded bytes for GPU
    decode; label; bytes read; indices of the files that failed to read or decode on the way,
    so that the feed counts each bad file once however often it is tried)."""

    def __init__(self, index: ImageIndex, size: tuple[int, int], decode_on_gpu: bool) -> None:
        self.index = index
        self.decode_on_gpu = decode_on_gpu
        self.augment = augmentation(size)

    def __len__(self) -> int:
        return len(self.index.files)

    def __getitem__(self, i: int):
        from PIL import Image

        failed: list[int] = []
        for k in range(RETRIES):
            at = (i + k) % len(self)
            path = self.index.files[at]
            try:
                data = path.read_bytes()
                size = header_size(data)  # before any decode allocates what it claims
                if self.decode_on_gpu:  # the file's index travels along: its decode may fail
                    encoded = _encoded(data, at, size)
                    return encoded, self.index.labels[at], len(data), failed
                image = decode_rgb(data)
            except (RuntimeError, ValueError, OSError, Image.DecompressionBombError):
                failed.append(at)  # gone, unreadable or not decodable
                continue
            return self.augment(image), self.index.labels[at], len(data), failed
        raise UserError(f"--data: {RETRIES} files in a row failed to read or decode near {path}")


def _encoded(data: bytes, at: int, size: tuple[int, int]) -> tuple:
    """GPU decode: what one file sends to the device. A JPEG of one or three components goes
    as its bytes; anything nvJPEG cannot take (PNG, TIFF, CMYK) is decoded here and goes as
    its pixels (uint8 CHW), cropped on the device with the same kind of box."""
    box, flip = draw_crop(*size)
    frame = jpeg_frame(data) if data[:3] == b"\xff\xd8\xff" else None
    if frame is not None and frame.components in (1, 3):
        raw = torch.frombuffer(bytearray(data), dtype=torch.uint8)
        return raw, at, box, flip, size, frame.engine_ready, False
    pixels = decode_rgb(data)
    return pixels.flatten(), at, box, flip, tuple(pixels.shape[1:]), False, True


def decode_rgb(data: bytes) -> torch.Tensor:
    """Any image file a folder may hold as uint8 CHW with 3 channels, as torchvision's recipe
    reads it (grey and palette expanded, alpha dropped, CMYK converted): torchvision's decoder
    for JPEG and PNG, 16-bit PNGs scaled to 8 bits; PIL for TIFF, whose wide grey modes
    (WIDE_GREY) are scaled, never clipped."""
    from torchvision.io import ImageReadMode, decode_image

    if data[:4] not in TIFF_MAGIC:
        image = decode_image(
            torch.frombuffer(bytearray(data), dtype=torch.uint8), ImageReadMode.RGB
        )
        if image.dtype == torch.uint8:
            return image
        return ((image.to(torch.int32) * 255 + 32767) // 65535).to(torch.uint8)  # 16-bit
    return _pil_rgb(data)


def _pil_rgb(data: bytes) -> torch.Tensor:
    import io

    import numpy as np
    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        if image.mode in WIDE_GREY:
            grey = np.asarray(image, dtype=np.float64) * (255.0 / WIDE_GREY[image.mode])
            grey = torch.from_numpy(np.clip(grey, 0, 255).round().astype(np.uint8))
            return grey.expand(3, *grey.shape).contiguous()
        rgb = np.asarray(image.convert("RGB"))
    return torch.from_numpy(rgb.copy()).permute(2, 0, 1).contiguous()


def collate_decoded(samples: list) -> tuple[torch.Tensor, ...]:
    """Samples of equal shape (cropped images, token windows) into one batch; the failed file
    indices of all samples into one flat tensor."""
    inputs, targets, sizes, failed = zip(*samples)
    targets = torch.stack(targets) if torch.is_tensor(targets[0]) else torch.tensor(targets)
    return torch.stack(inputs), targets, torch.tensor(sizes), _indices(failed)


def _indices(failed: tuple[list[int], ...]) -> torch.Tensor:
    return torch.tensor([i for each in failed for i in each], dtype=torch.long)


class EncodedBatch(NamedTuple):
    """GPU decode: a batch's encoded files end to end in one tensor (one shared buffer per
    batch; a tensor per file would cost a file descriptor each between processes), their
    lengths and indices, the crop box and flip each worker drew, each image's (height, width),
    whether the GPU's JPEG engines take it (baseline colour) and whether a worker decoded it
    (a file nvJPEG cannot take: its pixels, uint8 CHW, instead of its bytes)."""

    flat: torch.Tensor
    lengths: torch.Tensor
    files: torch.Tensor
    boxes: torch.Tensor
    flips: torch.Tensor
    sizes: torch.Tensor
    engine_ready: torch.Tensor
    decoded: torch.Tensor


def collate_encoded(samples: list) -> tuple:
    """GPU decode: the samples' files and crops into one EncodedBatch."""
    encoded, labels, sizes, failed = zip(*samples)
    raws, files, boxes, flips, shapes, ready, decoded = zip(*encoded)
    lengths = torch.tensor([raw.numel() for raw in raws])
    packed = EncodedBatch(
        torch.cat(raws),
        lengths,
        torch.tensor(files),
        torch.tensor(boxes),
        torch.tensor(flips),
        torch.tensor(shapes),
        torch.tensor(ready),
        torch.tensor(decoded),
    )
    return packed, torch.tensor(labels), torch.tensor(sizes), _indices(failed)
