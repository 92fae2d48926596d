"""Stamps travel with the entries: from the producer's output into the entry index, and back as numpy
columns that a dispatcher routes without reading a payload."""

from __future__ import annotations

import pickle
import random

import numpy as np
import pytest
from stream_support import random_entries, read_all

import bucketcore as bc
import bucketcore.stream as st
from bucketcore.stream import EntryPayload, StreamStore, pack_messages, unpack_messages


@pytest.fixture
def store(tmp_path):
    s = StreamStore.open(tmp_path / "s")
    s.create_stream("x")
    s.session = s.open_session("x", "w1")  # type: ignore[attr-defined]
    yield s
    s.close()


def _keys(n: int) -> list[str]:
    return [f"user-{i * 7919 % 1000}" for i in range(n)]


def test_entries_from_the_batcher_keep_payloads_and_stamps(store) -> None:
    layout = bc.Buckets.equal_width(8)
    batcher = bc.EntryBucketBatcher(layout, max_messages=5)
    keys = _keys(60)
    payloads = [f"msg-{i}".encode() for i in range(60)]
    entries = batcher.add_many(keys, payloads) + batcher.flush()
    res = store.append("x", [EntryPayload.from_entry(e) for e in entries], session=store.session)
    assert res.record_count == 60 and res.entry_count == len(entries)
    got = read_all(store, "x")
    for e, g in zip(entries, got, strict=True):
        assert unpack_messages(g.payload) == [bytes(p) for p in e.payloads]
        assert (g.hash_min, g.hash_max, g.segment_id, g.bucket) == (e.hash_min, e.hash_max, e.segment_id, e.bucket)
        assert g.record_count == e.count


def test_from_entry_refuses_a_table_view_without_payloads() -> None:
    table = bc.bucket_entries(_keys(10), bc.Buckets.equal_width(2))
    with pytest.raises(ValueError, match="append_table"):
        EntryPayload.from_entry(table[0])
    with pytest.raises(TypeError, match="bucketcore.Entry"):
        EntryPayload.from_entry({"payloads": [b"a"]})  # type: ignore[arg-type]


def test_append_table_appends_every_entry_of_a_table_in_one_commit(store) -> None:
    layout = bc.TopicLayout(
        1,
        [bc.Segment(0, 0, 0x7FFF, bc.Buckets.equal_width(4)), bc.Segment(1, 0x8000, 0xFFFF, bc.Buckets.equal_width(2))],
    )
    keys = _keys(200)
    payloads = [f"m{i}".encode() for i in range(200)]
    table = bc.bucket_entries(keys, layout, max_messages=7)
    meta = [f"e{i}".encode() for i in range(len(table))]
    res = store.append_table("x", table, payloads, session=store.session, metadata=meta)
    assert res.entry_count == len(table) and res.record_count == 200
    assert store.head("x").version == 1
    got = read_all(store, "x")
    for i, g in enumerate(got):
        s, c = int(table.start[i]), int(table.count[i])
        assert unpack_messages(g.payload) == [payloads[j] for j in table.order[s : s + c]]
        assert g.metadata == meta[i]
        assert (g.hash_min, g.hash_max) == (int(table.hash_min[i]), int(table.hash_max[i]))
        assert (g.segment_id, g.bucket) == (int(table.segment_id[i]), int(table.bucket[i]))
    stamps = store.read_stamps("x")
    assert np.array_equal(stamps.hash_min, table.hash_min) and np.array_equal(stamps.hash_max, table.hash_max)
    assert np.array_equal(stamps.segment_id, table.segment_id) and np.array_equal(stamps.bucket, table.bucket)
    assert np.array_equal(stamps.record_count, table.count) and stamps.stamped.all()


def test_append_table_refuses_mismatched_payloads(store) -> None:
    table = bc.bucket_entries(_keys(10), bc.Buckets.equal_width(2))
    with pytest.raises(ValueError, match="payloads has 9 items; the table's entries hold 10"):
        store.append_table("x", table, [b"p"] * 9, session=store.session)
    with pytest.raises(TypeError, match=r"payloads\[3\] must be bytes"):
        store.append_table("x", table, [b"p"] * 3 + ["s"] + [b"p"] * 6, session=store.session)
    with pytest.raises(ValueError, match="metadata has 1 items"):
        store.append_table("x", table, [b"p"] * 10, session=store.session, metadata=[b"m"])
    with pytest.raises(TypeError, match="EntryTable"):
        store.append_table("x", [b"p"], [b"p"], session=store.session)  # type: ignore[arg-type]
    empty = bc.bucket_entries([], bc.Buckets.equal_width(2))
    with pytest.raises(ValueError, match="empty"):
        store.append_table("x", empty, [], session=store.session)
    assert store.head("x").version == 0


def test_read_stamps_feed_route_entries_directly(store) -> None:
    buckets = bc.Buckets.equal_width(16)
    table = bc.bucket_entries(_keys(500), buckets, max_messages=4)
    store.append_table("x", table, [b"."] * 500, session=store.session)
    selector = bc.EntryBucketSelector(buckets)
    for i, name in enumerate(("c", "a", "b")):
        selector.add_consumer(name, i)
    stamps = store.read_stamps("x")
    routed = bc.route_entries(selector, stamps.hash_min, hash_max=stamps.hash_max)
    assert np.array_equal(routed, bc.route_entries(selector, table.hash_min))
    owners = selector.owners()
    for slot, lo in zip(routed.tolist(), stamps.hash_min.tolist(), strict=True):
        assert selector.consumers[slot] == owners[buckets.bucket_of(lo)]


