"""The compiled one-entry paths of Dispatcher (offer, ack, poll) and EntryBucketSelector (owner_of).

They take the common call shapes in C; every other shape goes to the general paths. These tests
check that both give the same results, that every bad argument of the fast shapes is refused with
the general path's error (naming the argument, the id or the consumer), and that a refused call
changes nothing."""

from __future__ import annotations

import functools
import gc
import pickle
from typing import Any

import numpy as np
import pytest
from dispatch_reference import ids, make_dispatcher
from hypothesis import given, settings
from hypothesis import strategies as st

import bucketcore as bc
from bucketcore.dispatch import (
    Deliveries,
    Dispatcher,
    EntryBucketSelector,
    MalformedStampError,
    fits_one_bucket,
    route_entries,
)

A, B, C = ("a", 1), ("b", 2), ("c", 3)


def dispatcher(n: int = 4, *members: tuple[str, int]) -> Dispatcher:
    d = Dispatcher(bc.Buckets.equal_width(n))
    for m in members:
        d.add_consumer(*m)
    return d


def snapshot(d: Dispatcher) -> tuple[Any, ...]:
    """Everything a refused call must leave as it was (outboxes are compared by the caller)."""
    bs = d.bucket_stats()
    return (
        d.offered_entries,
        d.straddling_entries,
        d.pending_entries,
        d.queued_entries,
        d.consumers,
        d.leaving,
        {c: s for c, s in d.consumer_stats().items()},
        bs.delivered.tolist(),
        bs.pending.tolist(),
        bs.queued.tolist(),
    )


def polled(d: Dispatcher) -> dict[tuple[str, int], tuple[list[int], list[int], list[bool]]]:
    return {c: (b.entry_ids.tolist(), b.hashes.tolist(), b.redelivered.tolist()) for c, b in sorted(d.poll().items())}


# -- offer ------------------------------------------------------------------------------------


_entry = st.tuples(
    st.integers(1, 5),  # gap to the previous id
    st.integers(0, 0xFFFF),  # hash_min
    st.integers(0, 0x3000),  # hash_max - hash_min
    st.one_of(st.none(), st.integers(1, 2**40)),  # message_count
    st.booleans(),  # pass hash_max
)


@settings(max_examples=150, deadline=None)
@given(entries=st.lists(_entry, max_size=30), n=st.sampled_from([1, 3, 16, 256]))
def test_one_entry_offers_as_ints_and_as_columns_of_one_item_agree(entries, n):
    fast, column, numpy_scalars = dispatcher(n, A, B), dispatcher(n, A, B), dispatcher(n, A, B)
    entry_id = -1
    for gap, lo, width, msgs, with_max in entries:
        entry_id += gap
        hi = min(lo + width, 0xFFFF) if with_max else None
        kwargs: dict[str, Any] = {}
        if hi is not None:
            kwargs["hash_max"] = hi
        if msgs is not None:
            kwargs["message_count"] = msgs
        now = fast.offer(entry_id, lo, **kwargs)
        col = {k: [v] for k, v in kwargs.items()}
        assert column.offer([entry_id], [lo], **col) == now
        np_kwargs = {k: np.int64(v) for k, v in kwargs.items()}
        assert numpy_scalars.offer(np.int64(entry_id), np.uint16(lo), **np_kwargs) == now
    assert snapshot(fast) == snapshot(column) == snapshot(numpy_scalars)
    assert polled(fast) == polled(column) == polled(numpy_scalars)


def test_a_stamp_of_0_gets_the_sticky_hash_1_on_the_fast_path_as_on_the_column_path():
    fast, column = dispatcher(4, A), dispatcher(4, A)
    fast.offer(3, 0)
    column.offer([3], [0])
    assert polled(fast) == polled(column) == {A: ([3], [1], [False])}


