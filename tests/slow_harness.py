"""A planted slowdown in the dlbench loop's steps only (the bare loop of `validate` does not use
it), loaded as a plugin into the tests' processes and active where DLBENCH_TEST_SLOW_STEPS is
set: `validate` must see its ratio fall."""

from __future__ import annotations

import os
import time

from dlbench.engine.timing import loop

PLANTED_S = 0.05
_run_measured_loop = loop.run_measured_loop


def _slowed(step, *args, **kwargs):
    def slow_step(i: int) -> None:
        time.sleep(PLANTED_S)
        step(i)

    return _run_measured_loop(slow_step, *args, **kwargs)


if os.environ.get("DLBENCH_TEST_SLOW_STEPS"):
    loop.run_measured_loop = _slowed
