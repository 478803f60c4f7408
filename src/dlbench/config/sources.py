"""Parts of a run's configuration parsed from one flag each: where the batches come from
(--data) and what DistributedDataParallel gets (--ddp)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path

from dlbench.errors import UserError, invalid

DATA_KINDS = ("synthetic", "folder", "text")
DECODERS = ("cpu", "gpu")


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


# auto: DDP when more than one process runs; ddp: always; fsdp: sharded data parallel (FSDP2)
STRATEGIES = ("auto", "ddp", "fsdp")


@dataclass(frozen=True)
class DdpSettings:
    """What DistributedDataParallel gets (--ddp KEY=VALUE changes any of it). Gradients as
    bucket views (no copy of every gradient into its bucket) and a static graph (every
    workload here uses all its parameters every step) ran faster, for the bare loop and
    dlbench alike (docs/decisions.md#ddp-settings); the rest are torch's defaults."""

    bucket_cap_mb: float = 25.0
    gradient_as_bucket_view: bool = True
    static_graph: bool = True
    broadcast_buffers: bool = True

    @classmethod
    def parse(cls, items: tuple[str, ...] | list[str]) -> DdpSettings:
        """`--ddp KEY=VALUE` pairs, or a UserError naming the flag, value and what is allowed."""
        fields = {f.name: f.type for f in dataclasses.fields(cls)}
        changes: dict[str, object] = {}
        for item in items:
            key, sep, value = item.partition("=")
            if not sep or key not in fields:
                raise UserError(
                    f"--ddp: invalid value {item!r}; KEY=VALUE with KEY one of {', '.join(fields)}"
                )
            changes[key] = _value(key, value, fields[key])
        return cls(**changes)

    def kwargs(self) -> dict[str, object]:
        """Keyword arguments for torch's DistributedDataParallel."""
        return dataclasses.asdict(self)

    def columns(self) -> dict[str, object]:
        """Row columns `ddp_<setting>`."""
        return {f"ddp_{k}": v for k, v in self.kwargs().items()}


def _value(key: str, text: str, kind: str) -> object:
    if kind == "bool":
        if text.lower() not in ("true", "false", "1", "0"):
            raise UserError(f"--ddp: invalid value {text!r} for {key}; true or false")
        return text.lower() in ("true", "1")
    try:
        number = float(text)
    except ValueError:
        raise UserError(f"--ddp: invalid value {text!r} for {key}; a number") from None
    if not math.isfinite(number) or number <= 0:
        raise UserError(f"--ddp: invalid value {text!r} for {key}; a positive finite number")
    return number


def resolved_strategy(requested: str, world_size: int) -> str:
    """What ran: 'fsdp' where asked, 'ddp' (several processes, or --strategy ddp on one) or
    'single'."""
    if requested == "fsdp":
        return "fsdp"
    return "ddp" if requested == "ddp" or world_size > 1 else "single"
