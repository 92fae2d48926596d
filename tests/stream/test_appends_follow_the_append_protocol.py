"""The append protocol of the stream store (docs/design.md, "The append protocol"): offsets, results, retries, lanes,
group commit, fail-closed checks before any I/O."""

from __future__ import annotations

import itertools
import os
import sqlite3
import threading

import pytest
from stream_support import read_all, snapshot, wal_objects

import bucketcore.stream as st
from bucketcore.stream import EntryPayload, StreamStore


@pytest.fixture
def store(tmp_path):
    s = StreamStore.open(tmp_path / "store")
    s.create_stream("orders")
    yield s
    s.close()


def test_seed_example_head_100_then_3_and_2_records_commits_100_to_105(store) -> None:
    session = store.open_session("orders", "w1")
    store.append("orders", [EntryPayload(b"x", record_count=100)], session=session)
    before = store.head("orders")
    res = store.append(
        "orders",
        [EntryPayload(b"kafka-batch-1", 3), EntryPayload(b"kafka-batch-2", 2)],
        session=session,
        expected_start_offset=100,
    )
    assert (res.start_offset, res.end_offset, res.committed_end) == (100, 105, 105)
    assert res.commit_version == before.version + 1
    assert res.record_count == 5 and res.entry_count == 2
    head = store.head("orders")
    assert head.committed_end == 105 and head.version == before.version + 1
    assert head.last_commit_id == res.commit_id
    assert [(e.start_offset, e.end_offset) for e in store.read("orders", 100)] == [(100, 103), (103, 105)]


def test_append_result_carries_size_target_and_ids(store) -> None:
    session = store.open_session("orders", "w1")
    r1 = store.append("orders", [EntryPayload(b"abc", 1, b"meta")], session=session)
    r2 = store.append("orders", [EntryPayload(b"defgh", 2)], session=session)
    assert r1.stream_id == "orders" and r1.logical_size == 3 and r2.logical_size == 8
    assert r2.commit_version == 2 and r1.commit_id != r2.commit_id
    t = r2.read_target
    assert t.generation == 0 and t.object_key in wal_objects(store.path)
    assert os.path.getsize(os.path.join(store.path, "wal", t.object_key)) == t.length
    assert t.payload_format == "bucketcore-wal/1"


def test_one_append_call_is_one_object_and_one_head_version(store) -> None:
    session = store.open_session("orders", "w1")
    entries = [EntryPayload(bytes([i]) * 100, 1 + i % 3) for i in range(250)]
    res = store.append("orders", entries, session=session)
    assert wal_objects(store.path) == [res.read_target.object_key]
    assert store.head("orders").version == 1
    got = read_all(store, "orders")
    assert [e.payload for e in got] == [e.payload for e in entries]
    assert [e.record_count for e in got] == [e.record_count for e in entries]


def test_read_from_inside_an_entry_returns_that_entry(store) -> None:
    session = store.open_session("orders", "w1")
    store.append("orders", [EntryPayload(b"a", 4), EntryPayload(b"b", 3)], session=session)
    store.append("orders", [EntryPayload(b"c", 5)], session=session)
    assert [e.payload for e in store.read("orders", 5)] == [b"b", b"c"]
    assert [e.payload for e in store.read("orders", 9, 1)] == [b"c"]
    assert [e.payload for e in store.read("orders", 3, 1)] == [b"a"]
    assert store.read("orders", 12) == []
    with pytest.raises(st.OffsetOutOfRangeError) as err:
        store.read("orders", 13)
    assert err.value.committed_end == 12


def test_expected_start_mismatch_rejects_and_writes_no_file(store) -> None:
    session = store.open_session("orders", "w1")
    store.append("orders", [EntryPayload(b"a", 2)], session=session)
    before = snapshot(store.path)
    with pytest.raises(st.OffsetMismatchError, match="ends at 2"):
        store.append("orders", [EntryPayload(b"b")], session=session, expected_start_offset=1)
    assert snapshot(store.path) == before


def test_unsupported_profile_fails_closed_before_any_io(store) -> None:
    before = snapshot(store.path)
    with pytest.raises(st.CapabilityError, match="bookkeeper"):
        store.create_stream("other", profile="bookkeeper")
    assert snapshot(store.path) == before
    assert store.streams() == ["orders"]


