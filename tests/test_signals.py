"""A signal handled by one run leaves nothing behind for the next run in the same process (a
sweep worker runs many)."""

from __future__ import annotations

import os
import signal
import time

import pytest

from dlbench.signals import Interrupted, interruptible, raise_if_interrupted


def test_a_handled_signal_does_not_stop_the_next_run():
    with pytest.raises(Interrupted), interruptible():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(1)
    raise_if_interrupted()  # the next run starts clean: this must not raise
