"""SIGTERM (docker stop), SIGINT and SIGHUP become an exception, so a run unwinds and nothing
stays half-written (the processes a run starts: dlbench.subprocesses)."""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

# docker stop, Ctrl-C, and a closed terminal or ssh session (a sweep over ssh whose link drops)
STOPPING_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGINT", "SIGHUP") if hasattr(signal, name)
)


class Interrupted(BaseException):
    """Raised in the main thread when a stopping signal arrives; exit code 128 + signal."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.signum = signum

    @property
    def exit_code(self) -> int:
        """130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP, as shells report them."""
        return 128 + self.signum


_pending: list[int] = []  # a signal that arrived, in case its exception was swallowed
_held: list[int] | None = None  # while signals are held: those that came meanwhile


def _raise(signum: int, _frame: object) -> None:
    if _held is not None:
        _held.append(signum)
        return
    _pending.append(signum)
    raise Interrupted(signum)


def raise_if_interrupted() -> None:
    """Raise the signal that arrived if its exception was lost: a handler that fires inside a
    `__del__` (an import's clean-up, say) has its exception ignored by Python, and the run
    would go on. The measured loop calls this between steps (a list read, no sync)."""
    if _pending:
        raise Interrupted(_pending[-1])


def _quiet_lost_interrupt(previous_hook: Callable[[Any], object]) -> Callable[[Any], None]:
    """An `Interrupted` that Python could not raise (it fired in a finalizer) is already in
    `_pending`, and the run stops at its next check: printing it would put a traceback under
    the run's one-line error. Anything else goes to the hook that was there."""

    def hook(unraisable: Any) -> None:  # sys.UnraisableHookArgs, a type only typeshed names
        if not isinstance(unraisable.exc_value, Interrupted):
            previous_hook(unraisable)

    return hook


@contextmanager
def interruptible() -> Iterator[None]:
    """Turn STOPPING_SIGNALS into `Interrupted` inside the block; restore handlers after."""
    global _held
    _pending.clear()
    _held = None
    previous = {s: signal.signal(s, _raise) for s in STOPPING_SIGNALS}
    previous_hook = sys.unraisablehook
    sys.unraisablehook = _quiet_lost_interrupt(previous_hook)
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        sys.unraisablehook = previous_hook
        _pending.clear()  # handled here: the next run in this process starts clean
        _held = None


def hold_signals() -> None:
    """From now on a stopping signal only waits, until `release_signals` or the end of
    `interruptible`. Python runs a signal's handler in the main thread whichever thread the
    kernel gave the signal to (torch, gloo and the telemetry have threads of their own), so
    the handler holds it: a signal mask would hold only the thread that set it."""
    global _held
    _held = []


def came_while_held() -> Interrupted | None:
    """The `Interrupted` of the last signal that came while held (None if none came); signals
    stay held: a run that ends anyway exits with it, and no later signal cuts its last words."""
    return Interrupted(_held[-1]) if _held else None


def release_signals() -> Interrupted | None:
    """Stop holding; `came_while_held`, for the caller to raise."""
    global _held
    came, _held = came_while_held(), None
    if came is not None:
        _pending.append(came.signum)
    return came
