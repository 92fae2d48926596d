"""Damaged entry-index rows: every reader refuses a row that breaks its structure with a
CorruptionError naming the stream, the row (its first offset) and the field — never numpy's or
Python's own errors, never payloads at the wrong offsets or with the wrong stamps.

Runs against both head stores (the rows are damaged in place through the store's own connection).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import bucketcore.stream as st
from bucketcore.stream import EntryPayload, SQLiteHeadStore, StreamStore
from bucketcore.stream.heads import LOCATION_DTYPE, STAMP_DTYPE


@pytest.fixture
def store(tmp_path):
    """Stream "x" of three appends: [0,4) two entries (one stamped), [4,7) one, [7,9) two."""
    s = StreamStore.open(tmp_path / "s")
    s.create_stream("x")
    session = s.open_session("x", "w1")
    s.append("x", [EntryPayload(b"A" * 40, 2, b"m", 1, 2), EntryPayload(b"B" * 7, 2)], session=session)
    s.append("x", [EntryPayload(b"C" * 9, 3, b"meta-c", 10, 20)], session=session)
    s.append("x", [EntryPayload(b"D" * 5, 1), EntryPayload(b"E" * 5, 1, b"e")], session=session)
    yield s
    s.close()


def _execute(s: StreamStore, sql: str, params: tuple) -> None:
    """Run one statement (``?`` placeholders) on the store's head database, behind its back."""
    heads = s._heads
    if isinstance(heads, SQLiteHeadStore):
        heads._db.execute(sql, params)
    else:
        with heads._tx() as cur:  # type: ignore[attr-defined]
            cur.execute(sql.replace("?", "%s"), params)


def _blob(s: StreamStore, column: str, start: int) -> bytes:
    for rows in s._heads.scan_index("x", start, (column,), 1):
        return bytes(rows[0][5])
    raise AssertionError("no row")


def _set_blob(s: StreamStore, column: str, start: int, blob: bytes) -> None:
    _execute(s, f"UPDATE appends SET {column} = ? WHERE stream_id = 'x' AND start_offset = ?", (blob, start))


def _edit(s: StreamStore, column: str, start: int, dtype: np.dtype, change: Callable[[np.ndarray], None]) -> None:
    records = np.frombuffer(_blob(s, column, start), dtype=dtype).copy()
    change(records)
    _set_blob(s, column, start, records.tobytes())


def _refused(s: StreamStore, *, offset: int, match: str, stamps_too: bool = True) -> None:
    """Both readers (or read alone) refuse, naming stream "x", the row's offset and ``match``."""
    readers = [lambda: s.read("x", 0, 100)]
    if stamps_too:
        readers.append(lambda: s.read_stamps("x"))
    for reader in readers:
        with pytest.raises(st.CorruptionError, match=match) as info:
            reader()
        assert "stream 'x'" in str(info.value)
        assert f"append at offset {offset} " in str(info.value)
        assert isinstance(info.value, st.StreamError)


def test_the_undamaged_fixture_reads_back(store) -> None:
    assert [e.start_offset for e in store.read("x", 0, 100)] == [0, 2, 4, 7, 8]
    assert store.read_stamps("x").end_offset.tolist() == [2, 4, 7, 8, 9]


@pytest.mark.parametrize("cut", [1, 24, 25])
def test_a_stamps_blob_of_partial_records_is_a_corruption_error(store, cut: int) -> None:
    _set_blob(store, "stamps", 0, _blob(store, "stamps", 0)[:-cut])
    _refused(store, offset=0, match="stamps holds")
    # the rows after it stay readable
    assert [e.payload for e in store.read("x", 4, 10)] == [b"C" * 9, b"D" * 5, b"E" * 5]
    assert store.read_stamps("x", 7).start_offset.tolist() == [7, 8]


def test_a_locations_blob_shorter_than_the_entry_count_is_a_corruption_error(store) -> None:
    _set_blob(store, "locations", 0, _blob(store, "locations", 0)[:-28])
    _refused(store, offset=0, match="locations holds", stamps_too=False)
    assert store.read_stamps("x").start_offset.tolist() == [0, 2, 4, 7, 8]  # stamps need no locations


def test_an_entry_count_that_disagrees_with_the_blobs_is_a_corruption_error(store) -> None:
    _execute(store, "UPDATE appends SET entry_count = 3 WHERE stream_id = 'x' AND start_offset = 4", ())
    _refused(store, offset=4, match="entry_count 3 exceeds the 3 records|stamps holds 25 bytes")


