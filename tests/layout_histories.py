"""A hypothesis helper shared by the controller tests: a layout given a random history."""

from __future__ import annotations

from hypothesis import strategies as st

from bucketcore import Buckets, TopicLayout


def evolve(draw: st.DrawFn, layout: TopicLayout, steps: int, max_buckets: int) -> tuple[TopicLayout, set[int]]:
    """Up to ``steps`` random splits, merges and rebuckets of ``layout``; returns the result and a
    random set of its sealed segments taken as drained."""
    for _ in range(draw(st.integers(0, steps))):
        active = list(layout.active_segments)
        op = draw(st.sampled_from(["split", "merge", "rebucket"]))
        if op == "split" and any(s.hash_end > s.hash_start for s in active):
            target = draw(st.sampled_from([s for s in active if s.hash_end > s.hash_start]))
            layout = layout.split(target.segment_id)
        elif op == "merge" and len(active) > 1:
            i = draw(st.integers(0, len(active) - 2))
            layout = layout.merge(active[i].segment_id, active[i + 1].segment_id)
        else:
            target = draw(st.sampled_from(active))
            others = [n for n in range(1, max_buckets + 1) if n != target.buckets.count]
            if others:  # rebucketing to the current list is an error ("unchanged bucketing")
                layout = layout.rebucket(target.segment_id, Buckets.equal_width(draw(st.sampled_from(others))))
    sealed = [s.segment_id for s in layout.segments if s.state == "sealed"]
    drained = set(draw(st.lists(st.sampled_from(sealed), unique=True))) if sealed else set()
    return layout, drained