def test_a_straddling_stamp_is_counted_on_the_fast_path():
    d = dispatcher(4, A)
    d.offer(1, 0x3FFF, hash_max=0x4000)  # crosses the start of bucket 1
    d.offer(2, 0x4000, hash_max=0x7FFF)
    assert (d.offered_entries, d.straddling_entries) == (2, 1)


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        ((4, 1), {}, ValueError, "entry id at index 0 is 4, not after the last offered id 6"),
        ((6, 1), {}, ValueError, "not after the last offered id 6"),
        ((-1, 1), {}, ValueError, "entry id at index 0 is -1; entry ids are >= 0"),
        ((2**63, 1), {}, ValueError, "above the int64 range"),
        ((True, 1), {}, TypeError, "entry_ids must be an int or a column of ints, not bool"),
        ((7.0, 1), {}, TypeError, "entry_ids must be an int or a column of ints, not float"),
        (("7", 1), {}, TypeError, "entry_ids must be an int or a column of ints, not str"),
        ((None, 1), {}, TypeError, "entry_ids must be an int or a column of ints, not NoneType"),
        ((7, -1), {}, bc.MalformedStampError, "hash_min=-1 is outside 0..0xFFFF"),
        ((7, 0x10000), {}, bc.MalformedStampError, "hash_min=65536 is outside 0..0xFFFF"),
        ((7, 2**70), {}, bc.MalformedStampError, "hash_min=.* is outside 0..0xFFFF"),
        ((7, True), {}, TypeError, r"hash_min at index 0 is a bool \(True\)"),
        ((7, 1.5), {}, TypeError, "hash_min at index 0 is float 1.5"),
        ((7,), {}, TypeError, "pass hash_min"),
        ((7, 5), {"hash_max": 4}, bc.MalformedStampError, "hash_min=0x0005 > hash_max=0x0004"),
        ((7, 5), {"hash_max": 0x10000}, bc.MalformedStampError, "hash_max=65536 is outside 0..0xFFFF"),
        ((7, 5), {"hash_max": -1}, bc.MalformedStampError, "hash_max=-1 is outside"),
        ((7, 5), {"hash_max": "x"}, TypeError, "hash_max at index 0 is str 'x'"),
        ((7, 5), {"message_count": 0}, ValueError, "message_count at index 0 is 0; an entry holds >= 1 message"),
        ((7, 5), {"message_count": -3}, ValueError, "message_count at index 0 is -3"),
        ((7, 5), {"message_count": 2**63}, ValueError, "message_count above the int64 range"),
        ((7, 5), {"message_count": True}, TypeError, r"message_count at index 0 is a bool \(True\)"),
        ((7, 5), {"message_count": 1.0}, TypeError, "message_count at index 0 is float 1.0"),
    ],
)
def test_a_refused_one_entry_offer_names_the_argument_and_changes_nothing(args, kwargs, error, match):
    d = dispatcher(4, A, B)
    d.offer(5, 1)
    d.offer(6, 0xF000)
    before = snapshot(d)
    with pytest.raises(error, match=match):
        d.offer(*args, **kwargs)
    assert snapshot(d) == before
    assert polled(d) == {A: ([5], [1], [False]), B: ([6], [0xF000], [False])}
    assert d.offer(7, 2) == 1  # the next good id is still taken


# -- ack --------------------------------------------------------------------------------------


