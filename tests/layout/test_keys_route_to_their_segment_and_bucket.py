"""Boundary lists, balanced boundaries, segment layouts and routing (docs/design.md:
"Boundary lists" and "Segments, layouts and routing").

Oracles: the Java reference's facts as vectors, a pure-Python ``bisect`` reference for bucket and
segment lookup, ``mmh3`` for the hashes, Java's ``signSafeMod`` written out, and brute force for
the balanced partition on small inputs.
"""

from __future__ import annotations

import bisect
import itertools
import json
import pickle
from fractions import Fraction
from types import ModuleType

import mmh3
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bucketcore as bc
from bucketcore import InvalidBoundaryError, InvalidLayoutError
from bucketcore.layout import Buckets, Segment, TopicLayout, buckets_for_budget

# --------------------------------------------------------------------------------------------------
# Pure-Python references


def ref_bucket_of(splits, h):
    """Number of splits <= h."""
    return bisect.bisect_right(list(splits), h)


def ref_ranges(splits):
    starts = [0] + list(splits)
    ends = [s - 1 for s in splits] + [0xFFFF]
    return list(zip(starts, ends, strict=False))


def java_rem(a, b):
    """Java's int remainder: truncated toward zero, sign of the dividend."""
    r = abs(a) % abs(b)
    return -r if a < 0 else r


def sign_safe_mod(dividend, divisor):
    mod = java_rem(dividend, divisor)
    if mod < 0:
        mod += divisor
    return mod


def ref_route(layout, keys, round_robin=0):
    """segment_id per key: keyed by mmh3 high 16 bits over the sorted active ranges (or
    signSafeMod over the legacy order), keyless round-robin. Returns (ids, next_round_robin)."""
    active = sorted((s for s in layout.segments if s.state == "active"), key=lambda s: s.hash_start)
    legacy = all(s.legacy_topic_name is not None for s in active)
    order = [s for s in layout.segments if s.state == "active"] if legacy else active
    starts = [s.hash_start for s in active]
    ids = []
    rr = round_robin % len(order)
    for key in keys:
        if key is None:
            ids.append(order[rr].segment_id)
            rr = (rr + 1) % len(order)
            continue
        data = key.encode("utf-8") if isinstance(key, str) else key
        raw = mmh3.hash(data, 0, signed=False)
        if legacy:
            ids.append(order[sign_safe_mod(raw & 0x7FFFFFFF, len(order))].segment_id)
        else:
            ids.append(active[bisect.bisect_right(starts, raw >> 16) - 1].segment_id)
    return ids, rr


def brute_force_best_max(hashes, weights, n):
    """Least possible heaviest bucket: cut the sorted distinct observed hashes into <= n
    contiguous groups every way there is (the ring has room for the rest of the buckets)."""
    loads = {}
    for h, w in zip(hashes, weights, strict=False):
        loads[h] = loads.get(h, 0) + w
    values = [loads[h] for h in sorted(loads)]
    if not values:
        return 0
    best = None
    slots = range(1, len(values))
    for k in range(0, min(n - 1, len(values) - 1) + 1):
        for cuts in itertools.combinations(slots, k):
            bounds = (0,) + cuts + (len(values),)
            worst = max(sum(values[a:b]) for a, b in zip(bounds, bounds[1:], strict=False))
            if best is None or worst < best:
                best = worst
    return best


def exact_loads(buckets, hashes, weights):
    loads = [0] * buckets.count
    for h, w in zip(hashes, weights, strict=False):
        loads[ref_bucket_of(buckets.splits, h)] += Fraction(w) if isinstance(w, float) else w
    return loads


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


# --------------------------------------------------------------------------------------------------
# Balanced boundaries


@given(
    st.lists(st.integers(0, 0xFFFF), max_size=9),
    st.integers(1, 5),
    st.sampled_from(["none", "int", "dyadic"]),
    st.data(),
)
@settings(max_examples=150, deadline=None)
def test_balanced_is_optimal_against_brute_force(hashes, n, kind, data):
    # Cluster some draws so several hashes share a bin or sit at the ring's ends.
    hashes = [h if i % 3 else (h % 4) * 0x3FFF for i, h in enumerate(hashes)]
    if kind == "none":
        weights = None
        ws = [1] * len(hashes)
    elif kind == "int":
        ws = data.draw(st.lists(st.integers(0, 1000), min_size=len(hashes), max_size=len(hashes)))
        weights = ws
    else:  # dyadic floats: every partial sum is exact, so float and exact arithmetic agree
        ws = data.draw(st.lists(st.integers(0, 64), min_size=len(hashes), max_size=len(hashes)))
        ws = [w / 8 for w in ws]
        weights = ws
    b = Buckets.balanced(hashes, n, weights=weights)
    assert Buckets(b.splits) == b  # valid: strictly ascending in 1..0xFFFF, every bucket non-empty
    assert b.count == n
    best = brute_force_best_max(hashes, ws, n)
    assert max(exact_loads(b, hashes, ws)) == best
    load = b.load(hashes, weights=weights)
    assert load.max == float(best)
    assert load.per_bucket.tolist() == [float(x) if kind == "dyadic" else x for x in exact_loads(b, hashes, ws)]
    assert Buckets.balanced(hashes, n, weights=weights) == b  # deterministic


