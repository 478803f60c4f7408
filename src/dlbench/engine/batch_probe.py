"""Probes for `--batch-size auto` inside the benchmark's process: build, two steps, peak memory.

An out-of-memory error is caught and everything the probe held is freed before the next one;
the measured run afterwards uses the same process and Fabric."""

from __future__ import annotations

import gc
from collections.abc import Callable

import torch

from dlbench.console import stderr
from dlbench.engine.session import open_session
from dlbench.engine.timer import synchronize
from dlbench.sweep.autobatch import MEMORY_FRACTION, Probe


def memory_budget(device: torch.device) -> float | None:
    """Bytes a batch may take at peak: a fraction of the GPU's memory; None on the CPU."""
    if device.type != "cuda":
        return None
    return MEMORY_FRACTION * torch.cuda.get_device_properties(device).total_memory


def in_process_probe(plan, fabric, autotune: bool = False) -> Callable[[int], Probe]:
    """probe(n): the plan's workload at batch n for two steps; fits, and its peak memory.
    Search probes skip cuDNN autotuning (seconds per new shape); the chosen size is confirmed
    by an autotuned probe, whose algorithms and workspaces the measured run will use."""
    device = fabric.device

    def probe(n: int) -> Probe:
        config = plan.config.replace(batch_size=n)
        session = None
        try:
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(device)
            session = open_session(
                config, plan.workload, plan.shape, plan.precision, fabric, autotune
            )
            with session.context():
                for i in range(2):
                    session.step(i)
            synchronize(device)
            peak = torch.cuda.max_memory_reserved(device) if device.type == "cuda" else None
            result = Probe(n, True, peak)
        except torch.OutOfMemoryError:
            result = Probe(n, False)
        finally:
            del session
            gc.collect()
            if device.type == "cuda":
                torch.cuda.empty_cache()
        shown = "" if result.peak_bytes is None else f", peak {result.peak_bytes / 2**30:.1f} GiB"
        stderr.print(
            f"--batch-size auto: probe {n}{' (autotuned)' if autotune else ''}: "
            f"{'fits' if result.fits else 'out of memory'}{shown}"
        )
        return result

    return probe
