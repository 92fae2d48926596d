"""The selector spreads a segment's buckets evenly over its consumers, and a membership change
reports exactly the buckets whose owner changed.

The spread is the formula of docs/design.md ("Dispatch"): consumer j of k, in (name, id) order,
owns buckets [j*n//k, (j+1)*n//k); owners cap at the bucket count and the surplus stays idle.
What a membership change returns (BucketMoves) behaves as the tuple of its moves; a consumer
declaring a stale boundary list is refused."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
from dispatch_reference import covered_hashes, ref_owners, selector_with, splits_strategy
from hypothesis import given, settings
from hypothesis import strategies as st

import bucketcore as bc
from bucketcore.dispatch import NO_CONSUMER, BucketMove, BucketMoves, Dispatcher, EntryBucketSelector, route_entries

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


# --------------------------------------------------------------------------------------------
# the spread: the reference's scenarios and the formula


# --------------------------------------------------------------------------------------------
# EntryBucketSelector: the reference's scenarios


def test_lone_consumer_keeps_the_segment_whole():
    sel = selector_with(bc.Buckets.equal_width(4).splits, [("only", 7)])
    assert sel.owners() == [("only", 7)] * 4
    assert sel.buckets_of("only", 7) == range(0, 4)
    assert covered_hashes(sel.buckets, sel.buckets_of("only", 7)) == [(0, 0xFFFF)]


def test_two_consumers_split_four_buckets_into_contiguous_halves_tiling_the_ring():
    sel = EntryBucketSelector(bc.Buckets.equal_width(4))
    sel.add_consumer("b", 1)
    sel.add_consumer("a", 2)  # sorted by (name, id): "a" first whatever the join order
    assert sel.consumers == (("a", 2), ("b", 1))
    halves = [covered_hashes(sel.buckets, sel.buckets_of(*c)) for c in sel.consumers]
    assert halves == [[(0x0000, 0x7FFF)], [(0x8000, 0xFFFF)]]
    assert sel.owner_of(0x7FFF) == ("a", 2) and sel.owner_of(0x8000) == ("b", 1)


def test_owners_cap_at_the_bucket_count_and_the_surplus_stays_idle():
    sel = selector_with(bc.Buckets.equal_width(4).splits, [(f"c{i}", 0) for i in range(6)])
    owners = sel.owners()
    assert len(set(owners)) == 4 and None not in owners
    idle = [c for c in sel.consumers if len(sel.buckets_of(*c)) == 0]
    assert len(idle) == 2
    assert owners == ref_owners(4, list(sel.consumers))


def test_no_consumer_means_no_owner():
    sel = EntryBucketSelector(bc.Buckets.equal_width(3))
    assert sel.owners() == [None, None, None]
    assert sel.owner_of(0x1234) is None
    assert route_entries(sel, np.array([0, 0xFFFF], dtype=np.uint16)).tolist() == [NO_CONSUMER] * 2


def test_first_join_and_last_leave_report_moves_from_and_to_nobody():
    sel = EntryBucketSelector(bc.Buckets.equal_width(4))
    assert sel.add_consumer("a", 1) == (BucketMove(range(0, 4), None, ("a", 1)),)
    assert sel.add_consumer("b", 1) == (BucketMove(range(2, 4), ("a", 1), ("b", 1)),)
    assert sel.remove_consumer("a", 1) == (BucketMove(range(0, 2), ("a", 1), ("b", 1)),)
    assert sel.remove_consumer("b", 1) == (BucketMove(range(0, 4), ("b", 1), None),)


@settings(max_examples=150, deadline=None)
@given(
    splits=splits_strategy,
    ops=st.lists(st.tuples(st.booleans(), st.sampled_from(["a", "b", "c", "d"]), st.integers(0, 3)), max_size=25),
)
def test_spread_and_moves_follow_the_formula(splits, ops):
    sel = EntryBucketSelector(bc.Buckets(splits))
    members: set[tuple[str, int]] = set()
    n = len(splits) + 1
    for add, name, cid in ops:
        before = sel.owners()
        if add and (name, cid) not in members:
            moves = sel.add_consumer(name, cid)
            members.add((name, cid))
        elif not add and (name, cid) in members:
            moves = sel.remove_consumer(name, cid)
            members.discard((name, cid))
        else:
            continue
        after = sel.owners()
        assert sel.consumers == tuple(sorted(members))
        assert after == ref_owners(n, list(members))
        # The moves are exactly the changed buckets, contiguous, sorted, from old to new owner.
        rebuilt = list(before)
        seen = []
        for mv in moves:
            assert isinstance(mv.buckets, range) and mv.buckets.step == 1 and len(mv.buckets) > 0
            assert mv.old_owner != mv.new_owner
            for b in mv.buckets:
                assert rebuilt[b] == mv.old_owner
                rebuilt[b] = mv.new_owner
                seen.append(b)
        assert seen == sorted(seen) and len(seen) == len(set(seen))
        assert rebuilt == after
        assert set(seen) == {b for b in range(n) if before[b] != after[b]}
        # owner_of agrees with the bucket lookup of every range start and end.
        for b, (start, end) in enumerate(sel.buckets.ranges):
            assert sel.owner_of(start) == after[b] == sel.owner_of(end)


def test_selector_membership_errors():
    sel = EntryBucketSelector(bc.Buckets.equal_width(2))
    sel.add_consumer("a", 1)
    with pytest.raises(ValueError, match=r"\('a', 1\) is already a member"):
        sel.add_consumer("a", 1)
    with pytest.raises(KeyError, match=r"\('a', 2\) is not a member"):
        sel.remove_consumer("a", 2)
    with pytest.raises(KeyError):
        sel.buckets_of("nobody", 0)
    with pytest.raises(TypeError, match="consumer_id must be an int"):
        sel.add_consumer("a", True)
    with pytest.raises(TypeError, match="consumer_id must be an int"):
        sel.add_consumer("a", 1.0)
    with pytest.raises(TypeError, match="consumer name must be a str"):
        sel.add_consumer(b"a", 3)
    with pytest.raises(ValueError, match=r"consumer_id must be 0\.\.2\*\*64-1 .*, not -1"):
        sel.add_consumer("a", -1)
    with pytest.raises(ValueError, match="not 18446744073709551616"):
        sel.add_consumer("a", 1 << 64)
    sel.add_consumer("big", np.uint64((1 << 64) - 1))  # the largest wire value is a valid id
    sel.remove_consumer("big", (1 << 64) - 1)
    with pytest.raises(TypeError, match="must be a Buckets"):
        EntryBucketSelector("0x8000")
    with pytest.raises(bc.InvalidBoundaryError):
        EntryBucketSelector([0x8000, 0x100])
    assert sel.consumers == (("a", 1),)  # nothing changed by the failures


def test_owner_of_checks_its_hash():
    sel = selector_with((), [("a", 1)])
    assert sel.owner_of(0) == sel.owner_of(0xFFFF) == ("a", 1)
    assert sel.owner_of(np.uint16(5)) == ("a", 1)
    with pytest.raises(ValueError, match="65536 is outside"):
        sel.owner_of(0x10000)
    with pytest.raises(ValueError, match="-1 is outside"):
        sel.owner_of(-1)
    with pytest.raises(TypeError):
        sel.owner_of(True)
    with pytest.raises(TypeError):
        sel.owner_of(1.0)


def test_owner_slots_is_read_only():
    sel = selector_with((0x8000,), [("a", 1), ("b", 2)])
    assert sel.owner_slots.tolist() == [0, 1]
    assert sel.owner_slots.dtype == np.int32
    with pytest.raises(ValueError):
        sel.owner_slots[0] = 1


def test_validate_accepts_the_same_list_in_every_form_and_rejects_a_stale_one():
    buckets = bc.Buckets.equal_width(4)
    sel = EntryBucketSelector(buckets)
    sel.validate(buckets)
    sel.validate(list(buckets.splits))
    sel.validate(buckets.ranges)
    sel.validate(np.array(buckets.splits))
    with pytest.raises(bc.StaleLayoutError, match="has 3 buckets, the segment has 4"):
        sel.validate([0x5555, 0xAAAA])
    with pytest.raises(bc.StaleLayoutError, match=r"declared split 1 \(start of bucket 2\) is 0x9000"):
        sel.validate([0x4000, 0x9000, 0xC000])
    with pytest.raises(bc.StaleLayoutError, match="do not tile"):
        sel.validate([(0, 0x3FFF), (0x4001, 0xFFFF)])
    with pytest.raises(bc.StaleLayoutError, match="end at 0xfffe"):
        sel.validate([(0, 0x7FFF), (0x8000, 0xFFFE)])
    with pytest.raises(bc.StaleLayoutError):
        sel.validate([])  # the single-bucket list
    with pytest.raises(TypeError):
        sel.validate("0x4000")
    with pytest.raises(TypeError):
        sel.validate([True, 0x8000, 0xC000])
    assert isinstance(bc.StaleLayoutError("x"), ValueError)
    EntryBucketSelector(bc.Buckets()).validate([])
    EntryBucketSelector(bc.Buckets()).validate([(0, 0xFFFF)])


def test_a_sharer_declaring_a_stale_list_is_not_added():
    sel = EntryBucketSelector(bc.Buckets.equal_width(4))
    with pytest.raises(bc.StaleLayoutError):
        sel.add_consumer("a", 1, declared=bc.Buckets.equal_width(2))
    assert sel.consumers == ()
    sel.add_consumer("a", 1, declared=bc.Buckets.equal_width(4).ranges)
    assert sel.consumers == (("a", 1),)


# --------------------------------------------------------------------------------------------
# joins and leaves among many consumers


def test_joins_and_leaves_among_many_consumers_report_the_moves_of_the_formula() -> None:
    n = 1000
    d = Dispatcher(bc.Buckets.equal_width(n))
    members = [(f"c{i:03d}", i) for i in range(0, 60, 2)]
    for m in members:
        d.add_consumer(*m)
    for joiner in [("c017", 17), ("a", 5), ("zz", 99)]:
        before = d.owners()
        moves = d.add_consumer(*joiner)
        after = d.owners()
        expected = [b for b in range(n) if before[b] != after[b]]
        assert [b for mv in moves for b in mv.buckets] == expected
        for mv in moves:
            assert all(before[b] == mv.old_owner and after[b] == mv.new_owner for b in mv.buckets)
    before = d.owners()
    moves = d.remove_consumer("c017", 17)
    after = d.owners()
    assert [b for mv in moves for b in mv.buckets] == [b for b in range(n) if before[b] != after[b]]


# --------------------------------------------------------------------------------------------
# a declared boundary list is validated in any form


_splits = st.lists(st.integers(2, 0xFFFF), max_size=8, unique=True).map(lambda s: tuple(sorted(s)))


@settings(max_examples=200, deadline=None)
@given(ours=_splits, data=st.data(), form=st.sampled_from(["buckets", "splits", "ranges", "array"]))
def test_validate_accepts_exactly_the_same_list_in_any_form(ours, data, form):
    theirs = data.draw(st.one_of(st.just(ours), _splits, st.just(ours[:-1]), st.just(tuple(sorted({*ours, 0x7777})))))
    sel = bc.EntryBucketSelector(bc.Buckets(ours))
    b = bc.Buckets(theirs)
    declared = {
        "buckets": b,
        "splits": list(theirs),
        "ranges": list(b.ranges),
        "array": np.array(b.ranges, dtype=np.int64).reshape(-1, 2),
    }[form]
    d = bc.Dispatcher(bc.Buckets(ours))
    if ours == theirs:
        sel.validate(declared)
        d.add_consumer("x", 1, declared=declared)
        assert d.consumers == (("x", 1),)
    else:
        with pytest.raises(bc.StaleLayoutError):
            sel.validate(declared)
        with pytest.raises(bc.StaleLayoutError):
            d.add_consumer("x", 1, declared=declared)
        assert d.consumers == () and sel.consumers == ()


@pytest.mark.parametrize(
    "declared",
    [
        [(0, 0x7FFF)],  # does not reach 0xFFFF
        [(1, 0xFFFF)],  # does not start at 0
        [(0, 0x3FFF), (0x5000, 0xFFFF)],  # gap
        [(0, 0x8000), (0x8000, 0xFFFF)],  # overlap
        [(0, 0x7FFF), (0x8000, 0xFFFF), (0x8000, 0xFFFF)],
        [(0x8000, 0xFFFF), (0, 0x7FFF)],  # out of order
    ],
)
def test_validate_rejects_ranges_that_do_not_tile_as_stale(declared):
    sel = bc.EntryBucketSelector(bc.Buckets.equal_width(2))
    with pytest.raises(bc.StaleLayoutError):
        sel.validate(declared)
