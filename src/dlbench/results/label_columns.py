"""The labels a row is given by what ran it (a sweep, a gate, a power sweep, the batch-size
search) rather than measured: columns of their own, which `--tag` may also set."""

from __future__ import annotations

LABEL_COLUMNS: dict[str, str] = {
    "isolation": "sweeps: worker (points back to back in one process) or process (one each)",
    "sweep": "sweeps: the plan's name",
    "purpose": "sweeps: the plan block's label (throughput or latency in the default plan)",
    "repeat": "sweeps with repeats: which repeat of the point (0, 1, ...)",
    "shard": "sweep --shard K/N: the shard that measured the row (other shards shared the host)",
    "power_limit_request_w": "power sweeps: the limit the plan asked for",
    "batch_size_mode": "auto when --batch-size auto chose the batch size",
    "side": "dlbench gate: the side that measured the row, base or head",
    "round": "dlbench gate: the round (0, 1, ...); in each, every point ran on both sides",
    "gate_order": "dlbench gate: the row's place in the order the gate's runs went (1, 2, ...)",
    "gate_point": "dlbench gate: the plan's point the row measured (p0, p1 ...: its place in the "
    "plan), which the gate's verdict groups by",
}
GATE_POINT = "gate_point"


def gate_point(index: int) -> str:
    """The `gate_point` label of the plan's point `index` (text no CSV reader takes for a
    number)."""
    return f"p{index}"
