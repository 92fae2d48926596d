"""Conformance with the reference implementation of PIP-486 (apache/pulsar broker, pulsar-common).

Each test is translated from a test of the reference (its Java class and method are named in the
test's comment) and states the rule in bucketcore's terms. Where bucketcore deliberately differs
(it raises where the reference clamps), the test says so; docs/design.md gives the reasons.
"""

from __future__ import annotations

import pytest

import bucketcore as bc
from bucketcore import InvalidBoundaryError, InvalidLayoutError
from bucketcore.controller import assignable_segments, compute_assignment
from bucketcore.layout import MAX_BUCKETS_PER_SEGMENT, Buckets, Segment, TopicLayout

TOPIC = "persistent://tenant/ns/topic"


def one_segment(n: int) -> TopicLayout:
    """ScalableTopicController.createInitialMetadata(1, n): one segment over the ring with N = n."""
    return TopicLayout(0, [Segment(0, 0, 0xFFFF, Buckets.equal_width(n))], TOPIC)


def equal_segments(count: int, n: int) -> TopicLayout:
    """createInitialMetadata(count, count * n): ``count`` equal ranges, N = n each."""
    width = 0x10000 // count
    segments = [
        Segment(i, i * width, 0xFFFF if i == count - 1 else (i + 1) * width - 1, Buckets.equal_width(n))
        for i in range(count)
    ]
    return TopicLayout(0, segments, TOPIC)


def holders(result: dict[str, bc.Assignment], segment_id: int) -> int:
    return sum(segment_id in a.segment_ids for a in result.values())


def idle(result: dict[str, bc.Assignment]) -> int:
    return sum(a.idle for a in result.values())


# --- 1. a drained parent retires from the assignment ----------------------------------------------


def test_drained_rollover_parent_retires_and_every_consumer_moves_to_the_successor() -> None:
    # SubscriptionCoordinatorTest.testDrainedParentRetiresFromAssignment: N=4 rolled over to N=8,
    # five consumers. Before the drain the parent's 4 buckets cap the group at 4 owners (the
    # successor is gated, one consumer idles); after it, all five share the successor.
    rolled = one_segment(4).rebucket(0, Buckets.equal_width(8))
    names = [f"consumer-{i}" for i in range(1, 6)]
    before = compute_assignment(rolled, names)
    assert (holders(before, 0), holders(before, 1), idle(before)) == (4, 0, 1)
    after = compute_assignment(rolled, names, drained={0})
    assert (holders(after, 0), holders(after, 1), idle(after)) == (0, 5, 0)
    for assignment in after.values():
        (segment,) = assignment.segments
        assert segment.bucket_ranges == Buckets.equal_width(8).ranges  # the full list, for each sharer


def test_split_children_wait_for_the_parent_which_retires_once_drained() -> None:
    # SubscriptionCoordinatorTest.testActiveChildrenBlockedUntilParentDrained: after split(0) of
    # four segments, the sealed parent and the untouched segments are assigned and the children
    # are blocked; once 0 is drained the children are assigned and 0 is not.
    layout = equal_segments(4, 1).split(0)
    children = [s.segment_id for s in layout.segments if s.parent_ids == (0,)]
    before = set(compute_assignment(layout, ["consumer-1"])["consumer-1"].segment_ids)
    assert before == {0, 1, 2, 3}
    after = set(compute_assignment(layout, ["consumer-1"], drained={0})["consumer-1"].segment_ids)
    assert after == {1, 2, 3, *children}


def test_a_sealed_segment_not_yet_drained_stays_assigned() -> None:
    # SubscriptionCoordinatorTest.testInstallDrainCheckerAfterRestoreEnablesOrdering: "sealed
    # parent stays" while nothing is drained (its backlog must be consumed).
    layout = equal_segments(4, 1).split(0)
    assert 0 in [s.segment_id for s in assignable_segments(layout)]
    assert layout.segment(0).state == bc.SEALED


# --- 2. rebucketing to the current boundary list is an error --------------------------------------


def test_rebucket_to_the_unchanged_list_is_refused() -> None:
    # SegmentLayoutTest.testRebucketRejectsInvalidTargets: unknown segment, unchanged bucketing
    # (the initial segment already has N=4) and a sealed segment are all refused.
    layout = one_segment(4)
    with pytest.raises(KeyError, match="no segment 99"):
        layout.rebucket(99, Buckets.equal_width(8))
    with pytest.raises(InvalidLayoutError, match="cannot rebucket segment 0: unchanged bucketing"):
        layout.rebucket(0, Buckets.equal_width(4))
    with pytest.raises(InvalidLayoutError, match="cannot rebucket segment 0: it is sealed"):
        layout.split(0).rebucket(0, Buckets.equal_width(8))


