"""The published rows: every row `benchmarks/reference.sh` measured on lent GPUs, shipped with the
package (dlbench/published/, one CSV a part; docs/reference.md names each part's commit), the
best knowledge there is of what each GPU model does with each configuration. A new row is held
against the published rows of its GPU model and configuration, as a fleet check holds a GPU
against its siblings: its ratio to their median, where they came from, and the band the ratio
may stray from 1 before the row is called below (or above) what its GPU did before.

A published row counts when the same experiment (results.pairing.EXPERIMENT_KEY: every setting
that decides what was measured, the GPU model and the process count) ran under the same power
limit and the same torch and CUDA releases (major.minor), and when its own window made it valid:
a row judged only against an older publication stays a reference. The band and how a sweep uses
it: docs/reference.md#held-against-the-published-rows."""

from __future__ import annotations

import functools
import math
import os
import statistics
from collections.abc import Mapping
from pathlib import Path

from dlbench.errors import UserError, number_or_none, warn
from dlbench.results.intervals import interval_of
from dlbench.results.pairing import (
    COMPARED_KINDS,
    EXPERIMENT_KEY,
    GATE_THRESHOLD_PCT,
    experiment_key,
    figure_of,
    finished,
    key_text,
    kind_of,
    machine,
    release,
)
from dlbench.results.stats import Z_975
from dlbench.results.store import CsvStore, NotDlbenchCsv
from dlbench.results.upgrade import missing_columns, upgraded

PACKAGED_DIR = Path(__file__).resolve().parents[1] / "published"
# A folder of one's own published rows (a fleet's), held against in place of the package's
FOLDER_VARIABLE = "DLBENCH_PUBLISHED_DIR"
# what the run's GPU was allowed to draw: a row under another limit measured another thing
CONDITIONS = ("power_limit_w",)
# the software a figure depends on, matched at major.minor (results.pairing.release)
RELEASES = {"torch": "torch_release", "cuda": "cuda_release"}
# what a benchmark row must share with a published row (a row of another kind: its own
# experiment key, results.pairing.EXPERIMENT_KEYS, with the same conditions and releases)
PUBLISHED_KEY = (*EXPERIMENT_KEY, *CONDITIONS, *RELEASES.values())


def published_key(kind: str) -> tuple[str, ...]:
    """What a row of `kind` must share with a published row."""
    return (*experiment_key(kind), *CONDITIONS, *RELEASES.values())


BELOW, ABOVE = "below_published", "above_published"  # the verdict's words for a row outside


def published_files(folder: Path) -> list[Path]:
    """The dlbench CSVs of a published folder that can be read: not the per-rank side files,
    nor the bare loops' files beside them (the yardstick's, not rows); a file that cannot be
    read (no regular file, not UTF-8 text, a damaged line) does not count, said once."""
    return [path for path, _ in _published_tables(folder)]


@functools.cache
def _published_tables(folder: Path) -> tuple[tuple[Path, tuple[dict[str, object], ...]], ...]:
    """Each readable dlbench CSV of the folder with its rows, read once a process; a warning
    for each file, and each file's rows of no figure, that do not count."""
    tables = []
    for path in sorted(folder.glob("*.csv")) if folder.is_dir() else []:
        if path.name.endswith(".per_rank.csv"):
            continue
        store = CsvStore(path, flag=_label(folder))
        try:
            if not path.is_file():  # a FIFO would hold the reader until someone writes to it
                raise UserError(f"{_label(folder)}: {path} is not a regular file")
            if not _ours(store):
                continue
            store.check_rows()
            missing = missing_columns(store.header())  # rows from before these columns
            rows = [upgraded(row, missing) for row in store.rows()]
        except UserError as exc:
            warn(f"{exc}; it does not count")
            continue
        rows_not_counted(_label(folder), path, rows)
        tables.append((path, tuple(rows)))
    return tuple(tables)


def _label(folder: Path) -> str:
    """How the user named the folder, for messages."""
    given = os.environ.get(FOLDER_VARIABLE)
    return f"{FOLDER_VARIABLE}={given}" if given else "the published rows"


def _ours(store: CsvStore) -> bool:
    try:
        return bool(store.header())
    except NotDlbenchCsv:  # a bare loop's file beside the rows
        return False


