"""Read dlbench CSVs into one pandas frame for analysis; refuse files that are not ours."""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import pandas as pd

from dlbench.errors import UserError, one_line, warn
from dlbench.results.advice import verdict_label
from dlbench.results.pairing import RUN_KEY, finished, machine, release
from dlbench.results.published import (
    RELEASES,
    is_reference,
    own_faults,
    published_files,
    published_folder,
    rows_not_counted,
)
from dlbench.results.schema import NUMBER_COLUMNS, TEXT_COLUMNS, is_true
from dlbench.results.store import CsvStore, NotDlbenchCsv, as_given, one_line_cell
from dlbench.results.upgrade import missing_columns, upgraded


def load_rows(
    paths: list[Path], argument: str = "CSV", figureless: str = "refuse", foreign: bool = False
) -> pd.DataFrame:
    """All rows of the given dlbench CSVs (a folder means every CSV in it), with `source` (file
    name) added; numbers as numbers, ids and versions as the text written. A finished row whose
    figure (samples/s, a rate found) is no positive number: `refuse` names it (the rows judged),
    `warn` leaves it out and says so once a file (a baseline's), `drop` leaves it out (rows
    already said not to count). With `foreign`, a CSV that is not dlbench's (a bare loop's file
    beside the rows) is skipped, each named once in one note; else it is refused."""
    files = [f for p in paths for f in (sorted(Path(p).glob("*.csv")) if Path(p).is_dir() else [p])]
    if not files:
        raise UserError(f"{argument}: give at least one dlbench CSV (or a folder holding some)")
    frames, skipped, refusal = [], [], None
    for path in files:
        if not Path(path).exists():
            raise UserError(f"{argument}: {path} does not exist")
        if not Path(path).is_file():  # a FIFO would hold the reader until someone writes
            raise UserError(f"{argument}: {path} is not a regular file; give a dlbench CSV")
        store = CsvStore(Path(path), flag=argument)
        try:
            header = store.header()  # a UserError for foreign or unreadable files
        except NotDlbenchCsv as exc:
            if not foreign:
                raise
            skipped.append(Path(path).name)
            refusal = refusal or exc
            continue
        if not header:
            raise UserError(f"{argument}: {path} is empty (no header, no rows)")
        store.check_rows()  # a damaged line would shift every column after it
        try:
            frame = pd.read_csv(path, low_memory=False, dtype=dict.fromkeys(TEXT_COLUMNS, str))
        except (pd.errors.ParserError, ValueError, OSError) as exc:
            raise UserError(f"{argument}: cannot read {path}: {one_line(str(exc))}") from None
        for column in frame.columns:  # text as the rows were given (store.spreadsheet_safe),
            if not pd.api.types.is_numeric_dtype(frame[column]):  # a control character escaped
                frame[column] = frame[column].map(lambda v: one_line_cell(as_given(v)))
        if figureless != "refuse":
            frame = _without_rows_of_no_figure(frame, path, argument, figureless == "warn")
        _numbers_as_numbers(frame, path, argument)
        frame = _possible_figures(frame, path, argument, figureless)
        frame = _upgraded(frame)  # one block again: the conversion column by column fragments it
        frame["source"] = Path(path).name
        frames.append(frame)
    if refusal is not None and not frames:  # nothing of ours: the first file's refusal
        raise refusal
    if skipped:
        names = ", ".join(dict.fromkeys(skipped))
        note = f"skipped {len(skipped)} file(s) that hold no dlbench rows (a bare loop's own CSV)"
        print(f"note: {note}: {names}", file=sys.stderr)
    return pd.concat(frames, ignore_index=True, sort=False).copy()  # one block a dtype