@given(st.lists(st.integers(0, 0xFFFF), min_size=1, max_size=300), st.integers(1, 40))
@settings(max_examples=40, deadline=None)
def test_balanced_never_worse_than_equal_width(hashes, n):
    balanced = Buckets.balanced(hashes, n)
    assert balanced.load(hashes).max <= Buckets.equal_width(n).load(hashes).max
    assert Buckets(balanced.splits).count == n


def test_balanced_float_weights_optimal_in_float_arithmetic():
    # Non-dyadic weights: the result must be the optimum of the float prefix-sum cost, and it
    # must equal the exact rational optimum up to float rounding.
    rng = np.random.default_rng(5)
    hashes = rng.integers(0, 65536, size=12).tolist()
    weights = rng.random(12).tolist()
    for n in (2, 3, 4):
        b = Buckets.balanced(hashes, n, weights=weights)
        best = brute_force_best_max(hashes, [Fraction(w) for w in weights], n)
        got = max(exact_loads(b, hashes, weights))
        assert abs(float(got) - float(best)) <= 1e-12 * float(best)


def test_balanced_vectors():
    assert Buckets.balanced([], 3) == Buckets.equal_width(3)  # nothing observed: equal width
    assert Buckets.balanced([], 1) == Buckets()
    assert Buckets.balanced([], 65536) == Buckets.equal_width(65536)
    assert Buckets.balanced(np.arange(65536), 65536) == Buckets.equal_width(65536)
    # all traffic on one hash: that bucket carries it whatever we do; others split the rest
    b = Buckets.balanced([7] * 10, 4)
    assert b.load([7] * 10).max == 10 and b.count == 4
    # two equal hot hashes end up in different buckets, the boundary centred in the gap
    assert Buckets.balanced([100, 100, 300, 300], 2).splits == (200,)
    # weights move the boundary: bytes, not message counts
    hashes = [10, 20, 30, 40]
    assert Buckets.balanced(hashes, 2).load(hashes).per_bucket.tolist() == [2, 2]
    heavy = Buckets.balanced(hashes, 2, weights=[100, 1, 1, 1])
    assert heavy.load(hashes, weights=[100, 1, 1, 1]).per_bucket.tolist() == [100, 3]
    assert heavy.splits == (15,)


def test_balanced_beats_equal_width_on_skewed_traffic():
    rng = np.random.default_rng(11)
    hashes = np.concatenate([rng.integers(0, 0x1000, 90_000), rng.integers(0, 0x10000, 10_000)]).astype(np.uint16)
    balanced = Buckets.balanced(hashes, 16)
    equal = Buckets.equal_width(16)
    assert balanced.load(hashes).ratio < 1.01
    assert equal.load(hashes).ratio > 5
    # load of a big uniform sample under both lists
    per_bucket = balanced.load(hashes).per_bucket
    assert per_bucket.sum() == 100_000 and per_bucket.dtype == np.int64


