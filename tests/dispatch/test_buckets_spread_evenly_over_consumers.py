"""What a membership change returns (BucketMoves) and what a poll that delivers nothing returns."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bucketcore as bc
from bucketcore.dispatch import BucketMove, BucketMoves, Deliveries, Dispatcher, EntryBucketSelector

A, B, C = ("a", 1), ("b", 2), ("c", 3)


def spread_owner(members: list[tuple[str, int]], n: int, b: int) -> tuple[str, int] | None:
    """The owner of bucket b by the formula of docs/design.md: member j of k owns [j*n//k, (j+1)*n//k)."""
    k = len(members)
    if k == 0:
        return None
    return next(m for j, m in enumerate(sorted(members)) if j * n // k <= b < (j + 1) * n // k)


def reference_moves(before: list[tuple[str, int]], after: list[tuple[str, int]], n: int) -> tuple[BucketMove, ...]:
    """The moves between two memberships, bucket by bucket: runs of one (old, new) owner change."""
    out: list[BucketMove] = []
    run: tuple[int, object, object] | None = None
    for b in range(n):
        old, new = spread_owner(before, n, b), spread_owner(after, n, b)
        if run is not None and (old, new) != run[1:]:
            out.append(BucketMove(range(run[0], b), run[1], run[2]))  # type: ignore[arg-type]
            run = None
        if run is None and old != new:
            run = (b, old, new)
    if run is not None:
        out.append(BucketMove(range(run[0], n), run[1], run[2]))  # type: ignore[arg-type]
    return tuple(out)


def many_moves() -> tuple[BucketMoves, tuple[BucketMove, ...]]:
    """A join among 7 members over 100 buckets (several moves) and the tuple it stands for."""
    members = [(f"m{i}", i) for i in range(7)]
    sel = EntryBucketSelector(bc.Buckets.equal_width(100))
    for m in members:
        sel.add_consumer(*m)
    moves = sel.add_consumer("m3x", 99)
    expected = reference_moves(members, [*members, ("m3x", 99)], 100)
    assert len(expected) > 4
    return moves, expected


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 300),
    names=st.lists(st.integers(0, 40), min_size=1, max_size=25, unique=True),
    data=st.data(),
)
def test_a_membership_change_reports_exactly_the_runs_whose_owner_changed(n, names, data):
    sel = EntryBucketSelector(bc.Buckets.equal_width(n))
    members: list[tuple[str, int]] = []
    for name in names:
        consumer = (f"c{name:02d}", name)
        if members and data.draw(st.booleans()):
            leaver = data.draw(st.sampled_from(members))
            after = [m for m in members if m != leaver]
            moves = sel.remove_consumer(*leaver)
        else:
            after = [*members, consumer]
            moves = sel.add_consumer(*consumer)
        assert isinstance(moves, BucketMoves)
        expected = reference_moves(members, after, n)
        assert moves == expected and tuple(moves) == expected and len(moves) == len(expected)
        members = after


def test_bucket_moves_index_slice_and_iterate_as_their_tuple():
    moves, expected = many_moves()
    n = len(expected)
    for i in range(-n, n):
        assert moves[i] == expected[i]
    assert moves[np.int64(1)] == expected[1]
    for sl in (slice(None), slice(1, 4), slice(None, None, -1), slice(-3, None), slice(0, n, 2), slice(5, 1)):
        part = moves[sl]
        assert isinstance(part, BucketMoves) and part == expected[sl] and list(part) == list(expected[sl])
    assert list(moves) == list(expected) and list(reversed(moves)) == list(reversed(expected))
    assert [m.buckets for m in moves] == [m.buckets for m in expected]
    assert expected[2] in moves and BucketMove(range(0, 1), None, A) not in moves
    assert moves.index(expected[3]) == 3 and moves.count(expected[3]) == 1
    with pytest.raises(ValueError, match="not in BucketMoves"):
        moves.index(expected[3], 4)
    assert repr(moves) == repr(expected) and str(moves) == str(expected)
    assert hash(moves) == hash(expected) and {moves: 1}[expected] == 1
    assert moves + () == expected and () + moves == expected and moves + moves == expected * 2
    assert moves * 2 == expected * 2 and 2 * moves == expected * 2
    assert bool(moves) and not bool(BucketMoves())


