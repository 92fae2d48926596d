"""compute_assignment (docs/design.md, "Controller assignment"): segments first, buckets absorb
the surplus, determinism."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from layout_histories import evolve

from bucketcore.controller import AssignedSegment, Assignment, assignable_segments, compute_assignment
from bucketcore.dispatch import EntryBucketSelector
from bucketcore.layout import Buckets, Segment, TopicLayout

FULL = 0xFFFF
TOPIC = "persistent://tenant/ns/orders"


# --- an independent, slow reference of the rule ----------------------------------------------------


def ref_ranges(splits: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    bounds = [0, *splits, FULL + 1]
    return tuple((bounds[i], bounds[i + 1] - 1) for i in range(len(bounds) - 1))


def ref_topic(segment: Segment) -> str:
    tenant, namespace, name = TOPIC.split("://")[1].split("/")
    return f"segment://{tenant}/{namespace}/{name}/{segment.hash_start:04x}-{segment.hash_end:04x}-{segment.segment_id}"


def reference_assignment(layout: TopicLayout, names: list[str], drained: set[int]) -> dict[str, Assignment]:
    """Round by round: round 0 gives each segment its first owner; round r gives one more owner to
    every segment (in order) with more than r buckets, while surplus consumers remain."""
    ids_present = {s.segment_id for s in layout.segments}
    segments = sorted(
        (
            s
            for s in layout.segments
            if s.segment_id not in drained and {p for p in s.parent_ids if p in ids_present} <= drained
        ),
        key=lambda s: (s.hash_start, s.hash_end, s.segment_id),
    )
    names = sorted(names)
    owners: dict[int, list[str]] = {s.segment_id: [] for s in segments}
    if len(names) <= len(segments):
        for i, s in enumerate(segments):
            if names:
                owners[s.segment_id].append(names[i % len(names)])
    else:
        pool = list(names)
        for s in segments:
            owners[s.segment_id].append(pool.pop(0))
        round_number = 1
        while pool:
            gave = False
            for s in segments:
                if pool and s.buckets.count > round_number:
                    owners[s.segment_id].append(pool.pop(0))
                    gave = True
            if not gave:
                break
            round_number += 1
    result = {}
    for name in names:
        mine = []
        for s in segments:
            if name in owners[s.segment_id]:
                shared = len(owners[s.segment_id]) > 1
                mine.append(
                    AssignedSegment(
                        s.segment_id,
                        s.hash_start,
                        s.hash_end,
                        ref_topic(s),
                        ref_ranges(s.buckets.splits) if shared else (),
                    )
                )
        result[name] = Assignment(layout.epoch, tuple(mine))
    return result


def tiling_layout(counts: list[int], epoch: int = 7, cuts: list[int] | None = None) -> TopicLayout:
    """Active segments tiling the ring, segment i with counts[i] equal-width buckets."""
    n = len(counts)
    if cuts is None:
        cuts = [i * 0x10000 // n for i in range(1, n)]
    bounds = [0, *cuts, 0x10000]
    segments = [Segment(10 + i, bounds[i], bounds[i + 1] - 1, Buckets.equal_width(c)) for i, c in enumerate(counts)]
    return TopicLayout(epoch, segments, TOPIC)


def names_of(k: int) -> list[str]:
    return [f"consumer-{i:02d}" for i in range(k)]


# --- the reference's scenarios ----------------------------------------------------------------------


def test_lone_consumer_keeps_a_bucketed_segment_whole() -> None:
    layout = tiling_layout([4])
    result = compute_assignment(layout, ["c1"])
    assert result == {
        "c1": Assignment(7, (AssignedSegment(10, 0, FULL, "segment://tenant/ns/orders/0000-ffff-10", ()),))
    }
    assert not result["c1"].segments[0].shared  # Exclusive


def test_two_consumers_share_an_n4_segment_with_the_full_list_and_the_broker_splits_halves() -> None:
    layout = tiling_layout([4])
    result = compute_assignment(layout, ["c2", "c1"])
    full = ((0, 0x3FFF), (0x4000, 0x7FFF), (0x8000, 0xBFFF), (0xC000, 0xFFFF))
    # Normative spec (docs/design.md, "Controller assignment"): every sharer gets the full boundary list, not a slice.
    assert [a.segments[0].bucket_ranges for a in result.values()] == [full, full]
    assert result["c1"] == result["c2"]
    # The spread the PR's test observed (disjoint contiguous halves tiling the ring) is the
    # broker's, computed from the declared list and the live membership (docs/design.md, "Dispatch").
    selector = EntryBucketSelector(Buckets(result["c1"].segments[0].splits))
    selector.validate(result["c1"].segments[0].splits)
    selector.add_consumer("c1", 1)
    selector.add_consumer("c2", 2)
    owners = [owner[0] if owner else None for owner in selector.owners()]
    assert owners == ["c1", "c1", "c2", "c2"]
    halves = {
        name: (full[owners.index(name)][0], full[len(owners) - 1 - owners[::-1].index(name)][1])
        for name in ("c1", "c2")
    }
    assert halves == {"c1": (0, 0x7FFF), "c2": (0x8000, 0xFFFF)}


def test_owners_cap_at_bucket_count_and_the_surplus_stays_idle() -> None:
    layout = tiling_layout([4])
    result = compute_assignment(layout, names_of(7))
    busy = [n for n, a in result.items() if not a.idle]
    assert busy == names_of(4)
    assert [n for n, a in result.items() if a.idle] == names_of(7)[4:]
    assert all(result[n] == Assignment(7, ()) for n in names_of(7)[4:])


def test_single_bucket_segments_are_never_shared() -> None:
    layout = tiling_layout([1, 1])
    result = compute_assignment(layout, names_of(5))
    assert [a.segment_ids for a in result.values()] == [(10,), (11,), (), (), ()]
    assert all(not s.shared for a in result.values() for s in a.segments)


def test_fewer_consumers_than_segments_round_robin_whole() -> None:
    layout = tiling_layout([4, 2, 1, 8, 3])
    result = compute_assignment(layout, ["b", "a"])
    assert result["a"].segment_ids == (10, 12, 14)
    assert result["b"].segment_ids == (11, 13)
    assert all(s.bucket_ranges == () for a in result.values() for s in a.segments)


def test_surplus_cycles_over_segments_skipping_full_ones() -> None:
    # counts 2, 1, 3: first owners a,b,c; surplus d → seg 10, e → seg 12 (11 full), f → seg 12, g idle
    layout = tiling_layout([2, 1, 3])
    result = compute_assignment(layout, list("gfedcba"))
    assert {n: a.segment_ids for n, a in result.items()} == {
        "a": (10,),
        "b": (11,),
        "c": (12,),
        "d": (10,),
        "e": (12,),
        "f": (12,),
        "g": (),
    }
    assert result["b"].segments[0].bucket_ranges == ()
    assert result["a"].segments[0].bucket_ranges == ((0, 0x7FFF), (0x8000, 0xFFFF))


def test_no_consumers_and_empty_result() -> None:
    assert compute_assignment(tiling_layout([4]), []) == {}


# --- assignable segments: drain replay and parents first -------------------------------------------


def split_chain() -> TopicLayout:
    """0 (sealed, N4) split into 1 and 2; 1 (sealed) split again into 3 and 4."""
    layout = TopicLayout(1, [Segment(0, 0, FULL, Buckets.equal_width(4))], TOPIC).split(0).split(1)
    assert [(s.segment_id, s.state, s.parent_ids) for s in layout.segments] == [
        (0, "sealed", ()),
        (1, "sealed", (0,)),
        (2, "active", (0,)),
        (3, "active", (1,)),
        (4, "active", (1,)),
    ]
    return layout


def test_active_children_wait_for_their_parents_to_drain() -> None:
    layout = split_chain()
    ids = lambda drained: [s.segment_id for s in assignable_segments(layout, drained)]  # noqa: E731
    # sealed ones replay; no child (sealed or active) before its parents drain; sorted by
    # (hash_start, hash_end, id): 3 [0000-3fff], 1 [0000-7fff], 0 [0000-ffff], 4 [4000-7fff], 2 [8000-ffff]
    # a drained sealed segment retires (assigned to nobody): docs/design.md ("Controller assignment")
    assert ids(set()) == [0]
    assert ids({0}) == [1, 2]
    assert ids([0, 1]) == [3, 4, 2]
    result = compute_assignment(layout, ["x", "y"], drained={0})
    assert result["x"].segment_ids == (1,) and result["y"].segment_ids == (2,)


def test_bad_inputs_are_named() -> None:
    layout = tiling_layout([4, 2])
    with pytest.raises(ValueError, match="'b' appears more than once"):
        compute_assignment(layout, ["a", "b", "b"])
    with pytest.raises(TypeError, match=r"consumer_names\[1\] must be a str"):
        compute_assignment(layout, ["a", 3])
    with pytest.raises(TypeError, match="not a single str"):
        compute_assignment(layout, "abc")
    with pytest.raises(TypeError, match="TopicLayout"):
        compute_assignment({"epoch": 1}, ["a"])
    with pytest.raises(ValueError, match="segment 10, which is active"):
        compute_assignment(layout, ["a"], drained={10})
    with pytest.raises(TypeError, match="segment ids are ints"):
        compute_assignment(layout, ["a"], drained={True})
    with pytest.raises(TypeError, match="collection of segment ids"):
        compute_assignment(layout, ["a"], drained=5)


def test_value_types_validate_and_compare() -> None:
    good = AssignedSegment(1, 0, 9, "segment://t/ns/x/0000-0009-1", [[0, 9], [10, FULL]])
    assert good.bucket_ranges == ((0, 9), (10, FULL)) and good.splits == (10,)
    assert hash(good) == hash(AssignedSegment(1, 0, 9, "segment://t/ns/x/0000-0009-1", ((0, 9), (10, FULL))))
    assert AssignedSegment(np.int64(1), 0, 9, "t") == AssignedSegment(1, 0, 9, "t")
    assert Assignment(1, [good]) == Assignment(1, (good,)) and Assignment(1) < Assignment(2)
    with pytest.raises(ValueError, match="range 1 is"):
        AssignedSegment(1, 0, 9, "t", ((0, 9), (11, FULL)))
    with pytest.raises(ValueError, match="end at 0xfffe"):
        AssignedSegment(1, 0, 9, "t", ((0, 0xFFFE),))
    with pytest.raises(TypeError, match="start of segment 1"):
        AssignedSegment(1, 0, 9, "t", ((0.0, FULL),))
    with pytest.raises(ValueError, match="hash_start 0x000a is above"):
        AssignedSegment(1, 10, 9, "t")
    with pytest.raises(TypeError, match="segment_id must be an int"):
        AssignedSegment(False, 0, 9, "t")
    with pytest.raises(TypeError, match="layout_epoch must be an int"):
        Assignment(True)
    with pytest.raises(ValueError, match="segment 1 is assigned twice"):
        Assignment(1, (good, good))
    with pytest.raises(TypeError, match=r"segments\[0\] must be an AssignedSegment"):
        Assignment(1, ("x",))
    with pytest.raises(KeyError, match="segment 5 is not in this assignment"):
        Assignment(1, (good,)).segment(5)


# --- every case of the rule: 1-8 segments of different bucket counts, 0-40 consumers ----------------

COUNT_PATTERNS = [
    lambda s: [1] * s,
    lambda s: [i + 1 for i in range(s)],
    lambda s: [s - i for i in range(s)],
    lambda s: [(3, 1, 8, 2, 5, 1, 4, 16)[i] for i in range(s)],
    lambda s: [random.Random(s).randint(1, 12) for _ in range(s)],
]


def check_structure(layout: TopicLayout, result: dict[str, Assignment], names: list[str]) -> None:
    segments = assignable_segments(layout)
    assert list(result) == sorted(names)
    owners = {s.segment_id: [n for n, a in result.items() if s.segment_id in a.segment_ids] for s in segments}
    if len(names) <= len(segments):
        loads = [len(a.segments) for a in result.values()]
        assert all(len(o) == 1 for o in owners.values()) or not names
        assert not loads or max(loads) - min(loads) <= 1
    else:
        capacity = sum(s.buckets.count for s in segments)
        assert all(1 <= len(owners[s.segment_id]) <= s.buckets.count for s in segments)
        assert all(len(a.segments) <= 1 for a in result.values())
        assert sum(not a.idle for a in result.values()) == min(len(names), capacity)
        for s in segments:  # a segment below capacity trails no other segment by more than one owner
            for t in segments:
                if len(owners[s.segment_id]) < s.buckets.count:
                    assert len(owners[t.segment_id]) <= len(owners[s.segment_id]) + 1
    for a in result.values():
        for view in a.segments:
            shared = len(owners[view.segment_id]) > 1
            full = ref_ranges(layout.segment(view.segment_id).buckets.splits)
            assert view.bucket_ranges == (full if shared else ())


@pytest.mark.parametrize("segment_count", range(1, 9))
@pytest.mark.parametrize("pattern", range(len(COUNT_PATTERNS)))
def test_every_case_of_segments_first(segment_count: int, pattern: int) -> None:
    counts = COUNT_PATTERNS[pattern](segment_count)
    layout = tiling_layout(counts)
    for k in range(41):
        names = names_of(k)
        result = compute_assignment(layout, names)
        assert result == reference_assignment(layout, names, set()), (counts, k)
        check_structure(layout, result, names)


# --- determinism and conformance on random layouts with history ------------------------------------


@st.composite
def layouts_with_history(draw: st.DrawFn) -> tuple[TopicLayout, set[int]]:
    n = draw(st.integers(1, 5))
    cuts = sorted(draw(st.sets(st.integers(1, FULL), min_size=n - 1, max_size=n - 1)))
    counts = draw(st.lists(st.integers(1, 9), min_size=n, max_size=n))
    layout = tiling_layout(counts, epoch=draw(st.integers(0, 50)), cuts=cuts)
    return evolve(draw, layout, steps=3, max_buckets=9)


@settings(max_examples=300, deadline=None)
@given(
    case=layouts_with_history(),
    names=st.lists(st.text(min_size=1, max_size=6), unique=True, max_size=40),
    seed=st.randoms(use_true_random=False),
)
def test_matches_reference_and_ignores_input_order(case, names, seed) -> None:  # type: ignore[no-untyped-def]
    layout, drained = case
    result = compute_assignment(layout, names, drained=frozenset(drained))
    assert result == reference_assignment(layout, names, drained)
    assert list(result) == sorted(names)

    shuffled_segments = list(layout.segments)
    seed.shuffle(shuffled_segments)
    shuffled_names = list(names)
    seed.shuffle(shuffled_names)
    same_layout = TopicLayout(layout.epoch, shuffled_segments, layout.topic)
    again = compute_assignment(same_layout, tuple(shuffled_names), drained=sorted(drained, reverse=True))
    assert again == result and list(again) == list(result)
    # equal content gives equal (and equally hashed) value objects
    assert {name: hash(a) for name, a in again.items()} == {name: hash(a) for name, a in result.items()}


def test_shared_bucket_ranges_equal_the_buckets_ranges_list() -> None:
    # docs/design.md ("Controller assignment"): a sharer's bucket_ranges *is* buckets.ranges (a list); the immutable
    # assignment keeps a tuple that compares equal to it either way round
    buckets = Buckets.equal_width(4)
    layout = TopicLayout(1, [Segment(0, 0, 0xFFFF, buckets)])
    shared = compute_assignment(layout, ["a", "b"])["a"].segments[0].bucket_ranges
    assert shared == buckets.ranges and buckets.ranges == shared and not shared != buckets.ranges
    assert shared == tuple(buckets.ranges) and hash(shared) == hash(tuple(buckets.ranges))
    assert shared != buckets.ranges[:2]
    alone = compute_assignment(layout, ["a"])["a"].segments[0].bucket_ranges
    assert alone == [] and alone == ()
