"""The workload registry (dlbench.workloads.registry): list what exists and build any of it by
name (like timm's models); importing this package registers every workload dlbench defines, then
those of installed plugins."""

from __future__ import annotations

from dlbench.plugins import load_plugins
from dlbench.workloads import segmentation, text, vision  # noqa: F401  (they register entries)
from dlbench.workloads.base import Batch, InputShape, SizeRule, Workload
from dlbench.workloads.registry import (
    get_workload,
    is_workload,
    list_workloads,
    register_workload,
)

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
