"""A layout plans its own boundary lists from a histogram of its traffic: TopicLayout.rebalanced."""

from __future__ import annotations

import numpy as np
import pytest

import bucketcore as bc


def layout_with_history() -> bc.TopicLayout:
    # epoch 6: sealed segments 0 and 1, active segments 2, 3 and 4
    grown = bc.TopicLayout(4, [bc.Segment(0, 0, 0xFFFF, bc.Buckets.equal_width(4))], "persistent://a/b/c").split(0)
    return grown.split(1)


def test_every_active_segment_gets_the_balanced_list_of_its_own_traffic() -> None:
    layout = layout_with_history()
    every = [f"order-{i % 900}" for i in range(8000)]
    quiet = layout.active_segments[0].segment_id
    keys = [k for k, seg in zip(every, np.asarray(layout.route(bc.hash_keys(every))), strict=True) if seg != quiet]
    kh = bc.hash_keys(keys)
    routed = np.asarray(layout.route(kh))
    hist = bc.bucket_histogram(keys, layout)
    planned = layout.rebalanced(hist, 6)
    assert (planned.epoch, planned.topic) == (layout.epoch, layout.topic)
    assert sorted(s.segment_id for s in planned.active_segments) == [2, 3, 4]
    assert (planned.segment(0), planned.segment(1)) == (layout.segment(0), layout.segment(1))  # sealed: untouched
    assert planned.segment(quiet).buckets == bc.Buckets.equal_width(6)
    for seg in layout.active_segments:
        hashes = np.asarray(kh.bucket_hash)[routed == seg.segment_id]
        assert planned.segment(seg.segment_id).buckets == bc.Buckets.balanced(hashes, 6)
        assert planned.segment(seg.segment_id).hash_start == seg.hash_start
    assert hist.balanced_layout(layout, 6) == planned


def test_a_segment_nothing_reached_gets_equal_width_buckets() -> None:
    layout = layout_with_history()
    ids = [s.segment_id for s in layout.active_segments]
    hist = bc.BucketHistogram(ids, {})
    planned = layout.rebalanced(hist, 5)
    assert all(s.buckets == bc.Buckets.equal_width(5) for s in planned.active_segments)


def test_a_histogram_of_another_layout_or_a_bad_count_is_refused() -> None:
    layout = layout_with_history()
    hist = bc.bucket_histogram(["a", "b"], layout)
    with pytest.raises(TypeError, match="must be a BucketHistogram"):
        layout.rebalanced(hist[2], 4)  # one segment's HashHistogram
    with pytest.raises(bc.InvalidLayoutError, match="are not the histogram's"):
        bc.TopicLayout(1, [bc.Segment(0, 0, 0xFFFF)]).rebalanced(hist, 4)
    with pytest.raises(bc.InvalidBoundaryError):
        layout.rebalanced(hist, 0)
    with pytest.raises(TypeError, match="layout must be a TopicLayout"):
        hist.balanced_layout("not a layout", 4)
