"""`--batch-size auto`: the largest batch that fits, found in seconds, in one place.

The search runs in the benchmark's own process: each probe builds the model, runs two steps at
a batch size and reports its peak memory, or an out-of-memory error that is caught and freed.
Two small probes give the fixed memory (weights, optimizer state) and the memory per sample;
the estimate they give is checked, then bisected to within 1/16. A size fits when it ran and
its peak stayed under MEMORY_FRACTION of the device, so that the measured run does not make the
allocator thrash. Generation and runs of several processes (DDP ranks would disagree on an
OOM) probe in subprocesses instead, each a `dlbench` command built from the run's config (the
slow, isolated way); a probe that fails there for any other reason stops the search."""

from __future__ import annotations

import gc
import math
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from dlbench.config import RunConfig
from dlbench.config.flags import config_args
from dlbench.console import stderr
from dlbench.engine.acceleration.attention import attention_kernel
from dlbench.engine.distribution.fabric import fabric_for
from dlbench.engine.plan import Plan, make_plan
from dlbench.engine.scenarios.session import open_session
from dlbench.engine.timing.timer import synchronize
from dlbench.errors import EXIT_OK, EXIT_OOM, UserError
from dlbench.subprocesses import run_child

MEMORY_FRACTION = 0.9
SMALL_PROBES = (2, 8)
STEP_UP = 1.125  # from a checked estimate, try this much more (or less) before bisecting
PROBE_FLAGS = ["--n-iters", "1", "--warmup-steps", "1", "--no-telemetry", "--min-time", "0"]


CONFIRM_TRIES = 4  # autotuned confirmations, each 1/16 smaller than the last


@dataclass(frozen=True)
class Probe:
    """One probe's outcome: it ran (with its peak memory in bytes, if known) or ran out."""

    batch_size: int
    fits: bool
    peak_bytes: float | None = None
    confirming: bool = False  # the autotuned check of the chosen size


@dataclass
class Search:
    """The chosen size and every probe on the way, in order."""

    batch_size: int = 0
    probes: list[Probe] = field(default_factory=list)
    seconds: float = 0.0

    def columns(self) -> dict[str, object]:
        """What the row records about the search (`batch_size_mode` is the run's setting)."""
        trail = " ".join(
            f"{p.batch_size}:{'ok' if p.fits else 'oom'}{'(tuned)' if p.confirming else ''}"
            for p in self.probes
        )
        return {"auto_batch_probes": trail, "auto_batch_s": self.seconds}


def within_budget(result: Probe, budget_bytes: float | None) -> bool:
    """A size fits when its probe ran and its peak (if known) stayed within the budget."""
    return result.fits and (
        budget_bytes is None or result.peak_bytes is None or result.peak_bytes <= budget_bytes
    )


def search_batch_size(
    probe: Callable[[int], Probe],
    budget_bytes: float | None,
    limit: int = 8192,
    resolution: float = 1 / 16,
) -> Search:
    """The largest batch <= limit whose probe fits (within `resolution` of it)."""
    search = Search()
    started = time.monotonic()

    def fits(n: int) -> bool:
        result = probe(n)
        ok = within_budget(result, budget_bytes)
        search.probes.append(Probe(n, ok, result.peak_bytes))
        return ok

    small = [n for n in SMALL_PROBES if n <= limit]
    measured = [(n, fits(n)) for n in small]
    good = max((n for n, ok in measured if ok), default=0)
    bad = min((n for n, ok in measured if not ok), default=None)
    estimate = _estimate(search.probes, budget_bytes, limit) if bad is None else None
    if good == 0:
        good, bad = 0, min(small, default=1)
    elif estimate and estimate > good:
        if fits(estimate):
            good = estimate
            while good < limit:
                higher = min(limit, max(good + 1, math.floor(good * STEP_UP)))
                if not fits(higher):
                    bad = higher
                    break
                good = higher
        else:  # the line overshot, seldom by much: step down from it, not up from the probes
            bad = estimate
            while (lower := math.floor(bad / STEP_UP)) > good:
                if fits(lower):
                    good = lower
                    break
                bad = lower
    elif bad is None:
        good, bad = _grow_until_failure(fits, good, limit)
    while bad is not None and bad - good > max(1, int(good * resolution)):
        middle = (good + bad) // 2
        good, bad = (middle, bad) if fits(middle) else (good, middle)
    search.batch_size, search.seconds = good, time.monotonic() - started
    return search


def confirm_batch_size(
    search: Search, probe: Callable[[int], Probe], budget_bytes: float | None
) -> Search:
    """Check the found size with the probe the measured run will match (cuDNN autotuned: other
    algorithms, other workspaces); step down 1/16 at a time until one fits."""
    started = time.monotonic() - search.seconds
    n = search.batch_size
    for _ in range(CONFIRM_TRIES):
        if n < 1:
            break
        result = probe(n)
        ok = within_budget(result, budget_bytes)
        search.probes.append(Probe(n, ok, result.peak_bytes, confirming=True))
        if ok:
            search.batch_size, search.seconds = n, time.monotonic() - started
            return search
        n = min(n - 1, math.floor(n * (1 - 1 / 16)))
    search.batch_size, search.seconds = 0, time.monotonic() - started
    return search


