"""`--batch-size auto`: the largest batch that fits, found by probing in subprocesses.

Each probe is a short real run in its own process, so an OOM cannot poison the next probe's
allocator. Doubling finds an upper bound, bisection the largest size that fits."""

from __future__ import annotations

from collections.abc import Callable

from dlbench.errors import UserError
from dlbench.run import EXIT_OK, EXIT_OOM
from dlbench.sweep.child import run_child

PROBE_FLAGS = ["--n-iters", "2", "--warmup-steps", "1", "--no-telemetry"]


def largest_fitting(fits: Callable[[int], bool], start: int = 1, limit: int = 8192) -> int:
    """Largest n in [start, limit] with fits(n), assuming fits is monotone; 0 if none fits."""
    if not fits(start):
        return 0
    good, bad = start, None
    while bad is None:
        nxt = min(good * 2, limit)
        if nxt == good:
            return good
        if fits(nxt):
            good = nxt
        else:
            bad = nxt
    while bad - good > 1:
        middle = (good + bad) // 2
        good, bad = (middle, bad) if fits(middle) else (good, middle)
    return good


def find_batch_size(mode_args: list[str], probe_output: str, timeout_s: float, limit: int) -> int:
    """Probe `dlbench MODE ARGS --batch-size n` until the largest fitting n is known."""

    def fits(n: int) -> bool:
        args = [*mode_args, "--batch-size", str(n), *PROBE_FLAGS, "--output", probe_output]
        result = run_child(args, timeout_s)
        if result.returncode == EXIT_OK:
            return True
        if result.returncode == EXIT_OOM:
            return False
        raise UserError(f"--batch-size auto: the probe at batch {n} failed: {result.last_line}")

    found = largest_fitting(fits, limit=limit)
    if found == 0:
        raise UserError("--batch-size auto: even batch size 1 does not fit on this device")
    return found