def rows_not_counted(
    label: str, path: Path, rows: list[Mapping[str, object]], say: bool = True
) -> list[bool]:
    """Which of a file's rows do not count (not_counted), with one warning for them where
    `say` (`label` names how the user gave the file)."""
    bad = [not_counted(r) for r in rows]
    if say and any(bad):
        first = rows[bad.index(True)]
        column = figure_of(first)[0]
        warn(
            f"{label}: {path}: {sum(bad)} row(s) whose {column} is no positive number "
            f"(e.g. {first.get(column)!r}) do not count"
        )
    return bad


def not_counted(row: Mapping[str, object]) -> bool:
    """Whether a finished row of a compared kind holds a figure that is no positive finite
    number (a hand edit: `abc`, 0, -5, inf): a row that counts for no comparison. An empty
    cell is not one (nothing was measured there: its own verdict says so)."""
    kind = kind_of(row)
    if kind not in COMPARED_KINDS or not finished(row, kind):
        return False
    cell = row.get(figure_of(row)[0])
    empty = (
        cell is None or (isinstance(cell, float) and math.isnan(cell)) or str(cell).strip() == ""
    )
    return not empty and _figure(row) is None


# What a row fed by a real input pipeline found (the GPU waited for its loader): the loader's
# rate is what such a row measures, not a fault of its window. Rows before issue 88 carried it
# as a reason for their verdict; it is a note since.
LOADER_FINDINGS = ("input_bound",)


def own_faults(row: Mapping[str, object]) -> set[str]:
    """The reasons a row's verdict gives that are faults of its own window: less its comparison
    with the rows published before it, less a loader row's finding (LOADER_FINDINGS)."""
    reasons = {r for r in key_text(row.get("verdict_reasons")).split(";") if r}
    return reasons - {BELOW, *LOADER_FINDINGS}


def is_reference(row: Mapping[str, object]) -> bool:
    """Whether a published row is a reference: a finished benchmark or serve run valid by its
    own window (`own_faults`) with the figure its kind is compared on."""
    kind = kind_of(row)
    valid = key_text(row.get("verdict")) in ("valid", "") or not own_faults(row)
    return kind in COMPARED_KINDS and finished(row, kind) and valid and _figure(row) is not None


def _figure(row: Mapping[str, object]) -> float | None:
    """The row's figure (results.pairing.figure_of), a positive finite number, or None."""
    value = number_or_none(row.get(figure_of(row)[0]))
    return value if value is not None and math.isfinite(value) and value > 0 else None


@functools.cache
def published_rows(folder: Path) -> tuple[dict[str, object], ...]:
    """Every reference row of the published CSVs, each with the file it came from
    (`published_file`)."""
    return tuple(
        {**row, "published_file": path.name}
        for path, rows in _published_tables(folder)
        for row in rows
        if is_reference(row)
    )


def forget_published() -> None:
    """Read the published folders again at their next use (a test that edits one)."""
    published_rows.cache_clear()
    _published_tables.cache_clear()


def check_published_folder() -> None:
    """A UserError, before anything runs, where DLBENCH_PUBLISHED_DIR names no folder: a row
    measured then would be held against nothing without a word."""
    given = os.environ.get(FOLDER_VARIABLE)
    if given and not Path(given).is_dir():
        state = "does not exist" if not Path(given).exists() else "is not a folder"
        raise UserError(
            f"{FOLDER_VARIABLE}: {given} {state}; name a folder of published CSVs, or unset it "
            "to hold rows against the package's"
        )


def published_folder() -> Path:
    """DLBENCH_PUBLISHED_DIR where it is set, else the rows shipped with the package."""
    given = os.environ.get(FOLDER_VARIABLE)
    return Path(given) if given else PACKAGED_DIR


def releases(row: Mapping[str, object]) -> dict[str, str]:
    """The release columns of PUBLISHED_KEY: torch and CUDA at major.minor."""
    return {column: release(row.get(version)) for version, column in RELEASES.items()}


def _match(row: Mapping[str, object]) -> tuple[str, ...]:
    keyed = {**row, **releases(row)}
    kind = kind_of(row)
    return (kind, *(key_text(keyed.get(k), k) for k in published_key(kind)), machine(row))


def matching_rows(row: Mapping[str, object], folder: Path | None = None) -> list[dict[str, str]]:
    """The published rows of this row's experiment, machine and software releases."""
    wanted = _match(row)
    return [r for r in published_rows(folder or published_folder()) if _match(r) == wanted]


