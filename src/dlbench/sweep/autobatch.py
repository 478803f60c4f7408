"""`--batch-size auto`: the largest batch that fits, found by probing in subprocesses.

Each probe is a short real run in its own process, so an OOM cannot poison the next probe's
allocator. Doubling finds an upper bound, bisection the largest size that fits (to within 1/16:
the row records the batch used and `batch_size_mode=auto`)."""

from __future__ import annotations

import time
from collections.abc import Callable

from dlbench.console import stderr
from dlbench.errors import UserError
from dlbench.run import EXIT_OK, EXIT_OOM
from dlbench.sweep.child import run_child

PROBE_FLAGS = ["--n-iters", "1", "--warmup-steps", "1", "--no-telemetry"]


def largest_fitting(
    fits: Callable[[int], bool], start: int = 16, limit: int = 8192, resolution: float = 1 / 16
) -> int:
    """Largest n <= limit with fits(n), for a monotone `fits`; 0 if not even 1 fits.

    Doubles from `start` (or bisects below it), then bisects until the gap between the last
    fit and the first failure is within `resolution` of the fit: each probe is a whole run,
    so a few percent of batch size is not worth many more probes."""
    start = min(start, limit)
    if fits(start):
        good, bad = start, None
        while bad is None and good < limit:
            nxt = min(good * 2, limit)
            good, bad = (nxt, None) if fits(nxt) else (good, nxt)
        if bad is None:
            return good
    else:
        good, bad = 0, start
    while bad - good > max(1, int(good * resolution)):
        middle = (good + bad) // 2
        good, bad = (middle, bad) if fits(middle) else (good, middle)
    return good


def find_batch_size(mode_args: list[str], probe_output: str, timeout_s: float, limit: int) -> int:
    """Probe `dlbench MODE ARGS --batch-size n` until the largest fitting n is known."""

    def fits(n: int) -> bool:
        args = [*mode_args, "--batch-size", str(n), *PROBE_FLAGS, "--output", probe_output]
        start = time.monotonic()
        result = run_child(args, timeout_s)
        verdict = {EXIT_OK: "fits", EXIT_OOM: "out of memory"}.get(result.returncode, "failed")
        stderr.print(f"--batch-size auto: probe {n}: {verdict} ({time.monotonic() - start:.0f} s)")
        if result.returncode == EXIT_OK:
            return True
        if result.returncode == EXIT_OOM:
            return False
        raise UserError(f"--batch-size auto: the probe at batch {n} failed: {result.last_line}")

    found = largest_fitting(fits, limit=limit)
    if found == 0:
        raise UserError("--batch-size auto: even batch size 1 does not fit on this device")
    return found
