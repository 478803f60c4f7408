"""A lock beside a file that leaves nothing behind once released: an OS lock (flock) on a hidden
file beside it, unlinked by its holder as it lets go. A waiter that got the lock on a file its
last holder had already unlinked finds the path gone or another file there, and takes the lock
again on what is there now: so two processes never both hold it, and a folder of results keeps
no `.NAME.csv.lock` once a command ends. The OS releases the lock of a process that dies however
it dies (its file stays until the next holder lets go). Reentrant within a process."""

from __future__ import annotations

import contextlib
import fcntl
import os
import time

POLL_S = 0.05


class LockBusy(Exception):
    """Another process held the lock past the timeout."""


class BesideLock:
    """`acquire` (waiting up to `timeout` seconds; 0: not at all) and `release`."""

    def __init__(self, lock_file: str, timeout: float) -> None:
        self.lock_file, self.timeout = lock_file, timeout
        self._fd: int | None = None
        self._depth = 0

    def acquire(self) -> None:
        if self._depth:
            self._depth += 1
            return
        deadline = time.monotonic() + self.timeout
        while True:
            fd = os.open(self.lock_file, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                if time.monotonic() >= deadline:
                    raise LockBusy(self.lock_file) from None
                time.sleep(POLL_S)
                continue
            if self._still_there(fd):
                self._fd, self._depth = fd, 1
                return
            os.close(fd)  # its last holder unlinked it as it let go: lock what is there now

    def _still_there(self, fd: int) -> bool:
        try:
            here = os.stat(self.lock_file)
        except FileNotFoundError:
            return False
        mine = os.fstat(fd)
        return (here.st_dev, here.st_ino) == (mine.st_dev, mine.st_ino)

    def release(self) -> None:
        if not self._depth:
            return
        self._depth -= 1
        if self._depth or self._fd is None:
            return
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.lock_file)  # while held: no one else can be past their check
        os.close(self._fd)  # the OS lock goes with it
        self._fd = None

    def __enter__(self) -> BesideLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