@pytest.mark.parametrize(
    "entry,start,match",
    [
        (0, 1, "entry 0 starts at 1, not at the row's start_offset"),
        (1, 0, "entry 1 starts at 0, not after entry 0's start 0"),
        (1, 9, "the last entry starts at 9, not before end_offset 4"),
        (1, -5, "entry 1 starts at -5"),
    ],
)
def test_start_offsets_out_of_place_are_a_corruption_error(store, entry: int, start: int, match: str) -> None:
    def change(r: np.ndarray) -> None:
        r["start_offset"][entry] = start

    _edit(store, "stamps", 0, STAMP_DTYPE, change)
    _refused(store, offset=0, match=match)


@pytest.mark.parametrize(
    "field,value,match",
    [
        ("stamped", 2, "entry 1: stamped is 2, not 0 or 1"),
        ("hash_min", 9, r"entry 1: an unstamped entry has hashes \(9, 0\)"),
        ("segment_id", -2, "entry 1: segment_id is -2"),
        ("bucket", -7, "entry 1: bucket is -7"),
    ],
)
def test_impossible_stamp_fields_are_a_corruption_error(store, field: str, value: int, match: str) -> None:
    def change(r: np.ndarray) -> None:
        r[field][1] = value

    _edit(store, "stamps", 0, STAMP_DTYPE, change)
    _refused(store, offset=0, match=match)


def test_a_reversed_stamp_is_a_corruption_error(store) -> None:
    def change(r: np.ndarray) -> None:
        r["hash_min"][0], r["hash_max"][0] = 7, 3

    _edit(store, "stamps", 0, STAMP_DTYPE, change)
    _refused(store, offset=0, match=r"entry 0: the stamp \(7, 3\) has hash_min > hash_max")


@pytest.mark.parametrize(
    "field,value,match",
    [
        ("payload_off", 10**6, "entry 1's payload .* ends past the object's data"),
        ("payload_off", -1, "entry 1's payload starts at -1"),
        ("payload_len", 10**6, "entry 1's payload .* ends past the object's data"),
        ("payload_len", -3, "entry 1's payload length is -3"),
        ("meta_off", 5, "entry 1's meta_off 5 is past the 1 metadata bytes"),
    ],
)
def test_locations_outside_their_object_are_a_corruption_error(store, field: str, value: int, match: str) -> None:
    def change(r: np.ndarray) -> None:
        r[field][1] = value

    _edit(store, "locations", 0, LOCATION_DTYPE, change)
    _refused(store, offset=0, match=match, stamps_too=False)


def test_overlapping_payloads_are_a_corruption_error(store) -> None:
    def change(r: np.ndarray) -> None:
        r["payload_off"][0] = r["payload_off"][1] - 1

    _edit(store, "locations", 7, LOCATION_DTYPE, change)
    _refused(store, offset=7, match="entry 0's payload .* overlaps the next one", stamps_too=False)


def test_a_missing_index_row_is_a_corruption_error(store) -> None:
    _execute(store, "DELETE FROM appends WHERE stream_id = 'x' AND start_offset = 4", ())
    _refused(store, offset=0, match="end_offset 4 is not the next row's start_offset 7: a row is missing")


def test_trim_into_a_damaged_row_is_a_corruption_error(store) -> None:
    _set_blob(store, "stamps", 4, _blob(store, "stamps", 4)[:-1])
    with pytest.raises(st.CorruptionError, match="append at offset 4 .*stamps holds"):
        store.trim("x", 5)
    assert store.head("x").log_start == 0  # nothing was trimmed


@pytest.mark.parametrize(
    "column,dtype,field,entry,delta",
    [
        ("stamps", STAMP_DTYPE, "start_offset", 1, 1),  # entry 1 starts at 3, still inside [0, 4)
        ("stamps", STAMP_DTYPE, "hash_max", 0, 1),  # the stamp (1, 3) instead of (1, 2)
        ("stamps", STAMP_DTYPE, "segment_id", 0, 5),
        ("locations", LOCATION_DTYPE, "payload_off", 0, -1),  # onto its metadata byte: inside, no overlap
        ("locations", LOCATION_DTYPE, "payload_crc", 0, 1),
        ("locations", LOCATION_DTYPE, "meta_off", 1, -1),
    ],
)
def test_damage_that_keeps_the_structure_fails_the_row_checksum(
    store, column: str, dtype: np.dtype, field: str, entry: int, delta: int
) -> None:
    def change(r: np.ndarray) -> None:
        r[field][entry] += delta

    _edit(store, column, 0, dtype, change)
    crc = "stamps_crc" if column == "stamps" else "locations_crc"
    _refused(store, offset=0, match=f"{crc} .* does not match", stamps_too=column == "stamps")


