"""Broker dispatch: the selector's spread, vectorised routing, fits_one_bucket and the Dispatcher.

Oracles are written here in slow pure Python (docs/design.md, "Boundary lists" and "Dispatch"): bucket_of as a count of
splits <= h, the spread formula, a per-entry routing loop, and for the Dispatcher a model of the
consumers that checks per-key order and handoff safety at every delivery.
"""

from __future__ import annotations

import functools
from collections import defaultdict

import mmh3
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, target
from hypothesis import strategies as st

import bucketcore as bc
from bucketcore.dispatch import (
    MALFORMED,
    NO_CONSUMER,
    BucketMove,
    Dispatcher,
    EntryBucketSelector,
    MalformedStampError,
    fits_one_bucket,
    route_entries,
    sticky_hashes,
)

# --------------------------------------------------------------------------------------------
# oracles


def ref_bucket_of(splits: tuple[int, ...], h: int) -> int:
    return sum(1 for s in splits if s <= h)


def ref_owners(n_buckets: int, consumers: list[tuple[str, int]]) -> list[tuple[str, int] | None]:
    ordered = sorted(consumers)
    k = len(ordered)
    owners: list[tuple[str, int] | None] = [None] * n_buckets
    for j, c in enumerate(ordered):
        for b in range(j * n_buckets // k, (j + 1) * n_buckets // k):
            owners[b] = c
    return owners


def ref_route(splits, consumers, hash_min, stamped, key_hash):
    owners = ref_owners(len(splits) + 1, consumers)
    ordered = sorted(consumers)
    out = []
    for i, lo in enumerate(hash_min):
        h = lo if stamped is None or stamped[i] else key_hash[i] & 0xFFFF
        owner = owners[ref_bucket_of(splits, h)]
        out.append(-1 if owner is None else ordered.index(owner))
    return out


# dispatchable lists: bucket 0 holds its canonical hash 1 (a first split of 1 is refused)
splits_strategy = st.lists(st.integers(2, 0xFFFF), max_size=40, unique=True).map(lambda s: tuple(sorted(s)))
consumer_strategy = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c", "zed", "ü"]), st.integers(0, 5)), max_size=12, unique=True
)


def selector_with(splits, consumers) -> EntryBucketSelector:
    sel = EntryBucketSelector(bc.Buckets(splits))
    for name, cid in consumers:
        sel.add_consumer(name, cid)
    return sel


def covered_hashes(buckets: bc.Buckets, bucket_indexes) -> list[tuple[int, int]]:
    """Merge the hash ranges of a set of buckets into maximal inclusive ranges."""
    out: list[tuple[int, int]] = []
    for b in sorted(bucket_indexes):
        start, end = buckets.ranges[b]
        if out and out[-1][1] + 1 == start:
            out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return out


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
# route_entries


def test_a_stamped_entry_routes_by_bucket():
    sel = selector_with(bc.Buckets.equal_width(4).splits, [("a", 1), ("b", 1)])
    slots = route_entries(sel, np.array([0x0001, 0x7FFF, 0x8000, 0xFFFF], dtype=np.uint16))
    assert slots.dtype == np.int32
    assert slots.tolist() == [0, 0, 1, 1]


def test_hash_min_zero_routes_to_bucket_zero_and_is_exposed_as_one():
    sel = selector_with(bc.Buckets.equal_width(4).splits, [("a", 1), ("b", 1), ("c", 1), ("d", 1)])
    assert route_entries(sel, [0]).tolist() == [0]
    assert sticky_hashes([0, 5, 0xFFFF]).tolist() == [1, 5, 0xFFFF]
    # A split at 1 makes bucket 0 = [0, 0]: its canonical hash 1 would lie in bucket 1, so both
    # buckets would be exposed as hash 1. Such a list is refused (tests/test_conformance.py).
    with pytest.raises(bc.InvalidBoundaryError, match="cannot be dispatched"):
        selector_with((1, 0x8000), [("a", 1)])
    with pytest.raises(bc.InvalidBoundaryError, match="cannot be dispatched"):
        Dispatcher(bc.Buckets((1, 0x8000)))