def test_bucket_moves_compare_as_their_tuple():
    moves, expected = many_moves()
    assert moves == expected and expected == moves and not moves != expected
    assert moves != expected[:-1] and moves != expected[::-1]
    assert moves == BucketMoves(expected) and moves[1:] != moves
    assert moves <= expected and not moves < expected and moves[:2] < expected
    assert moves != list(expected)  # a tuple never equals a list
    with pytest.raises(TypeError):
        _ = moves < list(expected)


def test_bad_indexes_raise_as_a_tuples_do():
    moves, expected = many_moves()
    n = len(expected)
    for i in (n, -n - 1, 2**70):
        with pytest.raises(IndexError, match="out of range"):
            moves[i]
    with pytest.raises(TypeError, match="integers or slices, not str"):
        moves["1"]  # type: ignore[index]


def test_bucket_moves_columns_match_the_moves_and_are_fresh_arrays():
    moves, expected = many_moves()
    assert moves.starts.dtype == np.int32 and moves.starts.tolist() == [m.buckets.start for m in expected]
    assert moves.stops.tolist() == [m.buckets.stop for m in expected]
    assert moves.old_owners == tuple(m.old_owner for m in expected)
    assert moves.new_owners == tuple(m.new_owner for m in expected)
    starts = moves.starts
    starts[:] = -1  # a caller's copy: the moves do not change
    assert moves.starts is not starts and moves == expected


def test_bucket_moves_pickle_and_copy_to_equal_bucket_moves():
    moves, expected = many_moves()
    for back in (pickle.loads(pickle.dumps(moves)), copy.copy(moves), copy.deepcopy(moves)):
        assert type(back) is BucketMoves and back == moves == expected


def test_bucket_moves_are_built_from_bucket_moves_and_refuse_anything_else():
    assert BucketMoves([BucketMove(range(0, 2), None, A)]) == (BucketMove(range(0, 2), None, A),)
    with pytest.raises(TypeError, match="iterable of BucketMove, not int"):
        BucketMoves(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="move 1 is a tuple"):
        BucketMoves([BucketMove(range(0, 2), None, A), (range(2, 3), None, A)])
    with pytest.raises(TypeError, match="move 0: buckets is a list"):
        BucketMoves([BucketMove([0, 1], None, A)])  # type: ignore[arg-type]
    for bad in (range(2, 2), range(0, 4, 2), range(-1, 3), range(0, 65537)):
        with pytest.raises(ValueError, match="move 0: buckets"):
            BucketMoves([BucketMove(bad, None, A)])


def test_bucket_moves_never_change_once_built():
    moves, expected = many_moves()
    with pytest.raises(TypeError, match="cannot change"):
        moves.__init__([])  # type: ignore[misc]
    with pytest.raises(TypeError):
        moves[0] = expected[1]  # type: ignore[index]
    with pytest.raises(AttributeError):
        moves.starts = np.zeros(3)  # type: ignore[misc]
    assert moves == expected


def test_the_dispatcher_returns_bucket_moves_and_an_empty_one_for_a_second_crash_removal():
    d = Dispatcher(bc.Buckets.equal_width(4))
    d.add_consumer(*A)
    moves = d.add_consumer(*B)
    assert isinstance(moves, BucketMoves) and moves == (BucketMove(range(2, 4), A, B),)
    d.offer(1, 0xF000)
    d.poll()
    assert d.remove_consumer(*B) == (BucketMove(range(2, 4), B, A),)
    again = d.remove_consumer(*B, crash=True)
    assert isinstance(again, BucketMoves) and again == () and len(again) == 0 and list(again) == []


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
