"""A sweep looks at its own rows: each point's row held against the published rows of its GPU and
configuration (results.published), the points outside their band measured once more in a fresh
worker (`recheck_of` names the first row; both rows stay), and whether the second measurement
agreed with the first row or with the published ones."""

from __future__ import annotations

from dataclasses import dataclass

from dlbench.errors import number_or_none
from dlbench.results.published import ABOVE, BELOW, outside_band

PUBLISHED, FIRST, NEITHER = "the published rows", "the first row", "neither"


@dataclass(frozen=True)
class HeldRow:
    """One point's row against the published rows."""

    label: str
    run_id: str
    ratio: float | None  # None: nothing was published for its GPU and configuration
    band_pct: float | None
    outside: str  # BELOW, ABOVE or ''

    @classmethod
    def of(cls, label: str, row: dict[str, str]) -> HeldRow:
        return cls(
            label,
            row.get("run_id", ""),
            number_or_none(row.get("published_ratio")),
            number_or_none(row.get("published_band_pct")),
            outside_band(row),
        )

    def figure(self) -> str:
        return f"{self.ratio:.3f}x" if self.ratio is not None else "nothing published"


@dataclass(frozen=True)
class Recheck:
    """A point outside its band measured again: the first row and the second (None: the second
    run did not finish)."""

    first: HeldRow
    second: HeldRow | None

    def agreed_with(self) -> str:
        """PUBLISHED where the second row lies within its band, FIRST where it lies as far out
        as the first (within the band of it), else NEITHER; '' where it did not finish."""
        second = self.second
        if second is None or second.ratio is None or self.first.ratio is None:
            return ""
        if not second.outside:
            return PUBLISHED
        band = second.band_pct or 0.0
        return FIRST if abs(100.0 * (second.ratio / self.first.ratio - 1)) <= band else NEITHER


def summary_lines(held: list[HeldRow], rechecks: list[Recheck]) -> list[str]:
    """What a sweep prints after its table: how many rows lie within their published band, each
    one outside it, and what its recheck found."""
    if not held:
        return []
    compared = [h for h in held if h.ratio is not None]
    below = sum(h.outside == BELOW for h in compared)
    above = sum(h.outside == ABOVE for h in compared)
    unpublished = len(held) - len(compared)
    if not compared:
        return [f"held against the published rows: nothing published for its {unpublished} row(s)"]
    lines = [
        f"held against the published rows: {len(compared) - below - above} of {len(compared)} "
        f"row(s) within their band, {below} below, {above} above"
        + (f"; {unpublished} with nothing published" if unpublished else "")
    ]
    checked = {r.first.run_id: r for r in rechecks}
    for row in compared:
        if not row.outside:
            continue
        where = "below" if row.outside == BELOW else "above"
        line = f"  {where}: {row.label}: {row.figure()} (band +/-{row.band_pct:.1f} %)"
        recheck = checked.get(row.run_id)
        if recheck is None:
            lines.append(f"{line}, not rechecked (--no-recheck)")
        elif recheck.second is None:
            lines.append(
                f"{line}; measured again, the second run did not finish (its row says why)"
            )
        else:
            agreed = recheck.agreed_with()
            lines.append(
                f"{line}; measured again in a fresh worker: {recheck.second.figure()}, "
                f"agrees with {agreed}"
            )
    return lines