def delivered(n_entries: int = 4) -> Dispatcher:
    """A and B, entries 0..n-1 alternating between bucket 0 (A's) and bucket 3 (B's), polled."""
    d = dispatcher(4, A, B)
    for i in range(n_entries):
        d.offer(i, 0x0001 if i % 2 == 0 else 0xF000)
    d.poll()
    return d


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        ((1, 1, 0), TypeError, "consumer name must be a str, not int"),
        ((None, 1, 0), TypeError, "consumer name must be a str, not NoneType"),
        (("a", "1", 0), TypeError, "consumer_id must be an int, not str"),
        (("a", True, 0), TypeError, "consumer_id must be an int, not bool"),
        (("a", -1, 0), ValueError, "consumer_id must be 0..2\\*\\*64-1"),
        (("z", 1, 0), KeyError, r"consumer \('z', 1\) is not connected"),
        (("a", 2, 0), KeyError, r"consumer \('a', 2\) is not connected"),
        (("a", 1, 1), KeyError, r"entry 1 is not pending on consumer \('a', 1\): pending on consumer \('b', 2\)"),
        (("a", 1, 99), KeyError, "entry 99 is not pending on consumer .*not a dispatched entry"),
        (("a", 1, -5), KeyError, "entry -5 .*outside the entry id range"),
        (("a", 1, 2**64), KeyError, "outside the entry id range"),
        (("a", 1, True), TypeError, "entry_ids must be an int or a column of ints, not bool"),
        (("a", 1, 0.0), TypeError, "entry_ids must be an int or a column of ints, not float"),
        (("a", 1, np.array([0, 1], dtype=np.int64)), KeyError, "entry 1 is not pending"),
        (("a", 1, np.array([0, -1], dtype=np.int64)), KeyError, "outside the entry id range"),
        (("a", 1, np.array([0, 0], dtype=np.int64)), ValueError, "twice|duplicate|same id"),
    ],
)
def test_a_refused_ack_names_what_is_wrong_and_changes_nothing(args, error, match):
    d = delivered()
    before = snapshot(d)
    with pytest.raises(error, match=match):
        d.ack(*args)
    assert snapshot(d) == before
    assert d.ack("a", 1, 0) == 1 and d.ack("b", 2, np.array([1, 3], dtype=np.int64)) == 2


def test_an_entry_acked_twice_or_still_queued_is_refused_by_id():
    d = dispatcher(2, A, B)
    d.offer(1, 0x0001)
    d.offer(2, 0x0002)
    d.poll()
    d.remove_consumer(*A)  # bucket 0 moves to B: new entries of it queue until A acked
    d.offer(3, 0x0003)
    assert d.ack(*A, 1) == 1
    with pytest.raises(KeyError, match="entry 1 is not pending .*already acked"):
        d.ack(*A, 1)
    with pytest.raises(KeyError, match="entry 3 is not pending"):
        d.ack(*B, 3)
    assert d.queued_entries == 1


def test_int_ack_numpy_scalar_ack_and_column_acks_agree():
    ways = {
        "int": lambda e: e,
        "numpy scalar": lambda e: np.uint32(e),
        "int64 column": lambda e: np.array([e], dtype=np.int64),
        "list": lambda e: [e],
    }
    snapshots = []
    for make in ways.values():
        d = delivered(8)
        for e in (0, 4, 6):
            assert d.ack(*A, make(e)) == 1
        assert d.ack(*B, make(5)) == 1
        snapshots.append(snapshot(d))
    assert all(s == snapshots[0] for s in snapshots)


def test_members_sharing_a_name_are_told_apart_by_id():
    a1, a2, a3 = ("a", 1), ("a", 2), ("a", 3)
    d = dispatcher(3, a1, a2, a3)
    for i, h in enumerate((0x0001, 0x6000, 0xC000)):
        d.offer(i, h)
    assert [d.poll(*c).entry_ids.tolist() for c in (a1, a2, a3)] == [[0], [1], [2]]
    assert d.ack("a", 2, 1) == 1
    with pytest.raises(KeyError, match=r"entry 2 is not pending on consumer \('a', 1\)"):
        d.ack("a", 1, 2)
    d.remove_consumer("a", 2)  # holds nothing: forgotten at once
    with pytest.raises(KeyError, match=r"\('a', 2\) is not connected"):
        d.poll("a", 2)
    assert d.ack("a", 3, 2) == 1 and d.ack("a", 1, 0) == 1
    d.add_consumer("a", 2)  # rejoins under the same name
    d.offer(3, 0x8000)
    assert d.poll("a", 2).entry_ids.tolist() == [3]


def test_a_leaving_consumer_is_forgotten_when_its_last_entry_is_acked_by_int():
    d = dispatcher(2, A, B)
    d.offer(1, 0x0001)
    d.offer(2, 0x0002)
    d.poll()
    d.remove_consumer(*A)
    assert d.ack(*A, 1) == 1 and d.leaving == (A,)
    assert d.ack(*A, 2) == 1 and d.leaving == ()
    with pytest.raises(KeyError, match="not connected"):
        d.ack(*A, 2)


