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


def _raise(signum: int, _frame: object) -> None:
    raise Interrupted(signum)


@contextmanager
def interruptible() -> Iterator[None]:
    """Turn SIGTERM and SIGINT into `Interrupted` inside the block; restore handlers after."""
    previous = {s: signal.signal(s, _raise) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
