"""`--data`: where a run's batches come from, parsed and checked before anything is built."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from dlbench.errors import invalid

DATA_KINDS = ("synthetic", "folder", "text")
DECODERS = ("cpu", "gpu")
DEFAULT_MAX_WORKERS = 8  # --workers default: one per CPU, at most this many


@dataclass(frozen=True)
class DataSource:
    """synthetic (batches made once, in memory), folder (an ImageFolder-style tree of JPEG/PNG
    files) or text (a .txt file, a line per sample, or .jsonl with a "text" field)."""

    kind: str
    path: Path | None = None

    @classmethod
    def parse(cls, text: str) -> DataSource:
        """'synthetic', 'folder:PATH' or 'text:PATH'; a UserError naming --data otherwise."""
        kind, sep, path = text.partition(":")
        if kind == "synthetic" and not sep:
            return cls("synthetic")
        if kind not in DATA_KINDS[1:] or not path:
            raise invalid("--data", text, "synthetic, folder:PATH or text:PATH")
        where = Path(path).expanduser()
        if kind == "folder" and not where.is_dir():
            raise invalid("--data", text, f"{where} is not a folder")
        if kind == "text" and not where.is_file():
            raise invalid("--data", text, f"{where} is not a file")
        return cls(kind, where)

    @property
    def synthetic(self) -> bool:
        """True for the in-memory default."""
        return self.kind == "synthetic"


def available_cpus() -> int:
    """CPUs this process may run on (a container's limit, not the host's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def default_workers() -> int:
    """Loader processes when --workers is not given: one per CPU, at most 8."""
    return min(DEFAULT_MAX_WORKERS, available_cpus())
