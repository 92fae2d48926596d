"""bucketcore: the compiled hot path of Apache Pulsar entry-bucketing (PIP-486)."""

from __future__ import annotations

from .consumer import (
    Close,
    ConsumerStateError,
    CumulativeAck,
    Drain,
    IndividualAck,
    StreamConsumerState,
    Subscribe,
)
from .controller import AssignedSegment, Assignment, compute_assignment
from .dispatch import (
    MALFORMED,
    NO_CONSUMER,
    BucketMove,
    BucketStats,
    ConsumerStats,
    Deliveries,
    Dispatcher,
    EntryBucketSelector,
    MalformedStampError,
    fits_one_bucket,
    route_entries,
    sticky_hashes,
)
from .errors import (
    BucketcoreError,
    InvalidBoundaryError,
    InvalidLayoutError,
    KeyEncodingError,
    StaleLayoutError,
)
from .hash_histogram import BucketHistogram, HashHistogram
from .hashing import MAX_HASH, KeyHashes, hash_keys, murmur3_32, split_hash
from .histogram import bucket_histogram
from .layout import ACTIVE, SEALED, BucketLoad, Buckets, Segment, TopicLayout, buckets_for_budget
from .producer import Entry, EntryBucketBatcher, EntryTable, bucket_entries

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "MAX_HASH",
    "BucketcoreError",
    "InvalidBoundaryError",
    "InvalidLayoutError",
    "KeyEncodingError",
    "StaleLayoutError",
    "KeyHashes",
    "hash_keys",
    "murmur3_32",
    "split_hash",
    "BucketHistogram",
    "HashHistogram",
    "bucket_histogram",
    "ACTIVE",
    "SEALED",
    "BucketLoad",
    "Buckets",
    "Segment",
    "TopicLayout",
    "buckets_for_budget",
    "Entry",
    "EntryBucketBatcher",
    "EntryTable",
    "bucket_entries",
    "EntryBucketSelector",
    "route_entries",
    "fits_one_bucket",
    "sticky_hashes",
    "Dispatcher",
    "BucketMove",
    "Deliveries",
    "ConsumerStats",
    "BucketStats",
    "MalformedStampError",
    "NO_CONSUMER",
    "MALFORMED",
    "AssignedSegment",
    "Assignment",
    "compute_assignment",
    "StreamConsumerState",
    "ConsumerStateError",
    "Subscribe",
    "Drain",
    "Close",
    "CumulativeAck",
    "IndividualAck",
]

# Subpackages with heavier imports (the stream store's SQLite and CRC32C, the wire format's CRC32C,
# the optional Dask integration) load on first use: ``bc.stream`` works without
# ``import bucketcore.stream``.
_LAZY_SUBMODULES = ("stream", "dask", "wire")


def __getattr__(name: str) -> object:
    if name in _LAZY_SUBMODULES:
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'bucketcore' has no attribute {name!r}")