def test_an_unstamped_entry_falls_back_to_the_key_hash():
    buckets = bc.Buckets.equal_width(16)
    sel = selector_with(buckets.splits, [(f"c{i:02d}", 0) for i in range(16)])
    keys = ["key-1", "some-routing-key", "orders/customer-42"]
    raw = [mmh3.hash(k.encode(), 0, signed=False) for k in keys]
    expected = [ref_bucket_of(buckets.splits, r & 0xFFFF) for r in raw]  # one consumer per bucket
    stamped = np.zeros(3, dtype=bool)
    junk_min = np.array([0xFFFF, 0, 0x1234], dtype=np.int64)  # ignored for unstamped entries
    assert route_entries(sel, junk_min, key_hash=np.array(raw, np.uint32), stamped=stamped).tolist() == expected
    # A KeyHashes works too, and with no stamp at all hash_min may be None.
    kh = bc.hash_keys(keys)
    assert route_entries(sel, junk_min, key_hash=kh, stamped=stamped).tolist() == expected
    assert route_entries(sel, None, key_hash=kh).tolist() == expected
    assert sticky_hashes(None, key_hash=raw).tolist() == [r & 0xFFFF or 1 for r in raw]
    # Keyless: bucket hash 0.
    assert route_entries(sel, None, key_hash=bc.hash_keys([None])).tolist() == [0]


def test_a_straddling_stamp_routes_by_hash_min_and_is_counted():
    sel = selector_with(bc.Buckets.equal_width(4).splits, [("a", 1), ("b", 1), ("c", 1), ("d", 1)])
    slots = route_entries(sel, [0x3000, 0x4100, 0x7000, 0x1000], hash_max=[0x5000, 0x4200, 0xC000, 0x1000])
    assert slots.tolist() == [0, 1, 1, 0]
    assert sel.straddling_entries == 2
    assert sel.routed_entries == 4
    # Unstamped entries never count as straddling (their hash_max is ignored).
    route_entries(sel, [0x3000], hash_max=[0x5000], key_hash=[7], stamped=np.array([False]))
    assert sel.straddling_entries == 2


@pytest.mark.parametrize(
    "lo, hi, message",
    [
        ([5, 0x9000], [9, 0x8000], r"index 1 has a malformed stamp: hash_min=0x9000 > hash_max=0x8000"),
        ([5, 0x10000], None, r"index 1 has a malformed stamp: hash_min=65536 is outside 0..0xFFFF"),
        ([-1, 5], None, r"index 0 has a malformed stamp: hash_min=-1 is outside"),
        ([5, 6], [9, 0x10000], r"index 1 has a malformed stamp: hash_max=65536 is outside"),
        ([5, 6], [-3, 7], r"index 0 has a malformed stamp: hash_max=-3 is outside"),
    ],
)
def test_malformed_stamps_are_reported_never_routed(lo, hi, message):
    sel = selector_with((0x8000,), [("a", 1)])
    with pytest.raises(MalformedStampError, match=message) as info:
        route_entries(sel, lo, hash_max=hi)
    assert info.value.index == int(message.split("index ")[1].split(" ")[0])
    assert isinstance(info.value, ValueError) and isinstance(info.value, bc.BucketcoreError)
    assert sel.routed_entries == 0 and sel.malformed_entries == 0
    marked = route_entries(sel, lo, hash_max=hi, malformed="mark")
    assert marked[info.value.index] == MALFORMED
    assert (marked[np.arange(2) != info.value.index] == 0).all()
    assert sel.malformed_entries == 1 and sel.routed_entries == 1
    with pytest.raises(MalformedStampError):
        fits_one_bucket(bc.Buckets((0x8000,)), lo, hi if hi is not None else [0xFFFF, 0xFFFF])


def test_a_malformed_stamp_of_an_unstamped_entry_is_ignored():
    sel = selector_with((0x8000,), [("a", 1), ("b", 1)])
    slots = route_entries(
        sel, [-5, 0x9000], hash_max=[3, 0x100], key_hash=[0x9000, 0x10], stamped=np.array([False, False])
    )
    assert slots.tolist() == [1, 0]


def test_route_entries_input_errors():
    sel = selector_with((0x8000,), [("a", 1)])
    with pytest.raises(TypeError, match="dtype bool"):
        route_entries(sel, np.array([True, False]))
    with pytest.raises(TypeError, match="dtype float64"):
        route_entries(sel, np.array([1.0, 2.0]))
    with pytest.raises(TypeError, match="hash_min at index 0 is float 1.0, not an int"):
        route_entries(sel, [1.0, 2.0])
    with pytest.raises(ValueError, match="1-D"):
        route_entries(sel, np.zeros((2, 2), np.uint16))
    with pytest.raises(ValueError, match="1-D"):
        route_entries(sel, 5)
    with pytest.raises(ValueError, match="hash_max has 1 items; hash_min has 2"):
        route_entries(sel, [1, 2], hash_max=[3])
    with pytest.raises(TypeError, match="pass stamped="):
        route_entries(sel, [1, 2], key_hash=[1, 2])
    with pytest.raises(ValueError, match="index 1 is unstamped and no key_hash"):
        route_entries(sel, [1, 2], stamped=np.array([True, False]))
    with pytest.raises(TypeError, match="stamped must be a bool column"):
        route_entries(sel, [1, 2], key_hash=[1, 2], stamped=np.array([1, 0]))
    with pytest.raises(ValueError, match="key_hash at index 1 is -1"):
        route_entries(sel, [1, 2], key_hash=[1, -1], stamped=np.array([True, False]))
    with pytest.raises(ValueError, match="key_hash has 1 items; expected 2"):
        route_entries(sel, [1, 2], key_hash=[1], stamped=np.array([True, False]))
    with pytest.raises(TypeError, match="pass hash_min"):
        route_entries(sel, None)
    with pytest.raises(TypeError, match="EntryBucketSelector"):
        route_entries(object(), [1])
    with pytest.raises(ValueError, match="malformed must be"):
        route_entries(sel, [1], malformed="skip")
    # every entry stamped: a stamped mask of all True needs no key hash
    assert route_entries(sel, [1, 0x8000], stamped=np.array([True, True])).tolist() == [0, 0]
    assert route_entries(sel, np.array([], np.uint16)).tolist() == []
    assert route_entries(sel, []).tolist() == []


