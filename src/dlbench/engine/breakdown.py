"""`--breakdown`: a diagnostic pass after the measured window that times each phase of a step.

Its numbers go to `breakdown_*` columns, never into the throughput: events between phases and the
profiler used for the GPU's idle share both cost a little themselves."""

from __future__ import annotations

import statistics
import time

import torch

from dlbench.engine.profiled_pass import HOST_BOUND_BUSY_PCT
from dlbench.engine.session import Session
from dlbench.engine.timer import synchronize

PHASES = ("h2d", "forward", "backward", "optimizer")
INPUT_BOUND_SHARE = 0.3


def _phase_times_ms(session: Session, steps: int) -> tuple[dict[str, float], float]:
    """Mean device time per phase (events on CUDA, host clock on CPU) and host time per step."""
    p, cuda = session.phases, session.device.type == "cuda"
    marks: list[list] = []
    host: list[float] = []

    def mark() -> object:
        if cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

    synchronize(session.device)
    for i in range(steps):
        began = time.perf_counter()
        m = [mark()]
        inputs, targets = p.fetch(i)
        m.append(mark())
        loss = p.forward(inputs, targets)
        m.append(mark())
        if p.backward is not None:
            p.backward(loss)
            m.append(mark())
            p.update()
            m.append(mark())
        host.append(time.perf_counter() - began)
        marks.append(m)
    synchronize(session.device)

    def gap(a, b) -> float:
        return a.elapsed_time(b) if cuda else (b - a) * 1e3

    means = {
        name: statistics.fmean(gap(m[k], m[k + 1]) for m in marks)
        for k, name in enumerate(PHASES[: len(marks[0]) - 1])
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
