"""The CSV store never tears, never duplicates a header, never damages earlier rows."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

import pytest

from dlbench.errors import UserError
from dlbench.results.store import CsvStore
from tests.conftest import read_rows


def _row(i: int, **extra: object) -> dict[str, object]:
    return {"schema_version": 1, "run_id": f"r{i}", "timestamp": "t", "status": "ok", **extra}


def _append_many(path: str, writer: int, count: int) -> None:
    store = CsvStore(Path(path))
    for i in range(count):
        store.append(_row(writer * 1000 + i, model="m", note='a,b "quoted"'))


def test_concurrent_appends_keep_every_row_and_one_header(tmp_path):
    path = tmp_path / "shared.csv"
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_append_many, args=(str(path), w, 25)) for w in range(8)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    lines = path.read_text().splitlines()
    assert sum(line.startswith("schema_version,") for line in lines) == 1
    rows = read_rows(path)
    assert len(rows) == 200
    assert len({r["run_id"] for r in rows}) == 200
    assert all(r["note"] == 'a,b "quoted"' for r in rows)
    # each holder unlinked the lock as it let go (a waiter that locked an unlinked file took the
    # lock again on the one there): nothing is left beside the CSV
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shared.csv"]


def test_new_columns_rewrite_with_union_and_keep_old_rows(tmp_path):
    store = CsvStore(tmp_path / "r.csv")
    store.append(_row(1, model="a", images_per_s=10.0))
    store.append(_row(2, model="b", images_per_s=20.0, avg_power_w=300))
    rows = read_rows(store.path)
    assert [r["model"] for r in rows] == ["a", "b"]
    assert rows[0]["avg_power_w"] == "" and rows[1]["avg_power_w"] == "300"
    left = list(tmp_path.glob(".r.csv.*"))  # no temporary file, no lock
    assert not left, f"left behind: {left}"


def test_foreign_csv_is_refused_and_left_untouched(tmp_path):
    path = tmp_path / "theirs.csv"
    original = "name,score\nalice,3\n"
    path.write_text(original)
    with pytest.raises(UserError, match="not a dlbench CSV"):
        CsvStore(path).append(_row(1))
    assert path.read_text() == original


def test_unreadable_csv_is_a_user_error(tmp_path):
    path = tmp_path / "bin.csv"
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(UserError, match="cannot read"):
        CsvStore(path).check_writable()


def test_row_after_a_torn_last_line_starts_on_its_own_line(tmp_path):
    store = CsvStore(tmp_path / "r.csv")
    store.append(_row(1, model="a"))
    with store.path.open("a") as f:
        f.write("1,torn")  # a writer killed mid-line, no newline
    store.append(_row(2, model="b"))
    assert store.path.read_text().splitlines()[-1].startswith("1,r2,")


def test_a_lock_held_elsewhere_waits_then_names_itself():
    import tempfile

    from dlbench.results.file_lock import BesideLock, LockBusy

    folder = tempfile.mkdtemp()
    first = BesideLock(f"{folder}/.x.lock", timeout=0)
    first.acquire()
    first.acquire()  # reentrant
    second = BesideLock(f"{folder}/.x.lock", timeout=0.2)
    with pytest.raises(LockBusy):
        second.acquire()
    first.release()
    with pytest.raises(LockBusy):  # still held once
        second.acquire()
    first.release()
    second.acquire()
    second.release()
    import os

    assert os.listdir(folder) == []
