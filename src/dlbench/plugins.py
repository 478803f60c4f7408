"""Plugins: installed packages that add workloads or telemetry backends to dlbench.

A package declares an entry point in the group `dlbench.plugins` (pyproject.toml:
`[project.entry-points."dlbench.plugins"] mine = "my_package.dlbench_plugin"`); dlbench imports
each such module once, before the first workload or GPU telemetry is looked up, and the module
registers what it brings with `dlbench.workloads.register_workload` or
`dlbench.telemetry.nvml.register_nvml_provider`. docs/plugins.md has an example."""

from __future__ import annotations

import warnings
from importlib import metadata

GROUP = "dlbench.plugins"
_loaded = False


def load_plugins() -> None:
    """Import every installed plugin once; one that fails to import costs a warning."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    for entry in metadata.entry_points(group=GROUP):
        try:
            entry.load()
        except Exception as exc:  # a broken plugin must not stop a benchmark
            warnings.warn(f"dlbench plugin {entry.name} ({entry.value}): {exc}", stacklevel=1)
