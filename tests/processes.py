"""The processes a test looks at (Linux /proc): a process's children and descendants, its
command line, and whether it still runs."""

from __future__ import annotations

from pathlib import Path

PROC = Path("/proc")


def _stat(pid: int | str) -> list[str]:
    """A process's /proc stat fields after its name (state, parent, ...); OSError once it is
    gone."""
    return (PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()


def _parents() -> dict[int, int]:
    """Every process's parent."""
    found = {}
    for entry in PROC.glob("[0-9]*"):
        try:
            found[int(entry.name)] = int(_stat(entry.name)[1])
        except (OSError, ValueError, IndexError):
            continue  # it ended between the listing and the read
    return found


def children(pid: int) -> list[int]:
    """Processes whose parent is `pid`, ended ones not yet reaped among them."""
    return [child for child, parent in _parents().items() if parent == pid]


def descendants(pid: int) -> list[int]:
    """Every process below `pid`."""
    below: dict[int, list[int]] = {}
    for child, parent in _parents().items():
        below.setdefault(parent, []).append(child)
    found, todo = [], [pid]
    while todo:
        for child in below.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def command_line(pid: int) -> bytes:
    """A process's command line (b"" once it is gone)."""
    try:
        return (PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return b""


def running(pid: int) -> bool:
    """Whether the process has not ended (gone, or ended and not yet reaped: a zombie)."""
    try:
        return _stat(pid)[0] != "Z"
    except (OSError, IndexError):
        return False
