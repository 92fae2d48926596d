"""compute_assignment (docs/design.md, "Controller assignment") keeps per-key order on layouts
with history: a child is never
assigned before its parents drained, and the rule holds as worded on random split/merge chains."""

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
    assert ids({0}) == [1, 2]  # drained 0 retires
    assert ids({0, 1}) == [3, 4, 2]
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


# --- compute_assignment against the rule's own words (cursor form), on layouts with history -------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from layout_histories import evolve  # noqa: E402


def spec_assignment(layout: TopicLayout, names: list[str], drained: set[int]) -> dict[str, list[tuple[int, bool]]]:
    present = {s.segment_id for s in layout.segments}
    segs = sorted(
        (
            s
            for s in layout.segments
            if s.segment_id not in drained and all(p in drained for p in s.parent_ids if p in present)
        ),
        key=lambda s: (s.hash_start, s.hash_end, s.segment_id),
    )
    names = sorted(names)
    owners: list[list[str]] = [[] for _ in segs]
    if len(names) <= len(segs):
        for i in range(len(segs)):
            if names:
                owners[i].append(names[i % len(names)])
    else:
        for i in range(len(segs)):
            owners[i].append(names[i])
        i = 0  # "handed to the segments in sorted order, cycling from the first, skipping full ones"
        for name in names[len(segs) :]:
            tried = 0
            while tried < len(segs) and len(owners[i % len(segs)]) >= segs[i % len(segs)].buckets.count:
                i += 1
                tried += 1
            if tried == len(segs):
                break
            owners[i % len(segs)].append(name)
            i += 1
    out: dict[str, list[tuple[int, bool]]] = {n: [] for n in names}
    for s, o in zip(segs, owners, strict=False):
        for n in o:
            out[n].append((s.segment_id, len(o) > 1))
    return out


@st.composite
def history(draw):
    layout = TopicLayout(1, [Segment(0, 0, 0xFFFF, Buckets.equal_width(draw(st.integers(1, 6))))], TOPIC)
    return evolve(draw, layout, steps=5, max_buckets=6)


@settings(max_examples=200, deadline=None)
@given(case=history(), k=st.integers(0, 25))
def test_compute_assignment_follows_the_rule_as_worded(case, k):
    layout, drained = case
    names = [f"c{i:02d}" for i in range(k)]
    got = compute_assignment(layout, reversed(names), drained=drained)
    want = spec_assignment(layout, names, drained)
    assert list(got) == sorted(names)
    for name in names:
        assert [(s.segment_id, bool(s.bucket_ranges)) for s in got[name].segments] == want[name]
        for s in got[name].segments:
            if s.bucket_ranges:
                assert s.bucket_ranges == tuple(layout.segment(s.segment_id).buckets.ranges)
    # parents first: nothing assigned while a parent still in the layout is undrained
    present = {s.segment_id for s in layout.segments}
    for a in got.values():
        for s in a.segments:
            assert all(p in drained for p in layout.segment(s.segment_id).parent_ids if p in present)
