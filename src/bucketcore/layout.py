"""Step 2 of the data flow: boundary lists, segment layouts and routing (docs/design.md:
"Boundary lists" and "Segments, layouts and routing").

The names live in three modules, one job each, and are re-exported here:

* :mod:`bucketcore.buckets` — :class:`Buckets` (a segment's boundary list), :class:`BucketLoad`,
  :func:`buckets_for_budget` and the bucket-count limits;
* :mod:`bucketcore.balancing` — the solver behind :meth:`Buckets.balanced`;
* :mod:`bucketcore.segments` — :class:`Segment`;
* :mod:`bucketcore.topic_layout` — :class:`TopicLayout` (routing, split, merge, rebucket).
"""

from __future__ import annotations

from .buckets import MAX_BUCKETS, MAX_BUCKETS_PER_SEGMENT, RING, BucketLoad, Buckets, buckets_for_budget
from .segments import ACTIVE, MAX_SEGMENT_ID, SEALED, Segment
from .topic_layout import TopicLayout

__all__ = [
    "ACTIVE",
    "SEALED",
    "RING",
    "MAX_BUCKETS",
    "MAX_BUCKETS_PER_SEGMENT",
    "MAX_SEGMENT_ID",
    "BucketLoad",
    "Buckets",
    "Segment",
    "TopicLayout",
    "buckets_for_budget",
]
