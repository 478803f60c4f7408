"""A finished measurement as result rows: the main row and, under DDP, one per rank."""

from __future__ import annotations

from dlbench.engine.benchmark import Measurement
from dlbench.engine.distribution.ranks import RANK_TELEMETRY
from dlbench.engine.scenarios.kinds import scenario_for
from dlbench.results.published import published_columns
from dlbench.results.row import RowBuilder, config_columns, identity


def measurement_row(
    m: Measurement,
    env: dict[str, object],
    run_kind: str = "benchmark",
    side_file: str | None = None,
) -> dict[str, object]:
    """A row for a finished run: throughput over the slowest rank's window, stats, memory; each
    column from one part (results.row.RowBuilder); `side_file` names each rank's rows."""
    plan = m.plan
    global_rate = m.samples / m.slowest_window_s
    measured = _measured_columns(m, global_rate)
    gpus = dict(m.gpus)  # several ranks: every rank's GPU, not rank 0's
    mixed = {"gpu_mixed": gpus.pop("gpu_mixed")} if "gpu_mixed" in gpus else {}
    row = (
        RowBuilder()
        .add("identity", {**identity(plan.config.output.run_id, "ok"), "run_kind": run_kind})
        .add("settings", config_columns(plan.config))
        .amend("the workload's shape", plan.workload.shape_columns(plan.shape))
        .amend("the loop", {"warmup_steps": m.loop.warmup_steps})  # as settled, not as asked
        .amend("what ran", m.as_run)
        .add("the measurement", measured)
        .include(m.parts)
        .add("environment", env)
        .amend("the job's GPUs", gpus)
        .add("the job's GPUs", mixed)
        .add("the side file", {"per_rank_file": side_file} if side_file else {})
    )
    price = plan.config.cost.usd_per_hour
    if price:
        per_s = row.get("tokens_per_s") if plan.workload.family == "llm" else global_rate
        per_million = price / 3600 / float(per_s) * 1e6  # type: ignore[arg-type]
        row.add("cost", {"usd_per_hour": price, "usd_per_million_samples": per_million})
    row.add("the published rows", published_columns(row.columns()))
    return row.row()


def _measured_columns(m: Measurement, global_rate: float) -> dict[str, object]:
    """The window's columns: throughput over the slowest rank's window, per device and in the
    workload's own units (images, megapixels, tokens), steps, spread, warm-up and memory."""
    plan, loop = m.plan, m.loop
    shape = plan.shape
    measured: dict[str, object] = {
        "family": plan.workload.family,
        "sample_unit": plan.workload.sample_unit,
        "accelerator": plan.devices.accelerator,
        "world_size": m.world_size,
        "launcher": m.launcher,
        "steps": loop.steps,
        "min_time_s": plan.config.min_time_s(plan.devices.device_type),
        "noise_met": loop.noise_met,
        "window_s": m.slowest_window_s,
        "wall_window_s": loop.wall_window_s,
        "samples_per_s": global_rate,
        "samples_per_s_per_device": global_rate / m.world_size,
        "batches_per_s": loop.steps / m.slowest_window_s,
        **loop.stats.as_row(),
        **loop.noise.columns(),
        "slowest_rank_median_step_ms": m.slowest_median_step_s * 1e3,
        "slowest_rank": m.slowest_rank,
        "warmup_s": loop.warmup_s,
        "first_step_s": loop.first_step_s,
        "warmup_steady": loop.warmup_steady,
        "param_count": m.param_count,
        "peak_memory_allocated_mb": m.peak_allocated_mb,
        "peak_memory_reserved_mb": m.peak_reserved_mb,
    }
    pixels = plan.workload.pixels_per_sample(shape)
    tokens = plan.workload.tokens_per_sample(shape)
    if pixels:
        measured["images_per_s"] = global_rate
        measured["megapixels_per_s"] = global_rate * pixels / 1e6
    if tokens and scenario_for(plan.scenario).samples_are_inputs:  # else: those generated
        measured["tokens_per_s"] = global_rate * tokens
    return measured


def per_rank_rows(m: Measurement, run_id: str) -> list[dict[str, object]]:
    """One row per rank for the side file: its own window, throughput, power and GPU, so that a
    straggler, a hot GPU or a GPU of another model shows up by name (the main row carries the
    job's sums and the slowest)."""
    per_device = m.plan.devices.count
    rows = []
    for rank, r in enumerate(m.per_rank):
        window = {
            "rank": rank,
            "node_rank": rank // per_device,
            "device_index": int(r["device_index"]),
            "window_s": r["window_s"],
            "median_step_ms": r["median_step_s"] * 1e3,
            "steps": int(r["steps"]),
            "samples_per_s": m.plan.config.workload.batch_size * r["steps"] / r["window_s"],
        }
        workload = {"model": m.plan.config.workload.model, "mode": m.plan.config.workload.mode}
        row = (
            RowBuilder()
            .add("identity", {**identity(run_id, "ok"), "run_kind": "per_rank"})
            .add("the workload", workload)
            .add("the rank's window", window)
            .add("the rank's GPU", {k: r.get(k) for k in SIDE_FACTS})
        )
        rows.append(row.columns())
    return rows


# What the side file shows of each rank beyond its window: its GPU and its telemetry.
SIDE_FACTS = (
    "hostname",
    "gpu_uuid",
    "gpu_name",
    "gpu_memory_mb",
    "gpu_capability",
    "peak_memory_allocated_mb",
    "peak_memory_reserved_mb",
    *RANK_TELEMETRY,
)
