"""Findings of the fuzz harnesses (fuzz/), each minimised to the smallest input that shows it.

A finding whose fix is still pending is marked ``xfail(strict=True)`` with what is wrong: the
test states the behaviour bucketcore must have, fails loudly (XPASS) once the fix lands, and then
loses its marker; the harness that found it stops tolerating it at the same time (each harness
names the findings it tolerates).
"""

from __future__ import annotations

import os
import sqlite3

import numpy as np
import pytest

import bucketcore as bc
import bucketcore.stream as st
from bucketcore import wire


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        if not value:
            out.append(byte)
            return bytes(out)
        out.append(byte | 0x80)


def _entry_with_stamp_fields(fields: bytes) -> bytes:
    """One checksummed entry of one keyless message b"p", its MessageMetadata ending in ``fields``."""
    # producer_name "p", sequence_id 0, publish_time 1, uncompressed_size 9, num_messages 1
    metadata = bytes.fromhex("0a017010001801400048095801") + fields
    payload = bytes.fromhex("000000041801400070")  # SingleMessageMetadata(payload_size 1) + b"p"
    body = len(metadata).to_bytes(4, "big") + metadata + payload
    return b"\x0e\x01" + wire.checksum(body).to_bytes(4, "big") + body


def _stamp(lo: int | None, hi: int | None) -> bytes:
    out = b""
    if lo is not None:
        out += b"\x88\x02" + _varint(lo)  # field 33 (entry_hash_min), varint
    if hi is not None:
        out += b"\x90\x02" + _varint(hi)  # field 34 (entry_hash_max), varint
    return out


def test_the_minimal_stamped_entry_decodes_on_both_paths() -> None:
    """The frame the wire regressions below damage is itself well formed."""
    data = _entry_with_stamp_fields(_stamp(5, 7))
    decoded = wire.decode_entry(data)
    assert (decoded.hash_min, decoded.hash_max) == (5, 7)
    assert [m.payload for m in decoded.messages] == [b"p"]
    assert wire.read_stamp(wire.metadata_of(data)) == (5, 7)


@pytest.mark.parametrize("lo,hi", [(1, 0), (0, 0x10000), (0x10000, 0x10001), (7, None), (None, 7)])
def test_decode_entry_refuses_the_stamps_read_stamp_refuses(lo: int | None, hi: int | None) -> None:
    """Finding (fuzz_wire), fixed: decode_entry returned stamps the fast path refuses."""
    data = _entry_with_stamp_fields(_stamp(lo, hi))
    with pytest.raises(wire.WireFormatError):
        wire.read_stamp(wire.metadata_of(data))
    try:
        decoded = wire.decode_entry(data)
    except wire.WireFormatError:
        return
    raise AssertionError(f"decode_entry accepted the stamp ({decoded.hash_min}, {decoded.hash_max})")


def test_an_empty_stamped_list_routes_nothing() -> None:
    """Finding (fuzz_routing), fixed: an empty list for stamped was refused as dtype float64."""
    sel = bc.EntryBucketSelector(bc.Buckets([0x8000]))
    assert bc.route_entries(sel, [], key_hash=[], stamped=[]).tolist() == []
    assert bc.sticky_hashes([], key_hash=[], stamped=[]).tolist() == []
    dispatcher = bc.Dispatcher(bc.Buckets([0x8000]))
    assert dispatcher.offer([], hash_min=[], stamped=[], key_hash=[]) == 0


@pytest.fixture
def store_path(tmp_path):
    """A closed store holding stream "x": one append of two entries (one stamped)."""
    path = str(tmp_path / "s")
    store = st.StreamStore.open(path)
    store.create_stream("x")
    session = store.open_session("x", "w1")
    store.append("x", [st.EntryPayload(b"A" * 40, 2, b"m", 1, 2), st.EntryPayload(b"B" * 7, 1)], session=session)
    store.close()
    return path


def _read_all(path: str) -> None:
    store = st.StreamStore.open(path)
    try:
        store.read("x", 0, 10)
        store.read_stamps("x")
    finally:
        store.close()


@pytest.mark.parametrize("damage", ["garbage", "schema-byte"])
def test_a_damaged_head_database_is_a_stream_error(store_path: str, damage: str) -> None:
    """Finding (fuzz_stream), fixed: sqlite3's errors (even a UnicodeDecodeError) escaped."""
    heads = os.path.join(store_path, "heads.sqlite3")
    with open(heads, "rb") as f:
        data = bytearray(f.read())
    if damage == "garbage":
        data = bytearray(b"garbage" * 100)
    else:
        # a byte of the schema text sqlite keeps in the file: no longer UTF-8
        at = data.index(b"PRIMARY KEY (stream_id, epoch)")
        data[at + 1] = 0xE1
    with open(heads, "wb") as f:
        f.write(bytes(data))
    with pytest.raises(st.CorruptionError):
        _read_all(store_path)