# -- poll -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        (("a",), {}, TypeError, "consumer_id must be an int, not NoneType"),
        ((None, 1), {}, TypeError, "consumer name must be a str, not NoneType"),
        ((), {"consumer_id": 1}, TypeError, "consumer name must be a str, not NoneType"),
        (("a", "1"), {}, TypeError, "consumer_id must be an int, not str"),
        (("z", 1), {}, KeyError, r"consumer \('z', 1\) is not connected"),
    ],
)
def test_a_refused_poll_names_what_is_wrong_and_keeps_the_outboxes(args, kwargs, error, match):
    d = dispatcher(2, A, B)
    d.offer(1, 0x0001)
    d.offer(2, 0xF000)
    with pytest.raises(error, match=match):
        d.poll(*args, **kwargs)
    assert polled(d) == {A: ([1], [1], [False]), B: ([2], [0xF000], [False])}


def test_poll_of_one_consumer_by_keyword_or_numpy_id_is_the_same_outbox():
    d = dispatcher(2, A, B)
    d.offer(1, 0x0001)
    d.offer(2, 0x0002)
    assert d.poll(name="a", consumer_id=np.int64(1)).entry_ids.tolist() == [1, 2]
    assert len(d.poll("a", 1)) == 0
    assert d.poll() == {}


# -- owner_of ---------------------------------------------------------------------------------


def test_owner_of_an_int_and_of_a_numpy_integer_agree_over_every_hash():
    sel = bc.EntryBucketSelector(bc.Buckets.equal_width(7))
    for c in (("x", 3), ("a", 1), ("m", 2)):
        sel.add_consumer(*c)
    owners = sel.owners()
    table = sel.buckets.lookup_table()
    for h in range(0, 0x10000, 97):
        assert sel.owner_of(h) == sel.owner_of(np.uint16(h)) == sel.owner_of(hash=h) == owners[table[h]]


def test_owner_of_follows_every_membership_change():
    sel = bc.EntryBucketSelector(bc.Buckets.equal_width(4))
    assert sel.owner_of(0x8000) is None
    sel.add_consumer(*B)
    assert sel.owner_of(0x0001) == B
    sel.add_consumer(*A)
    assert (sel.owner_of(0x0001), sel.owner_of(0xFFFF)) == (A, B)
    sel.remove_consumer(*B)
    assert sel.owner_of(0xFFFF) == A
    sel.remove_consumer(*A)
    assert sel.owner_of(0xFFFF) is None


@pytest.mark.parametrize(
    ("value", "error", "match"),
    [
        (-1, ValueError, "hash"),
        (0x10000, ValueError, "hash"),
        (2**80, ValueError, "hash"),
        (True, TypeError, "hash"),
        (1.0, TypeError, "hash"),
        (None, TypeError, "hash"),
    ],
)
def test_owner_of_refuses_a_bad_hash_by_name(value, error, match):
    sel = bc.EntryBucketSelector(bc.Buckets.equal_width(2))
    sel.add_consumer(*A)
    with pytest.raises(error, match=match):
        sel.owner_of(value)


# -- Deliveries -------------------------------------------------------------------------------


def test_a_delivery_column_outlives_its_deliveries_and_is_the_same_array_each_time():
    d = dispatcher(2, A)
    for i, h in enumerate((0, 0x0002, 0x0003)):
        d.offer(i, h)
    d.remove_consumer(*A, crash=True)
    d.add_consumer(*A)
    batch = d.poll(*A)
    assert batch.entry_ids is batch.entry_ids
    ids, hashes = batch.entry_ids, batch.hashes
    copy = pickle.loads(pickle.dumps(batch))
    del batch
    gc.collect()
    assert ids.tolist() == [0, 1, 2] and ids.dtype == np.int64
    assert hashes.tolist() == [1, 2, 3] and hashes.dtype == np.uint16
    assert copy.entry_ids.tolist() == [0, 1, 2] and copy.redelivered.tolist() == [True, True, True]
    assert copy.redelivered.dtype == np.bool_ and len(copy) == 3
    assert "entry_ids=array([0, 1, 2])" in repr(copy)


