"""Edge cases found by review: odd numpy/Arrow inputs at the hashing, layout and producer edges.

Every expected value comes from an independent oracle (mmh3, or the formulas of DESIGN.md),
never from bucketcore's own output.
"""

from __future__ import annotations

import mmh3
import numpy as np
import pytest

import bucketcore as bc


def _raw(key: str | bytes) -> int:
    return mmh3.hash(key.encode("utf-8") if isinstance(key, str) else key, 0, signed=False)


KEYS = ["a", "key-1", "ключ", "键🔑", "", "some-routing-key"]


# --- hashing: byte order of numpy U arrays -------------------------------------------------------


@pytest.mark.parametrize("dtype", [">U16", "<U16"])
def test_murmur3_of_u_array_in_either_byte_order(dtype: str) -> None:
    keys = np.array(KEYS, dtype=dtype)
    assert bc.murmur3_32(keys).tolist() == [_raw(k) for k in KEYS]
    kh = bc.hash_keys(keys[::-1])
    assert kh.raw.tolist() == [_raw(k) for k in KEYS[::-1]]
    assert kh.bucket_hash.tolist() == [_raw(k) & 0xFFFF for k in KEYS[::-1]]


def test_big_endian_u_surrogate_is_reported_with_its_index() -> None:
    keys = np.array(["ok", "\ud800x"], dtype=">U4")
    with pytest.raises(bc.KeyEncodingError, match="index 1"):
        bc.murmur3_32(keys)
    assert int(bc.murmur3_32(keys, errors="replace")[1]) == 0x11508252


def test_bucket_entries_of_big_endian_u_keys_matches_the_native_keys() -> None:
    buckets = bc.Buckets.equal_width(4)
    native = bc.bucket_entries(KEYS, buckets)
    swapped = bc.bucket_entries(np.array(KEYS, dtype=">U16"), buckets)
    for name in ("segment_id", "bucket", "hash_min", "hash_max", "start", "count", "order"):
        assert getattr(swapped, name).tolist() == getattr(native, name).tolist(), name
    # and the stamps are the oracle's
    lows = {i: _raw(k) & 0xFFFF for i, k in enumerate(KEYS)}
    for entry in swapped:
        members = [lows[int(i)] for i in entry.message_indices]
        assert (entry.hash_min, entry.hash_max) == (min(members), max(members))


def test_batcher_add_many_of_big_endian_u_keys() -> None:
    buckets = bc.Buckets.equal_width(4)
    batcher = bc.EntryBucketBatcher(buckets)
    batcher.add_many(np.array(["key-1"], dtype=">U5"), [b"q"])
    [entry] = batcher.flush()
    low = _raw("key-1") & 0xFFFF
    assert (entry.hash_min, entry.hash_max) == (low, low)
    assert entry.bucket == sum(1 for s in buckets.splits if s <= low)


def test_route_of_big_endian_u_keys() -> None:
    layout = bc.TopicLayout(0, [bc.Segment(0, 0, 0x7FFF), bc.Segment(1, 0x8000, 0xFFFF)])
    expected = [0 if (_raw(k) >> 16) < 0x8000 else 1 for k in KEYS]
    assert layout.route(np.array(KEYS, dtype=">U16")).tolist() == expected