@settings(max_examples=120, deadline=None)
@given(splits=splits_strategy, consumers=consumer_strategy, data=st.data())
def test_route_entries_matches_a_per_entry_loop(splits, consumers, data):
    n = data.draw(st.integers(0, 60))
    hash_min = data.draw(st.lists(st.integers(0, 0xFFFF), min_size=n, max_size=n))
    key_hash = data.draw(st.lists(st.integers(0, 0xFFFFFFFF), min_size=n, max_size=n))
    use_mask = data.draw(st.booleans())
    stamped = data.draw(st.lists(st.booleans(), min_size=n, max_size=n)) if use_mask else None
    dtype = data.draw(st.sampled_from([np.uint16, np.int32, np.int64, np.uint32]))
    widths = data.draw(st.lists(st.integers(0, 0x3000), min_size=n, max_size=n))
    hash_max = [min(lo + w, 0xFFFF) for lo, w in zip(hash_min, widths, strict=False)]
    with_max = data.draw(st.booleans())
    sel = selector_with(splits, consumers)
    kwargs = {}
    if use_mask:
        kwargs = dict(stamped=np.array(stamped, dtype=bool), key_hash=np.array(key_hash, dtype=np.uint32))
    if with_max:
        kwargs["hash_max"] = np.array(hash_max, dtype=dtype)
    got = route_entries(sel, np.array(hash_min, dtype=dtype), **kwargs)
    assert got.tolist() == ref_route(splits, consumers, hash_min, stamped, key_hash)
    straddling = sum(
        1
        for i in range(n)
        if (stamped is None or stamped[i]) and ref_bucket_of(splits, hash_min[i]) != ref_bucket_of(splits, hash_max[i])
    )
    assert sel.straddling_entries == (straddling if with_max else 0)
    assert sel.routed_entries == n


def test_route_entries_large_column_matches_numpy():
    rng = np.random.default_rng(5)
    buckets = bc.Buckets.equal_width(256)
    sel = selector_with(buckets.splits, [(f"c{i:02d}", i) for i in range(64)])
    hm = rng.integers(0, 0x10000, 200_000, dtype=np.uint16)
    expected = sel.owner_slots[np.searchsorted(buckets.splits_array, hm, side="right")]
    assert np.array_equal(route_entries(sel, hm), expected)


# --------------------------------------------------------------------------------------------
# fits_one_bucket


@settings(max_examples=100, deadline=None)
@given(splits=splits_strategy, stamps=st.lists(st.tuples(st.integers(0, 0xFFFF), st.integers(0, 0xFFFF)), max_size=50))
def test_fits_one_bucket_matches_the_definition(splits, stamps):
    stamps = [(min(a, b), max(a, b)) for a, b in stamps]
    lo = np.array([a for a, _ in stamps], dtype=np.int64)
    hi = np.array([b for _, b in stamps], dtype=np.int64)
    got = fits_one_bucket(bc.Buckets(splits), lo, hi)
    assert got.dtype == np.bool_
    assert got.tolist() == [ref_bucket_of(splits, a) == ref_bucket_of(splits, b) for a, b in stamps]


