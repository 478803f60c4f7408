"""Random-resized-crop and flip for a whole batch on the device (the GPU decode path): the boxes
and flips torchvision's RandomResizedCrop and RandomHorizontalFlip draw (the same calls on the
same generator, image by image in the CPU path's order), then one `roi_align` over the batch
padded into one tensor. roi_align's adaptive sampling averages each output pixel's footprint,
as an antialiased resize does: within about one grey level of torchvision's resized crop."""

from __future__ import annotations

import torch

SCALE = (0.08, 1.0)  # RandomResizedCrop's defaults, as the CPU path uses them
RATIO = (3 / 4, 4 / 3)
FLIP_P = 0.5


def draw_crops(sizes: list[tuple[int, int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Per image (height, width): a box [x0, y0, x1, y1] and whether to flip, drawn as the
    CPU path's Compose draws them (crop parameters, then the flip, image after image)."""
    from torchvision.transforms import RandomResizedCrop

    boxes, flips = [], []
    for height, width in sizes:
        top, left, h, w = RandomResizedCrop.get_params(torch.empty(1, height, width), SCALE, RATIO)
        boxes.append((left, top, left + w, top + h))
        flips.append(bool(torch.rand(1) < FLIP_P))
    return torch.tensor(boxes, dtype=torch.float32), torch.tensor(flips)


def batched_crop(images: list[torch.Tensor], size: tuple[int, int]) -> torch.Tensor:
    """uint8 CHW images of any sizes (on one device) to a float batch of `size` (0-255),
    each randomly cropped, resized and flipped."""
    from torchvision.ops import roi_align

    device = images[0].device
    boxes, flips = draw_crops([(img.shape[1], img.shape[2]) for img in images])
    height = max(img.shape[1] for img in images)
    width = max(img.shape[2] for img in images)
    padded = torch.zeros(len(images), 3, height, width, device=device)
    for k, img in enumerate(images):
        padded[k, :, : img.shape[1], : img.shape[2]] = img
    index = torch.arange(len(images), dtype=torch.float32)[:, None]
    rois = torch.cat([index, boxes], dim=1).to(device)
    out = roi_align(padded, rois, output_size=size, spatial_scale=1.0, sampling_ratio=-1,
                    aligned=True)  # fmt: skip
    flip = flips.to(device)[:, None, None, None]
    return torch.where(flip, out.flip(-1), out)
