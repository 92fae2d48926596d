"""Step 2 of the data flow: boundary lists, segment layouts and routing (DESIGN.md §3.2, §3.3).

The names live in three modules, one job each, and are re-exported here:

* :mod:`bucketcore.buckets` — :class:`Buckets` (a segment's boundary list), :class:`BucketLoad`,
  :func:`buckets_for_budget`;
* :mod:`bucketcore.balancing` — the solver behind :meth:`Buckets.balanced`;
* :mod:`bucketcore.segments` — :class:`Segment` and :class:`TopicLayout` (routing, split, merge,
  rebucket).
"""

from __future__ import annotations

from .buckets import MAX_BUCKETS, MAX_BUCKETS_PER_SEGMENT, RING, BucketLoad, Buckets, buckets_for_budget
from .segments import ACTIVE, MAX_SEGMENT_ID, SEALED, Segment, TopicLayout
from .validation import check_int
from .validation import is_int as _is_int  # dispatch.py's import, until it takes is_int from validation

__all__ = [
    "ACTIVE",
    "SEALED",
    "BucketLoad",
    "Buckets",
    "Segment",
    "TopicLayout",
    "buckets_for_budget",
]


def _check_int(value: object, name: str, low: int, high: int | None = None) -> int:
    """Positional-bounds spelling of :func:`bucketcore.validation.check_int`, kept for
    producer.py until it imports check_int from bucketcore.validation."""
    return check_int(value, name, lo=low, hi=high)