def test_balanced_and_load_invalid_input():
    with pytest.raises(InvalidBoundaryError, match="bucket count 0 is outside 1..65536"):
        Buckets.balanced([1, 2], 0)
    with pytest.raises(TypeError, match="bucket count n must be an int"):
        Buckets.balanced([1, 2], 2.0)
    with pytest.raises(ValueError, match=r"bucket hash 65536 at index 1 is outside"):
        Buckets.balanced([1, 65536], 2)
    with pytest.raises(ValueError, match=r"bucket hash -2 at index 0 is outside"):
        Buckets.balanced(np.array([-2, 3]), 2)
    with pytest.raises(ValueError, match=r"weights have shape \(3,\), bucket_hashes have shape \(2,\)"):
        Buckets.balanced([1, 2], 2, weights=[1, 2, 3])
    with pytest.raises(ValueError, match=r"weight -1 at index 1 is negative"):
        Buckets.balanced([1, 2], 2, weights=[1, -1])
    with pytest.raises(ValueError, match=r"weight nan at index 0 is not a finite non-negative number"):
        Buckets.balanced([1, 2], 2, weights=[float("nan"), 1.0])
    with pytest.raises(ValueError, match=r"weight inf at index 1"):
        Buckets.balanced([1, 2], 2, weights=np.array([1.0, np.inf]))
    with pytest.raises(ValueError, match=r"weight -0.5 at index 1"):
        Buckets.balanced([1, 2], 2, weights=[0.5, -0.5])
    with pytest.raises(TypeError, match=r"weight at index 0 is bool True"):
        Buckets.balanced([1, 2], 2, weights=[True, 1])
    with pytest.raises(TypeError, match="not an array of dtype bool"):
        Buckets.balanced([1, 2], 2, weights=np.array([True, False]))
    with pytest.raises(ValueError, match="overflows int64"):
        Buckets.balanced([1, 2], 2, weights=np.array([2**62, 2**62], dtype=np.int64))
    with pytest.raises(ValueError, match="does not fit int64"):
        Buckets.balanced([1], 2, weights=np.array([2**63], dtype=np.uint64))
    with pytest.raises(TypeError, match="bucket hash at index 0 is float"):
        Buckets().load([1.5])


def test_load_report():
    b = Buckets((0x8000,))
    load = b.load([1, 2, 3, 0x9000])
    assert load.per_bucket.tolist() == [3, 1]
    assert (load.total, load.max, load.mean, load.ratio) == (4.0, 3.0, 2.0, 1.5)
    weighted = b.load([1, 0x9000], weights=[0.25, 0.75])
    assert weighted.per_bucket.tolist() == [0.25, 0.75] and weighted.ratio == 1.5
    assert np.isnan(b.load([]).ratio)
    assert Buckets().load(7).per_bucket.tolist() == [1]


# --------------------------------------------------------------------------------------------------
# Segments and layouts


def seg(sid, start, end, n=1, **kw):
    return Segment(sid, start, end, Buckets.equal_width(n), **kw)


def two_segment_layout():
    return TopicLayout(3, [seg(0, 0, 0x7FFF, 4), seg(1, 0x8000, 0xFFFF, 2)])


def test_segment_fields_and_defaults():
    s = Segment(5, 0, 0xFFFF)
    assert (s.segment_id, s.hash_start, s.hash_end, s.buckets, s.state) == (5, 0, 0xFFFF, Buckets(), "active")
    assert s.parent_ids == () and s.child_ids == () and s.legacy_topic_name is None
    assert s.is_active and not s.is_legacy
    assert Segment(1, 0, 5, parent_ids=[3, 4]).parent_ids == (3, 4)
    with pytest.raises(AttributeError):
        s.hash_start = 4  # frozen
    assert s == Segment(5, 0, 0xFFFF) and hash(s) == hash(Segment(5, 0, 0xFFFF))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(segment_id=-1), r"segment_id must be an int >= 0, not int -1"),
        (dict(segment_id=True), r"segment_id must be an int >= 0, not bool True"),
        (dict(segment_id=1.0), r"segment_id must be an int >= 0, not float 1.0"),
        (dict(hash_start=-1), r"segment 1: hash_start -1 is outside 0..0xFFFF"),
        (dict(hash_end=0x10000), r"segment 1: hash_end 65536 is outside 0..0xFFFF"),
        (dict(hash_start=2.0), r"segment 1: hash_start must be an int in 0..0xFFFF, not float 2.0"),
        (dict(hash_start=9, hash_end=8), r"segment 1: hash_start 0x0009 is after hash_end 0x0008"),
        (dict(buckets=(1, 2)), r"segment 1: buckets must be a Buckets, not tuple"),
        (dict(state="ACTIVE"), r"segment 1: state must be 'active' or 'sealed', not 'ACTIVE'"),
        (dict(parent_ids=(1,)), r"segment 1: parent_ids \(1,\) includes the segment itself"),
        (dict(parent_ids=(2, 2)), r"segment 1: parent_ids \(2, 2\) lists a segment twice"),
        (dict(parent_ids=(2, -1)), r"segment 1: parent_ids\[1\] is int -1"),
        (dict(parent_ids=5), r"segment 1: parent_ids must be a tuple of segment ids, not int 5"),
        (dict(child_ids=(4,)), r"segment 1: an active segment has no children"),
        (dict(state="sealed", child_ids=("4",)), r"segment 1: child_ids\[0\] is str '4'"),
        (dict(legacy_topic_name=""), r"segment 1: legacy_topic_name must be a non-empty str or None"),
        (dict(legacy_topic_name=5), r"segment 1: legacy_topic_name must be a non-empty str or None, not int 5"),
    ],
)
def test_segment_validation(kwargs, message):
    args = dict(segment_id=1, hash_start=0, hash_end=0xFFFF)
    args.update(kwargs)
    with pytest.raises(InvalidLayoutError, match=message):
        Segment(**args)


