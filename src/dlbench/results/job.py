"""A multi-process run's row speaks for the job, not for rank 0: energy and power summed over its
GPUs, the worst GPU's heat, slowdowns and neighbours, and the GPUs it ran on (a host of mixed GPUs
says so). Each rank's own figures stay in the side file (engine.rows.per_rank_rows)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from dlbench.errors import number_or_none

# Sums over the job's GPUs: what the job drew (peak_power_w sums each GPU's highest sample, a
# bound on the job's highest draw).
SUMMED = (
    "energy_j",
    "energy_counter_j",
    "energy_integral_j",
    "avg_power_w",
    "peak_power_w",
    "idle_power_w",
)
HIGHEST = ("temp_max_c", "throttle_pct", "mem_used_max_mb", "other_gpu_processes")


def _sum(values: list[float | None]) -> float | None:
    """The sum where every rank has a figure; None where any lacks one (no partial sums)."""
    return None if any(v is None for v in values) else sum(values)  # type: ignore[arg-type]


def job_telemetry(per_rank: Sequence[dict]) -> dict[str, object]:
    """The job's telemetry columns from every rank's own
    (engine.distribution.ranks.RANK_TELEMETRY)."""
    out: dict[str, object] = {k: _sum([number_or_none(r.get(k)) for r in per_rank]) for k in SUMMED}
    for key in HIGHEST:
        values = [r[key] for r in per_rank if number_or_none(r.get(key)) is not None]
        out[key] = max(values) if values else None
    limits = {number_or_none(r.get("power_limit_w")) for r in per_rank}
    out["power_limit_w"] = limits.pop() if len(limits) == 1 else None
    out["gpu_processes_hidden"] = any(r.get("gpu_processes_hidden") is True for r in per_rank)
    out["other_gpu_process_list"] = "; ".join(
        f"GPU {r.get('device_index')}: {r['other_gpu_process_list']}"
        for r in per_rank
        if r.get("other_gpu_process_list")
    )
    first_of_host: dict[str, float | None] = {}  # RAPL reads the whole host, whichever rank
    for r in per_rank:
        first_of_host.setdefault(str(r.get("hostname")), number_or_none(r.get("cpu_energy_j")))
    out["cpu_energy_j"] = _sum(list(first_of_host.values()))
    return out


def job_gpus(per_rank: Sequence[dict]) -> dict[str, object]:
    """The GPUs the job ran on: the model, memory and capability they share, or on a host of
    mixed GPUs each model with its count, the smallest memory and every capability; the
    UUIDs in rank order."""
    names = Counter(str(r.get("gpu_name") or "") for r in per_rank)
    name = (
        next(iter(names)) if len(names) == 1 else " + ".join(f"{n} x{c}" for n, c in names.items())
    )
    memories = [m for r in per_rank if (m := number_or_none(r.get("gpu_memory_mb"))) is not None]
    capabilities = sorted({str(r.get("gpu_capability") or "") for r in per_rank})
    return {
        "gpu_name": name,
        "gpu_mixed": len(names) > 1,
        "gpu_memory_mb": min(memories) if memories else None,
        "gpu_capability": ",".join(capabilities),
        "gpu_uuid": " ".join(str(r.get("gpu_uuid") or "") for r in per_rank),
    }
