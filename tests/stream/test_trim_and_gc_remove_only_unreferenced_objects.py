"""Retention and garbage collection: ``trim`` makes whole objects collectable, ``gc`` removes only
objects that no committed entry references and no pending append protects."""

from __future__ import annotations

import os
import time

import pytest
from stream_support import InjectedFault, raising_hook, read_all, wal_objects

import bucketcore.stream as st
from bucketcore.stream import EntryPayload, StreamStore


@pytest.fixture
def store(tmp_path):
    """Stream x: appends [0,3)+[3,5) (object 0), [5,6) (object 1), [6,10) (object 2)."""
    s = StreamStore.open(tmp_path / "s")
    s.create_stream("x")
    session = s.open_session("x", "w1")
    s.keys = []  # type: ignore[attr-defined]
    for entries in ([EntryPayload(b"a", 3), EntryPayload(b"b", 2)], [EntryPayload(b"c", 1)], [EntryPayload(b"d", 4)]):
        s.keys.append(s.append("x", entries, session=session).read_target.object_key)  # type: ignore[attr-defined]
    yield s
    s.close()


def test_gc_never_removes_committed_objects(store) -> None:
    assert store.gc() == 0
    assert wal_objects(store.path) == sorted(store.keys)
    assert [e.payload for e in read_all(store, "x")] == [b"a", b"b", b"c", b"d"]


def test_trim_inside_an_entry_keeps_that_entry_whole(store) -> None:
    assert store.trim("x", 4) == 3
    assert store.head("x").log_start == 3
    assert [e.payload for e in store.read("x", 3)] == [b"b", b"c", b"d"]
    with pytest.raises(st.OffsetOutOfRangeError, match=r"\[3, 10\]") as err:
        store.read("x", 2)
    assert err.value.log_start == 3
    assert store.gc() == 0  # object 0 still holds the retained entry [3,5)
    assert store.read_stamps("x", 3).start_offset.tolist() == [3, 5, 6]


def test_trim_past_an_object_makes_it_collectable(store) -> None:
    assert store.trim("x", 6) == 6
    assert store.gc() == 2
    assert wal_objects(store.path) == [store.keys[2]]
    assert [e.payload for e in read_all(store, "x")] == [b"d"]
    assert store.head("x").committed_end == 10 and store.head("x").logical_size == 4


def test_trim_never_moves_the_log_start_back_and_can_empty_the_stream(store) -> None:
    store.trim("x", 6)
    assert store.trim("x", 2) == 6
    assert store.trim("x", 10) == 10
    assert store.read("x", 10) == [] and store.read_stamps("x", 10).entry_count == 0
    assert store.gc() == 3 and wal_objects(store.path) == []
    session = store.open_session("x", "w2")
    assert store.append("x", [EntryPayload(b"e")], session=session).start_offset == 10


def test_gc_removes_unreferenced_objects_and_stale_temporary_files(store) -> None:
    wal = os.path.join(store.path, "wal")
    orphan = os.path.join(wal, "0" * 32 + ".obj")
    with open(orphan, "wb") as f:
        f.write(b"left by a crashed writer")
    stale = os.path.join(wal, ".tmp-abc.obj-1234")
    fresh = os.path.join(wal, ".tmp-def.obj-5678")
    for p in (stale, fresh):
        with open(p, "wb") as f:
            f.write(b"partial")
    old = time.time() - 7200
    os.utime(stale, (old, old))
    assert store.gc() == 1
    assert not os.path.exists(orphan) and not os.path.exists(stale)
    assert os.path.exists(fresh)  # may belong to a PUT in progress
    assert store.gc(temp_grace=0) == 0 and not os.path.exists(fresh)
    assert wal_objects(store.path) == sorted(store.keys)