def test_layout_properties():
    lay = TopicLayout(7, [seg(1, 0x8000, 0xFFFF), seg(0, 0, 0x7FFF)], topic="persistent://acme/orders/events")
    assert lay.epoch == 7 and lay.topic == "persistent://acme/orders/events"
    assert [s.segment_id for s in lay.segments] == [1, 0]  # as given
    assert [s.segment_id for s in lay.active_segments] == [0, 1]  # by hash_start
    assert lay.active_segment_ids.tolist() == [0, 1]
    assert lay.segment(1).hash_start == 0x8000
    assert lay.segment_topic(1) == "segment://acme/orders/events/8000-ffff-1"
    assert lay.segment_topic(0) == "segment://acme/orders/events/0000-7fff-0"
    assert TopicLayout(1, [seg(0, 0, 0xFFFF)]).segment_topic(0) == "segment://t/ns/topic/0000-ffff-0"
    assert not lay.is_legacy
    with pytest.raises(KeyError, match="no segment 9 in layout epoch 7"):
        lay.segment(9)
    with pytest.raises(KeyError):
        lay.segment_topic(9)
    with pytest.raises(TypeError, match="segment_id must be an int"):
        lay.segment("1")
    assert "epoch=7" in repr(lay)


def test_layout_epoch_order_and_equality():
    a = TopicLayout(3, [seg(0, 0, 0xFFFF)])
    b = TopicLayout(4, [seg(0, 0, 0xFFFF)])
    assert b.is_newer_than(a) and not a.is_newer_than(b) and not a.is_newer_than(a)
    assert a == TopicLayout(3, (seg(0, 0, 0xFFFF),)) and hash(a) == hash(TopicLayout(3, [seg(0, 0, 0xFFFF)]))
    assert a != b
    with pytest.raises(TypeError):
        a.is_newer_than(3)
    assert pickle.loads(pickle.dumps(a)) == a
    with pytest.raises(AttributeError):
        a.epoch = 5


@pytest.mark.parametrize(
    "segments, message",
    [
        ([seg(0, 1, 0xFFFF)], r"gap 0x0000-0x0000 before segment 0"),
        ([seg(0, 0, 0x7FFF)], r"gap 0x8000-0xffff after segment 0"),
        ([seg(0, 0, 0x7FFF), seg(1, 0x8002, 0xFFFF)], r"gap 0x8000-0x8001 after segment 0 before segment 1"),
        (
            [seg(0, 0, 0x8000), seg(1, 0x7FFF, 0xFFFF)],
            r"overlap 0x7fff-0x8000 between active segments 0 \(0x0000-0x8000\) and 1 \(0x7fff-0xffff\)",
        ),
        ([seg(0, 0, 0xFFFF), seg(1, 0x10, 0x20)], r"overlap 0x0010-0x0020 between active segments 0"),
        ([seg(0, 0, 0xFFFF, state="sealed")], r"no active segment"),
        ([], r"no active segment"),
        ([seg(0, 0, 0x7FFF), seg(0, 0x8000, 0xFFFF)], r"duplicate segment id 0 at segments\[0\] and segments\[1\]"),
        (
            [seg(0, 0, 0x7FFF), seg(1, 0x8000, 0xFFFF, parent_ids=(0,))],
            r"segment 1: parent 0 is active: a segment is sealed when its successors are created",
        ),
        (
            [seg(0, 0, 0xFFFF, state="sealed", child_ids=(5,)), seg(1, 0, 0xFFFF, parent_ids=(0,))],
            r"segment 1: parent 0 lists child_ids \(5,\), which do not include 1",
        ),
        (
            [seg(0, 0, 0xFFFF, state="sealed", child_ids=(1,)), seg(1, 0, 0xFFFF)],
            r"segment 0: child 1 lists parent_ids \(\), which do not include 0",
        ),
        ([seg(0, 0, 0xFFFF), (1, 2, 3)], r"segments\[1\] is tuple \(1, 2, 3\), not a Segment"),
    ],
)
def test_layout_validation(segments, message):
    with pytest.raises(InvalidLayoutError, match=message):
        TopicLayout(1, segments)


