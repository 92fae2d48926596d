"""Damaged WAL objects: a flipped byte, a truncated object and a missing object are each detected on
read with an error naming the object, and every other object of the stream stays readable."""

from __future__ import annotations

import os

import pytest

import bucketcore.stream as st
from bucketcore.stream import EntryPayload, StreamStore
from bucketcore.stream.wal import ObjectWal


@pytest.fixture
def stream(tmp_path):
    """A stream of three appends (objects): [0,4) two entries, [4,7) one entry, [7,9) two entries."""
    s = StreamStore.open(tmp_path / "s")
    s.create_stream("x")
    session = s.open_session("x", "w1")
    results = [
        s.append(
            "x", [EntryPayload(b"A" * 64, 2, hash_min=1, hash_max=2), EntryPayload(b"B" * 64, 2)], session=session
        ),
        s.append("x", [EntryPayload(b"C" * 64, 3, b"meta-c", 10, 20)], session=session),
        s.append("x", [EntryPayload(b"D" * 64, 1), EntryPayload(b"E" * 64, 1)], session=session),
    ]
    yield s, results
    s.close()


def _object(s: StreamStore, key: str) -> str:
    return os.path.join(s.path, "wal", key)


def _others_still_readable(s: StreamStore) -> None:
    assert [e.payload[:1] for e in s.read("x", 0, 2)] == [b"A", b"B"]
    assert [e.payload[:1] for e in s.read("x", 7, 10)] == [b"D", b"E"]
    stamps = s.read_stamps("x")  # stamps come from the index: no payload is read
    assert stamps.start_offset.tolist() == [0, 2, 4, 7, 8]


def test_flipped_payload_byte_is_a_checksum_error_naming_the_object(stream) -> None:
    s, results = stream
    key = results[1].read_target.object_key
    with open(_object(s, key), "r+b") as f:
        data = bytearray(f.read())
        pos = data.index(b"C" * 64) + 17
        f.seek(pos)
        f.write(bytes([data[pos] ^ 0x01]))
    with pytest.raises(st.ChecksumError, match=key) as err:
        s.read("x", 4)
    assert not isinstance(err.value, st.MissingObjectError)
    with pytest.raises(st.ChecksumError, match="offset 4"):
        s.read("x", 0, 10)  # a read running into the damaged entry stops there, loudly
    _others_still_readable(s)


def test_flipped_byte_in_one_entry_leaves_its_neighbour_in_the_same_object_readable(stream) -> None:
    s, results = stream
    key = results[0].read_target.object_key
    with open(_object(s, key), "r+b") as f:
        data = bytearray(f.read())
        pos = data.index(b"B" * 64)
        f.seek(pos)
        f.write(b"b")
    assert [e.payload for e in s.read("x", 0, 1)] == [b"A" * 64]
    with pytest.raises(st.ChecksumError, match=key):
        s.read("x", 2, 1)


def test_truncated_object_is_detected_by_its_declared_length(stream) -> None:
    s, results = stream
    key = results[1].read_target.object_key
    length = results[1].read_target.length
    with open(_object(s, key), "r+b") as f:
        f.truncate(length - 10)
    with pytest.raises(st.ChecksumError, match=rf"{key}.*{length - 10} bytes.*{length}"):
        s.read("x", 4)
    _others_still_readable(s)


def test_missing_object_is_a_missing_object_error(stream) -> None:
    s, results = stream
    key = results[1].read_target.object_key
    os.unlink(_object(s, key))
    with pytest.raises(st.MissingObjectError, match=key) as err:
        s.read("x", 5)
    assert isinstance(err.value, st.ChecksumError)
    _others_still_readable(s)


def test_whole_object_validation_catches_a_flip_outside_the_payloads(stream) -> None:
    s, results = stream
    target = results[2].read_target
    wal = ObjectWal(os.path.join(s.path, "wal"))
    wal.validate(target.object_key, target.length, target.crc32c)  # intact: passes
    with open(_object(s, target.object_key), "r+b") as f:
        f.seek(12)  # inside the header
        b = f.read(1)
        f.seek(12)
        f.write(bytes([b[0] ^ 0x80]))
    with pytest.raises(st.ChecksumError, match=target.object_key):
        wal.validate(target.object_key, target.length, target.crc32c)
