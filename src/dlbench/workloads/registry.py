"""The workload registry: names to workloads, and name prefixes to builders of workloads another
library knows (`timm:NAME`), as timm's `_registry` keeps its maps beside the models that fill them.
The modules that define workloads register them here as they are imported (dlbench.workloads
imports them all)."""

from __future__ import annotations

import fnmatch
from collections.abc import Callable

from dlbench.errors import UserError, unknown_choice
from dlbench.workloads.base import Workload

_REGISTRY: dict[str, Workload] = {}
_PREFIXES: dict[str, tuple[Callable[[str], Workload], str]] = {}  # prefix: builder, what it takes


def register_workload(workload: Workload) -> Workload:
    """Add a workload under its name; names are unique."""
    if workload.name in _REGISTRY:
        raise ValueError(f"workload {workload.name!r} is registered twice")
    _REGISTRY[workload.name] = workload
    return workload


def register_prefix(prefix: str, build: Callable[[str], Workload], takes: str) -> None:
    """`PREFIXNAME` names the workload `build(NAME)` makes (`takes`: what NAME may be, for a
    refusal's list)."""
    _PREFIXES[prefix] = (build, takes)


def list_workloads(pattern: str = "*") -> list[str]:
    """Registered names matching a shell-style wildcard, sorted."""
    return sorted(name for name in _REGISTRY if fnmatch.fnmatch(name, pattern))


def is_workload(name: str) -> bool:
    """True for a registered name or a prefixed name its builder knows (`timm:NAME`)."""
    try:
        get_workload(name)
    except UserError:
        return False
    return True


def get_workload(name: str) -> Workload:
    """The workload called `name`; a prefixed name built by its prefix's builder (`timm:NAME`
    builds any timm model); else a UserError."""
    if name in _REGISTRY:
        return _REGISTRY[name]
    for prefix, (build, _) in _PREFIXES.items():
        if name.startswith(prefix):
            return build(name[len(prefix) :])
    others = [f"{prefix}{takes}" for prefix, (_, takes) in _PREFIXES.items()]
    raise unknown_choice("--model", name, [*_REGISTRY, *others])