def test_layout_argument_validation():
    one = [seg(0, 0, 0xFFFF)]
    for epoch, what in ((-1, "int -1"), (True, "bool True"), (1.0, "float 1.0")):
        with pytest.raises(InvalidLayoutError, match=f"epoch must be an int >= 0, not {what}"):
            TopicLayout(epoch, one)
    for topic in ("t/ns/topic", "persistent://t/ns", "persistent://t//x", "://t/ns/x", "persistent://a/b/c/d"):
        with pytest.raises(InvalidLayoutError, match="is not of the form"):
            TopicLayout(1, one, topic=topic)
    with pytest.raises(InvalidLayoutError, match="topic must be a str"):
        TopicLayout(1, one, topic=None)
    with pytest.raises(InvalidLayoutError, match="segments must be an iterable of Segment"):
        TopicLayout(1, seg(0, 0, 0xFFFF))


def test_ids_of_garbage_collected_segments_are_allowed():
    # a drained, sealed parent is gone from the layout; its children still name it
    lay = TopicLayout(
        9,
        [
            seg(5, 0, 0x7FFF, parent_ids=(1,)),
            seg(6, 0x8000, 0xFFFF, parent_ids=(1, 2)),
            seg(7, 0, 0xFFFF, state="sealed", child_ids=(11, 12)),
        ],
    )
    assert [s.parent_ids for s in lay.active_segments] == [(1,), (1, 2)]
    assert TopicLayout.from_dict(lay.to_dict()) == lay


def test_sealed_segments_may_overlap_active_ones():
    lay = TopicLayout(
        2,
        [
            seg(0, 0, 0xFFFF, 4, state="sealed", child_ids=(1, 2)),
            seg(1, 0, 0x7FFF, parent_ids=(0,)),
            seg(2, 0x8000, 0xFFFF, parent_ids=(0,)),
        ],
    )
    assert [s.segment_id for s in lay.active_segments] == [1, 2]


# --------------------------------------------------------------------------------------------------
# Routing


def key_lists(max_size=60):
    key = st.one_of(st.none(), st.text(max_size=8), st.binary(max_size=8))
    return st.lists(key, max_size=max_size)


@st.composite
def tilings(draw, max_segments=12):
    cuts = draw(st.lists(st.integers(1, 0xFFFF), max_size=max_segments - 1, unique=True).map(sorted))
    bounds = [0] + cuts + [0x10000]
    ids = draw(st.permutations(list(range(len(bounds) - 1))))
    segs = [Segment(ids[i] * 3 + 1, a, b - 1) for i, (a, b) in enumerate(zip(bounds, bounds[1:], strict=False))]
    order = draw(st.permutations(segs))
    return TopicLayout(draw(st.integers(0, 100)), order)


@given(tilings(), key_lists(), st.integers(0, 50))
@settings(max_examples=120, deadline=None)
def test_route_matches_reference(layout, keys, rr):
    expected, next_rr = ref_route(layout, keys, rr)
    got = layout.route(keys, round_robin=rr)
    assert got.dtype == np.int64 and got.tolist() == expected
    index, got_rr = layout.route_index(bc.hash_keys(keys), round_robin=rr)
    assert index.dtype == np.int32
    assert got_rr == next_rr == (rr + sum(k is None for k in keys)) % len(layout.active_segments)
    assert [layout.active_segments[i].segment_id for i in index.tolist()] == expected


@given(tilings(max_segments=300), st.integers(0, 2**32 - 1))
@settings(max_examples=25, deadline=None)
def test_route_large_columns_matches_reference(layout, seed):
    # Large enough that many-segment layouts route through the 64 Ki table.
    rng = np.random.default_rng(seed)
    keys = [None if x < 30_000 else f"k{x}" for x in rng.integers(0, 10**6, 3000).tolist()]
    expected, next_rr = ref_route(layout, keys, 0)
    index, got_rr = layout.route_index(keys)
    assert layout.active_segment_ids[index].tolist() == expected and got_rr == next_rr
    assert layout.route(keys[:10]).tolist() == expected[:10]


