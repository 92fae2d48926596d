"""Boundary lists cover the ring (docs/design.md, "Boundary lists"): equal_width and
buckets_for_budget give the Java reference's lists, ranges tile 0..65535, canonical hashes, what a
list refuses, and bucket_of agrees with a pure-Python ``bisect`` reference on every dtype and shape.
Oracles: the Java reference's facts as vectors and the references below."""

from __future__ import annotations

import bisect
import pickle
from types import ModuleType

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bucketcore as bc
from bucketcore import InvalidBoundaryError
from bucketcore.layout import Buckets, buckets_for_budget

# --------------------------------------------------------------------------------------------------
# Pure-Python references


def ref_bucket_of(splits, h):
    """Number of splits <= h."""
    return bisect.bisect_right(list(splits), h)


def ref_ranges(splits):
    starts = [0] + list(splits)
    ends = [s - 1 for s in splits] + [0xFFFF]
    return list(zip(starts, ends, strict=False))


split_lists = st.lists(st.integers(1, 0xFFFF), max_size=40, unique=True).map(sorted)


hash_values = st.integers(0, 0xFFFF)


# --------------------------------------------------------------------------------------------------
# Buckets: vectors


def test_equal_width_vectors():
    assert Buckets.equal_width(1).splits == ()
    assert Buckets.equal_width(2).splits == (0x8000,)
    assert Buckets.equal_width(3).splits == (21845, 43690)
    assert Buckets.equal_width(4).splits == (0x4000, 0x8000, 0xC000)
    assert Buckets.equal_width(65536).splits == tuple(range(1, 65536))
    for n in (5, 7, 100, 1000, 65535):
        assert Buckets.equal_width(n).splits == tuple(i * 65536 // n for i in range(1, n))
        assert Buckets.equal_width(n).count == n


@pytest.mark.parametrize("n", [-1, 65537, 1 << 40])
def test_equal_width_count_out_of_range(n):
    # The reference clamps a count above its ring size and treats every count <= 1 as one bucket;
    # we refuse a negative count or one above 65536 (docs/design.md, "Where bucketcore differs").
    with pytest.raises(InvalidBoundaryError, match=f"bucket count {n} is outside 0..65536"):
        Buckets.equal_width(n)


@pytest.mark.parametrize("n", [True, 2.0, "4", None])
def test_equal_width_count_type(n):
    with pytest.raises(TypeError, match="bucket count n must be an int"):
        Buckets.equal_width(n)


def test_buckets_for_budget_vectors():
    assert buckets_for_budget(4, 1) == 4
    assert buckets_for_budget(4, 2) == 2
    assert buckets_for_budget(4, 4) == 1
    assert buckets_for_budget(4, 8) == 1
    assert buckets_for_budget(4, 3) == 1
    assert buckets_for_budget(0, 3) == 1
    assert bc.buckets_for_budget(1024, 16) == 64


def test_buckets_for_budget_errors():
    with pytest.raises(ValueError, match="segment_count must be >= 1, not 0"):
        buckets_for_budget(4, 0)
    with pytest.raises(ValueError, match="budget must be >= 0, not -4"):
        buckets_for_budget(-4, 2)
    with pytest.raises(TypeError, match="budget must be an int, not float 4.0"):
        buckets_for_budget(4.0, 2)
    with pytest.raises(TypeError, match="segment_count must be an int, not bool True"):
        buckets_for_budget(4, True)


def test_ranges_and_count():
    assert Buckets((0x8000,)).ranges == [(0, 0x7FFF), (0x8000, 0xFFFF)]
    assert Buckets().ranges == [(0, 0xFFFF)]
    assert Buckets().count == 1
    assert Buckets((1, 0xFFFF)).ranges == [(0, 0), (1, 0xFFFE), (0xFFFF, 0xFFFF)]


@given(split_lists)
@settings(max_examples=60, deadline=None)
def test_ranges_property(splits):
    b = Buckets(splits)
    assert b.splits == tuple(splits)
    assert b.count == len(splits) + 1
    assert b.ranges == ref_ranges(splits)
    assert b.splits_array.dtype == np.uint16 and b.splits_array.tolist() == list(splits)
    for i, (start, end) in enumerate(b.ranges):
        assert b.bucket_of(start) == i == b.bucket_of(end)
        if i or b.dispatchable:
            assert b.canonical_hash(i) == (1 if i == 0 else start)
        else:  # bucket 0 is [0, 0]: its canonical hash 1 would lie in bucket 1
            with pytest.raises(InvalidBoundaryError, match="bucket 0 has no canonical hash"):
                b.canonical_hash(i)


def test_canonical_hash():
    b = Buckets.equal_width(4)
    assert [b.canonical_hash(i) for i in range(4)] == [1, 0x4000, 0x8000, 0xC000]
    assert Buckets().canonical_hash(0) == 1
    arr = b.canonical_hash(np.array([[0, 3], [2, 1]]))
    assert arr.tolist() == [[1, 0xC000], [0x8000, 0x4000]]
    with pytest.raises(ValueError, match="bucket index 4 is outside 0..3"):
        b.canonical_hash(4)
    with pytest.raises(ValueError, match=r"bucket index -1 at index 1 is outside 0..3"):
        b.canonical_hash(np.array([0, -1]))
    with pytest.raises(TypeError, match="bucket index must be an int"):
        b.canonical_hash(True)


# --------------------------------------------------------------------------------------------------
# Buckets: validation


@pytest.mark.parametrize(
    "splits, message",
    [
        ([5, 3], r"not strictly ascending: 3 at position 1 follows 5 at position 0"),
        ([1, 9, 4], r"not strictly ascending: 4 at position 2 follows 9 at position 1"),
        ([100, 100], r"duplicate split 100 at positions 0 and 1"),
        ([0], r"split 0 at position 0: bucket 0 starts at hash 0"),
        ([0, 5], r"split 0 at position 0"),
        ([5, 0x10000], r"split 65536 \(0x10000\) at position 1 is above 0xFFFF"),
        ([-3], r"split -3 at position 0 is negative"),
        ([4, True], r"split at position 1 is a bool \(True\)"),
        ([np.bool_(True)], r"split at position 0 is a bool"),
        ([1.0], r"split at position 0 is float 1.0, not an int"),
        ([3, 4.5], r"split at position 1 is float 4.5, not an int"),
        ([np.float64(7)], r"split at position 0 is float64 7.0, not an int"),
        (["7"], r"split at position 0 is str '7', not an int"),
        ([5, None], r"split at position 1 is NoneType None, not an int"),
        ("123", r"splits must be an iterable of ints, not str '123'"),
        (b"\x01", r"splits must be an iterable of ints, not bytes"),
        (12, r"splits must be an iterable of ints, not int 12"),
        (np.array([[1, 2]]), r"splits must be one-dimensional"),
        (np.array([1.5, 2.5]), r"split at position 0 is float 1.5"),
    ],
)
def test_invalid_splits(splits, message):
    with pytest.raises(InvalidBoundaryError, match=message):
        Buckets(splits)


def test_invalid_boundary_error_is_value_error():
    with pytest.raises(ValueError):
        Buckets([2, 1])
    assert issubclass(InvalidBoundaryError, bc.BucketcoreError)


def test_buckets_accepts_any_iterable_of_ints():
    assert Buckets(range(1, 4)).splits == (1, 2, 3)
    assert Buckets(np.array([10, 20], dtype=np.uint16)).splits == (10, 20)
    assert Buckets(iter([np.int64(5), 9])).splits == (5, 9)
    assert all(type(s) is int for s in Buckets(np.array([10, 20])).splits)
    assert Buckets(Buckets((7,))).splits == (7,)


def test_buckets_equality_hash_repr_immutability_pickle():
    a, b = Buckets((1, 2)), Buckets([1, 2])
    assert a == b and hash(a) == hash(b) and a != Buckets((1, 3))
    assert len({a, b, Buckets()}) == 2
    assert repr(Buckets()) == "Buckets(count=1, splits=())"
    assert repr(Buckets((0x8000,))) == "Buckets(count=2, splits=(32768,))"
    assert repr(Buckets.equal_width(65536)) == "Buckets(count=65536, splits=(1, 2, 3, ..., 65534, 65535))"
    with pytest.raises(AttributeError):
        a.splits = (3,)
    with pytest.raises(AttributeError):
        a._splits = (3,)
    with pytest.raises(ValueError):
        a.splits_array[0] = 9
    assert pickle.loads(pickle.dumps(a)) == a


# --------------------------------------------------------------------------------------------------
# bucket_of


@given(split_lists, st.lists(hash_values, max_size=50))
@settings(max_examples=150, deadline=None)
def test_bucket_of_matches_bisect_small_columns(splits, hashes):
    b = Buckets(splits)  # fresh: small columns take the branchless search (N >= 3)
    got = b.bucket_of(np.array(hashes, dtype=np.uint16))
    assert got.dtype == np.int32
    assert got.tolist() == [ref_bucket_of(splits, h) for h in hashes]
    assert b.bucket_of(hashes).tolist() == got.tolist()  # a list in
    for h in hashes[:5]:
        value = b.bucket_of(h)
        assert type(value) is int and value == ref_bucket_of(splits, h)


@given(
    split_lists, st.integers(0, 2**32 - 1), st.sampled_from(["u1", "u2", "u4", "u8", "i2", "i4", "i8", ">u2", ">i8"])
)
@settings(max_examples=80, deadline=None)
def test_bucket_of_matches_bisect_large_columns_every_dtype(splits, seed, dtype):
    rng = np.random.default_rng(seed)
    top = 0xFF if dtype == "u1" else 0x7FFF if dtype == "i2" else 0xFFFF
    hashes = rng.integers(0, top + 1, size=5000).astype(dtype)
    b = Buckets(splits)
    got = b.bucket_of(hashes)  # large: builds and keeps the 64 Ki table
    expected = np.searchsorted(np.array(splits, dtype=np.int64), hashes.astype(np.int64), side="right")
    assert np.array_equal(got, expected)
    # spot-check the numpy oracle itself against bisect
    for h in hashes[:20].tolist():
        assert expected[hashes.tolist().index(h)] == ref_bucket_of(splits, h)
    # small column again: now served by the cached table, same answers
    assert b.bucket_of(hashes[:7]).tolist() == expected[:7].tolist()


@pytest.mark.parametrize("n", [1, 2, 3, 4, 16, 256, 4096, 65535, 65536])
def test_bucket_of_equal_width_every_hash(n):
    b = Buckets.equal_width(n)
    every = np.arange(65536, dtype=np.uint16)
    expected = np.searchsorted(np.array(b.splits, dtype=np.int64), np.arange(65536), side="right")
    assert np.array_equal(b.bucket_of(every), expected)
    # closed form for equal width: h >= floor(i*65536/n) <=> i < (h+1)*n/65536, so
    # bucket_of(h) = ceil((h + 1) * n / 65536) - 1
    h = np.arange(65536, dtype=np.int64)
    assert np.array_equal(expected, ((h + 1) * n + 65535) // 65536 - 1)
    for i, (start, end) in list(enumerate(b.ranges))[:: max(1, n // 64)]:
        assert expected[start] == expected[end] == i
    assert np.array_equal(b.lookup_table(), expected)
    assert np.array_equal(Buckets(b.splits).bucket_of(every[::97].copy()), expected[::97])


def test_bucket_of_shape_and_empty():
    b = Buckets.equal_width(4)
    out = b.bucket_of(np.array([[0, 0x4000], [0xBFFF, 0xFFFF]], dtype=np.uint32))
    assert out.shape == (2, 2) and out.dtype == np.int32
    assert out.tolist() == [[0, 1], [2, 3]]
    assert b.bucket_of(np.array([], dtype=np.uint16)).shape == (0,)
    assert b.bucket_of([]).shape == (0,)
    assert b.bucket_of(np.uint16(0xC000)) == 3
    assert b.bucket_of(np.arange(0, 65536, 4096)[::2]).tolist() == [0, 0, 1, 1, 2, 2, 3, 3]


def test_bucket_of_read_only_and_strided_columns():
    b = Buckets.equal_width(16)
    every = np.arange(65536, dtype=np.uint16)
    every.flags.writeable = False
    assert b.bucket_of(every)[::4096].tolist() == list(range(16))
    assert b.bucket_of(every[::4096]).tolist() == list(range(16))  # non-contiguous view
    assert b.bucket_of(np.arange(0, 65536, dtype=np.int64)[::8192]).tolist() == list(range(0, 16, 2))


def test_bucket_of_an_arrow_integer_column(pa: ModuleType) -> None:
    b = Buckets.equal_width(16)
    assert b.bucket_of(pa.array([1, 4096, 65535], type=pa.uint16())).tolist() == [0, 1, 15]


def test_bucket_of_invalid():
    b = Buckets.equal_width(4)
    with pytest.raises(ValueError, match=r"bucket hash 65536 at index 2 is outside 0..0xFFFF"):
        b.bucket_of(np.array([0, 1, 65536, 5], dtype=np.int64))
    with pytest.raises(ValueError, match=r"bucket hash -1 at index \(1, 0\) is outside"):
        b.bucket_of(np.array([[0, 1], [-1, 2]], dtype=np.int32))
    with pytest.raises(ValueError, match=r"bucket hash 70000 at index 1 is outside"):
        b.bucket_of([1, 70000])
    with pytest.raises(ValueError, match=r"bucket hash 4294967295 at index 0"):
        b.bucket_of(np.array([2**32 - 1], dtype=np.uint32))
    big = np.zeros(10000, dtype=np.int64)
    big[9999] = -5
    with pytest.raises(ValueError, match=r"bucket hash -5 at index 9999"):
        b.bucket_of(big)  # table path checks the range too
    with pytest.raises(ValueError, match=r"bucket hash 65536 is outside"):
        b.bucket_of(65536)
    with pytest.raises(ValueError, match=r"bucket hash -1 is outside"):
        b.bucket_of(-1)
    with pytest.raises(TypeError, match="not an array of dtype float64"):
        b.bucket_of(np.array([1.0]))
    with pytest.raises(TypeError, match="not an array of dtype bool"):
        b.bucket_of(np.array([True]))
    with pytest.raises(TypeError, match=r"bucket hash at index 1 is float 2.0"):
        b.bucket_of([1, 2.0])
    with pytest.raises(TypeError, match=r"bucket hash at index 0 is bool True"):
        b.bucket_of([True])
    for scalar in (True, 1.0, "1"):
        with pytest.raises(TypeError, match="bucket hashes must be ints"):
            b.bucket_of(scalar)
    for n in (1, 2):  # the compare and constant paths check ranges as well
        with pytest.raises(ValueError, match="bucket hash 65536 at index 0"):
            Buckets.equal_width(n).bucket_of(np.array([65536]))