def test_stream_whose_profile_has_no_writer_refuses_appends_before_io(store, tmp_path) -> None:
    session = store.open_session("orders", "w1")
    # a database written by a build with another profile: this build has no writer for it
    db = sqlite3.connect(os.path.join(store.path, "heads.sqlite3"))
    db.execute("UPDATE streams SET profile = 'bookkeeper-wal' WHERE stream_id = 'orders'")
    db.commit()
    db.close()
    before = snapshot(store.path)
    with pytest.raises(st.CapabilityError, match="bookkeeper-wal"):
        store.append("orders", [EntryPayload(b"a")], session=session)
    assert snapshot(store.path) == before


def test_head_store_url_of_an_unknown_kind_is_refused_before_creating_anything(tmp_path) -> None:
    with pytest.raises(st.CapabilityError, match="'mysql'"):
        StreamStore.open(tmp_path / "other", heads="mysql://db/streams")
    assert not (tmp_path / "other").exists()


def test_unreachable_postgres_head_store_creates_nothing(tmp_path) -> None:
    pytest.importorskip("psycopg", reason="psycopg 3 (extra bucketcore[postgres]) is not installed")
    with pytest.raises(st.StreamError, match="cannot reach"):
        StreamStore.open(tmp_path / "pg", heads="postgresql://nobody@127.0.0.1:1/none?connect_timeout=1")
    assert not (tmp_path / "pg").exists()


def test_retry_of_a_committed_attempt_returns_the_same_result_once(store) -> None:
    session = store.open_session("orders", "w1")
    entries = [EntryPayload(b"once", 2)]
    first = store.append("orders", entries, session=session, attempt_id="a-1")
    again = store.append("orders", entries, session=session, attempt_id="a-1")
    assert again == first
    newer = store.open_session("orders", "w1")  # the retry may come from the writer's next session
    assert store.append("orders", entries, session=newer, attempt_id="a-1") == first
    assert [e.payload for e in read_all(store, "orders")] == [b"once"]
    assert len(wal_objects(store.path)) == 1


def test_reusing_an_attempt_id_with_other_entries_is_an_invariant_violation(store) -> None:
    session = store.open_session("orders", "w1")
    store.append("orders", [EntryPayload(b"one")], session=session, attempt_id="a-1")
    before = snapshot(store.path)
    with pytest.raises(st.InvariantViolationError, match="a-1"):
        store.append("orders", [EntryPayload(b"two")], session=session, attempt_id="a-1")
    assert snapshot(store.path) == before


def test_existing_object_with_different_content_is_never_overwritten(tmp_path) -> None:
    from stream_support import InjectedFault, raising_hook

    path = tmp_path / "s"
    with StreamStore.open(path, _fault=raising_hook(4)) as s:
        s.create_stream("x")
        session = s.open_session("x", "w1")
        with pytest.raises(InjectedFault):
            s.append("x", [EntryPayload(b"first")], session=session, attempt_id="a")
        [key] = wal_objects(str(path))
        original = (path / "wal" / key).read_bytes()
        # same attempt, same position, other bytes: the immutable key already holds the first try
        with pytest.raises(st.InvariantViolationError, match=key):
            s.append("x", [EntryPayload(b"second")], session=session, attempt_id="a")
        assert (path / "wal" / key).read_bytes() == original
        assert s.head("x").committed_end == 0


def test_same_writers_in_other_streams_and_other_writers_do_not_collide_on_attempt_ids(store) -> None:
    store.create_stream("payments")
    a = store.open_session("orders", "w1")
    b = store.open_session("payments", "w1")
    r1 = store.append("orders", [EntryPayload(b"o")], session=a, attempt_id="same")
    r2 = store.append("payments", [EntryPayload(b"p")], session=b, attempt_id="same")
    assert r1.commit_id != r2.commit_id
    c = store.open_session("orders", "w2")
    r3 = store.append("orders", [EntryPayload(b"q")], session=c, attempt_id="same")
    assert r3.start_offset == 1


def test_appends_from_many_threads_serialise_in_the_lane(store) -> None:
    session = store.open_session("orders", "w1")
    results: list[st.AppendResult] = []
    errors: list[BaseException] = []

    def worker(k: int) -> None:
        try:
            for i in range(8):
                results.append(store.append("orders", [EntryPayload(f"{k}-{i}".encode(), 1 + i % 2)], session=session))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    ranges = sorted((r.start_offset, r.end_offset) for r in results)
    assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges)) and ranges[0][0] == 0
    assert sorted(r.commit_version for r in results) == list(range(1, 33))
    assert len(read_all(store, "orders")) == 32


