"""What a sweep and its workers say to each other: one JSON object a line, each line written with
one `write` (a pipe takes a line this short whole, so a worker held still mid-answer never leaves
half a line), read by the sweep without blocking.

Worker to sweep: `{"ready": true}` once its imports are done; `{"ask": KIND}` for the GPU's turn
(dlbench.gpu_turn) and `{"done": true}` to give it back; `{"code": N, "last": LINE}` when a task
ends. Sweep to worker: `{"task": "measure"|"prepare", "config": ..., "auto_batch": ...,
"job_pids": [...]}`, and `{"granted": true, "waited_s": S, "job_pids": [...]}` (S: how long the
task has been held still or waited for turns so far; the PIDs: the sweep's other workers)."""

from __future__ import annotations

import json
import os

MEASURE_TASK, PREPARE_TASK = "measure", "prepare"  # a point measured; a point compiled ahead

# A worker's shared bytes (a small file both sides map): the sweep writes GIVE_WAY (1: another
# worker's turn asks this one to give way at its next checkpoint), the worker writes STATE.
GIVE_WAY, STATE, SHARED_BYTES = 0, 1, 8
# What a worker is doing, as far as another's turn cares: running (it may use the GPU at any
# moment), gave way (at a checkpoint, its GPU work done), waiting (for its turn or its next
# point, its GPU work done), compiling (host work only, its GPU work done before it began).
RUNNING, GAVE_WAY, WAITING, COMPILING = 0, 1, 2, 3


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
