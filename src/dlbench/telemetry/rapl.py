"""CPU package and DRAM energy from Linux RAPL (/sys/class/powercap), where it is readable."""

from __future__ import annotations

from pathlib import Path

POWERCAP = Path("/sys/class/powercap")


class RaplReader:
    """Sums the energy counters of every CPU package and its DRAM zone, handling wrap-around."""

    def __init__(self, root: Path = POWERCAP) -> None:
        zones = sorted(p for p in root.glob("intel-rapl:*") if (p / "energy_uj").exists())
        self.zones = [z for z in zones if _wanted(z)]
        self._ranges = {z: _read_int(z / "max_energy_range_uj") for z in self.zones}
        self._start: dict[Path, int] = {}
        if not self.zones or any(_read_int(z / "energy_uj") is None for z in self.zones):
            raise PermissionError("RAPL energy counters are missing or unreadable")

    def begin(self) -> None:
        self._start = {z: _read_int(z / "energy_uj") or 0 for z in self.zones}

    def end_j(self) -> float:
        """Joules since `begin`, over all zones."""
        total = 0
        for zone, start in self._start.items():
            now = _read_int(zone / "energy_uj") or 0
            total += now - start if now >= start else now + (self._ranges[zone] or 0) - start
        return total / 1e6


def _wanted(zone: Path) -> bool:
    """Top-level packages, plus their DRAM sub-zones (cores are inside the package already)."""
    depth = zone.name.count(":")
    name = (zone / "name").read_text().strip() if (zone / "name").exists() else ""
    return depth == 1 or name == "dram"


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None