def test_deliveries_from_columns_need_three_1d_columns_of_one_length():
    got = Deliveries([5, 6], [1, 2], [False, True])
    assert (got.entry_ids.tolist(), got.hashes.tolist(), got.redelivered.tolist()) == ([5, 6], [1, 2], [False, True])
    assert len(Deliveries([], [], [])) == 0 and Deliveries([], [], []).entry_ids.dtype == np.int64
    with pytest.raises(ValueError, match="one length"):
        Deliveries([5, 6], [1], [False, True])
    with pytest.raises(ValueError, match="1-D"):
        Deliveries([[5]], [[1]], [[False]])


# -- membership moves -------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(1, 300),
    ids=st.lists(st.integers(0, 600), min_size=1, max_size=40, unique=True),
    data=st.data(),
)
def test_the_moves_of_a_membership_change_are_exactly_the_buckets_whose_owner_changed(n, ids, data):
    # more consumers than buckets too: the idle ones own empty ranges
    b = bc.Buckets.equal_width(n) if n > 1 else bc.Buckets()
    d = Dispatcher(b)
    members: list[tuple[str, int]] = []
    for i in ids:
        before = d.owners()
        leave = members and data.draw(st.booleans())
        if leave:
            c = data.draw(st.sampled_from(members))
            moves = d.remove_consumer(*c)
            members.remove(c)
        else:
            c = (f"c{i % 7}", i)
            moves = d.add_consumer(*c)
            members.append(c)
        after = d.owners()
        assert [x for mv in moves for x in mv.buckets] == [x for x in range(b.count) if before[x] != after[x]]
        for mv in moves:
            assert all(before[x] == mv.old_owner and after[x] == mv.new_owner for x in mv.buckets)
        assert [mv.buckets.start for mv in moves] == sorted(mv.buckets.start for mv in moves)
        # the dispatcher hands entries of every bucket to the owner the selector reports
        h = data.draw(st.integers(0, 0xFFFF))
        entry = d.offered_entries
        d.offer(entry, h)
        owner = d._selector.owner_of(h)
        if owner is not None:
            got = d.poll(*owner).entry_ids.tolist()
            assert entry in got or d.queued_entries > 0


# --------------------------------------------------------------------------------------------
# per-consumer outboxes and column acks


def test_poll_of_one_consumer_leaves_the_others_outboxes_in_order() -> None:
    d = dispatcher(4, A, B)
    stamps = [0x0001, 0xF000, 0x1000, 0xE000, 0x2000]  # buckets 0, 3, 0, 3, 0: a, b, a, b, a
    for i, h in enumerate(stamps):
        d.offer(10 + i, h)
    mine = d.poll(*A)
    assert isinstance(mine, Deliveries) and mine.entry_ids.tolist() == [10, 12, 14]
    assert mine.entry_ids.dtype == np.int64 and mine.hashes.tolist() == [1, 0x1000, 0x2000]
    assert mine.redelivered.dtype == np.bool_ and not mine.redelivered.any()
    assert len(d.poll(*A)) == 0
    rest = d.poll()
    assert list(rest) == [B] and rest[B].entry_ids.tolist() == [11, 13]
    assert d.poll() == {}


def test_poll_of_all_returns_consumers_sorted_whatever_order_they_received_in() -> None:
    d = dispatcher(4, A, B, C)
    d.offer(1, 0xF000)  # c first
    d.offer(2, 0x0001)  # then a
    d.offer(3, 0x4000)  # then b
    out = d.poll()
    assert list(out) == [A, B, C]
    assert [out[c].entry_ids.tolist() for c in out] == [[2], [3], [1]]


def test_a_crash_drops_its_unpolled_rows_and_redelivers_them_flagged() -> None:
    d = dispatcher(2, A, B)
    d.offer(1, 0x0001)
    d.offer(2, 0x0002)
    d.remove_consumer(*A, crash=True)
    out = d.poll()
    assert list(out) == [B]
    assert out[B].entry_ids.tolist() == [1, 2] and out[B].redelivered.tolist() == [True, True]


