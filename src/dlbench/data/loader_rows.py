"""`dlbench data`: the loader measured at each worker count, a row per count in the CSV."""

from __future__ import annotations

from pathlib import Path

import torch

from dlbench.config import DataSource
from dlbench.console import show_frame
from dlbench.data.on_device import OnDevice
from dlbench.data.pipeline import check_data, open_pipeline
from dlbench.data.throughput import LoaderResult, measure_loader, parse_worker_counts
from dlbench.errors import invalid
from dlbench.host import available_cpus
from dlbench.results.advice import verdict_label
from dlbench.results.environment import collect_environment
from dlbench.results.row import RowBuilder, identity
from dlbench.results.store import CsvStore
from dlbench.workloads import get_workload


def loader_row(
    spec: str, model: str, batch_size: int, shape, decode: str, r: LoaderResult, min_time_s: float
) -> RowBuilder:
    """One worker count as a row's parts; throughput columns mean what they mean for a model
    row, and the window is judged as a model row's is (results.verdict)."""
    workload = get_workload(model)
    image = workload.is_image
    settings = {
        "model": model,
        "batch_size": batch_size,
        **workload.shape_columns(shape),
        "data": spec,
        "data_workers": r.workers,
        "data_decode": decode,
    }
    window = {
        "steps": r.batches,
        "min_time_s": min_time_s,
        "window_s": r.seconds,
        "warmup_s": r.warmup_s,
        "samples_per_s": r.samples_per_s,
        "data_mb_per_s": r.mb_per_s,
        "data_bytes_read": r.bytes_read,
        **({"images_per_s": r.samples_per_s} if image else {}),
    }
    return (
        RowBuilder()
        .add("identity", {**identity(None, "ok"), "run_kind": "loader"})
        .add("the loader's settings", settings)
        .add("the loader's window", window)
    )


def run_loader_sweep(
    spec: str,
    model: str,
    batch_size: int,
    workers: str | None,
    decode: str,
    size: tuple[int | None, int | None, int],
    min_time_s: float,
    output: Path,
    seed: int,
) -> list[dict]:
    """Measure the loader at every worker count; rows appended as each one finishes."""
    store = CsvStore(output)
    store.check_writable()
    source = DataSource.parse(spec)
    workload = get_workload(model)
    shape = workload.shape(*size)
    check_data(source, workload, decode)
    counts = parse_worker_counts(workers, available_cpus())
    cuda = torch.cuda.is_available()
    if decode == "gpu" and not cuda:
        raise invalid("--decode", decode, "GPU decode needs a CUDA GPU")
    device = torch.device("cuda" if cuda and decode == "gpu" else "cpu")
    env = collect_environment(device.type)
    rows = []
    for count in counts:
        pipeline = open_pipeline(source, workload, shape, batch_size, count, decode, seed, cuda)
        prepare = None
        if decode == "gpu":
            prepare = OnDevice(pipeline, shape, device, torch.float32, torch.contiguous_format)
        result = measure_loader(pipeline, min_time_s, device, prepare)
        files = {"data_files": pipeline.files, "data_skipped": pipeline.skipped}
        built = loader_row(spec, model, batch_size, shape, decode, result, min_time_s)
        row = built.add("the data set", files).add("environment", env).row()
        store.append(row)
        rows.append(row)
        print(
            f"workers {count:3d}: {result.samples_per_s:10,.0f} {workload.sample_unit}s/s "
            f"{result.mb_per_s:8,.1f} MB/s ({result.batches} batches, {result.seconds:.1f} s), "
            f"{verdict_label(row)}",
            flush=True,
        )
    import pandas as pd

    table = pd.DataFrame(rows)[["data_workers", "samples_per_s", "data_mb_per_s", "steps"]]
    table["verdict"] = [verdict_label(row) for row in rows]  # whether to trust each figure
    show_frame(table, f"loader alone: {spec}, batch {batch_size}, {decode} decode -> {output}")
    return rows
