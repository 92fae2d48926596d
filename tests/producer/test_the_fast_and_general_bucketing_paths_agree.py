"""Short streams on large layouts: ``bucket_entries`` groups them on a compact state sized to the
stream (the buckets it touches, found through a small table) instead of the layout's per-bucket
array. The entries must be exactly the reference batcher's, whichever state a stream is grouped
on, and a kept state must move between the two without carrying anything over."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_entries_match_the_reference_batcher import as_tuples, reference_entries

import bucketcore as bc
from _bucketcore import _grouping
from bucketcore.harness.workloads import tiled_layout, uuid_keys
from bucketcore.status import Status

# 16,384 buckets: a stream of up to 4,096 messages is short for it
LARGE = tiled_layout(64, 256)
LARGE_LEGACY = tiled_layout(64, 256, legacy=True)
# as many buckets in every segment, but not a power of two (the segment is found by a division)
LARGE_ODD = tiled_layout(48, 300)
# few distinct keys, so batches hold several messages and the limits are reached
POOL = [*uuid_keys(24, seed=3), None, "ключ", b"\x00\xff"]


@st.composite
def short_stream(draw: Any) -> dict[str, Any]:
    n = draw(st.integers(1, 400))
    keys = [POOL[i] for i in draw(st.lists(st.integers(0, len(POOL) - 1), min_size=n, max_size=n))]
    sizes = draw(st.one_of(st.none(), st.lists(st.integers(0, 300), min_size=n, max_size=n)))
    return dict(
        keys=keys,
        sizes=sizes,
        target=draw(st.sampled_from([LARGE, LARGE, LARGE_LEGACY, LARGE_ODD])),
        max_messages=draw(st.integers(1, 12)),
        max_bytes=draw(st.integers(1, 2000)),
        policy=draw(st.sampled_from(["shared", "per_bucket"])),
        encrypted=draw(st.integers(0, 7)) == 0,
        round_robin=draw(st.integers(0, 100)),
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(short_stream())
def test_short_streams_on_a_large_layout_match_the_reference(s: dict[str, Any]) -> None:
    kw = {k: s[k] for k in ("max_messages", "max_bytes", "policy", "encrypted", "round_robin")}
    expected, next_rr = reference_entries(s["keys"], s["target"], s["sizes"], **kw)
    for threads in (None, 1):  # the short path, then the general one (same kept states)
        options = dict(kw) if threads is None else dict(kw, threads=threads)
        table = bc.bucket_entries(s["keys"], s["target"], sizes=s["sizes"], **options)
        assert as_tuples(table) == expected
        assert table.next_round_robin == next_rr


def test_a_kept_state_moves_between_compact_and_wide_streams() -> None:
    """Streams of alternating lengths on one layout (its plan keeps the states): short ones
    compact, long ones on the layout's array, each exactly the reference's."""
    keys = list(uuid_keys(5000, seed=9))
    for i in range(0, 5000, 7):
        keys[i] = keys[i // 7]  # repeated keys: batches of several messages
    for policy in ("shared", "per_bucket"):
        for n in (100, 4097, 1, 1024, 1025, 50, 4096, 4097, 7):
            kw: dict[str, Any] = dict(max_messages=3, policy=policy, round_robin=n)
            expected, next_rr = reference_entries(keys[:n], LARGE, **kw)
            table = bc.bucket_entries(keys[:n], LARGE, **kw)
            assert as_tuples(table) == expected, (policy, n)
            assert table.next_round_robin == next_rr


def test_a_refused_compact_stream_leaves_nothing_behind() -> None:
    """A short stream refused part-way (batches open in the compact state) and the streams after
    it, short or long, on the same kept state give what fresh states give."""
    offsets = np.array([0, 5000, 12000], dtype=np.int64)
    rng = np.random.default_rng(8)
    stream = _grouping.WholeStream(offsets, 0, 1, 1, 0)

    def columns(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        seg = rng.integers(0, 2, n).astype(np.int32)
        bucket = np.where(seg == 0, rng.integers(0, 40, n), rng.integers(6990, 7000, n)).astype(np.int32)
        bucket = np.where(seg == 0, bucket, bucket - 5000).astype(np.int32)
        sizes = rng.integers(0, 50, n).astype(np.int64)
        return seg, bucket, rng.integers(0, 1 << 16, n).astype(np.uint16), sizes

    for policy in (0, 1):
        seg, bucket, bh, sizes = columns(600)
        bad = bucket.copy()
        bad[450] = 7000  # past segment 1's 7000 buckets
        refused = _grouping.group_entries(seg, bad, bh, sizes, offsets, policy, 5, 120, False, stream)
        assert refused == (Status.BC_ERR_BUCKET_INDEX, 450, None)
        for n in (600, 3000, 300):
            seg, bucket, bh, sizes = columns(n)
            reused = _grouping.group_entries(seg, bucket, bh, sizes, offsets, policy, 5, 120, False, stream)
            fresh = _grouping.group_entries(seg, bucket, bh, sizes, offsets, policy, 5, 120)
            assert reused[:2] == fresh[:2] == (Status.BC_OK, -1)
            for a, b in zip(reused[2], fresh[2]):
                assert np.array_equal(a, b)


@pytest.mark.parametrize("policy", ["shared", "per_bucket"])
def test_key_hashes_of_a_short_stream_on_a_large_layout(policy: str) -> None:
    """Precomputed hashes take the same compact grouping: the table equals the one from keys."""
    keys = [POOL[i % len(POOL)] for i in range(0, 900, 7)] * 3
    hashes = bc.hash_keys(keys)
    kw: dict[str, Any] = dict(max_messages=4, policy=policy, round_robin=3)
    from_keys = bc.bucket_entries(keys, LARGE, **kw)
    from_hashes = bc.bucket_entries(hashes, LARGE, **kw)
    assert as_tuples(from_hashes) == as_tuples(from_keys) == reference_entries(keys, LARGE, **kw)[0]
