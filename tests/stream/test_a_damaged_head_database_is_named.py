"""A damaged head database: no sqlite3 or psycopg error, no UnicodeDecodeError leaves the stream
store; a damaged file or page is a CorruptionError naming the file (or server), any other failure
of the database a StreamError naming it.

The SQLite tests damage the file itself, so they run once (``ONE_HEAD_STORE``: the PostgreSQL
fixture does not repeat this module as it does the other stream modules); the PostgreSQL test
damages a page of its own table in the throw-away server.
"""

from __future__ import annotations

import os
import sqlite3

import pytest

import bucketcore.stream as st
from bucketcore.stream import EntryPayload, StreamStore

ONE_HEAD_STORE = True  # tests/pg_fixture.py: these tests choose their head store themselves


@pytest.fixture
def path(tmp_path) -> str:
    """A closed store holding stream "x": one append of two entries (one stamped)."""
    where = str(tmp_path / "s")
    with StreamStore.open(where) as s:
        s.create_stream("x")
        session = s.open_session("x", "w1")
        s.append("x", [EntryPayload(b"A" * 40, 2, b"m", 1, 2), EntryPayload(b"B" * 7, 1)], session=session)
    return where


def _heads(path: str) -> str:
    return os.path.join(path, "heads.sqlite3")


def _read_all(path: str) -> None:
    with StreamStore.open(path) as s:
        s.read("x", 0, 10)
        s.read_stamps("x")


def _rewrite(path: str, change) -> None:  # type: ignore[no-untyped-def]
    with open(_heads(path), "rb") as f:
        data = bytearray(f.read())
    change(data)
    with open(_heads(path), "wb") as f:
        f.write(bytes(data))


def test_a_store_closed_cleanly_leaves_no_journal_to_replay(path: str) -> None:
    """The damage below goes to the one file that holds everything (no -wal file to replay)."""
    assert not os.path.exists(_heads(path) + "-wal") or os.path.getsize(_heads(path) + "-wal") == 0
    _read_all(path)


def test_a_file_that_is_not_a_database_is_a_corruption_error_naming_it(path: str) -> None:
    _rewrite(path, lambda data: data.__setitem__(slice(None), b"garbage" * 100))
    with pytest.raises(st.CorruptionError, match=rf"{_heads(path)} is damaged: file is not a database"):
        StreamStore.open(path)


def test_schema_text_that_is_not_utf8_is_a_corruption_error_naming_the_file(path: str) -> None:
    def damage(data: bytearray) -> None:
        at = data.index(b"PRIMARY KEY (stream_id, epoch)")
        data[at + 1] = 0xE1

    _rewrite(path, damage)
    with pytest.raises(st.CorruptionError, match=rf"{_heads(path)} is damaged") as info:
        _read_all(path)
    assert isinstance(info.value.__cause__, (sqlite3.DatabaseError, UnicodeDecodeError))


def test_a_malformed_page_of_the_index_is_a_corruption_error_naming_the_file(path: str) -> None:
    db = sqlite3.connect(_heads(path))
    page_size = db.execute("PRAGMA page_size").fetchone()[0]
    (root,) = db.execute("SELECT rootpage FROM sqlite_master WHERE name = 'appends'").fetchone()
    db.close()

    def damage(data: bytearray) -> None:
        start = (root - 1) * page_size
        data[start : start + 12] = b"\xff" * 12  # the b-tree page header: an impossible page type

    _rewrite(path, damage)
    with pytest.raises(st.CorruptionError, match=rf"{_heads(path)} is damaged: .*malformed"):
        _read_all(path)


def test_text_that_is_not_utf8_in_an_index_row_is_a_corruption_error(path: str) -> None:
    db = sqlite3.connect(_heads(path))
    db.execute("UPDATE appends SET object_key = CAST(x'ff00' AS TEXT)")
    db.commit()
    db.close()
    with StreamStore.open(path) as s:
        assert s.head("x").committed_end == 3  # the head is intact
        with pytest.raises(st.CorruptionError, match="not UTF-8"):
            s.read("x")
        with pytest.raises(st.CorruptionError, match="not UTF-8"):
            s.read_stamps("x")


def test_an_index_blob_stored_as_text_is_a_corruption_error_naming_the_field(path: str) -> None:
    db = sqlite3.connect(_heads(path))
    db.execute("UPDATE appends SET stamps = 'text'")
    db.commit()
    db.close()
    with StreamStore.open(path) as s:
        with pytest.raises(st.CorruptionError, match="append at offset 0 .*stamps is a str, not bytes"):
            s.read_stamps("x")


def test_a_head_file_sqlite_cannot_open_is_a_stream_error_naming_it(tmp_path) -> None:
    where = tmp_path / "s"
    os.makedirs(where / "heads.sqlite3")  # a directory where the database file should be
    with pytest.raises(st.StreamError, match="heads.sqlite3") as info:
        StreamStore.open(where)
    assert not isinstance(info.value, st.CorruptionError)


def test_a_corrupt_page_in_postgresql_is_a_corruption_error_naming_the_server(tmp_path, pg_server, pg_url) -> None:
    import psycopg

    with StreamStore.open(tmp_path / "s", heads=pg_url) as s:
        s.create_stream("x")
        session = s.open_session("x", "w1")
        s.append("x", [EntryPayload(b"A" * 40, 2, b"m", 1, 2)], session=session)
        with psycopg.connect(pg_url, autocommit=True) as conn:
            (relpath,) = conn.execute("SELECT pg_relation_filepath('appends')").fetchone()
    pg_server.stop()  # a clean stop writes every page to its file
    try:
        with open(os.path.join(pg_server.data, relpath), "r+b") as f:
            f.seek(12)
            f.write(b"\xff" * 8)  # pd_lower, pd_upper, pd_special, pd_pagesize_version
    finally:
        pg_server.start()
    with StreamStore.open(tmp_path / "s", heads=pg_url) as s:
        assert s.head("x").committed_end == 2  # another table: readable
        with pytest.raises(st.CorruptionError, match="head store at PostgreSQL .* is damaged: invalid page"):
            s.read("x")