def test_ack_of_an_int64_column_and_of_other_columns_agree() -> None:
    for make in (
        lambda ids: np.asarray(ids, dtype=np.int64),
        lambda ids: list(ids),
        lambda ids: np.asarray(ids, dtype=np.int32),
        lambda ids: np.asarray(ids * 2, dtype=np.int64)[::2],  # not contiguous
    ):
        d = dispatcher(2, A)
        for i in range(6):
            d.offer(i, 0x0001 + i)
        d.poll()
        assert d.ack(*A, make([0, 2, 4])) == 3
        assert d.pending_entries == 3
        assert d.ack(*A, make([])) == 0


def test_a_failing_column_ack_changes_nothing_and_names_the_id() -> None:
    d = dispatcher(2, A, B)
    d.offer(1, 0x0001)
    d.offer(2, 0xF000)
    d.poll()
    with pytest.raises(KeyError, match="2"):
        d.ack(*A, np.array([1, 2], dtype=np.int64))
    with pytest.raises(KeyError, match="outside the entry id range"):
        d.ack(*A, np.array([1, -5], dtype=np.int64))
    with pytest.raises(ValueError, match="twice|duplicate|same id"):
        d.ack(*A, np.array([1, 1], dtype=np.int64))
    assert d.pending_entries == 2
    assert d.ack(*A, np.array([1], dtype=np.int64)) == 1


def test_a_leaving_consumer_acking_its_last_entry_by_column_is_forgotten() -> None:
    d = dispatcher(2, A, B)
    d.offer(1, 0x0001)
    d.poll()
    d.remove_consumer(*A)
    assert d.leaving == (A,)
    assert d.ack(*A, np.array([1], dtype=np.int64)) == 1
    assert d.leaving == ()
    with pytest.raises(KeyError, match="not connected"):
        d.poll(*A)


# --------------------------------------------------------------------------------------------
# one entry as scalars or as a column: the same refusals, the same results


SCALAR_CASES = [
    # (kwargs for one entry with id 10, expected exception, message fragment)
    (dict(hash_min=0x10000), MalformedStampError, "hash_min=65536 is outside"),
    (dict(hash_min=-1), MalformedStampError, "hash_min=-1 is outside"),
    (dict(hash_min=9, hash_max=8), MalformedStampError, "hash_min=0x0009 > hash_max=0x0008"),
    (dict(hash_min=9, hash_max=0x10000), MalformedStampError, "hash_max=65536 is outside"),
    (dict(hash_min=9, key_hash=5), TypeError, "pass stamped="),
    (dict(hash_min=9, stamped=False), ValueError, "index 0 is unstamped and no key_hash"),
    (dict(hash_min=9, stamped=False, key_hash=-5), ValueError, "key_hash at index 0 is -5"),
    (dict(hash_min=None, key_hash=None), TypeError, "pass hash_min"),
    (dict(hash_min=None, key_hash=3, hash_max=4), TypeError, "need hash_min"),
    (dict(hash_min=9, message_count=0), ValueError, "message_count at index 0 is 0"),
]


