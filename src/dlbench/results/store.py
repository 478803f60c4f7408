"""The CSV store: one row per run, appended under a file lock, never damaging earlier rows."""

from __future__ import annotations

import contextlib
import csv
import io
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from dlbench.errors import UserError
from dlbench.results.file_lock import BesideLock, LockBusy
from dlbench.results.schema import COLUMNS, IDENTITY_COLUMNS

LOCK_TIMEOUT_S = 120
# A cell a spreadsheet would read as a formula (OWASP's CSV injection): written after an
# apostrophe, which spreadsheets show as text; text that starts with an apostrophe gets one
# more, so that reading back takes exactly one off and returns what was given.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
TEXT_MARK = "'"


def spreadsheet_safe(value: object) -> object:
    """`value` as written to a cell: text a spreadsheet would run as a formula gets TEXT_MARK
    in front; numbers (-1.5, as text too) and everything else stay as they are."""
    if not isinstance(value, str) or not value.startswith((*FORMULA_STARTS, TEXT_MARK)):
        return value
    try:
        float(value)
        return value
    except ValueError:
        return TEXT_MARK + value


def as_given(cell: object) -> object:
    """`spreadsheet_safe` undone: the text the row was given."""
    if isinstance(cell, str) and cell.startswith(TEXT_MARK):
        rest = cell[1:]
        if rest.startswith((*FORMULA_STARTS, TEXT_MARK)):
            return rest
    return cell


# Control characters in a text cell (a line break, a NUL) written as the escapes Python uses:
# a cell stays on its line for dlbench, pandas and a spreadsheet, and no NUL reaches a report.
_CONTROL = {c: repr(chr(c))[1:-1] for c in (*range(0x20), 0x7F) if chr(c) != "\t"}


def one_line_cell(value: object) -> object:
    """A text cell with its control characters escaped (`\\n`, `\\x00`); others as they are."""
    return value.translate(_CONTROL) if isinstance(value, str) else value


def _safe_rows(rows: list[dict[str, object]]) -> list[dict[str, object]]:
    return [{k: spreadsheet_safe(one_line_cell(v)) for k, v in row.items()} for row in rows]


class NotDlbenchCsv(UserError):
    """A readable CSV without dlbench's identity columns (a bare loop's file, another tool's)."""


