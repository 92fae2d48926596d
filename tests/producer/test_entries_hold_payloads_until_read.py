"""The entries an ``EntryBucketBatcher`` emits hold their payloads as given until ``payloads`` is
read: the list is made then, once, and kept; it is the same list however often it is read or by
how many threads, setting ``payloads`` replaces it, and an entry dropped unread releases every
payload it held."""

from __future__ import annotations

import pickle
import sys
import threading

import numpy as np
import pytest

import bucketcore as bc
from bucketcore.harness.workloads import tiled_layout, uuid_keys
from bucketcore.layout import Buckets
from bucketcore.producer import EntryBucketBatcher


def _entries(max_messages: int, n: int = 400) -> tuple[list[bc.Entry], list[bytes]]:
    payloads = [f"payload-{i}".encode() for i in range(n)]
    batcher = bc.EntryBucketBatcher(tiled_layout(2, 4), max_messages=max_messages)
    out = []
    for key, payload in zip(uuid_keys(n, seed=4), payloads):
        out += batcher.add(key, payload)
    return out + batcher.flush(), payloads


def test_payloads_are_the_messages_payloads_in_send_order() -> None:
    for max_messages in (1, 3, 10, 1000):  # entries held inside the entry and in a block of their own
        entries, payloads = _entries(max_messages)
        assert sorted(int(i) for e in entries for i in e.message_indices) == list(range(len(payloads)))
        for e in entries:
            assert e.payloads == [payloads[i] for i in e.message_indices]
            assert all(p is payloads[i] for p, i in zip(e.payloads, e.message_indices))


def test_payloads_is_one_list_made_on_first_read() -> None:
    entries, _ = _entries(7)
    for e in entries:
        first = e.payloads
        assert type(first) is list
        assert e.payloads is first
        first.append(b"mine")  # the caller's list now, as before
        assert e.payloads[-1] == b"mine"


def test_setting_payloads_replaces_what_was_held() -> None:
    entries, _ = _entries(5)
    e = entries[0]
    e.payloads = None
    assert e.payloads is None
    e.payloads = [b"a"]
    assert e.payloads == [b"a"]


def test_an_unread_entry_releases_its_payloads() -> None:
    payload = b"held-" + b"x" * 20  # one object, counted
    base = sys.getrefcount(payload)
    batcher = bc.EntryBucketBatcher(tiled_layout(2, 4), max_messages=6)
    entries = []
    for key in uuid_keys(300, seed=5):
        entries += batcher.add(key, payload)
    entries += batcher.flush()
    assert sum(e.count for e in entries) == 300
    assert sys.getrefcount(payload) == base + 300
    half = len(entries) // 2
    assert all(len(e.payloads) == e.count for e in entries[:half])  # read: the lists hold them now
    del entries
    assert sys.getrefcount(payload) == base


def test_a_subclass_of_entry_is_released_as_an_entry_is() -> None:
    class Tagged(bc.Entry):
        pass

    payload = b"tagged-" + b"y" * 20
    base = sys.getrefcount(payload)
    tagged = Tagged(0, 1, 2, 3, np.array([5, 6]), 9, [payload, payload])
    assert isinstance(tagged, bc.Entry) and tagged.count == 2 and tagged.payloads == [payload, payload]
    assert sys.getrefcount(payload) == base + 2
    del tagged
    assert sys.getrefcount(payload) == base


def test_message_indices_are_integer_positions_as_int64() -> None:
    for given in ([5, 6], np.array([5, 6], dtype=np.int32), np.arange(12)[5:7]):
        e = bc.Entry(0, 1, 2, 3, given, 0)
        assert e.message_indices.dtype == np.int64 and e.message_indices.tolist() == [5, 6] and e.count == 2
    assert bc.Entry(0, 1, 2, 3, [], 0).count == 0
    for wrong in ([1.5], [[1]], ["a"], None):
        with pytest.raises(TypeError, match="one-dimensional sequence of integers"):
            bc.Entry(0, 1, 2, 3, wrong, 0)
    with pytest.raises(ValueError, match="position 1 is negative"):
        bc.Entry(0, 1, 2, 3, np.array([0, -3]), 0)
    with pytest.raises(ValueError, match="position 0 is past the int64 range"):
        bc.Entry(0, 1, 2, 3, np.array([2**63], dtype=np.uint64), 0)
    e = bc.Entry(0, 1, 2, 3, [1], 0)
    with pytest.raises(ValueError, match="negative"):
        e.message_indices = [-1]
    assert e.message_indices.tolist() == [1]  # a refused value leaves the entry as it was


def test_equality_and_pickling_see_the_payloads() -> None:
    entries, _ = _entries(4)
    for e in entries[:20]:
        copy = pickle.loads(pickle.dumps(e))
        assert copy == e
        assert copy.payloads == e.payloads
    a, b = _entries(4)[0][0], _entries(4)[0][0]
    assert a == b  # neither read before: compared by their payloads
    b.payloads = [b"other"]
    assert a != b


def test_threads_reading_payloads_get_one_list() -> None:
    entries, _ = _entries(50)
    seen: list[list[int]] = [[] for _ in range(4)]
    barrier = threading.Barrier(4)

    def read(k: int) -> None:
        barrier.wait()
        seen[k] = [id(e.payloads) for e in entries]

    threads = [threading.Thread(target=read, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen[0] == seen[1] == seen[2] == seen[3]


# --------------------------------------------------------------------------------------------
# what the batcher keeps of the payload it was sent


def test_batcher_payload_forms() -> None:
    b = EntryBucketBatcher(Buckets(), max_bytes=10)
    out = list(b.add_many(["a", "a", "a"], [bytearray(b"12345"), memoryview(b"123456"), b"1"]))
    out += b.flush()
    assert [e.nbytes for e in out] == [5, 7]
    assert out[0].payloads == [b"12345"] and out[1].payloads == [b"123456", b"1"]


def test_batcher_keeps_what_was_sent_when_a_buffer_changes_afterwards() -> None:
    """A mutable payload is copied at add: changing it later changes neither the entry's payload
    nor its nbytes (Java's batch container copies the message too); bytes are kept as given."""
    b = EntryBucketBatcher(Buckets(), max_bytes=1000)
    buf, backing = bytearray(b"abc"), bytearray(b"wxyz")
    kept = b"immutable"
    b.add("k", buf)
    b.add_many(["k", "k"], [memoryview(backing), kept])
    buf.extend(b"def")
    backing[0:2] = b"!!"
    (entry,) = b.flush()
    assert entry.payloads == [b"abc", b"wxyz", b"immutable"]
    assert entry.nbytes == 3 + 4 + 9
    assert entry.payloads[2] is kept
