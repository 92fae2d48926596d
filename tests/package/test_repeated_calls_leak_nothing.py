"""Repeated calls leave no Python objects behind: what LeakSanitizer cannot see in the sanitized
suite (an object's allocation stack stops inside CPython there; docs/hardening.md).

Each call runs a hundred times to fill caches, then many times while CPython's object allocator
counts its live blocks: an object leaked per call would add at least one block per call.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable

import numpy as np
import pytest

import bucketcore as bc

ROUNDS = 400
# far fewer blocks than calls: a leak of one object per call would add ROUNDS
ALLOWED = ROUNDS // 8

pytestmark = pytest.mark.skipif(
    sys.getallocatedblocks() == 0,
    reason="CPython's object allocator is off (PYTHONMALLOC=malloc, as in tools/sanitize.sh): no block count",
)


def blocks_left_by(call: Callable[[], object]) -> int:
    """Blocks added over ROUNDS calls, after warm-up calls filled caches; the smaller of two
    such runs (a cache that fills late shows in one, a leak in both)."""
    for _ in range(100):
        call()
    counts = []
    for _ in range(2):
        gc.collect()
        before = sys.getallocatedblocks()
        for _ in range(ROUNDS):
            call()
        gc.collect()
        counts.append(sys.getallocatedblocks() - before)
    return min(counts)


def raises(exc: type[BaseException], call: Callable[[], object]) -> Callable[[], None]:
    def run() -> None:
        try:
            call()
        except exc:
            return
        raise AssertionError(f"expected {exc.__name__}")

    return run


KEYS = [f"key-{i}" for i in range(300)] + [None, b"bytes-key", "ключ", "🔑" * 9]
STR_KEYS = [k for k in KEYS if isinstance(k, str)]
LAYOUT = bc.TopicLayout(
    1, [bc.Segment(0, 0, 0x7FFF, bc.Buckets.equal_width(4)), bc.Segment(1, 0x8000, 0xFFFF, bc.Buckets.equal_width(3))]
)
BUCKETS = bc.Buckets.equal_width(8)
STAMPS = np.arange(0, 0x10000, 97, dtype=np.uint16)


def batcher_round() -> None:
    b = bc.EntryBucketBatcher(BUCKETS, max_messages=7)
    for i, key in enumerate(KEYS[:50]):
        b.add(key, b"payload %d" % i)
    b.add_many(STR_KEYS[:40], [b"p"] * 40)
    b.flush()


def dispatcher_round() -> None:
    d = bc.Dispatcher(BUCKETS)
    d.add_consumer("a", 1)
    d.add_consumer("b", 2)
    d.offer(np.arange(STAMPS.size), hash_min=STAMPS)
    for consumer, got in d.poll().items():
        d.ack(*consumer, got.entry_ids)
    d.remove_consumer("b", 2, crash=True)


CALLS: dict[str, Callable[[], object]] = {
    "murmur3_32 of a list": lambda: bc.murmur3_32(STR_KEYS),
    "murmur3_32 of one str": lambda: bc.murmur3_32("some-routing-key"),
    "hash_keys with None and bytes": lambda: bc.hash_keys(KEYS),
    "hash_keys of a U array": lambda: bc.hash_keys(np.array(STR_KEYS)),
    "hash_keys of an object array": lambda: bc.hash_keys(np.array(KEYS, dtype=object)),
    "hash_keys on two threads": lambda: bc.hash_keys(KEYS * 40, threads=2),
    "bucket_entries": lambda: bc.bucket_entries(KEYS, LAYOUT, sizes=np.full(len(KEYS), 10)),
    "bucket_entries on two threads": lambda: bc.bucket_entries(KEYS * 40, LAYOUT, threads=2),
    "a batcher's add, add_many, flush": batcher_round,
    "a dispatcher's offer, poll, ack": dispatcher_round,
    "route_entries": lambda: bc.route_entries(bc.EntryBucketSelector(BUCKETS), STAMPS),
    "fits_one_bucket": lambda: bc.fits_one_bucket(BUCKETS, STAMPS, STAMPS),
    "a key of a wrong type": raises(TypeError, lambda: bc.murmur3_32([*STR_KEYS, 1.5])),
    "a surrogate": raises(bc.KeyEncodingError, lambda: bc.hash_keys([*STR_KEYS, "\ud800"])),
    "bucket_entries of a bad key": raises(TypeError, lambda: bc.bucket_entries([*STR_KEYS, 7], LAYOUT)),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_repeated_calls_leave_no_python_objects_behind(name):
    assert blocks_left_by(CALLS[name]) < ALLOWED


def test_pyarrow_keys_leave_no_python_objects_behind(pa):
    column = pa.array(KEYS)
    chunked = pa.chunked_array([pa.array(STR_KEYS[:100]), pa.array(STR_KEYS[100:])])
    assert blocks_left_by(lambda: bc.hash_keys(column)) < ALLOWED
    assert blocks_left_by(lambda: bc.bucket_entries(chunked, LAYOUT)) < ALLOWED
