"""Lightning Fabric imported alone. The `lightning` package's own `__init__` imports the trainer
(`lightning.pytorch`) and, through `compare_version("torchmetrics", ...)` in Fabric's import
checks, torchmetrics, which imports matplotlib, torchvision's models, torch._dynamo and
transformers: seconds of every fresh process for code no run calls (dlbench uses Fabric alone;
docs/decisions.md#lean-lightning). Here the package is entered without its `__init__` and the
version check reads the installed version without importing the package, which is what it
compares."""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import sys
import types


def import_fabric() -> None:
    """Import `lightning.fabric` without the rest of Lightning (once; a process that imported
    Lightning whole keeps it)."""
    if "lightning.fabric" in sys.modules:
        return
    if "lightning" not in sys.modules:
        spec = importlib.util.find_spec("lightning")
        if spec is None or spec.submodule_search_locations is None:
            importlib.import_module("lightning.fabric")  # its own error says what is missing
            return
        package = types.ModuleType("lightning")
        package.__spec__ = spec
        package.__path__ = list(spec.submodule_search_locations)
        package.__file__ = spec.origin
        package.__version__ = importlib.metadata.version("lightning")
        sys.modules["lightning"] = package
    from lightning_utilities.core import imports

    compare = imports.compare_version
    imports.compare_version = _installed_version_compared(compare)
    try:
        importlib.import_module("lightning.fabric")
    finally:
        imports.compare_version = compare


def _installed_version_compared(compare):
    """lightning_utilities' `compare_version`, answering for a package not yet imported from
    its installed metadata (an absent package: False, as the import's failure would say)."""
    from packaging.version import Version

    def compare_version(package: str, op, version: str, use_base_version: bool = False) -> bool:
        if package in sys.modules:
            return compare(package, op, version, use_base_version)
        try:
            installed = Version(importlib.metadata.version(package))
        except (importlib.metadata.PackageNotFoundError, ValueError):
            return False
        if use_base_version:
            installed = Version(installed.base_version)
        return op(installed, Version(version))

    return compare_version