def test_fits_one_bucket_under_another_layout_and_on_large_columns():
    # Entries stamped under 2 buckets, re-examined under a rebucketed successor with 4.
    old, new = bc.Buckets.equal_width(2), bc.Buckets.equal_width(4)
    lo = np.array([0x0010, 0x3000, 0x8000, 0xC000], dtype=np.uint16)
    hi = np.array([0x3FFF, 0x4000, 0xBFFF, 0xFFFF], dtype=np.uint16)
    assert fits_one_bucket(old, lo, hi).tolist() == [True, True, True, True]
    assert fits_one_bucket(new, lo, hi).tolist() == [True, False, True, True]
    assert fits_one_bucket(list(new.splits), lo, hi).tolist() == [True, False, True, True]
    rng = np.random.default_rng(9)
    a = rng.integers(0, 0x10000, 50_000)
    b = rng.integers(0, 0x10000, 50_000)
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    buckets = bc.Buckets.equal_width(7)  # the table path (>= 8192 entries) and the search path agree
    idx = np.searchsorted(buckets.splits_array, lo, side="right") == np.searchsorted(
        buckets.splits_array, hi, side="right"
    )
    assert np.array_equal(fits_one_bucket(buckets, lo, hi), idx)
    assert np.array_equal(fits_one_bucket(buckets, lo[:100], hi[:100]), idx[:100])
    with pytest.raises(ValueError, match="hash_max has 1 items"):
        fits_one_bucket(buckets, [1, 2], [3])
    with pytest.raises(MalformedStampError, match="index 0"):
        fits_one_bucket(buckets, [9], [8])


# --------------------------------------------------------------------------------------------
# Dispatcher: scenarios


def ids(batch) -> list[int]:
    return batch.entry_ids.tolist()


def make_dispatcher(n_buckets: int, *consumers: tuple[str, int]) -> Dispatcher:
    d = Dispatcher(bc.Buckets.equal_width(n_buckets))
    for c in consumers:
        d.add_consumer(*c)
    return d


A, B, C = ("a", 1), ("b", 1), ("c", 1)
# equal_width(4): bucket starts 0x0000, 0x4000, 0x8000, 0xC000
H = [0x0100, 0x4100, 0x8100, 0xC100]


def test_dispatcher_delivers_whole_entries_to_bucket_owners():
    d = make_dispatcher(4, A, B)
    assert d.offer([1, 2, 3, 4], [H[0], H[1], H[2], H[3]], message_count=[3, 1, 2, 5]) == 4
    polled = d.poll()
    assert ids(polled[A]) == [1, 2] and ids(polled[B]) == [3, 4]
    assert not polled[A].redelivered.any()
    assert d.poll() == {}
    stats = d.consumer_stats(*A)
    assert (stats.delivered_entries, stats.delivered_messages, stats.pending_entries, stats.pending_messages) == (
        2,
        4,
        2,
        4,
    )
    assert d.ack(*A, [2, 1]) == 2
    stats = d.consumer_stats(*A)
    assert (stats.pending_entries, stats.pending_messages, stats.acked_entries) == (0, 0, 2)
    bs = d.bucket_stats()
    assert bs.delivered.tolist() == [1, 1, 1, 1] and bs.pending.tolist() == [0, 0, 1, 1]
    assert bs.owner.tolist() == [0, 0, 1, 1]


def test_join_pauses_the_moving_bucket_until_the_old_owner_acks():
    d = make_dispatcher(4, A)
    d.offer([1, 2, 3], [H[2], H[3], H[0]])
    assert ids(d.poll(*A)) == [1, 2, 3]
    moves = d.add_consumer(*B)
    assert moves == (BucketMove(range(2, 4), A, B),)
    assert d.paused_buckets().tolist() == [2, 3]
    assert d.consumer_stats(*B).paused_buckets == 2
    # New entries of the paused buckets queue, in order; bucket 0 still flows to A.
    assert d.offer([4, 5, 6, 7], [H[2], H[3], H[2], H[0]]) == 1
    assert ids(d.poll(*A)) == [7]
    assert ids(d.poll(*B)) == []
    assert d.bucket_stats().queued.tolist() == [0, 0, 2, 1]
    # A acks entry 2 (bucket 3): bucket 3 drains to B; bucket 2 still waits for entry 1.
    d.ack(*A, 2)
    assert ids(d.poll(*B)) == [5]
    assert d.paused_buckets().tolist() == [2]
    d.ack(*A, 1)
    assert ids(d.poll(*B)) == [4, 6]
    assert d.paused_buckets().tolist() == []
    d.offer(8, H[2])
    assert ids(d.poll(*B)) == [8]
    assert d.consumer_stats(*B).paused_buckets == 0


