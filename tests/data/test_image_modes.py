"""Every PIL mode an image folder may hold (issue 45): decoded to the model's three 8-bit
channels as torchvision's recipe reads it, wide grey scaled rather than clipped; a run fed by
such a folder trains through the CPU path and the GPU path's workers alike, skipping nothing."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from dlbench.data.images import decode_rgb, scan_images
from tests.conftest import read_rows, run_cli

# mode: the format that holds it (PNG where it can, else JPEG, else TIFF)
MODES = {
    "1": "PNG", "L": "PNG", "LA": "PNG", "P": "PNG", "PA": "TIFF", "RGB": "PNG",
    "RGBA": "PNG", "CMYK": "JPEG", "I;16": "PNG", "I;16B": "PNG", "I": "TIFF", "F": "TIFF",
    "YCbCr": "JPEG",
}  # fmt: skip
SIZE = (30, 40)  # (height, width)


def _image(mode: str) -> Image.Image:
    """A gradient in `mode`: wide modes span their range, so scaling (not clipping) shows."""
    ramp = np.linspace(0, 1, SIZE[0] * SIZE[1]).reshape(SIZE)
    wide = (ramp * 65535).astype(np.uint16)
    if mode == "I;16B":  # Pillow's convert to I;16B clips at 255: build it from its bytes
        return Image.frombytes(mode, SIZE[::-1], wide.astype(">u2").tobytes())
    if mode in ("I;16", "I"):
        return Image.fromarray(wide).convert(mode)
    if mode == "F":
        return Image.fromarray(ramp.astype(np.float32))
    rgb = (np.stack([ramp, ramp[::-1], ramp.T.reshape(SIZE)], -1) * 255).astype(np.uint8)
    return Image.fromarray(rgb).convert(mode)


def _encoded(mode: str) -> bytes:
    out = io.BytesIO()
    _image(mode).save(out, MODES[mode])
    return out.getvalue()


@pytest.fixture(scope="module")
def every_mode(tmp_path_factory) -> Path:
    """A class folder with one file per mode, twice over (26 files)."""
    root = tmp_path_factory.mktemp("modes") / "images"
    for label in ("a", "b"):
        (root / label).mkdir(parents=True)
        for mode, kind in MODES.items():
            suffix = {"PNG": ".png", "JPEG": ".jpg", "TIFF": ".tif"}[kind]
            name = mode.replace(";", "_") + suffix
            (root / label / name).write_bytes(_encoded(mode))
    return root


@pytest.mark.parametrize("mode", MODES)
def test_each_mode_decodes_to_three_8_bit_channels(mode):
    image = decode_rgb(_encoded(mode))
    assert image.dtype == torch.uint8 and image.shape == (3, *SIZE)
    if mode in ("I;16", "I;16B", "I", "F"):  # scaled over the whole range, not clipped at 255
        assert int(image.min()) == 0 and int(image.max()) == 255
        assert 100 < float(image.float().mean()) < 155


def test_a_16_bit_png_is_scaled_to_8_bits_by_its_range():
    pixels = np.array([[0, 257, 32896, 65535]], dtype=np.uint16)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, "PNG")
    assert decode_rgb(out.getvalue())[0].tolist() == [[0, 1, 128, 255]]


def test_a_folder_of_every_mode_is_indexed_whole(every_mode):
    index = scan_images(every_mode)
    assert len(index.files) == 2 * len(MODES) and not index.unreadable
    assert index.formats == {"png", "jpeg", "tiff"}


@pytest.mark.parametrize(
    "feed",
    [["--workers", "0"], ["--workers", "2"], ["--workers", "2", "--decode", "gpu"]],
    ids=["in-process", "workers", "gpu-path-workers"],
)
@pytest.mark.e2e
def test_a_folder_of_every_mode_trains_and_skips_nothing(every_mode, tmp_path, feed):
    csv = tmp_path / "modes.csv"
    out = run_cli(
        "train", "--accelerator", "cpu", "--model", "timm:test_resnet", "--width", "32",
        "--height", "32", "--batch-size", "13", "--n-iters", "4", "--warmup-steps", "1",
        "--data", f"folder:{every_mode}", *feed, "--output", csv,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    [row] = read_rows(csv)
    assert row["status"] == "ok" and row["data_skipped"] == "0"
    assert int(row["data_files_read"]) == 13 * int(row["steps"])


@pytest.mark.e2e
def test_the_loader_alone_reads_every_mode(every_mode, tmp_path):
    csv = tmp_path / "loader.csv"
    out = run_cli("data", every_mode, "--workers", "0,1", "--batch-size", "13", "--model",
                  "timm:test_resnet", "--width", "32", "--height", "32", "--min-time", "0.2",
                  "--output", csv)  # fmt: skip
    assert out.returncode == 0, out.stderr
    rows = read_rows(csv)
    assert rows and all(r["status"] == "ok" and r["data_skipped"] == "0" for r in rows)