def _numbers_as_numbers(frame: pd.DataFrame, path: Path, argument: str) -> None:
    """Finished rows' number columns as numbers: a UserError naming the first cell that is not
    one (a hand-edited file; arithmetic on it ended in a TypeError)."""
    finished = frame["status"] == "ok" if "status" in frame else pd.Series(False, frame.index)
    for column in NUMBER_COLUMNS:
        if column not in frame or pd.api.types.is_numeric_dtype(frame[column]):
            continue
        parsed = pd.to_numeric(frame[column], errors="coerce")
        bad = finished & frame[column].notna() & parsed.isna()
        if bad.any():
            at = bad.idxmax()
            value = frame.at[at, column]
            raise UserError(
                f"{argument}: {path}: {column} holds {value!r} (line {at + 2}), not a number"
            )
        frame[column] = parsed.where(finished, frame[column])


# Measured quantities no run can make negative or infinite (a time, a rate, an energy, a power,
# a size): by their unit's suffix. A share (`_pct`) may be negative (a drift), and so may energy
# above idle (a load that drew less than the idle baseline).
_MEASURED_SUFFIXES = ("_ms", "_s", "_per_s", "_qps", "_tflops", "_j", "_w", "_mb", "_kb", "_us")


def impossible_cells(frame: pd.DataFrame) -> pd.DataFrame:
    """Where a finished row's measured cell is infinite or negative (a hand edit, a timing
    fault): a frame of booleans over the measured columns, in the frame's order."""
    finished = frame["status"] == "ok" if "status" in frame else pd.Series(False, frame.index)
    measured = [
        c for c in frame.columns if c.endswith(_MEASURED_SUFFIXES) and "above_idle" not in c
    ]
    values = frame[measured].apply(pd.to_numeric, errors="coerce")
    impossible = values.notna() & (values.abs().eq(float("inf")) | values.lt(0))
    return impossible.mul(finished, axis=0).astype(bool)


def _possible_figures(
    frame: pd.DataFrame, path: Path, argument: str, figureless: str
) -> pd.DataFrame:
    """The frame with no finished row holding an impossible figure (`impossible_cells`):
    `refuse` names the first, column by column, in a UserError; `warn` leaves such rows out,
    said once a file; `drop` leaves them out."""
    bad = impossible_cells(frame)
    dropped = bad.any(axis=1)
    if not dropped.any():
        return frame
    if figureless == "refuse":
        column = bad.columns[bad.any()][0]
        at = bad[column].idxmax()
        raise UserError(
            f"{argument}: {path}: {column} holds {frame.at[at, column]!r} (line {at + 2}), "
            "which no run measures (infinite or negative); the row cannot be compared or reported"
        )
    if figureless == "warn":
        warn(
            f"{argument}: {path}: {int(dropped.sum())} row(s) holding an infinite or negative "
            "figure do not count"
        )
    return frame[~dropped].reset_index(drop=True)


def _upgraded(frame: pd.DataFrame) -> pd.DataFrame:
    """One file's rows with the columns written after them filled (results.upgrade)."""
    missing = missing_columns(frame.columns)
    if not missing:
        return frame.copy()
    filled = [upgraded(r, missing) for r in frame.to_dict("records")]
    added = pd.DataFrame({c: [r[c] for r in filled] for c in missing}, index=frame.index)
    return pd.concat([frame, added], axis=1).copy()  # one block: later columns add cleanly


def _without_rows_of_no_figure(
    frame: pd.DataFrame, path: Path, argument: str, say: bool
) -> pd.DataFrame:
    """The frame less its rows that do not count (results.published.rows_not_counted)."""
    bad = rows_not_counted(argument, path, frame.to_dict("records"), say)
    return frame[[not b for b in bad]].reset_index(drop=True) if any(bad) else frame


def load_published(folder: Path | None = None) -> pd.DataFrame:
    """The published rows that are references (results.published), read as any CSV is, each
    with `torch_release` and `cuda_release`; an empty frame where the folder holds none. Read
    once a process while its files stay as they were (each report, compare and gate reads
    them; a report spent most of its time there)."""
    files = published_files(folder or published_folder())
    stats = [(path, path.stat()) for path in files]
    stamps = tuple((str(path), stat.st_mtime_ns, stat.st_size) for path, stat in stats)
    return _published_frame(stamps).copy()