def test_gc_keeps_a_protected_object_of_a_pending_append(tmp_path) -> None:
    path = tmp_path / "s"
    with StreamStore.open(path, _fault=raising_hook(5)) as s:
        s.create_stream("x")
        session = s.open_session("x", "w1")
        with pytest.raises(InjectedFault):
            s.append("x", [EntryPayload(b"p")], session=session, attempt_id="a")
        [key] = wal_objects(str(path))
        assert s.gc() == 0 and wal_objects(str(path)) == [key]
        # the retry reuses the very object and commits it
        res = s.append("x", [EntryPayload(b"p")], session=session, attempt_id="a")
        assert res.read_target.object_key == key
        assert s.gc() == 0 and wal_objects(str(path)) == [key]


def test_objects_of_other_streams_are_untouched_by_a_trim(store) -> None:
    store.create_stream("y")
    session = store.open_session("y", "w1")
    key = store.append("y", [EntryPayload(b"y", 2)], session=session).read_target.object_key
    store.trim("x", 10)
    assert store.gc() == 3
    assert wal_objects(store.path) == [key]
    assert [e.payload for e in store.read("y")] == [b"y"]


def test_trim_below_the_log_start_changes_nothing(tmp_path) -> None:
    with StreamStore.open(tmp_path / "s") as s:
        s.create_stream("x")
        session = s.open_session("x", "w1")
        s.append("x", [EntryPayload(b"a")], session=session)
        s.append("x", [EntryPayload(b"b"), EntryPayload(b"c")], session=session)  # one object, [1,3)
        assert s.trim("x", 1) == 1
        assert s.trim("x", 0) == 1
        assert [e.payload for e in read_all(s, "x")] == [b"b", b"c"]


class _TrimDuringScan(st.SQLiteHeadStore):
    """Trims the stream right before an index scan starts: a retention job of another process
    running between a read's range check and its scan."""

    trim_to: int | None = None

    def scan_index(self, stream_id, from_offset, columns, batch_rows):  # type: ignore[no-untyped-def]
        if self.trim_to is not None:
            self.trim(stream_id, self.trim_to)
        return super().scan_index(stream_id, from_offset, columns, batch_rows)


@pytest.mark.parametrize("trim_to", [6, 10], ids=["partly", "wholly"])
def test_a_read_whose_start_is_trimmed_meanwhile_says_so_instead_of_skipping(tmp_path, trim_to) -> None:
    os.makedirs(tmp_path / "s")
    heads = _TrimDuringScan(str(tmp_path / "s" / "heads.sqlite3"))
    with StreamStore.open(tmp_path / "s", heads=heads) as s:
        for sid in ("x", "y"):
            s.create_stream(sid)
            session = s.open_session(sid, "w1")
            for payload, count in ((b"a", 5), (b"b", 1), (b"c", 4)):
                s.append(sid, [EntryPayload(payload, count)], session=session)
        heads.trim_to = trim_to
        with pytest.raises(st.OffsetOutOfRangeError, match="trimmed while being read") as err:
            s.read("x", 2)
        assert err.value.log_start == trim_to
        with pytest.raises(st.OffsetOutOfRangeError, match="trimmed while being read"):
            s.read_stamps("y", 0)
    heads.close()


def test_a_read_whose_object_is_trimmed_and_collected_meanwhile_says_so(tmp_path) -> None:
    with StreamStore.open(tmp_path / "s") as s:
        s.create_stream("x")
        session = s.open_session("x", "w1")
        for payload in (b"a", b"b"):
            s.append("x", [EntryPayload(payload, 2)], session=session)
        other = StreamStore.open(tmp_path / "s")
        real_read_span = s._wal.read_span

        def trim_and_collect_first(*args):  # type: ignore[no-untyped-def]
            other.trim("x", 4)
            other.gc()
            return real_read_span(*args)

        s._wal.read_span = trim_and_collect_first  # type: ignore[method-assign]
        with pytest.raises(st.OffsetOutOfRangeError, match="trimmed while being read"):
            s.read("x", 0)
        other.close()