def test_clean_leave_keeps_the_leavers_entries_ackable_and_pauses_its_buckets():
    d = make_dispatcher(4, A, B)
    d.offer([1, 2], [H[2], H[3]])
    assert ids(d.poll(*B)) == [1, 2]
    assert d.remove_consumer(*B) == (BucketMove(range(2, 4), B, A),)
    assert d.leaving == (B,) and d.consumers == (A,)
    assert d.consumer_stats(*B).state == "leaving"
    d.offer([3, 4], [H[2], H[0]])
    assert ids(d.poll(*A)) == [4]
    d.ack(*B, 1)
    assert ids(d.poll(*A)) == [3]
    assert B in d.leaving
    d.ack(*B, 2)
    assert d.leaving == ()
    with pytest.raises(KeyError):
        d.consumer_stats(*B)
    d2 = make_dispatcher(2, A, B)
    d2.offer(1, 0x9000)
    d2.remove_consumer(*B)
    with pytest.raises(ValueError, match="already left"):
        d2.remove_consumer(*B)
    with pytest.raises(TypeError, match="crash must be a bool"):
        d2.remove_consumer(*B, crash=1)


def test_a_leaver_may_not_rejoin_before_it_has_acked():
    d = make_dispatcher(2, A, B)
    d.offer(1, 0x9000)
    d.remove_consumer(*B)
    with pytest.raises(ValueError, match="still holds 1 unacked"):
        d.add_consumer(*B)
    d.ack(*B, 1)
    d.add_consumer(*B)
    assert d.consumers == (A, B)


def test_crash_redelivers_to_the_new_owner_first_and_in_order():
    d = make_dispatcher(4, A, B)
    d.offer([1, 2, 3, 4], [H[2], H[2], H[3], H[2]])
    assert ids(d.poll(*B)) == [1, 2, 3, 4]
    d.ack(*B, 2)  # out-of-order individual ack
    d.add_consumer(*C)  # A:0, B:1..? with 3 consumers: a[0,1) b[1,2) c[2,4)
    assert d.paused_buckets().tolist() == [2, 3]
    d.offer([5, 6], [H[2], H[3]])
    assert d.poll() == {}
    moves = d.remove_consumer(*B, crash=True)
    assert moves == (BucketMove(range(1, 2), B, A),)
    got = d.poll(*C)
    assert ids(got) == [1, 3, 4, 5, 6]
    assert got.redelivered.tolist() == [True, True, True, False, False]
    st_c = d.consumer_stats(*C)
    assert st_c.redelivered_entries == 3 and st_c.pending_entries == 5
    with pytest.raises(KeyError):
        d.ack(*B, 1)


def test_crash_also_redelivers_what_was_never_polled():
    d = make_dispatcher(2, A, B)
    d.offer([1, 2], [0x9000, 0x9001])
    d.remove_consumer(*B, crash=True)
    got = d.poll(*A)
    assert ids(got) == [1, 2] and got.redelivered.all()


def test_a_leaver_that_crashes_has_its_entries_redelivered():
    d = make_dispatcher(2, A, B)
    d.offer([1, 2, 3], [0x9000, 0x9001, 0x100])
    d.poll()
    d.remove_consumer(*B)
    d.offer(4, 0x9002)
    assert d.poll() == {}
    assert d.remove_consumer(*B, crash=True) == ()
    got = d.poll(*A)
    assert ids(got) == [1, 2, 4] and got.redelivered.tolist() == [True, True, False]
    assert d.leaving == ()


def test_without_consumers_entries_queue_until_one_joins():
    d = Dispatcher(bc.Buckets.equal_width(4))
    assert d.offer([1, 2, 3], [H[3], H[0], H[3]]) == 0
    assert d.queued_entries == 3
    assert d.add_consumer(*A) == (BucketMove(range(0, 4), None, A),)
    assert ids(d.poll(*A)) == [1, 2, 3]
    d.remove_consumer(*A, crash=True)
    assert d.queued_entries == 3 and d.consumers == ()
    d.offer(4, H[0])
    d.add_consumer(*B)
    got = d.poll(*B)
    assert ids(got) == [1, 2, 3, 4] and got.redelivered.tolist() == [True, True, True, False]


def test_unstamped_entries_route_by_key_hash_in_the_dispatcher():
    d = make_dispatcher(2, A, B)
    raw = mmh3.hash(b"key-1", 0, signed=False)  # low 16 = 0x15a0: bucket 0
    d.offer([1, 2], [0xFFFF, 0x9000], key_hash=[raw, 0], stamped=np.array([False, True]), hash_max=[0, 0x9000])
    polled = d.poll()
    assert ids(polled[A]) == [1] and polled[A].hashes.tolist() == [raw & 0xFFFF]
    assert ids(polled[B]) == [2]
    d.offer(3, None, key_hash=bc.hash_keys(["key-1"]))
    assert ids(d.poll(*A)) == [3]
    d.offer(4, 0x100, hash_max=0x9000)
    assert d.straddling_entries == 1 and ids(d.poll(*A)) == [4]