@functools.lru_cache(maxsize=8)
def _published_frame(stamps: tuple[tuple[str, int, int], ...]) -> pd.DataFrame:
    files = [Path(name) for name, _, _ in stamps]
    rows = load_rows(files, "the published rows", "drop") if files else pd.DataFrame()
    return with_releases(rows[[is_reference(r) for r in rows.to_dict("records")]])


def with_releases(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows with their torch and CUDA releases (major.minor) as columns of their own."""
    empty = pd.Series("", index=rows.index, dtype=object)
    added = pd.DataFrame({c: rows.get(v, empty).map(release) for v, c in RELEASES.items()})
    kept = rows.drop(columns=[c for c in added if c in rows])
    return pd.concat([kept, added], axis=1).copy()  # consolidated: later columns add cleanly


def require_columns(rows: pd.DataFrame, columns: tuple[str, ...], argument: str) -> None:
    """A UserError when finished benchmark rows lack a column the analysis reads (a file cut
    or edited by hand): named, with the files it came from."""
    if finished_rows(rows).empty:
        return
    missing = [c for c in columns if c not in rows.columns]
    if missing:
        files = ", ".join(sorted(rows["source"].astype(str).unique()))
        raise UserError(f"{argument}: {files} has no {', '.join(missing)} column")


def finished_rows(rows: pd.DataFrame, kind: str = "benchmark") -> pd.DataFrame:
    """The finished runs of one kind (results.pairing.finished): benchmark rows by default,
    or validate, scaling, loader, peak or serve rows; never per-rank or failure rows."""
    if "status" not in rows:
        return rows.iloc[0:0].copy()
    marks = rows.reindex(columns=["status", "run_kind"]).to_dict("records")
    return rows[[finished(r, kind) for r in marks]].copy()


def text_column(rows: pd.DataFrame, column: str, empty: str = "") -> pd.Series:
    """A column as text, `empty` where a cell is empty or the column is absent (rows from
    before it existed); filled as objects, since pandas 3 refuses to put text into a column
    that read as numbers (one whose cells are all empty)."""
    if column not in rows.columns:
        return pd.Series(empty, index=rows.index, dtype=object)
    return rows[column].astype(object).fillna(empty).astype(str)


def split_invalid(runs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Rows valid by their own window and the others, by the rule the published rows count by
    (results.published.own_faults: a row below the published band, or a loader row that waited
    for its loader, is valid by its window; rows from before verdicts existed count as valid):
    ratios use the first only."""
    verdict = text_column(runs, "verdict")
    faulty = [
        bool(own_faults(r)) for r in runs.reindex(columns=["verdict_reasons"]).to_dict("records")
    ]
    invalid = (verdict == "invalid") & pd.Series(faulty, index=runs.index, dtype=bool)
    return runs[~invalid], runs[invalid]


def verdict_labels(rows: pd.DataFrame) -> pd.Series:
    """Each row's verdict as every table prints it (results.advice.verdict_label)."""
    verdict, reasons = text_column(rows, "verdict"), text_column(rows, "verdict_reasons")
    labels = [verdict_label({"verdict": v, "verdict_reasons": r}) for v, r in zip(verdict, reasons)]
    return pd.Series(labels, index=rows.index, dtype=object)


def key_columns(rows: pd.DataFrame, key: tuple[str, ...] | list[str] = RUN_KEY) -> list[str]:
    """The key columns this frame has."""
    return [c for c in key if c in rows.columns]


def latest(rows: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """The newest row of each group (reruns of a point replace older ones)."""
    ordered = rows.sort_values("timestamp", kind="stable")
    return ordered.groupby(by, dropna=False, sort=False).tail(1)


def machine_labels(rows: pd.DataFrame) -> pd.Series:
    """What ran each row (results.pairing.machine)."""
    records = rows.reindex(columns=["gpu_name", "cpu"]).to_dict("records")
    return pd.Series([machine(r) for r in records], index=rows.index, dtype=object)


def flag_column(rows: pd.DataFrame, column: str) -> pd.Series:
    """A True/False column of the CSV as booleans (absent or empty: False), however pandas
    typed it (bool, or text when some rows leave it empty)."""
    return rows.get(column, pd.Series("", index=rows.index)).map(is_true).astype(bool)
