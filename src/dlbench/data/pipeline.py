"""A DataLoader for a data source and a workload: the data checked against the workload,
indexed or tokenised, and loaded by worker processes (data.feed hands its batches to the step)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.utils.data import DataLoader, Dataset

from dlbench.config import DataSource
from dlbench.console import stderr
from dlbench.data.images import ImageFolderSet, collate_decoded, collate_encoded, scan_images
from dlbench.data.text import TokenSet, read_samples, train_tokenizer
from dlbench.errors import UserError, invalid
from dlbench.workloads import InputShape, Workload

PREFETCH_BATCHES = 4  # batches each worker prepares ahead


@dataclass
class Pipeline:
    """A loader over a data set, and what the row says about it."""

    loader: DataLoader
    source: DataSource
    workers: int
    decode: str
    files: int  # samples (files, lines or packed sequences) in the data set
    skipped: int  # files skipped when the folder was scanned
    data_bytes: int


def _image_set(
    source: DataSource, workload: Workload, shape: InputShape, batch_size: int, decode: str
):
    index = scan_images(source.path, need=batch_size, classes=workload.num_classes)
    if decode == "gpu" and index.formats != {"jpeg"}:
        others = ", ".join(sorted(index.formats - {"jpeg"})).upper()
        stderr.print(
            f"[yellow]warning:[/yellow] --decode gpu: {source.path} also holds {others}; nvJPEG "
            "decodes JPEG only, the workers decode the rest on the CPU"
        )
    dataset = ImageFolderSet(index, (shape.height, shape.width), decode == "gpu")
    return dataset, len(index.unreadable), index.total_bytes


def _text_set(source: DataSource, workload: Workload, shape: InputShape, batch_size: int):
    causal = workload.family == "llm"
    samples = read_samples(source.path, None if causal else workload.num_classes)
    tokenizer = train_tokenizer(samples, workload.vocab_size or 30000)
    dataset = TokenSet(samples, tokenizer, shape.seq_len, causal=causal)
    if len(dataset) < batch_size:
        raise UserError(
            f"--data: {source.path} makes {len(dataset)} samples of {shape.seq_len} tokens, "
            f"fewer than one batch ({batch_size})"
        )
    return dataset, 0, sum(samples.sizes)


def check_data(source: DataSource, workload: Workload, decode: str) -> None:
    """A UserError when the data cannot feed the workload (before anything is built)."""
    given = f"{source.kind}:{source.path}"
    if source.kind == "folder" and workload.family != "vision":
        raise invalid("--data", given, f"{workload.name} does not classify images")
    if source.kind == "text" and workload.is_image:
        raise invalid("--data", given, f"{workload.name} takes images")
    if decode == "gpu" and source.kind != "folder":
        raise invalid("--decode", decode, "GPU decode is for image folders")


def open_pipeline(
    source: DataSource,
    workload: Workload,
    shape: InputShape,
    batch_size: int,
    workers: int,
    decode: str,
    seed: int,
    pin_memory: bool,
) -> Pipeline:
    """Check the data against the workload, index or tokenise it, and build the loader."""
    check_data(source, workload, decode)
    dataset: Dataset
    if source.kind == "folder":
        dataset, skipped, size = _image_set(source, workload, shape, batch_size, decode)
    else:
        dataset, skipped, size = _text_set(source, workload, shape, batch_size)
    loader = DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=True,
        drop_last=True,
        num_workers=workers,
        pin_memory=pin_memory,
        prefetch_factor=PREFETCH_BATCHES if workers else None,
        persistent_workers=workers > 0,
        generator=torch.Generator().manual_seed(seed),
        collate_fn=collate_encoded if decode == "gpu" else collate_decoded,
    )
    return Pipeline(loader, source, workers, decode, len(dataset), skipped, size)


def worker_message(text: str) -> str:
    """A user error raised in a DataLoader worker, without the worker's traceback that the
    loader wraps it in (the last line: `dlbench.errors.UserError: MESSAGE`)."""
    lines = [line for line in text.splitlines() if line.strip()]
    marker = "UserError: "
    last = lines[-1] if lines else text
    return last.split(marker, 1)[1] if marker in last else last