def _estimate(probes: list[Probe], budget: float | None, limit: int) -> int | None:
    """Batch size at which the linear fit of the small probes' peaks meets the budget."""
    known = [(p.batch_size, p.peak_bytes) for p in probes if p.fits and p.peak_bytes]
    if budget is None or len(known) < 2:
        return None
    (b1, m1), (b2, m2) = known[0], known[-1]
    per_sample = (m2 - m1) / (b2 - b1)
    if per_sample <= 0:
        return limit
    return max(1, min(limit, int((budget - (m1 - per_sample * b1)) / per_sample)))


def _grow_until_failure(
    fits: Callable[[int], bool], good: int, limit: int
) -> tuple[int, int | None]:
    """Double from a size that fits until one does not: the largest size that fitted and the
    first that did not (None: even `limit` fits)."""
    while good < limit:
        nxt = min(good * 2, limit)
        if not fits(nxt):
            return good, nxt
        good = nxt
    return good, None


def largest_fitting(
    fits: Callable[[int], bool], start: int = 16, limit: int = 8192, resolution: float = 1 / 16
) -> int:
    """Largest n <= limit with fits(n), for a monotone `fits`, by doubling then bisecting;
    0 if not even 1 fits (the subprocess fallback, where no peak memory is known)."""
    start = min(start, limit)
    if fits(start):
        good, bad = _grow_until_failure(fits, start, limit)
        if bad is None:
            return good
    else:
        good, bad = 0, start
    while bad - good > max(1, int(good * resolution)):
        middle = (good + bad) // 2
        good, bad = (middle, bad) if fits(middle) else (good, middle)
    return good


def find_batch_size(config: RunConfig, timeout_s: float = 900, limit: int = 8192) -> int:
    """Probe `dlbench MODE ...` (the config's own flags, batch size replaced) in subprocesses."""
    with tempfile.TemporaryDirectory() as tmp:
        probe_config = config.replace(output=Path(tmp) / "probe.csv")

        def fits(n: int) -> bool:
            args = [*config_args(probe_config.replace(batch_size=n)), *PROBE_FLAGS]
            start = time.monotonic()
            result = run_child(args, timeout_s)
            verdict = {EXIT_OK: "fits", EXIT_OOM: "out of memory"}.get(result.returncode, "failed")
            took = time.monotonic() - start
            stderr.print(f"--batch-size auto: probe {n}: {verdict} ({took:.0f} s)")
            if result.returncode == EXIT_OK:
                return True
            if result.returncode == EXIT_OOM:
                return False
            raise UserError(f"--batch-size auto: the probe at batch {n} failed: {result.last_line}")

        found = largest_fitting(fits, limit=limit)
    if found == 0:
        raise UserError("--batch-size auto: even batch size 1 does not fit on this device")
    return found


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
            with session.context(), attention_kernel(config.acceleration.attention):
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


def choose_batch_size(plan: Plan):
    """The plan at the largest batch that fits, the Fabric it was found in (None after
    subprocess probes) and the search (None likewise). In this process for one-process step
    workloads; in subprocesses for generation and DDP; refused on a CPU, whose memory has no
    budget to fill (every size up to the limit would fit)."""
    if plan.devices.device_type != "cuda":
        raise UserError(
            "--batch-size auto: needs a GPU (the CPU's memory has no fixed budget to fill, so "
            "every size up to the limit fits); give a number"
        )
    if plan.devices.world_size > 1 or plan.scenario == "generate":
        found = find_batch_size(plan.config)
        stderr.print(f"--batch-size auto: {found} is the largest batch that fits")
        return make_plan(plan.config.replace(batch_size=found)), None, None
    return search_in_process(plan)


def search_in_process(plan: Plan):
    """The search in this process and its Fabric, which the measured run then uses."""
    fabric = fabric_for(plan)
    budget = memory_budget(fabric.device)
    search = search_batch_size(in_process_probe(plan, fabric), budget)
    if search.batch_size and fabric.device.type == "cuda":  # cuDNN's autotuned algorithms
        search = confirm_batch_size(search, in_process_probe(plan, fabric, autotune=True), budget)
    if search.batch_size == 0:
        raise UserError("--batch-size auto: even batch size 1 does not fit on this device")
    stderr.print(
        f"--batch-size auto: {search.batch_size} is the largest batch that fits "
        f"({len(search.probes)} probes, {search.seconds:.0f} s)"
    )
    return make_plan(plan.config.replace(batch_size=search.batch_size)), fabric, search
