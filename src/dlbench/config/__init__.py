"""The one validated configuration of a run (config.run_config), in typed sections
(config.sections); each CLI flag maps onto one section field, and a flag's key names it in plan
files, rows and `RunConfig.of`."""

from __future__ import annotations

from dlbench.config.fields import CONFIG_KEY, DEFAULT_OUTPUT
from dlbench.config.run_config import PANELS, SETTINGS, RunConfig, Setting, declared_settings
from dlbench.config.sections import check_count
from dlbench.config.sources import DataSource, DdpSettings, resolved_strategy

__all__ = [
    "CONFIG_KEY",
    "DEFAULT_OUTPUT",
    "PANELS",
    "SETTINGS",
    "DataSource",
    "DdpSettings",
    "RunConfig",
    "Setting",
    "check_count",
    "declared_settings",
    "resolved_strategy",
]