def band_pct(row: Mapping[str, object], published: list[Mapping[str, object]]) -> float:
    """How far (in %) the ratio to the published median may lie from 1: the regression gate's
    threshold, or wider where independent uncertainties (each an interval's half-width at
    Z_975), combined as independent (the root of their sum of squares), add up to more: the new
    row's own interval (pooled over its processes where it ran several), the widest published
    row's, the published rows' spread between machines (their standard deviation) and, for a
    row of one process, how far one process may stray from the published rows' pooled mean
    (their widest `process_spread_pct`, a standard deviation), which its window cannot see."""
    rates = [_figure(r) or 0.0 for r in published]
    own = _normal_half(row)
    widest = max(_normal_half(r) for r in published)
    between = (
        Z_975 * statistics.stdev(rates) / statistics.fmean(rates) * 100 if len(rates) > 1 else 0.0
    )
    one_process = (number_or_none(row.get("processes")) or 1) <= 1
    stray = max(_share(r.get("process_spread_pct")) for r in published)
    terms = (own, widest, between, Z_975 * stray if one_process else 0.0)
    return max(GATE_THRESHOLD_PCT, math.sqrt(sum(t * t for t in terms)))


def _normal_half(row: Mapping[str, object]) -> float:
    """A row's interval (results.intervals) as a half-width at Z_975: its standard deviation's,
    whatever t it was drawn with; 0 where it has none or none finite."""
    interval = interval_of(row)
    if interval is None or not math.isfinite(interval.half_pct):
        return 0.0
    return Z_975 * interval.sd_pct


def _share(cell: object) -> float:
    """A recorded interval or spread (%): a finite number of 0 or more, else 0 (a cell edited to
    inf or -5 would widen or narrow every band held to it)."""
    value = number_or_none(cell)
    return value if value is not None and math.isfinite(value) and value >= 0 else 0.0


def published_columns(row: Mapping[str, object], folder: Path | None = None) -> dict[str, object]:
    """`published_ratio`, `published_rows`, `published_source` and `published_band_pct` for a
    finished benchmark or serve row; {} where no published row matches (another GPU, a
    configuration never published, a CPU). The ratio is the row's figure over the published
    median, where higher is better (samples/s, a rate found); the median over the row's for a
    latency (a single stream's p90): below 1 is slower either way."""
    kind = kind_of(row)
    figure = _figure(row)
    if kind not in COMPARED_KINDS or not finished(row, kind) or figure is None:
        return {}
    published = matching_rows(row, folder)
    if not published:
        return {}
    median = statistics.median(_figure(r) or 0.0 for r in published)
    ratio = median / figure if figure_of(row)[1] else figure / median
    sources = sorted(
        {f"{r['published_file']}@{str(r.get('dlbench_commit') or '')[:7]}" for r in published}
    )
    return {
        "published_ratio": ratio,
        "published_rows": len(published),
        "published_source": " ".join(sources),
        "published_band_pct": band_pct(row, published),
    }


def outside_band(row: Mapping[str, object]) -> str:
    """BELOW or ABOVE where the row's published ratio lies outside its band, else ''."""
    ratio = number_or_none(row.get("published_ratio"))
    band = number_or_none(row.get("published_band_pct"))
    if ratio is None or band is None or abs(100.0 * (ratio - 1.0)) <= band:
        return ""
    return BELOW if ratio < 1.0 else ABOVE


def published_line(row: Mapping[str, object]) -> str:
    """One line for the console under the verdict: the ratio to the published rows and whether
    it lies within its band, or that none were published for this GPU and configuration."""
    ratio = number_or_none(row.get("published_ratio"))
    if ratio is None and not row.get("gpu_name"):
        return ""  # dlbench publishes GPUs' figures: a CPU row has nothing to be held against
    if ratio is None:
        return f"published: no published row of {machine(row)} measured this configuration"
    band = float(row["published_band_pct"])  # type: ignore[arg-type]
    where = {BELOW: "below its band", ABOVE: "above its band"}.get(outside_band(row), "within")
    return (
        f"published: {ratio:.3f}x the median of {row['published_rows']} published row(s) of "
        f"this GPU and configuration ({row['published_source']}), {where} (+/-{band:.1f} %)"
    )
