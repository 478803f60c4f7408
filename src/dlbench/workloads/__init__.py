"""The workload registry: list what exists and build any of it by name (like timm's models)."""

from __future__ import annotations

import fnmatch

from dlbench.errors import UserError, unknown_choice
from dlbench.plugins import load_plugins
from dlbench.workloads.base import Batch, InputShape, SizeRule, Workload

_REGISTRY: dict[str, Workload] = {}
TIMM_PREFIX = "timm:"


def register_workload(workload: Workload) -> Workload:
    """Add a workload under its name; names are unique."""
    if workload.name in _REGISTRY:
        raise ValueError(f"workload {workload.name!r} is registered twice")
    _REGISTRY[workload.name] = workload
    return workload


def list_workloads(pattern: str = "*") -> list[str]:
    """Registered names matching a shell-style wildcard, sorted."""
    return sorted(name for name in _REGISTRY if fnmatch.fnmatch(name, pattern))


def is_workload(name: str) -> bool:
    """True for a registered name or a `timm:NAME` that timm knows."""
    try:
        get_workload(name)
    except UserError:
        return False
    return True


def get_workload(name: str) -> Workload:
    """The workload called `name`; `timm:NAME` builds any timm model; else a UserError."""
    if name in _REGISTRY:
        return _REGISTRY[name]
    if name.startswith(TIMM_PREFIX):
        from dlbench.workloads.vision import timm_workload

        return timm_workload(name[len(TIMM_PREFIX) :])
    raise unknown_choice("--model", name, [*_REGISTRY, "timm:<any timm model>"])


from dlbench.workloads import segmentation, text, vision  # noqa: E402,F401  (registers entries)

load_plugins()  # installed plugins register theirs (dlbench.plugins)

__all__ = [
    "Batch",
    "InputShape",
    "SizeRule",
    "Workload",
    "get_workload",
    "is_workload",
    "list_workloads",
    "register_workload",
]
