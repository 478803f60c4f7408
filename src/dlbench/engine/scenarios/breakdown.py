"""`--breakdown`: a diagnostic pass after the measured window that times each phase of a step.

Its numbers go to `breakdown_*` columns, never into the throughput: events between phases and the
profiler used for the GPU's idle share both cost a little themselves."""

from __future__ import annotations

import statistics
import time

from dlbench.engine.scenarios.session import Session
from dlbench.engine.timing.profiled_pass import HOST_BOUND_BUSY_PCT
from dlbench.engine.timing.timer import DeviceTimer, synchronize

PHASES = ("h2d", "forward", "backward", "optimizer")
INPUT_BOUND_SHARE = 0.3


def _phase_times_ms(session: Session, steps: int) -> tuple[dict[str, float], float]:
    """Mean device time per phase (on the step's device clock) and host time per step."""
    p = session.phases
    per_step = 5 if p.backward is not None else 3  # edges: before, after each phase
    timer = DeviceTimer(session.device, steps * per_step)
    host: list[float] = []
    synchronize(session.device)
    for i in range(steps):
        began = time.perf_counter()
        timer.mark()
        inputs, targets = p.fetch(i)
        timer.mark()
        loss = p.forward(inputs, targets)
        timer.mark()
        if p.backward is not None:
            p.backward(loss)
            timer.mark()
            p.update()
            timer.mark()
        host.append(time.perf_counter() - began)
    synchronize(session.device)
    means = {
        name: statistics.fmean(
            timer.between_s(i * per_step + k, i * per_step + k + 1) * 1e3 for i in range(steps)
        )
        for k, name in enumerate(PHASES[: per_step - 1])
    }
    return means, statistics.fmean(host) * 1e3


def hint(phases: dict[str, float], idle: float | None) -> str:
    """One line on what limits the step."""
    total = sum(phases.values()) or 1.0
    if phases.get("h2d", 0.0) / total > INPUT_BOUND_SHARE:
        share = phases["h2d"] / total
        return f"input-bound: host-to-device copies take {share:.0%} of the step"
    if idle is not None and idle > 1 - HOST_BOUND_BUSY_PCT / 100:
        return (
            f"host-bound: the GPU idles {idle:.0%} of the time between kernels "
            "(try a larger batch, --compile or CUDA graphs)"
        )
    busy = "" if idle is None else f" (GPU busy {1 - idle:.0%})"
    return f"compute-bound{busy}: the step is kernels, not host work"


def run_breakdown(
    session: Session, gpu_busy_pct: float | None, steps: int = 20
) -> dict[str, object]:
    """Columns `breakdown_*` from the diagnostic pass, plus its hint; the GPU's idle share comes
    from the profiled pass (`gpu_busy_pct`, None off CUDA)."""
    with session.context():
        phases, host_ms = _phase_times_ms(session, steps)
    idle = None if gpu_busy_pct is None else 1.0 - gpu_busy_pct / 100.0
    row: dict[str, object] = {f"breakdown_{k}_ms": v for k, v in phases.items()}
    row["breakdown_host_ms"] = host_ms
    row["breakdown_gpu_idle_pct"] = None if idle is None else 100.0 * idle
    row["breakdown_hint"] = hint(phases, idle)
    return row
