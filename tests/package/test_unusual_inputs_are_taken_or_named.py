"""Unusual but valid inputs, and bad ones that must be named: big-endian numpy U arrays, Python
lists checked item by item, Arrow integer columns with nulls, ids a layout still names, argument
checks with precomputed hashes, and no partial effect after an error.

Every expected value comes from an independent oracle (mmh3, or the formulas of docs/design.md),
never from bucketcore's own output.
"""

from __future__ import annotations

from types import ModuleType

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


# --- split_hash and canonical_hash: Python lists are checked item by item ------------------------


def test_split_hash_refuses_bools_in_a_list() -> None:
    with pytest.raises(TypeError, match="index 0"):
        bc.split_hash([True, 0])
    with pytest.raises(TypeError, match="index 1"):
        bc.split_hash([0, np.bool_(False)])


def test_split_hash_names_the_index_of_a_bad_list_item() -> None:
    with pytest.raises(ValueError, match="index 1"):
        bc.split_hash([0, 2**64])
    with pytest.raises(ValueError, match="index 1"):
        bc.split_hash([0, -1])
    with pytest.raises(TypeError, match="index 2"):
        bc.split_hash([0, 1, 1.0])
    with pytest.raises(TypeError, match="index 0"):
        bc.split_hash(["a"])


def test_split_hash_of_an_empty_list() -> None:
    segment_hash, bucket_hash = bc.split_hash([])
    assert segment_hash.dtype == np.uint16 and bucket_hash.dtype == np.uint16
    assert segment_hash.shape == (0,) and bucket_hash.shape == (0,)


def test_split_hash_of_a_list_of_ints() -> None:
    raws = [_raw(k) for k in KEYS]
    segment_hash, bucket_hash = bc.split_hash(raws + [np.uint32(0xFFFFFFFF)])
    assert segment_hash.tolist() == [r >> 16 for r in raws] + [0xFFFF]
    assert bucket_hash.tolist() == [r & 0xFFFF for r in raws] + [0xFFFF]


def test_canonical_hash_refuses_bools_in_a_list() -> None:
    buckets = bc.Buckets.equal_width(3)
    with pytest.raises(TypeError, match="index 1"):
        buckets.canonical_hash([0, True])
    with pytest.raises(TypeError, match="index 1"):
        buckets.canonical_hash([0, 1.0])


def test_canonical_hash_of_an_empty_list() -> None:
    out = bc.Buckets.equal_width(3).canonical_hash([])
    assert out.shape == (0,) and out.dtype.kind == "i"


def test_canonical_hash_of_a_list() -> None:
    # equal_width(3) = [21845, 43690]; bucket 0's canonical hash is 1, not 0
    assert bc.Buckets.equal_width(3).canonical_hash([2, 0, np.int64(1)]).tolist() == [43690, 1, 21845]


# --- producer: the batcher's first argument is called `buckets` (see the README's API section) --------------------


def test_batcher_takes_buckets_by_keyword() -> None:
    buckets = bc.Buckets.equal_width(2)
    batcher = bc.EntryBucketBatcher(buckets=buckets, max_messages=1)
    [entry] = batcher.add("a", b"x")
    low = _raw("a") & 0xFFFF
    assert (entry.segment_id, entry.bucket, entry.hash_min, entry.hash_max) == (0, int(low >= 0x8000), low, low)
    layout = bc.TopicLayout(3, [bc.Segment(5, 0, 0xFFFF, buckets)])
    assert bc.EntryBucketBatcher(buckets=layout, max_messages=1).add("a", b"x")[0].segment_id == 5
    with pytest.raises(TypeError, match="buckets"):
        bc.EntryBucketBatcher(buckets=[0x8000])  # type: ignore[arg-type]


# --- Arrow integer columns with nulls: named, not reported as "dtype float64" -------------------


