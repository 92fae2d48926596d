"""Bad input to the stream store: each a clear error naming what was wrong, and nothing written."""

from __future__ import annotations

import pytest
from stream_support import snapshot

import bucketcore.stream as st
from bucketcore.stream import EntryPayload, StreamStore


@pytest.fixture
def store(tmp_path):
    s = StreamStore.open(tmp_path / "s")
    s.create_stream("x")
    s.append("x", [EntryPayload(b"seed", 2)], session=s.open_session("x", "w0"))
    yield s
    s.close()


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"payload": "text"}, TypeError, "payload must be bytes"),
        ({"payload": None}, TypeError, "payload must be bytes"),
        ({"payload": [1, 2]}, TypeError, "payload must be bytes"),
        ({"payload": b"p", "record_count": 0}, ValueError, "record_count must be >= 1"),
        ({"payload": b"p", "record_count": -3}, ValueError, "record_count must be >= 1"),
        ({"payload": b"p", "record_count": 2**32}, ValueError, "record_count"),
        ({"payload": b"p", "record_count": 1.0}, TypeError, "record_count must be an int"),
        ({"payload": b"p", "record_count": True}, TypeError, "record_count must be an int"),
        ({"payload": b"p", "record_count": None}, TypeError, "record_count"),
        ({"payload": b"p", "metadata": "m"}, TypeError, "metadata must be bytes"),
        ({"payload": b"p", "hash_min": 3}, ValueError, "both hash_min and hash_max"),
        ({"payload": b"p", "hash_max": 3}, ValueError, "both hash_min and hash_max"),
        ({"payload": b"p", "hash_min": 9, "hash_max": 3}, ValueError, "hash_min 0x0009 > hash_max 0x0003"),
        ({"payload": b"p", "hash_min": -1, "hash_max": 3}, ValueError, "hash_min -1 is outside 0..0xFFFF"),
        ({"payload": b"p", "hash_min": 1, "hash_max": 0x10000}, ValueError, "hash_max 65536 is outside 0..0xFFFF"),
        ({"payload": b"p", "segment_id": -1}, ValueError, "segment_id"),
        ({"payload": b"p", "bucket": "0"}, TypeError, "bucket must be an int"),
    ],
)
def test_malformed_entry_payload_names_the_field(kwargs, error, match) -> None:
    with pytest.raises(error, match=match):
        EntryPayload(**kwargs)


def test_entry_payload_freezes_its_bytes() -> None:
    buf = bytearray(b"abc")
    e = EntryPayload(buf, metadata=memoryview(b"m"))
    buf[0] = ord("z")
    assert e.payload == b"abc" and e.metadata == b"m" and type(e.payload) is bytes


@pytest.mark.parametrize(
    "entries, error, match",
    [
        ([], ValueError, "entries is empty"),
        ((), ValueError, "entries is empty"),
        (EntryPayload(b"a"), TypeError, "entries must be a list or tuple"),
        ([EntryPayload(b"a"), b"raw"], TypeError, r"entries\[1\] must be an EntryPayload, not bytes"),
        ([{"payload": b"a"}], TypeError, r"entries\[0\] must be an EntryPayload, not dict"),
        (iter([EntryPayload(b"a")]), TypeError, "entries must be a list or tuple"),
    ],
)
def test_malformed_entries_write_nothing(store, entries, error, match) -> None:
    session = store.open_session("x", "w1")
    before = snapshot(store.path)
    with pytest.raises(error, match=match):
        store.append("x", entries, session=session)
    assert snapshot(store.path) == before


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"expected_start_offset": -1}, ValueError, "expected_start_offset must be >= 0"),
        ({"expected_start_offset": "2"}, TypeError, "expected_start_offset must be an int"),
        ({"expected_start_offset": True}, TypeError, "expected_start_offset must be an int"),
        ({"attempt_id": ""}, ValueError, "attempt_id must be 1..200"),
        ({"attempt_id": 7}, TypeError, "attempt_id must be a str"),
        ({"attempt_id": "a\nb"}, ValueError, "non-printable"),
        ({"session": "w1"}, TypeError, "session must be a Session"),
    ],
)
def test_malformed_append_arguments_write_nothing(store, kwargs, error, match) -> None:
    session = store.open_session("x", "w1")
    before = snapshot(store.path)
    args = {"session": session, **kwargs}
    with pytest.raises(error, match=match):
        store.append("x", [EntryPayload(b"a")], **args)
    assert snapshot(store.path) == before


def test_session_of_another_stream_is_refused(store) -> None:
    store.create_stream("y")
    other = store.open_session("y", "w1")
    before = snapshot(store.path)
    with pytest.raises(ValueError, match="belongs to stream 'y'"):
        store.append("x", [EntryPayload(b"a")], session=other)
    assert snapshot(store.path) == before