def test_dispatcher_offer_validation_is_atomic():
    d = make_dispatcher(2, A)
    d.offer([5, 6], [1, 2])
    with pytest.raises(ValueError, match="not after the last offered id 6"):
        d.offer([6, 7], [1, 2])
    with pytest.raises(ValueError, match="index 2 is 8 after 9"):
        d.offer([7, 9, 8], [1, 2, 3])
    with pytest.raises(ValueError, match="entry id at index 0 is -1"):
        Dispatcher(bc.Buckets()).offer([-1], [1])
    with pytest.raises(MalformedStampError, match="index 1"):
        d.offer([7, 8], [1, 9], hash_max=[2, 3])
    with pytest.raises(MalformedStampError, match="index 0"):
        d.offer([7], [0x10000])
    with pytest.raises(ValueError, match="message_count at index 1 is 0"):
        d.offer([7, 8], [1, 2], message_count=[1, 0])
    with pytest.raises(TypeError):
        d.offer([7, 8], [1, 2], message_count=[1.0, 2.0])
    with pytest.raises(ValueError, match="have 1 items; entry_ids has 2"):
        d.offer([7, 8], [1])
    with pytest.raises(TypeError):
        d.offer([True], [1])
    assert d.offered_entries == 2 and d.pending_entries == 2
    d.offer([7], [1])  # nothing above was half-applied: 7 is still the next id
    assert ids(d.poll(*A)) == [5, 6, 7]


def test_dispatcher_ack_errors_name_the_entry_and_change_nothing():
    d = make_dispatcher(2, A, B)
    d.offer([1, 2, 3], [0x100, 0x9000, 0x200])
    d.poll()
    with pytest.raises(
        KeyError, match=r"entry 2 is not pending on consumer \('a', 1\): pending on consumer \('b', 1\)"
    ):
        d.ack(*A, [1, 2])
    with pytest.raises(KeyError, match="entry 99 is not pending"):
        d.ack(*A, [99])
    with pytest.raises(ValueError, match="entry 3 is acked twice"):
        d.ack(*A, [3, 1, 3])
    with pytest.raises(KeyError, match="not connected"):
        d.ack("zz", 1, [1])
    assert d.consumer_stats(*A).pending_entries == 2  # the failed calls acked nothing
    d.ack(*A, np.array([1, 3], dtype=np.uint64))
    with pytest.raises(KeyError, match="already acked"):
        d.ack(*A, 1)
    assert d.ack(*A, []) == 0
    # An entry queued behind a paused bucket is not pending on anyone yet.
    d.remove_consumer(*B)  # B still holds entry 2 (bucket 1), which moves to A
    d.offer(4, 0x9001)
    with pytest.raises(KeyError, match="entry 4 is not pending on consumer \\('a', 1\\): queued for"):
        d.ack(*A, 4)


def test_dispatcher_counters_add_up():
    d = make_dispatcher(8, A, B, C)
    rng = np.random.default_rng(3)
    hm = rng.integers(0, 0x10000, 500)
    counts = rng.integers(1, 10, 500)
    d.offer(np.arange(500), hm, message_count=counts)
    polled = d.poll()
    total = sum(len(p) for p in polled.values())
    assert total == 500
    stats = d.consumer_stats()
    assert sum(s.delivered_messages for s in stats.values()) == int(counts.sum())
    assert sum(s.pending_entries for s in stats.values()) == d.pending_entries == 500
    bs = d.bucket_stats()
    assert bs.delivered.sum() == 500 and (bs.queued == 0).all() and not bs.paused.any()
    for c, p in polled.items():
        d.ack(*c, p.entry_ids)
    assert d.pending_entries == 0
    assert all(s.pending_messages == 0 for s in d.consumer_stats().values())


def test_dispatcher_log_compacts_and_keeps_acks_working():
    d = make_dispatcher(4, A)
    next_id = 0
    held = []
    for round_ in range(40):
        d.offer(np.arange(next_id, next_id + 300), np.full(300, H[round_ % 4]))
        next_id += 300
        got = d.poll(*A).entry_ids
        held.append(got[0])  # keep one early entry unacked per round
        d.ack(*A, got[1:])
    assert d.pending_entries == 40
    d.ack(*A, held)
    assert d.pending_entries == 0


# --------------------------------------------------------------------------------------------
# The whole consumption path: producer → dispatcher → consumers (property test)


