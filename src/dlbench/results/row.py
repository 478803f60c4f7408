"""Turn a measurement (or a failure) into one result row."""

from __future__ import annotations

import math
import uuid
from datetime import datetime, timezone

from dlbench.config import RunConfig
from dlbench.engine.benchmark import Measurement
from dlbench.results.schema import SCHEMA_VERSION


def new_run_id() -> str:
    """A short unique id for a run."""
    return uuid.uuid4().hex[:12]


def config_columns(config: RunConfig) -> dict[str, object]:
    """The settings that move the number, as given."""
    return {
        "model": config.model,
        "mode": config.mode,
        "precision": config.precision,
        "batch_size": config.batch_size,
        "width": config.width,
        "height": config.height,
        "seq_len": config.seq_len,
        "devices": config.devices,
        "num_nodes": config.num_nodes,
        "strategy": config.strategy,
        "channels_last": config.channels_last,
        "compile": config.compile,
        "cuda_graphs": config.cuda_graphs,
        "llm_impl": config.llm_impl,
        "optimizer": config.optimizer,
        "data_on": config.data_on,
        "data": config.data,
        "data_workers": None if config.data == "synthetic" else config.data_workers,
        "data_decode": None if config.data == "synthetic" else config.data_decode,
        "seed": config.seed,
        "warmup_steps": config.warmup_steps,
        "max_noise_pct": config.max_noise,
        **config.extra,
    }


def identity(run_id: str | None, status: str) -> dict[str, object]:
    """The columns every row starts with (a new run id when none is given)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id or new_run_id(),
        "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "status": status,
    }


def failure_row(
    columns: dict[str, object], status: str, error: str, env: dict[str, object]
) -> dict[str, object]:
    """A row for a run that did not finish (oom, error, timeout, interrupted): its settings
    (`config_columns`, or a sweep point's flags, with `run_id`) and the last error line."""
    settings = {k: v for k, v in columns.items() if k != "run_id"}
    first = identity(columns.get("run_id"), status)  # type: ignore[arg-type]
    return {**first, "error": error, "run_kind": "benchmark", **settings, **env}


def measurement_row(
    m: Measurement, env: dict[str, object], extra: dict[str, object] | None = None
) -> dict[str, object]:
    """A row for a finished run: throughput over the slowest rank's window, stats, memory."""
    plan, loop = m.plan, m.loop
    shape = plan.shape
    global_rate = m.samples / m.slowest_window_s
    row: dict[str, object] = {
        **identity(plan.config.run_id, "ok"),
        "run_kind": "benchmark",
        **config_columns(plan.config),
        "width": shape.width if plan.workload.is_image else None,
        "height": shape.height if plan.workload.is_image else None,
        "seq_len": None if plan.workload.is_image else shape.seq_len,
        "family": plan.workload.family,
        "sample_unit": plan.workload.sample_unit,
        "accelerator": plan.devices.accelerator,
        "world_size": m.world_size,
        "launcher": m.launcher,
        "warmup_steps": loop.warmup_steps,
        "steps": loop.steps,
        "min_time_s": plan.config.min_time_s(plan.devices.device_type),
        "noise_met": loop.noise_met,
        "window_s": m.slowest_window_s,
        "wall_window_s": loop.wall_window_s,
        "samples_per_s": global_rate,
        "samples_per_s_per_device": global_rate / m.world_size,
        "batches_per_s": loop.steps / m.slowest_window_s,
        **loop.stats.as_row(),
        "slowest_rank_median_step_ms": m.slowest_median_step_s * 1e3,
        "slowest_rank": m.slowest_rank,
        "warmup_s": loop.warmup_s,
        "first_step_s": loop.first_step_s,
        "param_count": m.param_count,
        "peak_memory_allocated_mb": m.peak_allocated_mb,
        "peak_memory_reserved_mb": m.peak_reserved_mb,
    }
    pixels = plan.workload.pixels_per_sample(shape)
    tokens = plan.workload.tokens_per_sample(shape)
    if pixels:
        row["images_per_s"] = global_rate
        row["megapixels_per_s"] = global_rate * pixels / 1e6
    if tokens:
        row["tokens_per_s"] = global_rate * tokens
    return {**row, **m.extra, **(extra or {}), **env}


def per_rank_rows(m: Measurement, run_id: str) -> list[dict[str, object]]:
    """One row per rank for the side file: its own window, throughput and power, so that a
    straggler or a hot GPU shows up by name (the main row carries the sums and the slowest)."""
    per_device = m.plan.devices.count
    rows = []
    for rank, r in enumerate(m.per_rank):
        values = {k: (None if math.isnan(v) else v) for k, v in r.items()}
        rows.append(
            {
                **identity(run_id, "ok"),
                "run_kind": "per_rank",
                "model": m.plan.config.model,
                "mode": m.plan.config.mode,
                "rank": rank,
                "node_rank": rank // per_device,
                "device_index": int(r["device_index"]),
                "window_s": r["window_s"],
                "median_step_ms": r["median_step_s"] * 1e3,
                "steps": int(r["steps"]),
                "samples_per_s": m.plan.config.batch_size * r["steps"] / r["window_s"],
                **{k: values[k] for k in ("energy_j", "avg_power_w", "peak_power_w")},
                **{k: values[k] for k in ("temp_max_c", "throttle_pct")},
            }
        )
    return rows
