"""What a sweep and its worker say to each other: one JSON object a line, each line written with
one `write`, read by the sweep without blocking.

Worker to sweep: `{"ready": true, "protocol": PROTOCOL}` once its imports are done; `{"code": N,
"last": LINE}` when a point ends. Sweep to worker: `{"config": ..., "auto_batch": ..., "log": ...}`,
a point to run; or (protocol 2 and later) `{"args": [...], "log": ...}`, a command line to run as
a fresh process would (a gate's side: its own dlbench parses it, whatever the gate's version).
A worker that says no protocol takes configs alone."""

from __future__ import annotations

import json
import os

PROTOCOL = 2  # what this worker understands (see above)


def encode(message: dict) -> bytes:
    """One line of JSON."""
    return (json.dumps(message) + "\n").encode()


def send(fd: int, message: dict) -> None:
    """Write `message` as one line, whole."""
    data = encode(message)
    while data:
        data = data[os.write(fd, data) :]


class LineReader:
    """Whole lines from a pipe that is read whenever it has bytes, never blocking on a part."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._buffer = b""
        self.closed = False

    def feed(self) -> list[dict]:
        """Read what the pipe holds now; the whole lines it completes, decoded."""
        try:
            chunk = os.read(self.fd, 65536)
        except BlockingIOError:
            return []
        if not chunk:
            self.closed = True
            return []
        self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        return [m for m in map(_decoded, lines) if m is not None]


def _decoded(line: bytes) -> dict | None:
    """A message, or None for a line that is none (the worker sends its own only)."""
    try:
        message = json.loads(line)
    except ValueError:
        return None
    return message if isinstance(message, dict) else None