@pytest.mark.parametrize("column,cut", [("stamps", 1), ("locations", 28)])
def test_a_damaged_index_row_is_a_stream_error(store_path: str, column: str, cut: int) -> None:
    """Finding (fuzz_stream), fixed: numpy's ValueError or an IndexError escaped."""
    db = sqlite3.connect(os.path.join(store_path, "heads.sqlite3"))
    (blob,) = db.execute(f"SELECT {column} FROM appends").fetchone()
    db.execute(f"UPDATE appends SET {column} = ?", (bytes(blob)[:-cut],))
    db.commit()
    db.close()
    with pytest.raises(st.CorruptionError):
        _read_all(store_path)


def test_a_short_key_at_its_allocations_end_among_mixed_lengths_hashes_like_mmh3() -> None:
    """Finding (fuzz_hashing, AddressSanitizer): a group of 16 keys of mixed lengths loaded 16 bytes
    at a short key's tail, past the end of its allocation (a 1-byte bytearray here). The answer was
    right; the read was not. Under the sanitizer build (tools/sanitize.sh, tools/fuzz.sh) this
    test is the proof that no such read is left."""
    mmh3 = pytest.importorskip("mmh3", reason="mmh3 is the reference hash")
    keys: list[bytes | bytearray | str] = [bytearray(b"\xa3"), *[""] * 15]
    want = [mmh3.hash(bytes(k) if not isinstance(k, str) else k.encode(), 0, signed=False) for k in keys]
    assert bc.murmur3_32(keys).tolist() == want
    assert bc.murmur3_32(keys, errors="replace").tolist() == want


# UndefinedBehaviorSanitizer findings: a zero offset added to a NULL pointer (undefined in C, even
# though nothing is read). Each input below is what made the sanitizer build stop; in an ordinary
# build the tests check the answers, under tools/sanitize.sh they are the proof the code is clean.


def test_keyless_keys_among_mixed_lengths_hash_to_zero() -> None:
    """Finding (fuzz_hashing, UBSan): a keyless key (no data pointer) in a 16-key lane group."""
    mmh3 = pytest.importorskip("mmh3", reason="mmh3 is the reference hash")
    kh = bc.hash_keys([None] * 15 + [b"abc"])
    assert kh.raw.tolist() == [0] * 15 + [mmh3.hash(b"abc", 0, signed=False)]
    assert kh.has_key.tolist() == [False] * 15 + [True]


@pytest.mark.parametrize("fmt", ["u", "z", "U", "Z"])
def test_arrow_strings_of_only_empty_values_may_have_no_values_buffer(fmt: str) -> None:
    """Finding (fuzz_arrow, UBSan): an Arrow string array whose values are all empty, handed over
    with a NULL values buffer (allowed: nothing is read from it)."""
    producer_module = pytest.importorskip("arrow_producer", reason="the suite's Arrow C-data producer")
    p = producer_module.Producer()
    offsets = np.zeros(4, dtype=np.int64 if fmt in "UZ" else np.int32)
    kh = bc.hash_keys(p.pair(p.schema(fmt), p.array(3, [None, offsets, None])))
    assert kh.raw.tolist() == [0, 0, 0]
    assert kh.has_key.tolist() == [True, True, True]


def test_read_stamps_of_an_empty_entry_in_an_empty_buffer_is_a_wire_format_error() -> None:
    """Finding (fuzz_wire, UBSan): read_stamps over an empty buffer (no data pointer)."""
    with pytest.raises(wire.WireFormatError, match="entry 0"):
        wire.read_stamps((memoryview(np.zeros(0, dtype=np.uint8)), np.array([0, 0])))


def test_a_property_field_of_the_wrong_wire_type_is_reported_at_its_value() -> None:
    """A KeyValue whose key is a varint: the error names the byte where that varint lies (the
    offset was read from an unset field before, so it was garbage)."""
    # MessageMetadata.properties (field 4, length 2) holding field 1 as the varint 5
    data = _entry_with_stamp_fields(b"\x22\x02\x08\x05")
    value_at = data.index(b"\x22\x02\x08\x05") + 3
    with pytest.raises(wire.WireFormatError, match="MessageMetadata properties") as caught:
        wire.decode_entry(data)
    assert caught.value.offset == value_at
    assert f"at byte {value_at}" in str(caught.value)
