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