def test_a_metadata_byte_changed_fails_the_row_checksum(store) -> None:
    _set_blob(store, "metadata", 4, b"meta-C")
    _refused(store, offset=4, match="locations_crc .* does not match", stamps_too=False)


def test_a_row_moved_to_another_range_fails_the_row_checksum(store) -> None:
    # the row [7, 9) renumbered as [7, 10): structurally whole, its checksum covers the range
    _execute(store, "UPDATE appends SET end_offset = 10 WHERE stream_id = 'x' AND start_offset = 7", ())
    with pytest.raises(st.CorruptionError, match="append at offset 7 .*stamps_crc .* does not match"):
        store.read_stamps("x", 7)


def test_rows_without_checksums_are_read_by_their_structure_alone(store) -> None:
    """Rows written before the checksums (schema 1) hold NULL there and stay readable."""
    _execute(store, "UPDATE appends SET stamps_crc = NULL, locations_crc = NULL WHERE stream_id = 'x'", ())
    assert [e.payload for e in store.read("x", 0, 100)] == [b"A" * 40, b"B" * 7, b"C" * 9, b"D" * 5, b"E" * 5]
    assert store.read_stamps("x").start_offset.tolist() == [0, 2, 4, 7, 8]
    _set_blob(store, "stamps", 0, _blob(store, "stamps", 0)[:-1])
    _refused(store, offset=0, match="stamps holds")  # the structure is still checked


def test_a_schema_1_store_is_upgraded_and_keeps_its_rows_readable(tmp_path) -> None:
    path = tmp_path / "old"
    with StreamStore.open(path) as s:
        s.create_stream("x")
        session = s.open_session("x", "w1")
        s.append("x", [EntryPayload(b"old", 2, b"m", 3, 4)], session=session)
        # back to the layout of schema 1: no checksum columns
        _execute(s, "ALTER TABLE appends DROP COLUMN stamps_crc", ())
        _execute(s, "ALTER TABLE appends DROP COLUMN locations_crc", ())
        _execute(s, "UPDATE meta SET value = '1' WHERE key = 'schema'", ())
    with StreamStore.open(path) as s:
        session = s.open_session("x", "w1")
        s.append("x", [EntryPayload(b"new", 1)], session=session)
        assert [(e.payload, e.hash_min) for e in s.read("x")] == [(b"old", 3), (b"new", None)]
        assert s.read_stamps("x").end_offset.tolist() == [2, 3]
        rows = [r for batch in s._heads.scan_index("x", 0, ("stamps_crc", "locations_crc"), 10) for r in batch]
        assert [r[5] is None for r in rows] == [True, False]  # the new row is checksummed
    with StreamStore.open(path) as s:
        _set_blob(s, "stamps", 2, _blob(s, "stamps", 2)[:0] + _blob(s, "stamps", 2)[:8] + b"\x00" * 17)
        with pytest.raises(st.CorruptionError, match="append at offset 2 .*stamps_crc"):
            s.read_stamps("x")


def test_the_row_checksums_are_the_documented_crc32c(store) -> None:
    """docs/stream.md's layout: stream id and object key (u16 length + UTF-8), start, end, entry
    count and object length (i64 each), the stamps; then on over the locations and metadata."""
    import struct

    import google_crc32c

    columns = ("stamps", "locations", "metadata", "stamps_crc", "locations_crc")
    rows = [r for batch in store._heads.scan_index("x", 0, columns, 10) for r in batch]
    assert len(rows) == 3
    for start, end, n, key, length, stamps, locations, metadata, stamps_crc, locations_crc in rows:
        head = b"".join(
            [
                struct.pack("<H", len(b"x")),
                b"x",
                struct.pack("<H", len(key)),
                key.encode(),
                struct.pack("<qqqq", start, end, n, length),
            ]
        )
        first = google_crc32c.value(head + bytes(stamps))
        assert stamps_crc == first
        assert locations_crc == google_crc32c.extend(google_crc32c.extend(first, bytes(locations)), bytes(metadata))