class CsvStore:
    """A dlbench CSV; a row with new columns rewrites the file atomically with their union."""

    def __init__(self, path: Path, flag: str = "--output") -> None:
        self.path = Path(path)
        self.flag = flag  # what the user named the file with, for messages
        # What a symlink names: rewrites replace that file, not the link, and two names of one
        # file share its lock.
        self._file = Path(os.path.realpath(self.path))
        self._lock = BesideLock(self.beside(".lock"), timeout=LOCK_TIMEOUT_S)

    def beside(self, suffix: str) -> str:
        """A hidden path beside the file itself (a lock: `.NAME.csv.lock`), the same under every
        name of the file; a results folder lists the CSVs, not a lock for each."""
        return str(self._file.parent / f".{self._file.name}{suffix}")

    def check_writable(self) -> None:
        """Fail early, before anything runs: the folder must be writable and the file ours."""
        writable_folder(self._file.parent, self.flag, shown=self.path)
        if not self.path.exists():
            return
        if not self.path.is_file():  # /dev/null would be replaced by root, /dev/full read forever
            raise UserError(f"{self.flag}: {self.path} is not a regular file; name a .csv file")
        if not os.access(self.path, os.W_OK):
            raise UserError(f"{self.flag}: {self.path} is not writable")
        self.check_rows()

    def check_rows(self) -> None:
        """A UserError for a damaged line: more fields than the header (every column after
        them shifts), or a quote left open (it swallows the lines after it, a row appended
        later too). A short line is a row whose writer was killed mid-line: readers see its
        missing cells as empty, and the next row starts on a line of its own."""
        header = self.header()
        with self._opened() as f:
            reader = csv.reader(f)
            next(reader, None)
            try:
                for fields in reader:
                    open_quote = any("\n" in v or "\r" in v for v in fields)
                    if len(fields) > len(header) or open_quote:
                        raise UserError(
                            f"{self.flag}: {self.path} line {reader.line_num} holds "
                            f"{len(fields)} fields where its header names {len(header)}"
                            f"{', a quote left open' if open_quote else ''} (a damaged or "
                            "hand-edited file); it was left untouched"
                        )
            except csv.Error as exc:
                raise UserError(f"{self.flag}: cannot read {self.path}: {exc}") from None
            except UnicodeDecodeError as exc:
                raise self._not_text(exc) from None

    @contextlib.contextmanager
    def _opened(self) -> Iterator[io.TextIOBase]:
        """The file open for reading as UTF-8 text: a UserError for what is no regular file
        (a FIFO would hold the reader until someone writes to it) or cannot be opened."""
        if self.path.exists() and not self.path.is_file():
            raise UserError(f"{self.flag}: {self.path} is not a regular file; name a .csv file")
        try:
            f = self.path.open(newline="", encoding="utf-8-sig")
        except OSError as exc:
            raise UserError(f"{self.flag}: cannot read {self.path}: {exc.strerror}") from None
        with f:
            yield f

    def _not_text(self, exc: UnicodeDecodeError) -> UserError:
        return UserError(
            f"{self.flag}: cannot read {self.path}: not UTF-8 text ({exc.reason}); it was left "
            "untouched"
        )

    def header(self) -> list[str]:
        """The existing header; a UserError if the file is unreadable or not a dlbench CSV."""
        try:
            with self._opened() as f:
                first = next(csv.reader(f), [])
        except UnicodeDecodeError as exc:
            raise self._not_text(exc) from None
        except csv.Error as exc:
            raise UserError(f"{self.flag}: cannot read {self.path}: {exc}") from None
        if not first:
            return []
        twice = sorted({c for c in first if first.count(c) > 1})
        if twice:
            names = ", ".join(twice)
            raise UserError(f"{self.flag}: {self.path} names {names} twice in its header")
        missing = [c for c in IDENTITY_COLUMNS if c not in first]
        if missing:
            raise NotDlbenchCsv(
                f"{self.flag}: {self.path} is not a dlbench CSV (no {', '.join(missing)} column); "
                "it was left untouched, choose another file"
            )
        return first

    def append(self, row: dict[str, object]) -> None:
        """Add one row; concurrent writers serialise on the lock, so no tearing, one header."""
        self.append_many([row])

    def append_many(self, new: list[dict[str, object]]) -> None:
        """Add rows together under one lock (a run's per-rank rows stay adjacent)."""
        self.check_writable()
        keys = [k for row in new for k in row]
        with held(self._lock, self.flag, f"another process kept {self.path} locked"):
            header = self.header() if self.path.exists() else []
            if not header:
                self._write_new(_ordered(keys), new)
            elif set(keys) <= set(header):
                self._append_lines(header, new)
            else:
                self._write_new(_ordered([*header, *keys]), [*self.rows(), *new])

    def rows(self) -> list[dict[str, str]]:
        """All rows as dicts of strings (analysis reads the file with pandas instead)."""
        if not self.path.exists():
            return []
        self.header()
        with self._opened() as f:
            try:
                return [{k: as_given(v) for k, v in row.items()} for row in csv.DictReader(f)]
            except UnicodeDecodeError as exc:
                raise self._not_text(exc) from None
            except csv.Error as exc:
                raise UserError(f"{self.flag}: cannot read {self.path}: {exc}") from None

    def _append_lines(self, header: list[str], rows: list[dict[str, object]]) -> None:
        buf = io.StringIO()
        csv.DictWriter(buf, fieldnames=header, lineterminator="\n").writerows(_safe_rows(rows))
        data = buf.getvalue().encode()
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND)  # read: its last byte
        size = os.fstat(fd).st_size
        try:
            if size and os.pread(fd, 1, size - 1) != b"\n":  # a torn last line: start a new one
                data = b"\n" + data
            written = 0
            while written < len(data):  # a full disk writes part, then raises
                written += os.write(fd, data[written:])
            os.fsync(fd)
        except OSError as exc:
            os.ftruncate(fd, size)  # no half row after the earlier ones
            raise self._not_written(exc) from None
        finally:
            os.close(fd)

    def _not_written(self, exc: OSError) -> UserError:
        return UserError(
            f"{self.flag}: cannot write {self.path}: {exc.strerror or exc}; this run's row was "
            "not written, the earlier rows are as they were"
        )

    def _write_new(self, header: list[str], rows: list[dict[str, object]]) -> None:
        """Write to a temporary file beside the target, then rename over it (atomic)."""
        folder = self._file.parent
        fd, tmp = tempfile.mkstemp(prefix=f".{self._file.name}.", dir=folder)
        try:
            with os.fdopen(fd, "w", newline="", encoding="utf-8") as f:
                writer = csv.DictWriter(f, fieldnames=header, lineterminator="\n")
                writer.writeheader()
                writer.writerows(_safe_rows(rows))
                f.flush()
                os.fsync(f.fileno())
            _match_owner(Path(tmp), self._file if self._file.exists() else folder)
            os.chmod(tmp, 0o644)
            os.replace(tmp, self._file)
        except OSError as exc:
            Path(tmp).unlink(missing_ok=True)
            raise self._not_written(exc) from None
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def writable_folder(folder: Path, flag: str, shown: Path | None = None) -> None:
    """Make `folder` if it is missing; a UserError naming `flag` unless files can go in it
    (`shown`: the path the message names, the file to be written if not the folder)."""
    if folder.exists() and not folder.is_dir():
        raise UserError(f"{flag}: {folder} exists and is not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"{flag}: cannot create folder {folder}: {exc.strerror or exc}") from None
    try:  # a real file, not os.access: root passes that check on /proc, /sys and read-only mounts
        fd, probe = tempfile.mkstemp(prefix=".dlbench-probe.", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise UserError(f"{flag}: {shown or folder} is not writable ({exc.strerror})") from None


def check_side_file(path: Path | None, flag: str) -> None:
    """A file a run writes beside its rows (a telemetry log), refused before anything is
    measured where it could not be written: a folder, no regular file, a folder that takes no
    file. Found only as the window ended, it cost the run its row."""
    if path is None:
        return
    if path.is_dir():
        raise UserError(f"{flag}: {path} is a folder; name a file")
    if path.exists() and not path.is_file():
        raise UserError(f"{flag}: {path} is not a regular file; name a .csv file")
    writable_folder(path.parent, flag, shown=path)


@contextlib.contextmanager
def held(lock: BesideLock, flag: str, busy: str) -> Iterator[None]:
    """`lock` held for the block; a UserError naming `flag` where another process holds it
    past its timeout (`busy` says who) or the filesystem takes no lock file."""
    try:
        lock.acquire()
    except LockBusy:
        raise UserError(f"{flag}: {busy} (it holds {lock.lock_file})") from None
    except OSError as exc:
        raise UserError(f"{flag}: cannot create {lock.lock_file}: {exc.strerror}") from None
    try:
        yield
    finally:
        lock.release()


def _ordered(columns) -> list[str]:
    """Known columns in schema order first, then any others in the order they came."""
    seen = list(dict.fromkeys(columns))
    known = [c for c in COLUMNS if c in seen]
    return known + [c for c in seen if c not in COLUMNS]


def _match_owner(path: Path, like: Path) -> None:
    """Run as root in a container, give the file to the owner of the mounted folder."""
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        st = like.stat()
        os.chown(path, st.st_uid, st.st_gid)
