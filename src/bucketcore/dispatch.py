"""Broker side of entry-bucketing: whole entries to the consumers that own their buckets (docs/design.md, "Dispatch").

Three layers, each usable alone, each in its own module and re-exported here:

* :mod:`bucketcore.selector` — :class:`EntryBucketSelector`, the live membership of one shared
  segment and the deterministic spread of its buckets over the sharers;
* :mod:`bucketcore.entry_routing` — :func:`route_entries`, :func:`fits_one_bucket` and
  :func:`sticky_hashes`, vectorised GIL-free routing of entry columns;
* :mod:`bucketcore.dispatcher` — :class:`Dispatcher`, the stateful dispatcher of one shared
  segment (offset order, pending acks, drain-on-handoff).

Consumers are identified by ``(name, consumer_id)`` tuples everywhere (``Consumer``).
"""

from __future__ import annotations

from .dispatcher import BucketStats, ConsumerStats, Deliveries, Dispatcher
from .entry_routing import MALFORMED, NO_CONSUMER, fits_one_bucket, route_entries, sticky_hashes
from .errors import MalformedStampError
from .selector import BucketMove, BucketMoves, Consumer, EntryBucketSelector

__all__ = [
    "Consumer",
    "NO_CONSUMER",
    "MALFORMED",
    "MalformedStampError",
    "BucketMove",
    "BucketMoves",
    "EntryBucketSelector",
    "route_entries",
    "fits_one_bucket",
    "sticky_hashes",
    "Deliveries",
    "ConsumerStats",
    "BucketStats",
    "Dispatcher",
]
