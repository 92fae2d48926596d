"""Adversarial review of compute_assignment (DESIGN.md §3.6) against per-key order (the spec)."""

from __future__ import annotations

from bucketcore.controller import assignable_segments, compute_assignment
from bucketcore.layout import Buckets, Segment, TopicLayout

TOPIC = "persistent://t/ns/orders"


def chain() -> TopicLayout:
    """0 (N4) split into 1 and 2, then 1 split into 3 and 4: 0 and 1 sealed, 2, 3, 4 active."""
    return TopicLayout(1, [Segment(0, 0, 0xFFFF, Buckets.equal_width(4))], TOPIC).split(0).split(1)


def test_a_sealed_child_is_not_consumed_before_its_sealed_parent_drained():
    # A key hashing into [0x0000, 0x3FFF] has its oldest messages in 0, newer ones in 1, newest
    # in 3. Handing 1 out while 0 still holds that key's older messages lets the newer ones be
    # consumed first (by another consumer, or interleaved): per-key order is lost. A sealed
    # segment replays its backlog only once the parents still in the layout are drained.
    layout = chain()
    ids = lambda drained: [s.segment_id for s in assignable_segments(layout, drained)]  # noqa: E731
    assert ids(set()) == [0]
    assert ids({0}) == [1, 0, 2]
    assert ids({0, 1}) == [3, 1, 0, 4, 2]
    # a parent garbage-collected from the layout no longer holds anything back
    gc = TopicLayout(2, [s for s in layout.segments if s.segment_id != 0], TOPIC)
    assert [s.segment_id for s in assignable_segments(gc, set())] == [1, 2]
    result = compute_assignment(layout, ["x", "y"])
    assert result["x"].segment_ids == result["y"].segment_ids == (0,)


def test_surplus_consumers_share_the_only_replayable_segment_of_a_chain():
    layout = chain()
    result = compute_assignment(layout, ["a", "b", "c"])
    # 0 is the only assignable segment (N=4): all three share it, with its full list.
    for name in "abc":
        (seg,) = result[name].segments
        assert seg.segment_id == 0
        assert seg.bucket_ranges == tuple(layout.segment(0).buckets.ranges)
