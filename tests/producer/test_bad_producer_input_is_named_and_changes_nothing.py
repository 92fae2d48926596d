"""Bad input to the producer (bucket_entries, EntryBucketBatcher and their kernels): a clear error
naming what was wrong, no partial output, and the state a call keeps is as it was before it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from test_entries_match_the_reference_batcher import as_tuples

import bucketcore as bc
from _bucketcore import _grouping, _routing
from bucketcore.layout import Buckets, Segment, TopicLayout
from bucketcore.producer import EntryBucketBatcher, bucket_entries
from bucketcore.status import Status, check_status

# ------------------------------------------------------------------------------------------------
# bad input: clear errors, no partial output


@pytest.mark.parametrize(
    "kw, exc, words",
    [
        (dict(sizes=[1, 2]), ValueError, "sizes"),
        (dict(sizes=[1, -2, 3]), ValueError, "sizes[1]"),
        (dict(sizes=np.array([1, 2, -3])), ValueError, "sizes[2]"),
        (dict(sizes=[1, True, 3]), TypeError, "sizes[1]"),
        (dict(sizes=[1, 2.0, 3]), TypeError, "sizes[1]"),
        (dict(sizes=np.array([1.0, 2.0, 3.0])), TypeError, "sizes"),
        (dict(sizes=np.ones((3, 1), dtype=np.int64)), ValueError, "sizes"),
        (dict(sizes="abc"), TypeError, "sizes"),
        (dict(max_messages=0), ValueError, "max_messages"),
        (dict(max_messages=-5), ValueError, "max_messages"),
        (dict(max_messages=True), TypeError, "max_messages"),
        (dict(max_messages=10.0), TypeError, "max_messages"),
        (dict(max_bytes=0), ValueError, "max_bytes"),
        (dict(max_bytes=2**64), ValueError, "max_bytes"),
        (dict(policy="fair"), ValueError, "policy"),
        (dict(policy=None), ValueError, "policy"),
        (dict(encrypted=1), TypeError, "encrypted"),
        (dict(round_robin=-1), ValueError, "round_robin"),
    ],
)
def test_bad_arguments(kw: dict[str, Any], exc: type, words: str) -> None:
    with pytest.raises(exc) as info:
        bucket_entries(["a", "b", "c"], Buckets.equal_width(2), **kw)
    assert words in str(info.value)


def test_bad_keys_and_targets() -> None:
    with pytest.raises(TypeError, match="index 1"):
        bucket_entries(["a", 5, "c"], Buckets())
    with pytest.raises(ValueError, match="one-dimensional"):
        bucket_entries(np.array([["a", "b"], ["c", "d"]]), Buckets())
    with pytest.raises(TypeError, match="layout_or_buckets"):
        bucket_entries(["a"], [0x8000])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="buckets must be"):
        EntryBucketBatcher("not a layout")  # type: ignore[arg-type]


def test_layout_that_does_not_tile_is_refused_before_routing() -> None:
    segments = [Segment(0, 0, 0x7FFF), Segment(1, 0x9000, 0xFFFF)]
    with pytest.raises(bc.InvalidLayoutError):
        TopicLayout(1, segments)  # the producer trusts TopicLayout's tiling ...


def test_router_refuses_tables_that_name_missing_segments_or_buckets() -> None:
    """... and the kernel's router checks every index its tables hold, so inconsistent tables
    (a layout object that lies about its segments) are an error, never a read out of bounds."""
    buckets = Buckets.equal_width(4).lookup_table()
    first = np.array([0, 4], np.int32)
    with pytest.raises(ValueError, match="names segment 1 of 1"):
        _routing.Router(
            _routing.BC_ROUTE_RANGE, False, np.ones(65536, np.uint16), np.zeros(1, np.int32), [buckets], first
        )
    with pytest.raises(ValueError, match=r"rotation\[1\] = 3"):
        _routing.Router(
            _routing.BC_ROUTE_RANGE, False, np.zeros(65536, np.uint16), np.array([0, 3], np.int32), [buckets], first
        )
    with pytest.raises(ValueError, match="names bucket 3 of a segment with 2"):
        _routing.Router(
            _routing.BC_ROUTE_ONE, False, None, np.zeros(1, np.int32), [buckets], np.array([0, 2], np.int32)
        )
    with pytest.raises(ValueError, match="65536"):
        _routing.Router(_routing.BC_ROUTE_ONE, False, None, np.zeros(1, np.int32), [buckets[:10]], first)
    with pytest.raises(ValueError, match="Buffer dtype mismatch"):
        _routing.Router(_routing.BC_ROUTE_ONE, True, None, np.zeros(1, np.int32), [buckets], first)


def test_bad_batcher_input_keeps_state() -> None:
    layout = TopicLayout(1, [Segment(0, 0, 0x7FFF, Buckets.equal_width(2)), Segment(1, 0x8000, 0xFFFF)])
    keys = [None, "a", "b", None, "c", "d", "e", None] * 3
    payloads = [b"x" * i for i in range(len(keys))]
    batcher = EntryBucketBatcher(layout, max_messages=3, max_bytes=30)
    got = list(batcher.add_many(keys[:5], payloads[:5]))
    before = (batcher.pending, batcher.position, batcher.round_robin)
    with pytest.raises(ValueError, match="payloads"):
        batcher.add_many(keys[5:8], payloads[5:7])
    with pytest.raises(TypeError, match=r"payloads\[1\]"):
        batcher.add_many([None, None], [b"1", "2"])
    with pytest.raises(TypeError, match="payloads"):
        batcher.add_many(["a"], b"1")
    with pytest.raises(TypeError, match="index 0"):
        batcher.add_many([3], [b"1"])
    with pytest.raises(TypeError, match="payload"):
        batcher.add("a", "text")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="key"):
        batcher.add(1, b"")  # type: ignore[arg-type]
    assert (batcher.pending, batcher.position, batcher.round_robin) == before
    got += batcher.add_many(keys[5:], payloads[5:]) + batcher.flush()
    expected = bucket_entries(keys, layout, sizes=[len(p) for p in payloads], max_messages=3, max_bytes=30)
    assert as_tuples(got) == as_tuples(expected)


@pytest.mark.parametrize(
    "kw, exc, words",
    [
        (dict(max_messages=0), ValueError, "max_messages"),
        (dict(max_bytes=-1), ValueError, "max_bytes"),
        (dict(max_bytes=1.5), TypeError, "max_bytes"),
        (dict(policy="x"), ValueError, "policy"),
        (dict(round_robin=-2), ValueError, "round_robin"),
        (dict(encrypted="yes"), TypeError, "encrypted"),
        (dict(errors="ignore"), ValueError, "errors"),
    ],
)
def test_batcher_bad_arguments(kw: dict[str, Any], exc: type, words: str) -> None:
    with pytest.raises(exc, match=words):
        EntryBucketBatcher(Buckets(), **kw)


def test_unpaired_surrogate_keys() -> None:
    layout = TopicLayout(1, [Segment(0, 0, 0x7FFF, Buckets.equal_width(3)), Segment(1, 0x8000, 0xFFFF)])
    keys = ["a", "\ud800x", "b"]
    with pytest.raises(bc.KeyEncodingError, match="index 1"):
        bucket_entries(keys, layout)
    batcher = EntryBucketBatcher(layout)
    with pytest.raises(bc.KeyEncodingError):
        batcher.add("\ud800x", b"")
    with pytest.raises(bc.KeyEncodingError, match="index 1"):
        batcher.add_many(keys, [b"", b"", b""])
    assert batcher.pending == 0 and batcher.position == 0
    # errors="replace": '?' like Java's getBytes(UTF_8) (0x11508252 in docs/design.md)
    replaced = bucket_entries(keys, layout, errors="replace", max_messages=1)
    assert (int(replaced.hash_min[1]), int(replaced.segment_id[1])) == (0x8252, 0)
    one = EntryBucketBatcher(layout, errors="replace", max_messages=1)
    got = [e for k in keys for e in one.add(k, b"")] + one.flush()
    assert as_tuples(got) == as_tuples(replaced)


def test_kernel_reports_the_first_bad_column_value() -> None:
    offsets = np.array([0, 2, 3], dtype=np.int64)
    bh = np.zeros(2, dtype=np.uint16)
    cases = [
        (
            np.array([0, 2], np.int32),
            np.zeros(2, np.int32),
            None,
            Status.BC_ERR_SEGMENT_INDEX,
            1,
            "segment index 2 at message 1",
        ),
        (
            np.array([1, 0], np.int32),
            np.array([1, 0], np.int32),
            None,
            Status.BC_ERR_BUCKET_INDEX,
            0,
            "bucket index 1 at message 0",
        ),
        (None, np.zeros(2, np.int32), np.array([0, -1]), Status.BC_ERR_NEGATIVE_SIZE, 1, "size -1 at message 1"),
    ]
    for seg, bucket, sizes, status, index, message in cases:
        got = _grouping.group_entries(seg, bucket, bh, sizes, offsets, 0, 5, 5)
        assert got == (status, index, None)
        with pytest.raises(ValueError, match=message):
            check_status(*got[:2], segments=seg, buckets=bucket, sizes=sizes)


def test_a_reused_stream_state_starts_clean_after_a_refused_stream() -> None:
    """A layout's batch state is kept for later calls: a stream refused in its second chunk (the
    first one scanned, batches left open) leaves nothing behind for the next stream on it."""
    offsets = np.array([0, 3, 5], dtype=np.int64)
    rng = np.random.default_rng(5)
    n = 3000
    seg = rng.integers(0, 2, n).astype(np.int32)
    bucket = np.where(seg == 0, rng.integers(0, 3, n), rng.integers(0, 2, n)).astype(np.int32)
    bh = rng.integers(0, 1 << 16, n).astype(np.uint16)
    bad = bucket.copy()
    bad[2500] = 9
    stream = _grouping.WholeStream(offsets, 0, 1, 1, 0)
    for policy in (0, 1):
        refused = _grouping.group_entries(seg, bad, bh, None, offsets, policy, 7, 100, False, stream)
        assert refused == (Status.BC_ERR_BUCKET_INDEX, 2500, None)
        reused = _grouping.group_entries(seg, bucket, bh, None, offsets, policy, 7, 100, False, stream)
        fresh = _grouping.group_entries(seg, bucket, bh, None, offsets, policy, 7, 100)
        assert reused[:2] == fresh[:2] == (Status.BC_OK, -1)
        for a, b in zip(reused[2], fresh[2]):
            assert np.array_equal(a, b)
    with pytest.raises(ValueError, match="other segments"):
        _grouping.group_entries(None, bucket[:3], bh[:3], None, np.array([0, 5], np.int64), 0, 7, 100, False, stream)