class _LostAckHeads(st.SQLiteHeadStore):
    """Commits the head CAS, then raises as if the answer was lost; can also fail intent reads."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.lose_next_ack = False
        self.intent_reads_fail = False

    def commit_append(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        head = super().commit_append(*args, **kwargs)
        if self.lose_next_ack:
            self.lose_next_ack = False
            raise OSError("connection reset after commit")
        return head

    def get_intent(self, commit_id):  # type: ignore[no-untyped-def]
        if self.intent_reads_fail:
            raise OSError("head store unreachable")
        return super().get_intent(commit_id)


def test_uncertain_append_is_resolved_before_the_next_one_starts(tmp_path) -> None:
    os.makedirs(tmp_path / "s")
    heads = _LostAckHeads(str(tmp_path / "s" / "heads.sqlite3"))
    s = StreamStore.open(tmp_path / "s", heads=heads)
    s.create_stream("x")
    session = s.open_session("x", "w1")
    heads.lose_next_ack = True
    with pytest.raises(OSError, match="reset"):
        s.append("x", [EntryPayload(b"a", 2)], session=session, attempt_id="a")
    heads.intent_reads_fail = True
    with pytest.raises(st.UncertainAppendError, match="outcome"):
        s.append("x", [EntryPayload(b"b")], session=session)
    assert s.head("x").committed_end == 2  # nothing moved while the lane was blocked
    heads.intent_reads_fail = False
    # the lost-ack append did commit: its retry answers from the intent, the next one follows it
    assert s.append("x", [EntryPayload(b"a", 2)], session=session, attempt_id="a").start_offset == 0
    assert s.append("x", [EntryPayload(b"b")], session=session).start_offset == 2
    assert [e.payload for e in read_all(s, "x")] == [b"a", b"b"]
    s.close()
    heads.close()


def test_store_reopens_with_everything_committed(tmp_path) -> None:
    path = tmp_path / "s"
    with StreamStore.open(path) as s:
        s.create_stream("x")
        session = s.open_session("x", "w1")
        for i in range(5):
            s.append("x", [EntryPayload(bytes([i]) * i, i + 1)], session=session)
    with StreamStore.open(path) as s:
        assert [e.payload for e in read_all(s, "x")] == [bytes([i]) * i for i in range(5)]
        assert s.head("x").version == 5 and s.head("x").committed_end == 15


def test_create_stream_twice_is_refused(store) -> None:
    with pytest.raises(st.StreamExistsError, match="orders"):
        store.create_stream("orders")


def test_readers_in_other_threads_see_only_whole_committed_appends(store) -> None:
    session = store.open_session("orders", "w1")
    stop = threading.Event()
    errors: list[BaseException] = []

    def reader() -> None:
        try:
            while not stop.is_set():
                stamps = store.read_stamps("orders")
                # every append is two entries of 2 and 1 records: whole appends only
                assert stamps.entry_count % 2 == 0
                assert stamps.record_count.tolist() == [2, 1] * (stamps.entry_count // 2)
                got = store.read("orders", 0, 1000)
                assert [e.payload for e in got] == [b"a", b"b"] * (len(got) // 2)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    for i in range(60):
        store.append("orders", [EntryPayload(b"a", 2), EntryPayload(b"b", 1)], session=session)
        if i % 20 == 0:
            store.gc()
    stop.set()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    assert store.head("orders").committed_end == 180


def test_same_attempt_committed_by_another_store_meanwhile_returns_that_commit(tmp_path) -> None:
    path = tmp_path / "s"
    entries = [EntryPayload(b"twice-sent", 2)]
    with StreamStore.open(path) as other:
        other.create_stream("x")
        session = other.open_session("x", "w1")
        first: list[st.AppendResult] = []

        def race(step: int) -> None:
            if step == 5:  # while this append is between protection and intent
                first.append(other.append("x", entries, session=session, attempt_id="dup"))

        with StreamStore.open(path, _fault=race) as s:
            res = s.append("x", entries, session=session, attempt_id="dup")
        assert res == first[0]
        assert [e.payload for e in read_all(other, "x")] == [b"twice-sent"]
        assert other.head("x").version == 1