def test_bucket_of_arrow_column_with_a_null_names_its_index(pa: ModuleType) -> None:
    buckets = bc.Buckets.equal_width(4)
    sliced = pa.array([7, 0, 0x4000, None, 0xFFFF], type=pa.uint16()).slice(1)
    with pytest.raises(ValueError, match="index 2.*null"):
        buckets.bucket_of(sliced)
    chunked = pa.chunked_array([[0, 0x8000], [None]], type=pa.uint16())
    with pytest.raises(ValueError, match="index 2.*null"):
        buckets.bucket_of(chunked)
    # without nulls, sliced and chunked columns are plain integer columns
    assert buckets.bucket_of(sliced.slice(0, 2)).tolist() == [0, 1]
    assert buckets.bucket_of(chunked.slice(0, 2)).tolist() == [0, 2]


def test_balanced_arrow_column_with_a_null_names_its_index(pa: ModuleType) -> None:
    with pytest.raises(ValueError, match="index 1.*null"):
        bc.Buckets.balanced(pa.array([1, None, 3], type=pa.int32()), 2)


def test_split_hash_arrow_column_with_a_null_names_its_index(pa: ModuleType) -> None:
    with pytest.raises(ValueError, match="index 1.*null"):
        bc.split_hash(pa.array([_raw("a"), None], type=pa.uint32()))
    segment_hash, bucket_hash = bc.split_hash(pa.array([0, _raw("a")], type=pa.uint32()).slice(1))
    assert (segment_hash.tolist(), bucket_hash.tolist()) == ([_raw("a") >> 16], [_raw("a") & 0xFFFF])


# --- layout transitions never reuse an id the layout still names ---------------------------------


def test_new_segment_ids_skip_ids_named_as_parents_or_children() -> None:
    # segment 0's parent 5 was garbage-collected after draining; its id must not come back
    layout = bc.TopicLayout(4, [bc.Segment(0, 0, 0xFFFF, parent_ids=(5,))])
    split = layout.split(0)
    new_ids = {s.segment_id for s in split.active_segments}
    assert new_ids.isdisjoint({0, 5}) and len(new_ids) == 2
    for _ in range(4):  # later transitions keep avoiding 5 (ids 1..4 are taken first)
        split = split.split(split.active_segments[0].segment_id)
        assert 5 not in {s.segment_id for s in split.segments}
    assert split.segment(0).parent_ids == (5,)
    # the id of a sealed segment's child that is gone from the layout is named too
    layout = bc.TopicLayout(
        1, [bc.Segment(1, 0, 0xFFFF, bc.Buckets(), "sealed", (), None, (3,)), bc.Segment(2, 0, 0xFFFF)]
    )
    (child,) = layout.rebucket(2, bc.Buckets.equal_width(2)).active_segments
    assert child.segment_id not in (1, 2, 3)


# --- producer: every argument is checked, also when the hashes are precomputed -------------------


def test_bucket_entries_checks_errors_with_precomputed_hashes() -> None:
    kh = bc.hash_keys(["a"])
    with pytest.raises(ValueError, match="errors"):
        bc.bucket_entries(kh, bc.Buckets(), errors="bogus")
    with pytest.raises(ValueError, match="errors"):
        bc.bucket_entries(kh, bc.Buckets(), errors=None)  # type: ignore[arg-type]
    assert len(bc.bucket_entries(kh, bc.Buckets(), errors="replace")) == 1


# --- no partial effect after an error; odd but valid targets --------------------------------------