class ConsumerModel:
    """What the application side of every consumer saw; checks the invariants as it goes."""

    def __init__(self, message_keys: list[str], entries: list[list[int]]) -> None:
        self.keys = message_keys
        self.entries = entries  # entry id -> message indices (send order)
        self.seq: list[int] = []  # per message: its position among its key's messages
        seen: dict[str, int] = defaultdict(int)
        for k in message_keys:
            self.seq.append(seen[k])
            seen[k] += 1
        self.earlier: dict[str, list[int]] = defaultdict(list)  # key -> message indices in send order
        for i, k in enumerate(message_keys):
            self.earlier[k].append(i)
        self.holding: dict[int, tuple[str, int]] = {}  # entry -> consumer holding it (received, unacked)
        self.unacked: dict[tuple[str, int], list[int]] = defaultdict(list)
        self.acked: set[int] = set()
        self.deliveries: dict[int, int] = defaultdict(int)
        self.lost: dict[int, int] = defaultdict(int)  # entry -> times its holder crashed with it
        self.last_seq: dict[tuple[tuple[str, int], str], int] = {}
        self.entry_of_message = {}
        for e, msgs in enumerate(entries):
            for m in msgs:
                self.entry_of_message[m] = e

    def receive(self, consumer, batch) -> None:
        for e, redelivered in zip(batch.entry_ids.tolist(), batch.redelivered.tolist(), strict=False):
            assert e not in self.acked, f"entry {e} delivered after it was acked"
            assert e not in self.holding, f"entry {e} delivered while {self.holding.get(e)} holds it"
            if not redelivered:
                assert self.deliveries[e] == 0, f"entry {e} delivered twice without a crash"
            self.deliveries[e] += 1
            for m in self.entries[e]:
                key = self.keys[m]
                # Per consumer, a key's messages arrive in send order.
                prev = self.last_seq.get((consumer, key), -1)
                assert self.seq[m] > prev, f"{consumer} got {key}#{self.seq[m]} after #{prev}"
                self.last_seq[(consumer, key)] = self.seq[m]
                # Handoff safety: every earlier message of the key is acked or held by this consumer.
                for m2 in self.earlier[key][: self.seq[m]]:
                    e2 = self.entry_of_message[m2]
                    assert e2 == e or e2 in self.acked or self.holding.get(e2) == consumer, (
                        f"{consumer} got {key}#{self.seq[m]} while #{self.seq[m2]} (entry {e2}) is "
                        f"held by {self.holding.get(e2)}"
                    )
            self.holding[e] = consumer
            self.unacked[consumer].append(e)

    def ack(self, d: Dispatcher, consumer, chosen: list[int]) -> None:
        if not chosen:
            return
        d.ack(*consumer, chosen)
        for e in chosen:
            del self.holding[e]
            self.acked.add(e)
            self.unacked[consumer].remove(e)

    def crash(self, consumer) -> None:
        for e in self.unacked.pop(consumer, []):
            del self.holding[e]
            self.lost[e] += 1