def test_unknown_stream_is_a_clear_error_and_writes_nothing(store) -> None:
    session = store.open_session("x", "w1")
    forged = st.Session("nope", session.epoch, session.token, "w1", session.expires_at)
    before = snapshot(store.path)
    with pytest.raises(st.UnknownStreamError, match="'nope'"):
        store.append("nope", [EntryPayload(b"a")], session=forged)
    for call in (
        lambda: store.open_session("nope", "w1"),
        lambda: store.read("nope"),
        lambda: store.read_stamps("nope"),
        lambda: store.trim("nope", 0),
        lambda: store.head("nope"),
    ):
        with pytest.raises(st.UnknownStreamError, match="'nope'"):
            call()
    assert snapshot(store.path) == before


@pytest.mark.parametrize(
    "stream_id, error, match",
    [
        ("a/b", ValueError, "path separator"),
        ("a\\b", ValueError, "path separator"),
        ("..", ValueError, r"'\.\.'"),
        ("a..b", ValueError, r"'\.\.'"),
        (".hidden", ValueError, "not starting with '.'"),
        ("", ValueError, "must not be empty"),
        ("x" * 201, ValueError, "at most 200"),
        ("sp ace", ValueError, "' '"),
        ("naïve", ValueError, "'ï'"),
        (b"bytes", TypeError, "stream_id must be a str"),
        (None, TypeError, "stream_id must be a str"),
    ],
)
def test_stream_ids_are_validated(store, stream_id, error, match) -> None:
    before = snapshot(store.path)
    with pytest.raises(error, match=match):
        store.create_stream(stream_id)
    assert snapshot(store.path) == before


def test_well_formed_stream_ids_are_accepted(store) -> None:
    for sid in ("orders", "t_1.seg-0001:a@b=c+d", "0", "x" * 200):
        store.create_stream(sid)
    assert len(store.streams()) == 5


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda s: s.read("x", -1), ValueError, "from_offset must be >= 0"),
        (lambda s: s.read("x", 0, 0), ValueError, "max_entries must be >= 1"),
        (lambda s: s.read("x", 0, "5"), TypeError, "max_entries must be an int"),
        (lambda s: s.read_stamps("x", 0, 0), ValueError, "max_entries must be >= 1"),
        (lambda s: s.read("x", 3), st.OffsetOutOfRangeError, r"readable range \[0, 2\]"),
        (lambda s: s.trim("x", 3), ValueError, "past the committed end 2"),
        (lambda s: s.trim("x", -1), ValueError, "before_offset"),
        (lambda s: s.open_session("x", "w1", ttl=0), ValueError, "ttl must be a finite number"),
        (lambda s: s.open_session("x", "w1", ttl=float("inf")), ValueError, "ttl"),
        (lambda s: s.open_session("x", "w1", ttl="5"), TypeError, "ttl must be a number"),
        (lambda s: s.open_session("x", ""), ValueError, "writer must be 1..200"),
        (lambda s: s.open_session("x", 5), TypeError, "writer must be a str"),
        (lambda s: s.create_stream("y", profile=None), TypeError, "profile must be a str"),
        (lambda s: s.gc(temp_grace=-1), ValueError, "temp_grace"),
    ],
)
def test_malformed_reads_sessions_and_admin_calls(store, call, error, match) -> None:
    before = snapshot(store.path)
    with pytest.raises(error, match=match):
        call(store)
    assert snapshot(store.path) == before


def test_open_refuses_wrong_types(tmp_path) -> None:
    with pytest.raises(TypeError, match="path must be"):
        StreamStore.open(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="heads must be"):
        StreamStore.open(tmp_path / "s", heads=3)  # type: ignore[arg-type]


def test_closed_store_refuses_every_call(store) -> None:
    session = store.open_session("x", "w1")
    store.close()
    store.close()  # idempotent
    calls = [
        lambda: store.append("x", [EntryPayload(b"a")], session=session),
        lambda: store.read("x"),
        lambda: store.read_stamps("x"),
        lambda: store.create_stream("y"),
        lambda: store.open_session("x", "w1"),
        lambda: store.trim("x", 0),
        lambda: store.gc(),
        lambda: store.head("x"),
        lambda: store.streams(),
    ]
    for call in calls:
        with pytest.raises(st.StoreClosedError, match="closed"):
            call()
    assert store.closed


def test_a_database_of_a_newer_schema_is_refused(tmp_path) -> None:
    import sqlite3

    path = tmp_path / "s"
    StreamStore.open(path).close()
    db = sqlite3.connect(path / "heads.sqlite3")
    db.execute("UPDATE meta SET value = '99' WHERE key = 'schema'")
    db.commit()
    db.close()
    with pytest.raises(st.StreamError, match="schema 99"):
        StreamStore.open(path)