@pytest.mark.parametrize("kwargs, error, fragment", SCALAR_CASES)
def test_one_entry_as_scalars_or_as_a_column_fails_the_same_way(kwargs, error, fragment):
    for as_column in (False, True):
        d = make_dispatcher(2, A)
        d.offer(5, 1)
        if as_column:
            kw = {
                k: (None if v is None else (np.array([v]) if isinstance(v, bool) else [v])) for k, v in kwargs.items()
            }
            call = functools.partial(d.offer, [10], **kw)
        else:
            call = functools.partial(d.offer, 10, **kwargs)
        with pytest.raises(error, match=fragment):
            call()
        assert d.offered_entries == 1 and d.pending_entries == 1  # nothing applied
    d = make_dispatcher(2, A)
    d.offer(5, 1)
    with pytest.raises(ValueError, match="not after the last offered id 5"):
        d.offer(5, 1)
    with pytest.raises(ValueError, match="entry id at index 0 is -2"):
        d.offer(-2, 1)


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_scalar_calls_behave_like_column_calls(data):
    n_buckets = data.draw(st.sampled_from([1, 2, 5, 16]))
    n = data.draw(st.integers(1, 40))
    lo = data.draw(st.lists(st.integers(0, 0xFFFF), min_size=n, max_size=n))
    width = data.draw(st.lists(st.integers(0, 0x2000), min_size=n, max_size=n))
    stamped = data.draw(st.lists(st.booleans(), min_size=n, max_size=n))
    keys = data.draw(st.lists(st.integers(0, 0xFFFFFFFF), min_size=n, max_size=n))
    counts = data.draw(st.lists(st.integers(1, 9), min_size=n, max_size=n))
    crash_at = data.draw(st.integers(0, n))
    runs = []
    for scalar in (True, False):
        d = make_dispatcher(n_buckets, A, B)
        for i in range(n):
            hi = min(lo[i] + width[i], 0xFFFF)
            if scalar:
                d.offer(3 * i, lo[i], hash_max=hi, key_hash=keys[i], stamped=stamped[i], message_count=counts[i])
            else:
                d.offer(
                    [3 * i],
                    [lo[i]],
                    hash_max=[hi],
                    key_hash=[keys[i]],
                    stamped=np.array([stamped[i]]),
                    message_count=[counts[i]],
                )
            if i == crash_at:
                d.remove_consumer(*B, crash=True)
        polled = d.poll()
        for c, batch in polled.items():
            if scalar:
                for e in batch.entry_ids.tolist():
                    d.ack(*c, e)
            else:
                d.ack(*c, batch.entry_ids)
        runs.append(
            (
                {c: (ids(b), b.hashes.tolist(), b.redelivered.tolist()) for c, b in polled.items()},
                d.consumer_stats(),
                d.straddling_entries,
                d.pending_entries,
            )
        )
    assert runs[0] == runs[1]


def test_int_lists_name_the_item_numpy_cannot_hold() -> None:
    sel = EntryBucketSelector(bc.Buckets.equal_width(4))
    sel.add_consumer("a", 1)
    with pytest.raises(ValueError, match=r"hash_min at index 1 is 1180591620717411303424, beyond 64-bit"):
        route_entries(sel, [5, 2**70])
    with pytest.raises(TypeError, match=r"hash_min at index 2 is str 'x', not an int"):
        route_entries(sel, [1, 2, "x"])
    with pytest.raises(TypeError, match=r"hash_max at index 0 is float 1.5, not an int"):
        fits_one_bucket(bc.Buckets(), [1], [1.5])


# --------------------------------------------------------------------------------------------
# ids and hashes of the wrong type


def test_ack_with_a_bad_id_type_says_what_is_wrong_and_a_huge_id_is_not_pending():
    d = bc.Dispatcher(bc.Buckets.equal_width(2))
    d.add_consumer("a", 1)
    d.offer([1, 2], hash_min=[0, 0x9000])
    for bad in (1.0, True, "x", b"1", None):
        with pytest.raises(TypeError, match="entry_ids"):
            d.ack("a", 1, bad)
    with pytest.raises(ValueError, match="1-D"):
        d.ack("a", 1, [[1]])
    for huge in (2**70, [2**70], np.array([2**63], dtype=np.uint64)):
        with pytest.raises(KeyError, match="not pending"):
            d.ack("a", 1, huge)
    assert d.pending_entries == 2
    assert d.ack("a", 1, np.array([1, 2], dtype=np.uint64)) == 2