def test_rebucket_rollover_keeps_the_range_and_carries_the_new_list() -> None:
    # SegmentLayoutTest.testRebucketSegment
    after = one_segment(4).rebucket(0, Buckets.equal_width(8))
    assert after.epoch == 1 and len(after.active_segments) == 1 and len(after.segments) == 2
    sealed, successor = after.segment(0), after.segment(1)
    assert sealed.state == bc.SEALED and sealed.child_ids == (1,)
    assert successor.parent_ids == (0,) and successor.buckets.count == 8
    assert (successor.hash_start, successor.hash_end) == (sealed.hash_start, sealed.hash_end)


# --- 3. bucket 0 must hold its canonical hash 1 ---------------------------------------------------


def test_canonical_hash_of_bucket_zero_is_one() -> None:
    # EntryBucketConsumerSelectorTest.testBucketIndexAndCanonicalHash
    b = Buckets.equal_width(4)
    assert [b.canonical_hash(i) for i in range(4)] == [1, 0x4000, 0x8000, 0xC000]
    assert [b.bucket_of(h) for h in (0x0000, 0x3FFF, 0x4000, 0x7FFF, 0x8000, 0xC000, 0xFFFF)] == [0, 0, 1, 1, 2, 3, 3]
    assert b.bucket_of(b.canonical_hash(0)) == 0


def test_a_list_whose_bucket_zero_is_one_hash_has_no_canonical_hash_for_it() -> None:
    # EntryBucketConsumerSelector.canonicalHashOfBucket nudges bucket 0 to 1 "since 1 is still
    # inside bucket 0"; a first split of 1 breaks that. Buckets still accepts the list (a
    # producer can stamp by it; equal_width(65536) makes it) but says it is not dispatchable
    # and refuses to name a canonical hash for bucket 0 rather than return one from bucket 1.
    for b in (Buckets([1, 0x8000]), Buckets.equal_width(65536)):
        assert not b.dispatchable
        assert b.bucket_of(1) == 1
        with pytest.raises(InvalidBoundaryError, match="bucket 0 has no canonical hash"):
            b.canonical_hash(0)
        with pytest.raises(InvalidBoundaryError, match="cannot be dispatched: its first split is 1"):
            b.check_dispatchable()
        assert b.canonical_hash(1) == 1 and b.canonical_hash([1]).tolist() == [1]
    assert Buckets([2]).dispatchable and Buckets().dispatchable and Buckets.equal_width(32768).dispatchable


def test_selector_and_dispatcher_refuse_a_list_whose_bucket_zero_is_one_hash() -> None:
    # EntryBucketConsumerSelectorTest.testBucketIndexAndCanonicalHash relies on it and the
    # reference dispatcher (PersistentEntryBucketDispatcherMultipleConsumers) refuses a declared
    # boundary list that breaks it: bucket 0 = [0x0000, 0x0000] cannot hold its canonical hash 1.
    bad = Buckets([1, 0x8000])
    with pytest.raises(InvalidBoundaryError, match="the segment's boundary list cannot be dispatched"):
        bc.EntryBucketSelector(bad)
    with pytest.raises(InvalidBoundaryError, match="cannot be dispatched"):
        bc.Dispatcher(Buckets.equal_width(65536))
    selector = bc.EntryBucketSelector(Buckets([2, 0x8000]))  # bucket 0 = [0, 1] holds 1
    with pytest.raises(InvalidBoundaryError, match="the declared boundary list cannot be dispatched"):
        selector.validate([1, 0x8000])
    with pytest.raises(InvalidBoundaryError, match="the declared boundary list cannot be dispatched"):
        selector.add_consumer("a", 1, declared=[(0, 0), (1, 0x7FFF), (0x8000, 0xFFFF)])
    assert selector.consumers == ()  # nothing changed
    selector.add_consumer("a", 1, declared=[2, 0x8000])
    assert selector.owner_of(1) == ("a", 1)


# --- 4. equal_width(0) is the empty list ----------------------------------------------------------