OPS = ["offer"] * 3 + ["poll"] * 2 + ["ack"] * 3 + ["join", "leave", "crash"]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_whole_consumption_path_keeps_per_key_order_through_churn(data):
    n_buckets = data.draw(st.sampled_from([1, 2, 3, 4, 8]), label="buckets")
    buckets = bc.Buckets.equal_width(n_buckets)
    n_keys = data.draw(st.integers(1, 12), label="keys")
    keys = data.draw(st.lists(st.integers(0, n_keys - 1), min_size=10, max_size=160), label="stream")
    message_keys = [f"user-{k}" for k in keys]
    table = bc.bucket_entries(
        message_keys,
        buckets,
        max_messages=data.draw(st.integers(1, 4)),
        policy=data.draw(st.sampled_from(["shared", "per_bucket"])),
    )
    entries = [
        table.order[s : s + c].tolist() for s, c in zip(table.start.tolist(), table.count.tolist(), strict=False)
    ]
    raw = bc.murmur3_32(message_keys)
    # One-message entries may come unstamped (a producer that does not bucket): key-hash routing.
    unstamped = np.array([len(m) == 1 and data.draw(st.booleans()) for m in entries], dtype=bool)
    first_raw = np.array([raw[m[0]] for m in entries], dtype=np.uint32)
    model = ConsumerModel(message_keys, entries)
    d = Dispatcher(buckets)
    names = ["a", "b", "c", "d"]
    next_cid = 0
    offered = 0

    def poll_all():
        for consumer, batch in d.poll().items():
            model.receive(consumer, batch)

    def connected():
        return list(d.consumers) + list(d.leaving)

    for _ in range(data.draw(st.integers(0, 3), label="initial consumers")):
        d.add_consumer(names[next_cid % len(names)], next_cid)
        next_cid += 1
    paused_seen = 0
    steps = data.draw(st.integers(20, 80), label="steps")
    for _ in range(steps):
        paused_seen += int(d.paused_buckets().size > 0 and offered < len(entries))
        op = data.draw(st.sampled_from(OPS))
        if op == "offer" and offered < len(entries):
            k = data.draw(st.integers(1, min(4, len(entries) - offered)))
            sl = slice(offered, offered + k)
            d.offer(
                np.arange(offered, offered + k),
                table.hash_min[sl],
                hash_max=table.hash_max[sl],
                key_hash=first_raw[sl],
                stamped=~unstamped[sl],
                message_count=table.count[sl],
            )
            offered += k
        elif op == "poll":
            poll_all()
        elif op == "ack":
            poll_all()
            holders = [c for c in connected() if model.unacked.get(c)]
            if holders:
                c = data.draw(st.sampled_from(sorted(holders)))
                pending = list(model.unacked[c])
                chosen = data.draw(st.lists(st.sampled_from(pending), unique=True, max_size=len(pending)))
                model.ack(d, c, chosen)  # any subset, in any order: individual acks
        elif op == "join":
            d.add_consumer(data.draw(st.sampled_from(names)) + "", next_cid)
            next_cid += 1
        elif op in ("leave", "crash") and connected():
            c = data.draw(st.sampled_from(sorted(connected())))
            crash = op == "crash" or c in d.leaving
            if crash:
                # The application never saw what sat in the outbox: only acknowledged state counts.
                d.remove_consumer(*c, crash=True)
                model.crash(c)
            else:
                d.remove_consumer(*c)
    target(float(paused_seen), label="steps with a paused bucket and entries still to offer")
    # Finish: everything offered, someone present, everyone acks all it holds until quiet.
    if offered < len(entries):
        sl = slice(offered, len(entries))
        d.offer(
            np.arange(offered, len(entries)),
            table.hash_min[sl],
            hash_max=table.hash_max[sl],
            key_hash=first_raw[sl],
            stamped=~unstamped[sl],
            message_count=table.count[sl],
        )
    if not d.consumers:
        d.add_consumer("last", next_cid)
    for _ in range(len(entries) + 2):
        poll_all()
        for c in connected():
            model.ack(d, c, list(model.unacked.get(c, [])))
        if d.pending_entries == 0 and d.queued_entries == 0:
            break
    poll_all()
    assert d.pending_entries == 0 and d.queued_entries == 0 and d.leaving == ()
    # Nothing lost: every entry acked exactly once; delivered once plus once per crash that held it.
    assert model.acked == set(range(len(entries)))
    for e in range(len(entries)):
        assert model.deliveries[e] == 1 + model.lost[e], (e, model.deliveries[e], model.lost[e])
    assert all(s.pending_entries == 0 and s.pending_messages == 0 for s in d.consumer_stats().values())
    assert d.bucket_stats().delivered.sum() >= len(entries)


def test_the_contract_names_are_exported():
    assert bc.EntryBucketSelector is EntryBucketSelector
    assert bc.route_entries is route_entries
    assert bc.fits_one_bucket is fits_one_bucket
    assert bc.Dispatcher is Dispatcher
    assert bc.MalformedStampError is MalformedStampError
    for name in ("EntryBucketSelector", "route_entries", "fits_one_bucket", "Dispatcher", "BucketMove"):
        assert name in bc.__all__


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


def test_queues_survive_log_compaction():
    d = make_dispatcher(2, A)
    d.offer(np.arange(900), np.full(900, 0x100))  # acked at once: the log may drop them
    d.ack(*A, d.poll(*A).entry_ids)
    d.offer(900, 0x9000)  # bucket 1, held by A
    d.poll()
    d.add_consumer(*B)  # bucket 1 moves to B: paused behind entry 900
    queued = []
    next_id = 901
    for _ in range(60):  # bucket 0 flows and is acked (the log compacts) while bucket 1 queues
        batch = np.arange(next_id, next_id + 50)
        hashes = np.where(batch % 5 == 0, 0x9000, 0x100)
        queued += batch[hashes == 0x9000].tolist()
        d.offer(batch, hashes)
        next_id += 50
        d.ack(*A, d.poll(*A).entry_ids)
    assert d.queued_entries == len(queued) and d.paused_buckets().tolist() == [1]
    d.ack(*A, 900)
    got = d.poll(*B)
    assert ids(got) == queued and not got.redelivered.any()


def test_int_lists_name_the_item_numpy_cannot_hold() -> None:
    sel = EntryBucketSelector(bc.Buckets.equal_width(4))
    sel.add_consumer("a", 1)
    with pytest.raises(ValueError, match=r"hash_min at index 1 is 1180591620717411303424, beyond 64-bit"):
        route_entries(sel, [5, 2**70])
    with pytest.raises(TypeError, match=r"hash_min at index 2 is str 'x', not an int"):
        route_entries(sel, [1, 2, "x"])
    with pytest.raises(TypeError, match=r"hash_max at index 0 is float 1.5, not an int"):
        fits_one_bucket(bc.Buckets(), [1], [1.5])
