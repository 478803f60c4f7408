"""A signal handled by one run leaves nothing behind for the next run in the same process (a
sweep worker runs many)."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from dlbench.signals import (
    Interrupted,
    hold_signals,
    interruptible,
    raise_if_interrupted,
    release_signals,
)


def test_a_handled_signal_does_not_stop_the_next_run():
    with pytest.raises(Interrupted), interruptible():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(1)
    raise_if_interrupted()  # the next run starts clean: this must not raise


def test_a_signal_inside_a_finalizer_prints_no_traceback_and_still_stops_the_run(tmp_path):
    """A handler that fires inside `__del__` has its exception printed and ignored by Python
    ("Exception ignored in ... Traceback"): the run must still stop, and stderr keep one line."""
    import subprocess
    import sys

    script = tmp_path / "finalizer_signal.py"
    script.write_text(
        "import os, signal, sys\n"
        "from dlbench.signals import Interrupted, interruptible, raise_if_interrupted\n"
        "class Dying:\n"
        "    def __del__(self):\n"
        "        os.kill(os.getpid(), signal.SIGTERM)\n"
        "        sum(range(1000))  # the handler runs at the next bytecode, still in __del__\n"
        "try:\n"
        "    with interruptible():\n"
        "        Dying()\n"
        "        raise_if_interrupted()\n"
        "        print('ran on')\n"
        "except Interrupted as stop:\n"
        "    print(f'error: {stop}', file=sys.stderr)\n"
        "    sys.exit(stop.exit_code)\n"
    )
    from tests.conftest import cli_env

    done = subprocess.run(
        [sys.executable, str(script)], env=cli_env(), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 143 and "ran on" not in done.stdout
    assert done.stderr.strip() == "error: interrupted by SIGTERM", done.stderr


def test_a_held_signal_waits_whichever_thread_the_kernel_gives_it_to():
    """A launcher's SIGTERM goes to the process, and the kernel hands it to any thread that does
    not block it (torch, gloo and the telemetry run threads of their own): Python still runs the
    handler in the main thread. Holding must hold it there too, and hand it over on release."""
    other = threading.Event()
    helper = threading.Thread(target=other.wait, daemon=True)  # as gloo's threads are there
    helper.start()
    try:
        with interruptible():
            hold_signals()
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.2)  # the handler has had its turn in this thread
            came = release_signals()
    finally:
        other.set()
    assert isinstance(came, Interrupted) and came.signum == signal.SIGTERM


def test_a_signal_that_came_before_the_hold_is_not_handed_over_again():
    with pytest.raises(Interrupted), interruptible():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(1)
    with interruptible():
        hold_signals()
        assert release_signals() is None