def test_equal_width_of_zero_or_one_is_one_bucket() -> None:
    # EntryBucketSplitsTest.testEqualWidthSingleBucketHasNoSplits
    assert Buckets.equal_width(1).splits == ()
    assert Buckets.equal_width(0).splits == ()
    assert Buckets.equal_width(0) == Buckets()


def test_equal_width_matches_the_reference_lists() -> None:
    # EntryBucketSplitsTest.testEqualWidthPowersOfTwoAreExact / testEqualWidthNonPowerOfTwoRoundsDown
    assert Buckets.equal_width(2).splits == (0x8000,)
    assert Buckets.equal_width(4).splits == (0x4000, 0x8000, 0xC000)
    assert Buckets.equal_width(3).splits == (21845, 43690)


def test_equal_width_above_the_ring_is_refused_not_clamped() -> None:
    # EntryBucketSplitsTest.testEqualWidthClampsToRingSize: the reference clamps a count above
    # its ring size. bucketcore deliberately refuses it (a clamped list would not have the N the
    # caller asked for), and refuses a negative count too.
    with pytest.raises(InvalidBoundaryError, match="bucket count 262144 is outside 0..65536"):
        Buckets.equal_width(65536 * 4)
    with pytest.raises(InvalidBoundaryError, match="bucket count -1 is outside 0..65536"):
        Buckets.equal_width(-1)
    assert Buckets.equal_width(65536).count == 65536


# --- 5. the ceiling on buckets per segment --------------------------------------------------------


def test_merge_is_clamped_to_the_ceiling() -> None:
    # EntryBucketSplitsTest.testMergeClampsToBucketCeiling: 2 x N=4 merged under a ceiling of 6
    # gives N=6, not 8.
    merged = equal_segments(2, 4).merge(0, 1, max_buckets=6)
    assert merged.segment(2).buckets == Buckets.equal_width(6)


def test_merge_sums_the_parents_buckets_below_the_ceiling() -> None:
    # EntryBucketSplitsTest.testMergeSumsChildBuckets / testSplitHalvesParentBuckets /
    # testSplitOfSingleBucketStaysSingleBucket
    merged = equal_segments(4, 1).merge(0, 1)
    assert merged.segment(4).buckets.count == 2
    halves = one_segment(4).split(0)
    assert [halves.segment(i).buckets.count for i in (1, 2)] == [2, 2]
    ones = equal_segments(4, 1).split(0)
    assert [ones.segment(i).buckets.count for i in (4, 5)] == [1, 1]


def test_the_default_ceiling_is_the_reference_brokers_1024() -> None:
    # AutoScalePolicyEvaluatorTest (its baseConfig helper): maxEntryBucketsPerSegment(1024), the broker default.
    assert MAX_BUCKETS_PER_SEGMENT == 1024
    big = equal_segments(2, 1000)
    assert big.merge(0, 1).segment(2).buckets.count == 1024
    assert big.merge(0, 1, max_buckets=2000).segment(2).buckets.count == 2000
    # a split never hands a child more than the ceiling either
    huge = one_segment(4096)
    assert huge.split(0).segment(1).buckets.count == 1024
    assert huge.split(0, max_buckets=4096).segment(1).buckets.count == 2048


def test_rebucket_above_the_ceiling_is_refused_not_clamped() -> None:
    # The reference clamps the counts its controller computes (AutoScalePolicyEvaluatorTest.
    # testRebucketCapsAtMaxBucketsPerSegment); a list the caller built is never silently
    # replaced by another, so bucketcore refuses it and names the ceiling.
    layout = one_segment(4)
    with pytest.raises(InvalidLayoutError, match="to 2048 buckets: above the ceiling of 1024"):
        layout.rebucket(0, Buckets.equal_width(2048))
    assert layout.rebucket(0, Buckets.equal_width(2048), max_buckets=2048).segment(1).buckets.count == 2048


# --- silent acceptances that now raise or are documented ------------------------------------------


def test_drained_id_the_layout_does_not_know_is_refused() -> None:
    layout = one_segment(4).split(0)
    with pytest.raises(ValueError, match="drained contains segment 99, which layout epoch 1 neither holds nor names"):
        compute_assignment(layout, ["a"], drained=[99])
    # an id the layout still names (a drained parent garbage-collected from it) is accepted
    gc = TopicLayout(2, [s for s in layout.segments if s.segment_id != 0], TOPIC)
    assert compute_assignment(gc, ["a"], drained=[0]) == compute_assignment(gc, ["a"])