def test_failed_batcher_calls_leave_no_trace(pa: ModuleType) -> None:
    layout = bc.TopicLayout(
        0,
        [bc.Segment(0, 0, 0x7FFF, bc.Buckets.equal_width(3)), bc.Segment(1, 0x8000, 0xFFFF, bc.Buckets.equal_width(2))],
    )
    clean = bc.EntryBucketBatcher(layout, max_messages=2)
    dirty = bc.EntryBucketBatcher(layout, max_messages=2)
    sends = [(None, b"1"), ("a", b"22"), (None, b"333"), ("key-1", b"4")]
    bad_calls = [
        lambda b: b.add(5, b"x"),
        lambda b: b.add("\ud800", b"x"),
        lambda b: b.add("a", "not bytes"),
        lambda b: b.add_many([None, "a", 5], [b"", b"", b""]),
        lambda b: b.add_many(pa.array([None, "\ud800x".encode("utf-8", "surrogatepass")], type=pa.binary()), [b"", 7]),
        lambda b: b.add_many(["a", None], [b""]),
    ]
    got_clean, got_dirty = [], []
    for key, payload in sends:
        for call in bad_calls:
            with pytest.raises((TypeError, ValueError)):
                call(dirty)
        got_clean += clean.add(key, payload)
        got_dirty += dirty.add(key, payload)
        assert (dirty.position, dirty.pending, dirty.round_robin) == (clean.position, clean.pending, clean.round_robin)
    got_clean += clean.flush()
    got_dirty += dirty.flush()
    assert got_dirty == got_clean and len(got_clean) >= 2


def test_full_ring_of_65536_buckets_in_the_producer() -> None:
    keys = ["a", "key-1", "ключ", None]
    table = bc.bucket_entries(keys, bc.Buckets.equal_width(65536))
    # every bucket hash is its own bucket: bucket == bucket hash
    lows = [_raw(k) & 0xFFFF if k is not None else 0 for k in keys]
    assert sorted(zip(table.bucket.tolist(), table.hash_min.tolist(), strict=False)) == sorted((h, h) for h in lows)
    [entry] = bc.EntryBucketBatcher(bc.Buckets.equal_width(65536), max_messages=1).add("ключ", b"")
    assert entry.bucket == entry.hash_min == _raw("ключ") & 0xFFFF


def test_one_legacy_segment_takes_every_message() -> None:
    layout = bc.TopicLayout(0, [bc.Segment(3, 0, 0xFFFF, legacy_topic_name="persistent://t/ns/x-partition-0")])
    keys = ["a", None, "key-1", None]
    assert layout.route(keys).tolist() == [3] * 4
    assert set(bc.bucket_entries(keys, layout).segment_id.tolist()) == {3}
    batcher = bc.EntryBucketBatcher(layout)
    batcher.add_many(keys, [b""] * 4)
    assert [e.segment_id for e in batcher.flush()] == [3]


def test_canonical_hash_list_with_a_huge_index_names_it() -> None:
    buckets = bc.Buckets.equal_width(3)
    for value in (2**64 - 1, 2**70, -(2**70), np.uint64(2**64 - 1)):
        with pytest.raises(ValueError, match="index 1 is outside 0..2"):
            buckets.canonical_hash([0, value])


def test_segment_ids_must_fit_int64() -> None:
    # route() and EntryTable.segment_id are np.int64 columns (Pulsar segment ids are Java longs)
    top = 2**63 - 1
    layout = bc.TopicLayout(0, [bc.Segment(top, 0, 0xFFFF)])
    assert layout.route(["a"]).tolist() == [top]
    assert bc.bucket_entries(["a"], layout).segment_id.tolist() == [top]
    for bad in (2**63, 2**70):
        with pytest.raises(bc.InvalidLayoutError, match=str(bad)):
            bc.Segment(bad, 0, 0xFFFF)
        with pytest.raises(bc.InvalidLayoutError, match=str(bad)):
            bc.Segment(0, 0, 0xFFFF, parent_ids=(bad,))
    with pytest.raises(bc.InvalidLayoutError, match=str(2**63)):
        layout.split(top)  # its children would need ids past the int64 range


def test_balanced_float_weights_whose_total_overflows() -> None:
    # each bin is finite, but their sum is not: a clear ValueError, not an AssertionError
    with pytest.raises(ValueError, match="overflows float64"):
        bc.Buckets.balanced([1, 2], 2, weights=[1e308, 1e308])
    with pytest.raises(ValueError, match="overflows float64"):
        bc.Buckets.equal_width(2).load([1, 2], weights=[1e308, 1e308])
    # large but summable weights still work: the two hashes are split apart
    assert bc.Buckets.balanced([1, 2], 2, weights=[8e307, 8e307]).splits == (2,)
