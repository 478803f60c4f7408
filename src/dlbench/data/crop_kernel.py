"""The GPU decode path's crop, flip and normalise as one Triton kernel: nvJPEG's decoded
images (separate uint8 tensors of any sizes) in, the model's input out (normalised, in its
dtype and memory format), in one pass over the pixels the crops read.

The CPU path's filter (antialiased bilinear, PIL's triangle as wide as the scale when
shrinking; data.crop) is evaluated per output pixel from its box: the weights of each
output pixel's taps are computed in the kernel, not stored, and the result is rounded to
whole grey levels as the CPU path's uint8 resize rounds it. Before, the same crop took a
padding kernel, two dense weight matrices, four batched matrix products and a normalising
kernel (docs/decisions.md#crop-kernel). Imported only
where Triton and a CUDA device are there."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

FIELDS = 11  # per image: pointer, height, width, 3 strides, box x0 y0 x1 y1, flip
# Output rows a program makes: neighbouring rows share most source rows, which are then resized
# across once for all of them (one row a program read each source pixel taps_y times).
ROWS = 8


@triton.jit
def _weight(pixel, center, inverse_support, start, end):
    """The triangle filter's weight of source pixel `pixel` for an output centred at
    `center`, zero outside the box [start, end)."""
    w = tl.maximum(1.0 - tl.abs((pixel + 0.5 - center) * inverse_support), 0.0)
    return tl.where((pixel >= start) & (pixel < end), w, 0.0)


@triton.jit
def _taps(center, support):
    """The first source pixel and the count of those the filter can weigh: the pixels strictly
    inside (center - support - 0.5, center + support - 0.5), at most ceil(2 * support), and
    one spare against rounding (torch's resize weights take two more, always zero)."""
    return tl.floor(center - support - 0.5) + 1, tl.ceil(2 * support).to(tl.int32) + 1


@triton.jit
def _crop_rows(
    meta,
    scale,
    shift,
    out,
    out_h,
    out_w,
    s_n,
    s_c,
    s_y,
    s_x,
    FIELDS: tl.constexpr,
    ROWS: tl.constexpr,
    BLOCK_X: tl.constexpr,
):
    """Program (image, tile of ROWS output rows): each source row the tile's filters reach is
    resized across once (the columns' taps), then weighed into every output row of the tile
    (the rows' taps; the triangle is zero for a row the source row is outside of)."""
    n = tl.program_id(0)
    row0 = tl.program_id(1) * ROWS
    base = meta + n * FIELDS
    source = tl.load(base).to(tl.pointer_type(tl.uint8))
    height, width = tl.load(base + 1), tl.load(base + 2)
    sc, sy, sx = tl.load(base + 3), tl.load(base + 4), tl.load(base + 5)
    x0, y0 = tl.load(base + 6).to(tl.float32), tl.load(base + 7).to(tl.float32)
    x1, y1 = tl.load(base + 8).to(tl.float32), tl.load(base + 9).to(tl.float32)
    flip = tl.load(base + 10)
    xs, columns, total_x = _columns(x0, x1, flip, out_w, BLOCK_X)
    valid = xs < out_w
    # rows: the tile's output rows, and the source rows their taps span
    ys = row0 + tl.arange(0, ROWS)
    rows_valid = ys < out_h
    step_y = (y1 - y0) / out_h
    support_y = tl.maximum(step_y, 1.0)
    inverse_y = 1.0 / support_y
    center_y = y0 + step_y * (ys.to(tl.float32) + 0.5)
    first_row, taps_y = _taps(y0 + step_y * (row0 + 0.5), support_y)
    last = tl.minimum(row0 + ROWS - 1, out_h - 1)
    last_row, _ = _taps(y0 + step_y * (last + 0.5), support_y)
    total_y = tl.zeros([ROWS], dtype=tl.float32)
    red = tl.zeros([ROWS, BLOCK_X], dtype=tl.float32)
    green = tl.zeros([ROWS, BLOCK_X], dtype=tl.float32)
    blue = tl.zeros([ROWS, BLOCK_X], dtype=tl.float32)
    for r in range(first_row.to(tl.int32), last_row.to(tl.int32) + taps_y):
        py = tl.cast(r, tl.float32)
        wy = _weight(py, center_y, inverse_y, y0, y1)
        total_y += wy
        at_row = source + tl.minimum(tl.maximum(py, 0.0), height - 1.0).to(tl.int64) * sy
        across_r, across_g, across_b = _across(at_row, sc, sx, width, columns, BLOCK_X)
        red += wy[:, None] * across_r[None, :]
        green += wy[:, None] * across_g[None, :]
        blue += wy[:, None] * across_b[None, :]
    # lanes past the row and rows past the image have no taps
    norm_x = 1.0 / tl.where(valid, total_x, 1.0)
    norm = norm_x[None, :] / tl.where(rows_valid, total_y, 1.0)[:, None]
    target = out + n.to(tl.int64) * s_n + ys[:, None] * s_y + xs[None, :] * s_x
    mask = rows_valid[:, None] & valid[None, :]
    _store(target, red * norm, 0, scale, shift, s_c, mask)
    _store(target, green * norm, 1, scale, shift, s_c, mask)
    _store(target, blue * norm, 2, scale, shift, s_c, mask)


@triton.jit
def _columns(x0, x1, flip, out_w, BLOCK_X: tl.constexpr):
    """The output's columns, a vector of pixels mirrored where the image is flipped: their
    lanes, what `_across` needs of their filters, and each pixel's sum of weights."""
    xs = tl.arange(0, BLOCK_X)
    valid = xs < out_w
    at = tl.where(flip != 0, out_w - 1 - xs, xs).to(tl.float32)
    step_x = (x1 - x0) / out_w
    support_x = tl.maximum(step_x, 1.0)
    inverse_x = 1.0 / support_x
    center_x = x0 + step_x * (at + 0.5)
    first_x, taps_x = _taps(center_x, support_x)
    total_x = tl.zeros([BLOCK_X], dtype=tl.float32)
    for tx in range(taps_x):
        total_x += _weight(first_x + tx, center_x, inverse_x, x0, x1)
    return xs, (first_x, taps_x, center_x, inverse_x, x0, x1, valid), total_x


@triton.jit
def _across(at_row, sc, sx, width, columns, BLOCK_X: tl.constexpr):
    """One source row resized across to the output's columns (`columns`: each output pixel's
    first tap, tap count, centre, inverse support, the box's x0 and x1, and which lanes are
    pixels), one sum a channel."""
    first_x, taps_x, center_x, inverse_x, x0, x1, valid = columns
    across_r = tl.zeros([BLOCK_X], dtype=tl.float32)
    across_g = tl.zeros([BLOCK_X], dtype=tl.float32)
    across_b = tl.zeros([BLOCK_X], dtype=tl.float32)
    for tx in range(taps_x):
        px = first_x + tx
        wx = _weight(px, center_x, inverse_x, x0, x1)
        pixel = at_row + tl.minimum(tl.maximum(px, 0.0), width - 1.0).to(tl.int64) * sx
        across_r += wx * tl.load(pixel, mask=valid, other=0).to(tl.float32)
        across_g += wx * tl.load(pixel + sc, mask=valid, other=0).to(tl.float32)
        across_b += wx * tl.load(pixel + 2 * sc, mask=valid, other=0).to(tl.float32)
    return across_r, across_g, across_b


@triton.jit
def _store(target, value, channel, scale, shift, s_c, valid):
    """Round to a grey level as a uint8 resize does, normalise, store in the output's dtype."""
    level = tl.floor(value + 0.5)
    normalised = level * tl.load(scale + channel) + tl.load(shift + channel)
    tl.store(target + channel * s_c, normalised.to(target.dtype.element_ty), mask=valid)


def image_table(images: list[torch.Tensor]) -> torch.Tensor:
    """(N, 6) int64 on the host: each uint8 CHW image's address, height, width and strides
    (channel, row, column), as `crop_normalise` reads them."""
    return torch.tensor(
        [[img.data_ptr(), *img.shape[1:], *img.stride()] for img in images], dtype=torch.int64
    )


def interleaved_table(
    buffer: torch.Tensor, starts: torch.Tensor, sizes: torch.Tensor
) -> torch.Tensor:
    """The same table for images stored (height, width, 3) end to end in one uint8 `buffer`
    (the JPEG engines' output, data.nvjpeg): image k at byte `starts[k]`, `sizes` (N, 2)
    their (height, width)."""
    heights, widths = sizes[:, 0].long(), sizes[:, 1].long()
    ones = torch.ones_like(heights)
    columns = (buffer.data_ptr() + starts, heights, widths, ones, widths * 3, ones * 3)
    return torch.stack(columns, 1)


def crop_normalise(
    table: torch.Tensor,
    boxes: torch.Tensor,
    flips: torch.Tensor,
    out: torch.Tensor,
    scale: torch.Tensor,
    shift: torch.Tensor,
) -> torch.Tensor:
    """Crop image k (uint8, described by row k of `image_table`'s table, on `out`'s device) to
    its box [x0, y0, x1, y1] (whole pixels), resize to `out`'s (H, W), flip where `flips`
    says, and write `value * scale[c] + shift[c]` into `out` (N, 3, H, W, any dtype and
    strides)."""
    count, _, out_h, out_w = out.shape
    meta = torch.cat([table, boxes.to(torch.int64), flips.to(torch.int64).view(-1, 1)], 1)
    if out.device.type == "cuda":  # pinned: the copy does not wait for the stream
        meta = meta.pin_memory().to(out.device, non_blocking=True)
    block = triton.next_power_of_2(out_w)
    grid = (count, triton.cdiv(out_h, ROWS))
    _crop_rows[grid](
        meta,
        scale,
        shift,
        out,
        out_h,
        out_w,
        *out.stride(),
        FIELDS=FIELDS,
        ROWS=ROWS,
        BLOCK_X=block,
    )
    return out