def test_balanced_with_no_observations_is_equal_width() -> None:
    assert Buckets.balanced([], 4) == Buckets.equal_width(4)
    assert Buckets.balanced([5, 9], 4, weights=[0, 0]) == Buckets.equal_width(4)


# --- the rest of the reference's boundary-list and layout tests -----------------------------------


def test_buckets_for_budget_floors_at_one() -> None:
    # EntryBucketSplitsTest.testBucketsForBudgetFloorsAtLeastOne
    assert [bc.buckets_for_budget(4, k) for k in (1, 2, 4, 8, 3)] == [4, 2, 1, 1, 1]


def test_ranges_from_splits() -> None:
    # EntryBucketSplitsTest.testRangesSingleBucketSpansWholeRing / testRangesFromSplits
    assert Buckets().ranges == [(0, 0xFFFF)]
    assert Buckets([0x8000]).ranges == [(0, 0x7FFF), (0x8000, 0xFFFF)]
    assert Buckets([0x4000, 0x8000, 0xC000]).ranges == [
        (0, 0x3FFF),
        (0x4000, 0x7FFF),
        (0x8000, 0xBFFF),
        (0xC000, 0xFFFF),
    ]


def test_split_seals_the_parent_and_adds_two_children_over_its_halves() -> None:
    # SegmentLayoutTest.testSplitSegment: createInitialMetadata(2, 4) then splitSegment(0)
    after = equal_segments(2, 2).split(0)
    assert after.epoch == 1 and len(after.active_segments) == 3 and len(after.segments) == 4
    assert after.segment(0).state == bc.SEALED and after.segment(0).child_ids == (2, 3)
    assert [after.segment(i).parent_ids for i in (2, 3)] == [(0,), (0,)]
    assert [(after.segment(i).hash_start, after.segment(i).hash_end) for i in (2, 3)] == [
        (0x0000, 0x3FFF),
        (0x4000, 0x7FFF),
    ]


def test_split_or_rebucket_of_a_sealed_segment_and_merge_of_non_adjacent_ones_are_refused() -> None:
    # SegmentLayoutTest.testSplitNonActiveSegment / testMergeNonAdjacentSegments
    after = equal_segments(2, 2).split(0)
    with pytest.raises(InvalidLayoutError, match="cannot split segment 0: it is sealed"):
        after.split(0)
    with pytest.raises(InvalidLayoutError, match="not adjacent"):
        equal_segments(4, 1).merge(0, 2)


def test_merge_seals_both_parents_and_covers_their_ranges() -> None:
    # SegmentLayoutTest.testMergeSegments: split 0, then merge its children back
    merged = equal_segments(2, 2).split(0).merge(2, 3)
    assert merged.epoch == 2 and len(merged.active_segments) == 2
    assert merged.segment(2).state == merged.segment(3).state == bc.SEALED
    child = merged.segment(4)
    assert child.state == bc.ACTIVE and child.parent_ids == (2, 3)
    assert (child.hash_start, child.hash_end) == (0x0000, 0x7FFF)


def test_spread_is_independent_of_join_order_and_caps_owners_at_n() -> None:
    # EntryBucketConsumerSelectorTest.testDeterministicSpreadIsAddOrderIndependent /
    # testSpreadWithMoreConsumersThanBuckets / testSelectWithNoConsumers
    four = Buckets.equal_width(4)
    one, two = bc.EntryBucketSelector(four), bc.EntryBucketSelector(four)
    one.add_consumer("consumer-a", 1)
    one.add_consumer("consumer-b", 2)
    two.add_consumer("consumer-b", 2)
    two.add_consumer("consumer-a", 1)
    expected = [("consumer-a", 1)] * 2 + [("consumer-b", 2)] * 2
    assert [one.owner_of(four.canonical_hash(b)) for b in range(4)] == expected
    assert [two.owner_of(four.canonical_hash(b)) for b in range(4)] == expected
    many = bc.EntryBucketSelector(four)
    for i in range(6):
        many.add_consumer(f"consumer-{i}", i)
    assert len({many.owner_of(four.canonical_hash(b)) for b in range(4)}) == 4
    empty = bc.EntryBucketSelector(four)
    assert empty.owner_of(1) is None
    empty.add_consumer("consumer-a", 1)
    empty.remove_consumer("consumer-a", 1)
    assert empty.owner_of(1) is None
