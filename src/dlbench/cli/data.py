"""`dlbench data` (the input pipeline alone, by worker count) and `dlbench make-data`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dlbench.cli.app import app
from dlbench.cli.options import Height, Model, Output, SeqLen, Width
from dlbench.config import check_count
from dlbench.errors import UserError, check_seconds

MAX_IMAGES = 10_000_000  # images or text lines one make-data call writes (a demo, not a set)


LOADER_OUTPUT = Path("results/loader.csv")  # loader rows apart from the benchmark rows


@app.command("data", help="Loader throughput alone (samples/s, MB/s) for 0, 1, 2, 4 ... workers.")
def data(
    path: Annotated[Path, typer.Argument(help="Image folder, or a .txt/.jsonl text file.")],
    model: Model = "resnet50",
    batch_size: Annotated[int, typer.Option(help="Samples per batch.")] = 64,
    workers: Annotated[
        str | None, typer.Option(help="Worker counts, e.g. 0,4,8 (default: 0, 1, 2, 4 ... CPUs).")
    ] = None,
    decode: Annotated[str, typer.Option(help="Images: cpu or gpu (nvJPEG, needs CUDA).")] = "cpu",
    width: Width = None,
    height: Height = None,
    seq_len: SeqLen = 128,
    min_time: Annotated[float, typer.Option(help="Seconds measured per worker count.")] = 3.0,
    output: Output = LOADER_OUTPUT,
    seed: Annotated[int, typer.Option(help="Shuffle and augmentation seed.")] = 0,
) -> None:
    from dlbench.data.loader_rows import run_loader_sweep

    check_count("--batch-size", batch_size)
    check_seconds("--min-time", min_time)
    kind = "folder" if path.is_dir() else "text"
    run_loader_sweep(
        f"{kind}:{path}",
        model,
        batch_size,
        workers,
        decode,
        (width, height, seq_len),
        min_time,
        output,
        seed,
    )


@app.command("make-data", help="Write a small image folder (and text corpus) for tests and demos.")
def make_data(
    folder: Annotated[Path, typer.Argument(help="Where to write (created).")],
    images: Annotated[int, typer.Option(help="Number of images.")] = 1000,
    size: Annotated[str, typer.Option(help="WIDTHxHEIGHT of each image.")] = "224x224",
    classes: Annotated[int, typer.Option(help="Class folders.")] = 10,
    quality: Annotated[int, typer.Option(help="JPEG quality, 1-100.")] = 90,
    image_format: Annotated[str, typer.Option("--format", help="jpeg or png.")] = "jpeg",
    text_lines: Annotated[
        int, typer.Option(help="Also write FOLDER/corpus.jsonl with this many lines.")
    ] = 0,
) -> None:
    import time

    from dlbench.data.make import ImageSpec, make_images, make_text, parse_size

    width, height = parse_size(size)
    checks = {
        "--images": 0 <= images <= MAX_IMAGES,
        "--classes": classes > 0,
        "--quality": 1 <= quality <= 100,
        "--format": image_format in ("jpeg", "png"),
        "--text-lines": 0 <= text_lines <= MAX_IMAGES,
    }
    for flag, ok in checks.items():
        if not ok:
            raise UserError(f"{flag}: invalid value; see dlbench make-data --help")
    if images == 0 and text_lines == 0:
        raise UserError("--images: 0 and no --text-lines: nothing to make")
    if folder.exists() and not folder.is_dir():
        raise UserError(f"{folder}: exists and is not a folder")
    began = time.perf_counter()
    spec = ImageSpec(images, width, height, classes, quality, image_format)
    made = []
    try:
        if images:
            written = make_images(folder / "images", spec)
            made.append(f"{images} images ({written / 1e6:.1f} MB) under {folder / 'images'}")
        if text_lines:
            text = make_text(folder / "corpus.jsonl", text_lines)
            made.append(f"{text_lines} lines ({text / 1e6:.1f} MB) to {folder / 'corpus.jsonl'}")
    except OSError as exc:
        where = exc.filename or folder
        raise UserError(f"FOLDER: cannot write {where}: {exc.strerror or exc}") from None
    print(f"wrote {' and '.join(made)} in {time.perf_counter() - began:.1f} s")
