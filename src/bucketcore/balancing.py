"""Traffic-balanced boundary lists: the solver behind :meth:`bucketcore.Buckets.balanced`.

The observed bucket hashes (optionally weighted) are binned over the 65,536 hash values and
partitioned into contiguous groups so that the heaviest group is as light as possible (an
exact linear partition: binary search on the answer with a greedy feasibility check, whose
inner loop runs in :mod:`_bucketcore._layout`). Private: :class:`bucketcore.Buckets` is the
public face.
"""

from __future__ import annotations

import bisect
import heapq
from typing import Any

import numpy as np

from _bucketcore import _layout

from .validation import MAX_HASH, describe, index_label, is_int, u16_hash_column

__all__ = ["RING", "check_float_total", "histogram", "linear_partition", "weight_column"]

RING = MAX_HASH + 1  # number of hash bins


def histogram(bucket_hashes: Any, weights: Any) -> np.ndarray:
    """Load of every hash value 0..0xFFFF: how many observed hashes (or how much weight) fell on it.

    Parameters
    ----------
    bucket_hashes : int or array-like of int
        Observed bucket hashes in 0..0xFFFF.
    weights : array-like of numbers or None
        One non-negative weight per hash (same shape), or None for a count.

    Returns
    -------
    numpy.ndarray
        65536 bins: ``np.int64`` for counts and integer weights, ``np.float64`` for float weights.

    Raises
    ------
    TypeError
        A hash or weight of the wrong kind (bools refused), or weights of a non-numeric dtype.
    ValueError
        A hash outside 0..0xFFFF, a negative or non-finite weight, a sum that overflows, or
        weights whose shape differs from the hashes' (each named with its index).
    """
    if is_int(bucket_hashes):
        bucket_hashes = [bucket_hashes]
        if weights is not None and not isinstance(weights, (list, tuple, np.ndarray)):
            weights = [weights]
    hashes, shape = u16_hash_column(bucket_hashes, "bucket hash")
    if weights is None:
        counts = np.zeros(RING, dtype=np.int64)
        _layout.histogram(hashes, counts)
        return counts
    flat = weight_column(weights, shape)
    if flat.dtype == np.int64:
        bins = np.zeros(RING, dtype=np.int64)
        bad = _layout.weighted_histogram(hashes, flat, bins)
        if bad >= 0:
            value = int(flat[bad])
            if value < 0:
                raise ValueError(f"weight {value} at index {index_label(bad, shape)} is negative")
            raise ValueError(f"the sum of the weights overflows int64 at index {index_label(bad, shape)}")
        return bins
    sums = np.zeros(RING, dtype=np.float64)
    bad = _layout.weighted_histogram_f64(hashes, flat, sums)
    if bad >= 0:
        raise ValueError(
            f"weight {float(flat[bad])!r} at index {index_label(bad, shape)} is not a finite non-negative number"
        )
    check_float_total(sums)
    return sums


def weight_column(weights: Any, shape: tuple[int, ...]) -> np.ndarray:
    """The weights as a flat contiguous ``np.int64`` (integer weights) or ``np.float64`` column.

    Checks kinds, dtype and shape only; the histogram kernels check signs, finiteness and
    overflow while they sum.

    Parameters
    ----------
    weights : array-like of numbers
        One weight per hash.
    shape : tuple of int
        The shape of the hash column.

    Returns
    -------
    numpy.ndarray
        1-D, ``np.int64`` or ``np.float64``.

    Raises
    ------
    TypeError
        A weight of the wrong kind (bools refused), or weights of a non-numeric dtype.
    ValueError
        Weights whose shape differs from the hashes', or an unsigned weight beyond int64.
    """
    if isinstance(weights, (list, tuple)):
        for i, w in enumerate(weights):
            if isinstance(w, (bool, np.bool_)) or not isinstance(w, (int, float, np.integer, np.floating)):
                raise TypeError(f"weight at index {i} is {describe(w)}; expected a non-negative number")
    w = np.asarray(weights)
    if w.shape != shape:
        raise ValueError(f"weights have shape {w.shape}, bucket_hashes have shape {shape}: one weight per hash")
    flat = w.reshape(-1)
    if w.dtype.kind in "ui":
        if w.dtype == np.uint64 and flat.size and flat.max() > np.iinfo(np.int64).max:
            index = int(np.argmax(flat > np.iinfo(np.int64).max))
            raise ValueError(f"weight {int(flat[index])} at index {index_label(index, shape)} does not fit int64")
        return np.ascontiguousarray(flat, dtype=np.int64)
    if w.dtype.kind == "f":
        return np.ascontiguousarray(flat, dtype=np.float64)
    raise TypeError(f"weights must be non-negative numbers, not an array of dtype {w.dtype}")


def check_float_total(sums: np.ndarray) -> None:
    """Refuse float bins whose running total overflows (every bin can be finite while it is not).

    The total is summed in the order the partition's prefix sums use.

    Parameters
    ----------
    sums : numpy.ndarray
        65536 ``np.float64`` bins.

    Raises
    ------
    ValueError
        The total is not finite.
    """
    with np.errstate(over="ignore"):
        total = np.cumsum(sums)[-1]
    if not np.isfinite(total):
        raise ValueError("the sum of the weights overflows float64")


