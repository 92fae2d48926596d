"""Balanced boundaries are optimal (docs/design.md, "Boundary lists"): Buckets.balanced minimises the
heaviest bucket, checked by brute force on small inputs (in integer and in float arithmetic), is
never worse than equal width, and the load report counts what each bucket receives."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_boundary_lists_cover_the_ring import ref_bucket_of

from bucketcore import InvalidBoundaryError
from bucketcore.layout import Buckets


def brute_force_best_max(hashes, weights, n):
    """Least possible heaviest bucket: cut the sorted distinct observed hashes into <= n
    contiguous groups every way there is (the ring has room for the rest of the buckets), never
    between hashes 0 and 1 (a dispatchable list's bucket 0 keeps both: docs/design.md)."""
    loads = {}
    for h, w in zip(hashes, weights, strict=False):
        h = 0 if h == 1 else h
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
    # a balanced list is dispatchable: bucket 0 keeps hashes 0 and 1, so 65535 buckets at most
    assert Buckets.balanced([], 65535).splits == tuple(range(2, 65536))
    assert Buckets.balanced(np.arange(65536), 65535).splits == tuple(range(2, 65536))
    with pytest.raises(InvalidBoundaryError, match="at most 65535 buckets, not 65536"):
        Buckets.balanced([], 65536)
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