def test_unstamped_entries_route_by_key_hash_with_the_stamped_column(store) -> None:
    buckets = bc.Buckets.equal_width(4)
    store.append(
        "x",
        [
            EntryPayload(b"s", 1, hash_min=0x1000, hash_max=0x1100),
            EntryPayload(b"u", 2),
            EntryPayload(b"t", 1, hash_min=0xF000, hash_max=0xF001),
        ],
        session=store.session,
    )
    stamps = store.read_stamps("x")
    assert stamps.stamped.tolist() == [True, False, True]
    assert stamps.hash_min.tolist() == [0x1000, 0, 0xF000]
    selector = bc.EntryBucketSelector(buckets)
    for i in range(4):
        selector.add_consumer(f"c{i}", i)
    key_hash = np.array([0, 0x8000, 0], dtype=np.uint32)  # the unstamped entry's key hash
    routed = bc.route_entries(selector, stamps.hash_min, stamped=stamps.stamped, key_hash=key_hash)
    assert routed.tolist() == [0, 2, 3]


def test_read_stamps_ranges_match_read(store) -> None:
    rng = random.Random(5)
    sent = []
    for _ in range(30):
        batch = random_entries(rng)
        sent.extend(batch)
        store.append("x", batch, session=store.session)
    full = read_all(store, "x")
    stamps = store.read_stamps("x")
    assert stamps.entry_count == len(sent)
    assert stamps.start_offset.tolist() == [e.start_offset for e in full]
    assert stamps.end_offset.tolist() == [e.end_offset for e in full]
    assert stamps.hash_min.tolist() == [e.hash_min or 0 for e in sent]
    assert stamps.hash_max.tolist() == [e.hash_max or 0 for e in sent]
    assert stamps.segment_id.tolist() == [-1 if e.segment_id is None else e.segment_id for e in sent]
    for _ in range(40):
        offset = rng.randrange(0, store.head("x").committed_end + 1)
        limit = rng.randint(1, 40)
        part = store.read_stamps("x", offset, limit)
        expect = [e for e in full if e.end_offset > offset][:limit]
        assert part.start_offset.tolist() == [e.start_offset for e in expect]
        assert part.end_offset.tolist() == [e.end_offset for e in expect]
        assert [e.start_offset for e in store.read("x", offset, limit)] == [e.start_offset for e in expect]


def test_read_stamps_columns_are_read_only_numpy_arrays(store) -> None:
    store.append("x", [EntryPayload(b"a", 2, hash_min=1, hash_max=3)], session=store.session)
    stamps = store.read_stamps("x")
    for name, arr in stamps.as_dict().items():
        assert isinstance(arr, np.ndarray) and not arr.flags.writeable, name
    assert stamps.hash_min.dtype == np.uint16 and stamps.start_offset.dtype == np.int64
    assert stamps.stamped.dtype == np.bool_


def test_pack_and_unpack_messages_round_trip_and_reject_bad_framing() -> None:
    msgs = [b"", b"a", bytes(range(256)), memoryview(b"view"), bytearray(b"ba")]
    assert unpack_messages(pack_messages(msgs)) == [bytes(m) for m in msgs]
    assert unpack_messages(b"") == []
    with pytest.raises(ValueError, match="cut short at byte 0"):
        unpack_messages(b"\x01\x00")
    with pytest.raises(ValueError, match="declares 9 bytes; only 1 follow"):
        unpack_messages(b"\x09\x00\x00\x00z")
    with pytest.raises(TypeError, match=r"payloads\[1\]"):
        pack_messages([b"a", "b"])
    with pytest.raises(TypeError):
        unpack_messages("text")  # type: ignore[arg-type]


def test_stream_names_are_reachable_from_the_package() -> None:
    for name in (
        "StreamStore",
        "EntryPayload",
        "CommittedEntry",
        "AppendResult",
        "StampColumns",
        "OffsetMismatchError",
        "FencedError",
        "CapabilityError",
        "InvariantViolationError",
        "ChecksumError",
        "HeadStore",
        "SQLiteHeadStore",
    ):
        assert hasattr(st, name), name
    assert st.FencedError is bc.errors.FencedError


def test_read_stamps_columns_are_named_read_only_and_picklable(store) -> None:
    buckets = bc.Buckets.equal_width(4)
    store.append(
        "x",
        [
            EntryPayload(b"a", 2, hash_min=0x0100, hash_max=0x0200),
            EntryPayload(b"b", 1, hash_min=0xC000, hash_max=0xC000),
        ],
        session=store.session,
    )
    cols = store.read_stamps("x")
    assert len(cols) == cols.entry_count == 2
    assert cols.start_offset.tolist() == [0, 2] and cols.end_offset.tolist() == [2, 3]
    assert cols.hash_min.tolist() == [0x0100, 0xC000] and cols.hash_max.tolist() == [0x0200, 0xC000]
    selector = bc.EntryBucketSelector(buckets)
    selector.add_consumer("a", 0)
    selector.add_consumer("b", 1)
    assert bc.route_entries(selector, cols.hash_min, hash_max=cols.hash_max).tolist() == [0, 1]
    with pytest.raises(AttributeError, match="read-only"):
        cols.hash_min = cols.hash_max  # type: ignore[misc]
    again = pickle.loads(pickle.dumps(cols))
    assert all(np.array_equal(a, b) for a, b in zip(again.as_dict().values(), cols.as_dict().values(), strict=True))
