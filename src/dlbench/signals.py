"""SIGTERM (docker stop) becomes an exception, so a run unwinds and nothing stays half-written."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager


class Interrupted(BaseException):
    """Raised in the main thread when SIGTERM or SIGINT arrives; exit code 128 + signal."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.signum = signum

    @property
    def exit_code(self) -> int:
        """130 for SIGINT, 143 for SIGTERM, as shells report them."""
        return 128 + self.signum


_pending: list[int] = []  # a signal that arrived, in case its exception was swallowed


def _raise(signum: int, _frame: object) -> None:
    _pending.append(signum)
    raise Interrupted(signum)


def raise_if_interrupted() -> None:
    """Raise the signal that arrived if its exception was lost: a handler that fires inside a
    `__del__` (an import's clean-up, say) has its exception printed and ignored by Python, and
    the run would go on. The measured loop calls this between steps (a list read, no sync)."""
    if _pending:
        raise Interrupted(_pending[-1])


@contextmanager
def interruptible() -> Iterator[None]:
    """Turn SIGTERM and SIGINT into `Interrupted` inside the block; restore handlers after."""
    _pending.clear()
    previous = {s: signal.signal(s, _raise) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
