"""`dlbench make-data`: a small data set for tests and demos, made here (nothing downloaded):
JPEG (or PNG) images in class folders, smooth random colour fields with some grain so that they
compress like photos rather than like noise; and a JSONL corpus of random-word lines."""

from __future__ import annotations

import json
import random
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dlbench.errors import invalid
from dlbench.host import available_cpus

WORDS = [
    "the",
    "a",
    "of",
    "to",
    "and",
    "in",
    "is",
    "it",
    "that",
    "for",
    "on",
    "with",
    "as",
    "was",
    "at",
    "by",
    "an",
    "be",
    "this",
    "from",
    "or",
    "which",
    "one",
    "had",
    "not",
    "but",
    "what",
    "all",
    "were",
    "when",
    "we",
    "there",
    "can",
    "more",
    "if",
    "out",
    "so",
    "up",
    "said",
    "about",
    "than",
    "them",
    "into",
    "some",
    "time",
    "could",
    "no",
    "other",
    "only",
    "new",
    "very",
    "after",
    "most",
    "also",
    "made",
    "through",
    "back",
    "much",
    "before",
    "where",
]


@dataclass(frozen=True)
class ImageSpec:
    """What to make: count, size in pixels, classes, format and JPEG quality."""

    count: int
    width: int
    height: int
    classes: int = 10
    quality: int = 90
    fmt: str = "jpeg"


# Pixels a side: larger images are no benchmark input (docs/decisions.md#input-limits).
MAX_SIDE = 8192


def parse_size(text: str) -> tuple[int, int]:
    """'WxH' to (width, height); a UserError naming --size otherwise."""
    width, sep, height = text.lower().partition("x")
    if not (sep and width.isdigit() and height.isdigit() and int(width) > 0 and int(height) > 0):
        raise invalid("--size", text, "WIDTHxHEIGHT in pixels, e.g. 224x224")
    if max(int(width), int(height)) > MAX_SIDE:
        raise invalid("--size", text, f"at most {MAX_SIDE} pixels a side")
    return int(width), int(height)


def _one_image(args: tuple[Path, ImageSpec, int]) -> int:
    """Write image number `k`; returns its size in bytes."""
    from PIL import Image

    path, spec, k = args
    rng = np.random.default_rng(k)
    coarse = rng.integers(0, 256, (4, 4, 3), dtype=np.uint8)
    field = Image.fromarray(coarse).resize((spec.width, spec.height), Image.BICUBIC)
    pixels = np.asarray(field, dtype=np.int16) + rng.integers(-12, 13, (spec.height, spec.width, 3))
    image = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))
    if spec.fmt == "png":
        image.save(path, format="PNG")
    else:
        image.save(path, format="JPEG", quality=spec.quality)
    return path.stat().st_size


def make_images(root: Path, spec: ImageSpec, workers: int | None = None) -> int:
    """Write spec.count images under root/class_XX/, spread over the classes; returns bytes."""
    suffix = ".png" if spec.fmt == "png" else ".jpg"
    jobs = []
    for k in range(spec.count):
        folder = root / f"class_{k % spec.classes:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        jobs.append((folder / f"{k:07d}{suffix}", spec, k))
    processes = min(workers or available_cpus(), max(1, spec.count // 64))
    if processes <= 1:
        return sum(map(_one_image, jobs))
    with ProcessPoolExecutor(processes) as pool:
        return sum(pool.map(_one_image, jobs, chunksize=64))


def make_text(path: Path, lines: int, words: int = 48, seed: int = 0) -> int:
    """A JSONL corpus: `lines` objects with a "text" of random words and a 0/1 "label"."""
    rng = random.Random(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for _ in range(lines):
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(words // 2, words)))
            f.write(json.dumps({"text": text, "label": rng.randint(0, 1)}) + "\n")
    return path.stat().st_size
