"""A planted slowdown in the dlbench loop's steps only (the bare loop of `validate` does not use
it), loaded into real processes via DLBENCH_PLUGINS: `validate` must see its ratio fall."""

from __future__ import annotations

import time

from dlbench.engine import loop

PLANTED_S = 0.05
_run_measured_loop = loop.run_measured_loop


def _slowed(step, *args, **kwargs):
    def slow_step(i: int) -> None:
        time.sleep(PLANTED_S)
        step(i)

    return _run_measured_loop(slow_step, *args, **kwargs)


loop.run_measured_loop = _slowed
