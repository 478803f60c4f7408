"""`dlbench scaling`: the same run at 1, 2, 4 ... devices (a sweep: one-device points in its
worker, multi-process ones in processes of their own), then efficiency."""

from __future__ import annotations

from dlbench.engine.distribution.devices import plan_devices
from dlbench.errors import UserError
from dlbench.sweep.plan import SweepPlan
from dlbench.workloads import get_workload


def device_counts(spec: str, accelerator: str) -> list[int]:
    """`1,2,4` as given (checked against what is visible), or `all`: 1, 2, 4 ... and the total."""
    if spec == "all":
        available = plan_devices(accelerator, "all").count
        counts = [1]
        while counts[-1] * 2 <= available:
            counts.append(counts[-1] * 2)
        return sorted({*counts, available})
    try:
        counts = sorted({int(part) for part in spec.split(",")})
    except ValueError:
        raise UserError(f"--devices: invalid value {spec!r}; e.g. 1,2,4 or all") from None
    if counts[0] < 1:
        raise UserError(f"--devices: invalid value {spec!r}; counts must be positive")
    plan_devices(accelerator, str(counts[-1]))  # a UserError when too many
    if counts[0] != 1:
        counts.insert(0, 1)  # efficiency needs the one-device run
    return counts


def scaling_plan(
    flags: dict[str, object], mode: str, counts: list[int], timeout_s: float
) -> SweepPlan:
    """A sweep over the device counts, plus one DDP-wrapped run on one device (the baseline
    that separates DDP's own cost from communication); `flags` are the other CLI flags. Under
    `--strategy fsdp` the one-device run is a plain one (nothing to shard over) and the
    others shard."""
    fixed = {k: v for k, v in flags.items() if k not in ("model", "batch_size", "precision")}
    block = {
        "models": [flags["model"]],
        "modes": [mode],
        "batch_sizes": [flags["batch_size"]],
        "precisions": [flags["precision"]],
        "devices": counts,
    }
    if flags.get("strategy") == "fsdp":
        plain = {"strategy": "auto", "activation_checkpointing": None}
        if get_workload(str(flags["model"])).is_image:  # like with like: FSDP runs images in
            plain["channels_last"] = False  # the contiguous layout (engine.plan)
        single = {**block, "devices": [1], "fixed": plain}
        sharded = {**block, "devices": [n for n in counts if n > 1]}
        return SweepPlan(name="scaling", runs=[single, sharded], fixed=fixed, timeout_s=timeout_s)
    wrapped = {**block, "devices": [1], "fixed": {"strategy": "ddp"}}
    return SweepPlan(name="scaling", runs=[block, wrapped], fixed=fixed, timeout_s=timeout_s)