def test_a_bool_inside_an_int_list_is_refused_not_read_as_0_or_1():
    sel = bc.EntryBucketSelector(bc.Buckets.equal_width(2))
    sel.add_consumer("a", 1)
    sel.add_consumer("b", 1)
    with pytest.raises(TypeError, match=r"hash_min.*index 1"):
        bc.route_entries(sel, [0x9000, True])
    with pytest.raises(TypeError, match=r"hash_max.*index 0"):
        bc.fits_one_bucket(sel.buckets, [0, 1], [False, 0x9000])
    d = bc.Dispatcher(sel.buckets)
    d.add_consumer("a", 1)
    with pytest.raises(TypeError, match=r"entry_ids.*index 1"):
        d.offer([0, True], hash_min=[0, 0x9000])
    with pytest.raises(TypeError, match=r"message_count.*index 0"):
        d.offer([0, 1], hash_min=[0, 0x9000], message_count=[True, 2])
    assert d.offered_entries == 0
    d.offer([0, 1], hash_min=[0, 0x9000])
    with pytest.raises(TypeError, match=r"entry_ids.*index 1"):
        d.ack("a", 1, [0, True])
    assert d.pending_entries == 2


# --------------------------------------------------------------------------------------------
# a poll that delivers nothing


# -- a poll that delivers nothing ---------------------------------------------------------------


def test_an_empty_poll_of_one_consumer_returns_one_shared_empty_deliveries():
    d = Dispatcher(bc.Buckets.equal_width(4))
    d.add_consumer(*A)
    d.add_consumer(*B)
    other = Dispatcher(bc.Buckets.equal_width(2))
    other.add_consumer(*C)
    empty = d.poll(*A)
    assert isinstance(empty, Deliveries) and len(empty) == 0
    assert d.poll(*B) is empty and d.poll(*A) is empty and other.poll(*C) is empty
    d.offer(1, 0x0001)
    got = d.poll(*A)
    assert got is not empty and got.entry_ids.tolist() == [1] and len(empty) == 0
    assert d.poll(*A) is empty


def test_the_shared_empty_deliveries_cannot_be_changed_through_its_columns_or_init():
    d = Dispatcher(bc.Buckets.equal_width(2))
    d.add_consumer(*A)
    empty = d.poll(*A)
    ids = empty.entry_ids
    assert ids.dtype == np.int64 and empty.hashes.dtype == np.uint16 and empty.redelivered.dtype == np.bool_
    ids.shape = (0, 3)  # a caller reshaping its column reaches no one else
    ids.resize(5, refcheck=False)
    assert empty.entry_ids is not ids and empty.entry_ids.shape == (0,)
    with pytest.raises(TypeError, match="cannot change"):
        empty.__init__([1], [1], [False])  # type: ignore[misc]
    assert len(empty) == 0 and empty.entry_ids.tolist() == [] and d.poll(*A) is empty
    assert type(pickle.loads(pickle.dumps(empty))) is Deliveries and len(pickle.loads(pickle.dumps(empty))) == 0


def test_a_built_deliveries_cannot_be_rebuilt():
    batch = Deliveries([1, 2], [5, 6], [False, True])
    with pytest.raises(TypeError, match="cannot change"):
        batch.__init__([9], [9], [True])  # type: ignore[misc]
    assert batch.entry_ids.tolist() == [1, 2] and batch.redelivered.tolist() == [False, True]


def test_an_empty_poll_of_every_consumer_returns_one_shared_empty_dict_that_refuses_changes():
    d = Dispatcher(bc.Buckets.equal_width(4))
    empty = d.poll()
    assert empty == {} and isinstance(empty, dict) and not empty
    d.add_consumer(*A)
    assert d.poll() is empty and Dispatcher(bc.Buckets.equal_width(2)).poll() is empty
    refusals = (
        lambda r: r.__setitem__(A, None),
        lambda r: r.__delitem__(A),
        lambda r: r.update({A: None}),
        lambda r: r.setdefault(A, None),
        lambda r: r.pop(A, None),
        lambda r: r.popitem(),
        lambda r: r.clear(),
        lambda r: r.__ior__({A: None}),
    )
    for refuse in refusals:
        with pytest.raises(TypeError, match="shared by every poll"):
            refuse(empty)
    assert empty == {} and d.poll() is empty
    mine = dict(empty)
    mine[A] = None  # a copy is the caller's own
    assert empty == {}
    d.offer(1, 0x0001)
    got = d.poll()
    assert got is not empty and list(got) == [A] and got[A].entry_ids.tolist() == [1]
    assert d.poll() is empty
