"""What a user can get wrong, turned into one line and an exit code, for every command; apart
from `dlbench.run` (which brings torch), so that `compare`, `report` and `--help` start
without it."""

from __future__ import annotations

from collections.abc import Callable

from dlbench.console import error_line
from dlbench.errors import EXIT_USER_ERROR, UserError, exception_line
from dlbench.signals import Interrupted, interruptible


def guarded(call: Callable[[], int]) -> int:
    """Run a command's body to its exit code: user errors, and what the filesystem or the
    environment refuses, 2 with one `error:` line and no traceback; signals 128 + the signal
    (the run in flight gets no result; a sweep records its point as interrupted, and --resume
    runs it again)."""
    try:
        with interruptible():
            return call()
    except UserError as exc:
        return report(str(exc), EXIT_USER_ERROR)
    except OSError as exc:  # the filesystem or the environment refused (a cache path, a pipe)
        return report(exception_line(exc), EXIT_USER_ERROR)
    except Interrupted as exc:
        return report(f"{exc}; the run in flight has no result", exc.exit_code)


def report(message: str, code: int) -> int:
    """Print one `error:` line; return the exit code."""
    error_line(message)
    return code