@st.composite
def legacy_layouts(draw):
    n = draw(st.integers(1, 12))
    bounds = [i * 0x10000 // n for i in range(n + 1)]
    segs = [
        Segment(10 + i, a, b - 1, legacy_topic_name=f"persistent://t/ns/topic-partition-{i}")
        for i, (a, b) in enumerate(zip(bounds, bounds[1:], strict=False))
    ]
    return TopicLayout(1, draw(st.permutations(segs)))


@given(legacy_layouts(), key_lists(), st.integers(0, 30))
@settings(max_examples=80, deadline=None)
def test_legacy_route_sign_safe_mod(layout, keys, rr):
    assert layout.is_legacy
    expected, next_rr = ref_route(layout, keys, rr)
    assert layout.route(keys, round_robin=rr).tolist() == expected
    assert layout.route_index(keys, round_robin=rr)[1] == next_rr


def test_legacy_route_vectors():
    # partitions in layout order p0, p1, p2: key "a" has raw 0x3c2569b2 -> 0x3c2569b2 % 3 = 2
    names = [f"persistent://t/ns/topic-partition-{i}" for i in range(3)]
    parts = [
        Segment(7, 0x8000, 0xFFFF, legacy_topic_name=names[0]),
        Segment(3, 0, 0x3FFF, legacy_topic_name=names[1]),
        Segment(5, 0x4000, 0x7FFF, legacy_topic_name=names[2]),
    ]
    lay = TopicLayout(1, parts)
    assert lay.is_legacy
    assert 0x3C2569B2 % 3 == 2
    assert lay.route("a") == 5
    # bit 31 set: "key-1" raw 0x98b115a0, masked 0x18b115a0 % 3
    assert lay.route("key-1") == [7, 3, 5][0x18B115A0 % 3]
    # keyless in layout order, not hash order
    assert lay.route([None, None, None, None]).tolist() == [7, 3, 5, 7]
    # one non-legacy active segment makes the whole layout keyed
    mixed = TopicLayout(1, [Segment(7, 0x8000, 0xFFFF, legacy_topic_name=names[0]), Segment(3, 0, 0x7FFF)])
    assert not mixed.is_legacy
    assert mixed.route("a") == 3  # segment hash 0x3c25 < 0x8000


def test_route_vectors_and_round_robin_continuation():
    lay = TopicLayout(1, [seg(0, 0, 0x3FFF), seg(1, 0x4000, 0x97FF), seg(2, 0x9800, 0xFFFF)])
    # "a" -> 0x3c25 (segment 0); "key-1" -> 0x98b1 (segment 2); "some-routing-key" -> 0x73df (segment 1)
    assert lay.route(["a", "key-1", "some-routing-key"]).tolist() == [0, 2, 1]
    assert lay.route("key-1") == 2
    assert lay.route_index("a") == (0, 0)
    keys = ["a", None, None, "key-1", None, None, None]
    whole, rr = lay.route_index(keys, round_robin=1)
    first, rr1 = lay.route_index(keys[:3], round_robin=1)
    second, rr2 = lay.route_index(keys[3:], round_robin=rr1)
    assert np.concatenate([first, second]).tolist() == whole.tolist() and rr2 == rr
    assert whole.tolist() == [0, 1, 2, 2, 0, 1, 2] and rr == 0
    assert lay.route(keys, round_robin=7).tolist() == [0, 1, 2, 2, 0, 1, 2]  # 7 % 3 == 1
    assert lay.route([]).shape == (0,)
    assert lay.route(np.array([["a", "key-1"]])).shape == (1, 2)
    with pytest.raises(ValueError, match="round_robin must be >= 0, not -1"):
        lay.route(keys, round_robin=-1)
    with pytest.raises(TypeError, match="round_robin must be an int"):
        lay.route(keys, round_robin=1.0)
    with pytest.raises(TypeError, match=r"key at index 1"):
        lay.route(["a", 5])


def test_route_single_segment_and_keyhashes_input():
    lay = TopicLayout(1, [seg(42, 0, 0xFFFF)])
    kh = bc.hash_keys(["x", None, "y"])
    assert lay.route(kh).tolist() == [42, 42, 42]
    idx, rr = lay.route_index(kh, round_robin=5)
    assert idx.tolist() == [0, 0, 0] and rr == 0
    with pytest.raises(TypeError, match="KeyHashes columns must be"):
        lay.route(bc.KeyHashes(kh.raw.astype(np.int64), kh.segment_hash, kh.bucket_hash, kh.has_key))


# --------------------------------------------------------------------------------------------------
# Transitions


def test_split_vectors():
    lay = TopicLayout(5, [seg(0, 0, 0xFFFF, 4)])
    nxt = lay.split(0)
    assert nxt.epoch == 6 and nxt.topic == lay.topic
    parent = nxt.segment(0)
    assert parent.state == "sealed" and parent.child_ids == (1, 2) and parent.buckets.count == 4
    low, high = nxt.segment(1), nxt.segment(2)
    assert (low.hash_start, low.hash_end, high.hash_start, high.hash_end) == (0, 0x7FFF, 0x8000, 0xFFFF)
    assert low.buckets.count == high.buckets.count == 2  # 4 -> 2 and 2
    assert low.buckets == Buckets.equal_width(2)
    assert low.parent_ids == high.parent_ids == (0,) and low.state == high.state == "active"
    again = nxt.split(1)  # N = 2 -> 1 and 1; new ids are max + 1, max + 2
    assert [s.buckets.count for s in again.segments if s.segment_id in (3, 4)] == [1, 1]
    assert (again.segment(3).hash_start, again.segment(3).hash_end) == (0, 0x3FFF)
    assert (again.segment(4).hash_start, again.segment(4).hash_end) == (0x4000, 0x7FFF)
    ones = TopicLayout(1, [seg(0, 0, 0xFFFF, 1)]).split(0)
    assert [s.buckets.count for s in ones.active_segments] == [1, 1]  # 1 -> 1 and 1
    odd = TopicLayout(1, [seg(0, 0, 4), seg(1, 5, 0xFFFF)]).split(0)
    assert [(s.hash_start, s.hash_end) for s in odd.active_segments][:2] == [(0, 2), (3, 4)]
    assert lay.segment(0).state == "active"  # the old layout is unchanged


def test_merge_vectors():
    lay = TopicLayout(2, [seg(4, 0x8000, 0xFFFF, 1), seg(9, 0, 0x7FFF, 1)])
    nxt = lay.merge(4, 9)
    assert nxt.epoch == 3
    child = nxt.segment(10)
    assert (child.hash_start, child.hash_end, child.buckets.count) == (0, 0xFFFF, 2)  # 1 + 1 -> 2
    assert child.buckets == Buckets.equal_width(2) and child.parent_ids == (9, 4)
    assert nxt.segment(4).state == nxt.segment(9).state == "sealed"
    assert nxt.segment(4).child_ids == nxt.segment(9).child_ids == (10,)
    assert [s.segment_id for s in nxt.active_segments] == [10]
    assert two_segment_layout().merge(0, 1).segment(2).buckets.count == 6


def test_rebucket():
    lay = two_segment_layout()
    new = Buckets((100, 200, 300))
    nxt = lay.rebucket(1, new)
    assert nxt.epoch == 4
    assert nxt.segment(2).buckets == new and nxt.segment(2).parent_ids == (1,)
    assert (nxt.segment(2).hash_start, nxt.segment(2).hash_end) == (0x8000, 0xFFFF)
    assert nxt.segment(1).state == "sealed" and nxt.segment(1).child_ids == (2,)
    assert nxt.segment(1).buckets.count == 2  # the sealed segment keeps its list


def test_transition_errors():
    lay = two_segment_layout().split(0)  # 0 sealed; active 2 [0, 3fff], 3 [4000, 7fff], 1 [8000, ffff]
    with pytest.raises(InvalidLayoutError, match="cannot split segment 0: it is sealed"):
        lay.split(0)
    with pytest.raises(KeyError, match="no segment 99"):
        lay.split(99)
    with pytest.raises(
        InvalidLayoutError,
        match=r"cannot merge segments 2 \(0x0000-0x3fff\) and 1 \(0x8000-0xffff\): they are not adjacent",
    ):
        lay.merge(1, 2)
    with pytest.raises(InvalidLayoutError, match="cannot merge segment 2 with itself"):
        lay.merge(2, 2)
    with pytest.raises(InvalidLayoutError, match="cannot merge segment 0: it is sealed"):
        lay.merge(0, 1)
    with pytest.raises(InvalidLayoutError, match="cannot rebucket segment 0: it is sealed"):
        lay.rebucket(0, Buckets())
    with pytest.raises(TypeError, match="buckets must be a Buckets"):
        lay.rebucket(1, (1, 2))
    tiny = TopicLayout(1, [seg(0, 0, 0), seg(1, 1, 0xFFFF)])
    with pytest.raises(InvalidLayoutError, match="cannot split segment 0: its range 0x0000 is a single hash"):
        tiny.split(0)
    full = TopicLayout(1, [seg(0, 0, 0x7FFF, 65536), seg(1, 0x8000, 0xFFFF, 2)])
    # the child of a merge is clamped to the ceiling (the reference's merge clamp)
    (child,) = full.merge(0, 1, max_buckets=65536).active_segments
    assert child.buckets == Buckets.equal_width(65536)
    with pytest.raises(ValueError, match="max_buckets must be <= 65536, not 65537"):
        full.merge(0, 1, max_buckets=65537)
    with pytest.raises(ValueError, match="max_buckets must be >= 1, not 0"):
        full.split(1, max_buckets=0)
    with pytest.raises(TypeError, match="max_buckets must be an int"):
        full.rebucket(1, Buckets(), max_buckets=2.0)


@given(
    tilings(max_segments=6),
    st.lists(st.tuples(st.sampled_from(["split", "merge", "rebucket"]), st.integers(0, 10**6)), max_size=6),
)
@settings(max_examples=40, deadline=None)
def test_transitions_keep_layout_valid_and_routing_consistent(layout, steps):
    keys = [f"k{i}" for i in range(200)]
    for action, pick in steps:
        active = layout.active_segments
        target = active[pick % len(active)]
        if action == "split":
            if target.hash_start == target.hash_end:
                continue
            nxt = layout.split(target.segment_id)
        elif action == "merge":
            if len(active) < 2:
                continue
            i = pick % (len(active) - 1)
            nxt = layout.merge(active[i].segment_id, active[i + 1].segment_id)
        else:
            count = 1 + pick % 5
            if count == target.buckets.count:  # an unchanged bucketing is an error, tested on its own
                continue
            nxt = layout.rebucket(target.segment_id, Buckets.equal_width(count))
        assert nxt.epoch == layout.epoch + 1 and nxt.is_newer_than(layout)
        assert TopicLayout.from_dict(nxt.to_dict()) == nxt
        # a key's new segment lies inside (split, rebucket) or contains (merge) its old segment's range
        old = layout.route(keys)
        new = nxt.route(keys)
        for o, n in zip(old.tolist(), new.tolist(), strict=False):
            a, b = nxt.segment(o), nxt.segment(n)
            assert (a.hash_start <= b.hash_start and b.hash_end <= a.hash_end) or (
                b.hash_start <= a.hash_start and a.hash_end <= b.hash_end
            )
        layout = nxt


# --------------------------------------------------------------------------------------------------
# Dict conversion


def test_dict_round_trip_through_json():
    lay = two_segment_layout().split(0).merge(2, 3).rebucket(1, Buckets.balanced([1, 2, 3, 4000], 3))
    text = json.dumps(lay.to_dict())
    back = TopicLayout.from_dict(json.loads(text))
    assert back == lay and back.to_dict() == lay.to_dict()
    assert lay.to_dict()["segments"][0] == {
        "segment_id": 0,
        "hash_start": 0,
        "hash_end": 0x7FFF,
        "splits": [0x4000, 0x8000, 0xC000],
        "state": "sealed",
        "parent_ids": [],
        "child_ids": [2, 3],
        "legacy_topic_name": None,
    }


def test_from_dict_minimal_and_legacy():
    lay = TopicLayout.from_dict(
        {
            "epoch": 1,
            "segments": [
                {
                    "segment_id": 0,
                    "hash_start": 0,
                    "hash_end": 0x7FFF,
                    "legacy_topic_name": "persistent://t/ns/x-partition-0",
                },
                {
                    "segment_id": 1,
                    "hash_start": 0x8000,
                    "hash_end": 0xFFFF,
                    "legacy_topic_name": "persistent://t/ns/x-partition-1",
                },
            ],
        }
    )
    assert lay.is_legacy and lay.topic == "persistent://t/ns/topic" and lay.segment(0).buckets == Buckets()


@pytest.mark.parametrize(
    "data, error, message",
    [
        ([], InvalidLayoutError, "a layout must be a mapping"),
        ({"segments": []}, InvalidLayoutError, r"layout: missing field\(s\) epoch"),
        ({"epoch": 1, "segments": [], "extra": 1}, InvalidLayoutError, r"layout: unknown field\(s\) extra"),
        ({"epoch": 1, "segments": "x"}, InvalidLayoutError, "segments must be a list of segment mappings"),
        ({"epoch": 1, "segments": [5]}, InvalidLayoutError, "a segment must be a mapping, not int 5"),
        (
            {"epoch": 1, "segments": [{"segment_id": 3, "hash_start": 0}]},
            InvalidLayoutError,
            r"segment 3: missing field\(s\) hash_end",
        ),
        (
            {"epoch": 1, "segments": [{"segment_id": 3, "hash_start": 0, "hash_end": 0xFFFF, "color": 1}]},
            InvalidLayoutError,
            r"segment 3: unknown field\(s\) color",
        ),
        (
            {"epoch": 1, "segments": [{"segment_id": 3, "hash_start": 0, "hash_end": 0xFFFF, "splits": [9, 4]}]},
            InvalidBoundaryError,
            r"segment 3: splits are not strictly ascending: 4 at position 1 follows 9",
        ),
        (
            {"epoch": 1, "segments": [{"segment_id": 3, "hash_start": 0, "hash_end": 0xFFFE}]},
            InvalidLayoutError,
            r"gap 0xffff-0xffff after segment 3",
        ),
    ],
)
def test_from_dict_errors(data, error, message):
    with pytest.raises(error, match=message):
        TopicLayout.from_dict(data)