def linear_partition(bins: np.ndarray, count: int) -> list[int]:
    """First bin of each of ``count`` contiguous, non-empty groups that minimise the heaviest group.

    Parameters
    ----------
    bins : numpy.ndarray
        The bins to group: the 65536 of :func:`histogram`, or any other positive number of them
        (``Buckets.balanced`` groups hashes 0 and 1 as one bin).
    count : int
        Number of groups, 1..``bins.size - 1`` (``bins.size`` has one answer, made by the caller).

    Returns
    -------
    list of int
        ``count`` ascending starts, the first 0.
    """
    integral = bins.dtype.kind == "i"
    prefix = np.zeros(bins.size + 1, dtype=bins.dtype)
    np.cumsum(bins, out=prefix[1:])
    total = prefix[-1]
    # Smallest feasible limit: a monotone predicate over the candidate limits, searched exactly.
    if integral:
        low = max(int(bins.max()), -(-int(total) // count))
        high = int(total)
        while low < high:
            mid = (low + high) // 2
            if _layout.greedy_groups(prefix, mid, count, None) >= 0:
                high = mid
            else:
                low = mid + 1
        limit: Any = low
    else:
        # Non-negative doubles order like their bit patterns: bisect the bits, so the limit found
        # is the exact smallest double for which the greedy succeeds (the optimum's own value).
        # No group can cost less than its costliest single bin (the cost is monotone).
        low_bits = int(np.float64(np.max(prefix[1:] - prefix[:-1])).view(np.int64))
        high_bits = int(np.float64(total).view(np.int64))
        while low_bits < high_bits:
            mid_bits = (low_bits + high_bits) // 2
            if _layout.greedy_groups(prefix, float(np.int64(mid_bits).view(np.float64)), count, None) >= 0:
                high_bits = mid_bits
            else:
                low_bits = mid_bits + 1
        limit = float(np.int64(low_bits).view(np.float64))
    starts_buf = np.empty(count, dtype=np.int64)
    groups = _layout.greedy_groups(prefix, limit, count, starts_buf)
    assert 1 <= groups <= count
    starts = starts_buf[:groups].tolist()
    if groups < count:
        starts = _split_heaviest(prefix.tolist(), starts, count, bins.size)
    return _spread_over_unused(bins, starts)


def _split_heaviest(prefix: list[Any], starts: list[int], count: int, size: int) -> list[int]:
    """Add groups until there are ``count`` (of ``size`` bins): split the heaviest (then widest,
    then leftmost) splittable group where its two halves are most even. Never raises the heaviest
    load."""
    ends = starts[1:] + [size]
    heap = [(-(prefix[b] - prefix[a]), a - b, a, b) for a, b in zip(starts, ends, strict=False) if b - a >= 2]
    heapq.heapify(heap)
    result = list(starts)
    while len(result) < count:
        _, _, a, b = heapq.heappop(heap)  # never empty: count < size leaves room for every group
        load = prefix[b] - prefix[a]
        if load == 0:
            cut = a + (b - a) // 2
        else:
            target = prefix[a] + load / 2
            k = bisect.bisect_left(prefix, target, a + 1, b)
            best = None
            for p in (k - 1, k):
                if a < p < b:
                    worst = max(prefix[p] - prefix[a], prefix[b] - prefix[p])
                    if best is None or worst < best[0]:
                        best = (worst, p)
            assert best is not None
            cut = best[1]
        result.append(cut)
        for x, y in ((a, cut), (cut, b)):
            if y - x >= 2:
                heapq.heappush(heap, (-(prefix[y] - prefix[x]), x - y, x, y))
    result.sort()
    return result


def _spread_over_unused(bins: np.ndarray, starts: list[int]) -> list[int]:
    """Spread boundaries that fall inside a run of unused (zero-load) hash values evenly over it.

    Moving a boundary across zero-load bins changes no bucket's load, so the list stays optimal;
    it just stops hugging the observed hashes, which matters for keys not seen yet.
    """
    splits = np.asarray(starts[1:], dtype=np.int64)
    if splits.size == 0:
        return starts
    index = np.arange(bins.size, dtype=np.int64)
    used = bins != 0
    last_used = np.maximum.accumulate(np.where(used, index, -1))  # last used bin <= i
    first_used = np.minimum.accumulate(np.where(used, index, bins.size)[::-1])[::-1]  # first used bin >= i
    left = last_used[splits - 1] + 1  # a boundary at p may move anywhere in [left, right]
    right = first_used[splits]
    # Consecutive splits with the same movable interval share one unused run: spread each group.
    new_group = np.ones(splits.size, dtype=bool)
    new_group[1:] = (left[1:] != left[:-1]) | (right[1:] != right[:-1])
    group_start = np.flatnonzero(new_group)
    sizes = np.diff(np.append(group_start, splits.size))
    m = np.repeat(sizes, sizes)  # group size of each split
    rank = np.arange(splits.size) - np.repeat(group_start, sizes)  # position within its group
    width = right - left
    spread = left + ((rank + 1) * width) // (m + 1)
    out = np.where(width >= m + 1, spread, splits)
    return [0] + out.tolist()
