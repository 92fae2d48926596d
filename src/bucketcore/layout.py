"""Step 2 of the data flow: boundary lists, segment layouts and routing (DESIGN.md §3.2, §3.3).

:class:`Buckets` is a validated, immutable boundary list with a vectorised ``bucket_of``;
:meth:`Buckets.balanced` places the boundaries by observed traffic (an exact linear partition).
:class:`Segment` and :class:`TopicLayout` describe a scalable topic's segments; a layout routes
key hashes to its active segments (keyed, keyless round-robin, or v4 legacy ``signSafeMod``) and
produces its successors (split, merge, rebucket). Arguments are validated here; the loops run in
the compiled kernels of :mod:`_bucketcore._layout`.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard, Union

import numpy as np

from _bucketcore import _layout
from .errors import InvalidBoundaryError, InvalidLayoutError
from .hashing import KeyHashes, _index_label, hash_keys, plain_ints, refuse_arrow_nulls

__all__ = [
    "ACTIVE",
    "SEALED",
    "BucketLoad",
    "Buckets",
    "Segment",
    "TopicLayout",
    "buckets_for_budget",
]

RING = 0x10000  # number of hash values in a 16-bit half of the hash
MAX_BUCKETS = RING  # every bucket owns at least one hash value
# segment ids are Java longs in Pulsar, and np.int64 in route() and EntryTable.segment_id
MAX_SEGMENT_ID = 2**63 - 1
ACTIVE = "active"
SEALED = "sealed"
_STATES = (ACTIVE, SEALED)

# Integer dtypes the kernels take without a copy; other integer dtypes are converted.
_KERNEL_DTYPES = tuple(
    np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64, np.int8, np.int16, np.int32, np.int64)
)

def _is_int(value: object) -> TypeGuard[Union[int, np.integer[Any]]]:
    """An int or numpy integer that is not a bool (bools are not ints here). Shared by every module."""
    if type(value) is int:  # the common case, without the slower numpy isinstance checks
        return True
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _describe(value: object) -> str:
    """``<type> <value>`` for messages; numpy scalars shown as their Python value (7.0, not np.float64(7.0))."""
    shown = value.item() if isinstance(value, np.generic) else value
    return f"{type(value).__name__} {shown!r}"


def _check_int(value: object, name: str, low: int, high: int | None = None) -> int:
    """Validate an int argument: TypeError for a non-int (bools and floats included), ValueError for range."""
    if not _is_int(value):
        raise TypeError(f"{name} must be an int, not {_describe(value)}")
    number = int(value)  # type: ignore[call-overload]
    if number < low:
        raise ValueError(f"{name} must be >= {low}, not {number}")
    if high is not None and number > high:
        raise ValueError(f"{name} must be <= {high}, not {number}")
    return number


def _hash_column(values: Any, what: str) -> tuple[np.ndarray, tuple[int, ...]]:
    """A column of 16-bit hashes as a flat contiguous integer array the kernels take, and its shape.

    Integer dtypes only: no bools, no floats, nothing silently converted. Array ranges are
    checked by the kernels in the lookup pass; a Python list is checked here while it is walked.
    """
    if isinstance(values, (list, tuple)):
        ints = plain_ints(values)  # the common list: ranges checked vectorised
        if ints is not None:
            bad = (ints < 0) | (ints > 0xFFFF)
            if bad.any():
                i = int(np.argmax(bad))
                raise ValueError(f"{what} {int(ints[i])} at index {i} is outside 0..0xFFFF")
            return ints.astype(np.uint16), (len(values),)
        # Checked here item by item, naming the first bad one.
        for i, item in enumerate(values):
            if not _is_int(item):
                raise TypeError(f"{what} at index {i} is {_describe(item)}; expected an int in 0..0xFFFF")
            if not 0 <= int(item) <= 0xFFFF:
                raise ValueError(f"{what} {int(item)} at index {i} is outside 0..0xFFFF")
        return np.array(values, dtype=np.uint16), (len(values),)
    refuse_arrow_nulls(values, what)
    arr = np.asarray(values)
    if arr.dtype.kind not in "ui":
        raise TypeError(f"{what} values must be integers in 0..0xFFFF, not an array of dtype {arr.dtype}")
    if arr.dtype not in _KERNEL_DTYPES:
        arr = arr.astype(arr.dtype.newbyteorder("="))
    if arr.dtype not in _KERNEL_DTYPES:  # e.g. a platform long long that is not int64
        arr = arr.astype(np.int64)
    return np.ascontiguousarray(arr).reshape(-1), arr.shape


def _out_of_range(what: str, flat: np.ndarray, index: int, shape: tuple[int, ...]) -> ValueError:
    value = int(flat[index])
    return ValueError(f"{what} {value} at index {_index_label(index, shape)} is outside 0..0xFFFF")


def _scalar_hash(value: object, what: str) -> int:
    number = int(value)  # type: ignore[call-overload]
    if not 0 <= number <= 0xFFFF:
        raise ValueError(f"{what} {number} is outside 0..0xFFFF")
    return number


def _as_u16(values: Any, what: str) -> tuple[np.ndarray, tuple[int, ...]]:
    """Validated flat np.uint16 copy-or-view of a hash column (ranges checked here)."""
    flat, shape = _hash_column(values, what)
    if flat.dtype != np.uint16 and flat.size:
        bad = (flat < 0) | (flat > 0xFFFF) if flat.dtype.kind == "i" else flat > 0xFFFF
        if bad.any():
            raise _out_of_range(what, flat, int(np.argmax(bad)), shape)
    return flat.astype(np.uint16, copy=False), shape


# --------------------------------------------------------------------------------------------------
# Boundary lists


def _validate_splits(splits: Any) -> tuple[int, ...]:
    """Strictly ascending ints in 1..0xFFFF, or InvalidBoundaryError naming the value and position."""
    if isinstance(splits, Buckets):
        return splits.splits
    if isinstance(splits, (str, bytes, bytearray)):
        raise InvalidBoundaryError(f"splits must be an iterable of ints, not {type(splits).__name__} {splits!r}")
    if isinstance(splits, np.ndarray):
        items = splits.tolist() if splits.ndim == 1 else None
        if items is None:
            raise InvalidBoundaryError(f"splits must be one-dimensional, not an array of shape {splits.shape}")
    else:
        try:
            items = list(splits)
        except TypeError:
            raise InvalidBoundaryError(
                f"splits must be an iterable of ints, not {type(splits).__name__} {splits!r}"
            ) from None
    previous = 0
    for position, value in enumerate(items):
        if isinstance(value, (bool, np.bool_)):
            raise InvalidBoundaryError(f"split at position {position} is a bool ({value!r}); splits are ints in 1..0xFFFF")
        if not isinstance(value, (int, np.integer)):
            raise InvalidBoundaryError(
                f"split at position {position} is {_describe(value)}, not an int; splits are ints in 1..0xFFFF"
            )
        split = int(value)
        if split < 0:
            raise InvalidBoundaryError(f"split {split} at position {position} is negative; splits are in 1..0xFFFF")
        if split == 0:
            raise InvalidBoundaryError(
                f"split 0 at position {position}: bucket 0 starts at hash 0, so a split of 0 would leave "
                "it empty; splits are in 1..0xFFFF"
            )
        if split > 0xFFFF:
            raise InvalidBoundaryError(f"split {split} (0x{split:X}) at position {position} is above 0xFFFF")
        if position and split <= previous:
            if split == previous:
                raise InvalidBoundaryError(f"duplicate split {split} at positions {position - 1} and {position}")
            raise InvalidBoundaryError(
                f"splits are not strictly ascending: {split} at position {position} follows {previous} "
                f"at position {position - 1}"
            )
        previous = split
    return tuple(int(v) for v in items)


def _table_threshold(count: int) -> int:
    """Smallest column of hashes for which building a boundary list's 64 Ki lookup table beats
    the branchless search over ``count`` buckets (the search's cost grows with its depth)."""
    return max(64, 2048 // max(1, (count - 1).bit_length()))


@dataclass(frozen=True, eq=False)
class BucketLoad:
    """How a set of observed bucket hashes (optionally weighted) spreads over a boundary list.

    ``per_bucket``: load of each bucket (np.int64 counts or integral weights, np.float64 for
    float weights); ``max`` and ``mean`` over the buckets; ``ratio = max / mean`` (1.0 is a
    perfect spread, N means everything in one bucket; NaN when nothing was observed).
    """

    per_bucket: np.ndarray
    total: float
    max: float
    mean: float
    ratio: float


class Buckets:
    """An immutable, validated boundary list: ``splits`` are the start hashes of buckets 1..N-1.

    ``Buckets()`` is one bucket over the whole 16-bit ring. Equality and hashing go by splits.
    """

    __slots__ = ("_splits", "_array", "_table", "_hash")

    _splits: tuple[int, ...]
    _array: np.ndarray
    _table: np.ndarray | None
    _hash: int

    def __init__(self, splits: Iterable[int] = ()) -> None:
        self._init(_validate_splits(splits))

    def _init(self, splits: tuple[int, ...]) -> None:
        array = np.array(splits, dtype=np.uint16)
        array.flags.writeable = False
        object.__setattr__(self, "_splits", splits)
        object.__setattr__(self, "_array", array)
        object.__setattr__(self, "_table", None)
        object.__setattr__(self, "_hash", hash(splits))

    @classmethod
    def _trusted(cls, splits: tuple[int, ...]) -> "Buckets":
        """Build from splits this module computed and knows to be valid (skips the Python loop)."""
        obj = cls.__new__(cls)
        obj._init(splits)
        return obj

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Buckets is immutable; a new boundary list is a rebucket rollover")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("Buckets is immutable")

    def __reduce__(self) -> tuple[Any, ...]:
        return (Buckets, (self._splits,))

    # --- properties ---------------------------------------------------------------------------

    @property
    def splits(self) -> tuple[int, ...]:
        """Start hashes of buckets 1..N-1, strictly ascending in 1..0xFFFF."""
        return self._splits

    @property
    def count(self) -> int:
        """N, the number of buckets."""
        return len(self._splits) + 1

    @property
    def splits_array(self) -> np.ndarray:
        """The splits as a read-only contiguous np.uint16 array (what the kernels take)."""
        return self._array

    @property
    def ranges(self) -> list[tuple[int, int]]:
        """Inclusive ``(start, end)`` hash range of every bucket, in bucket order."""
        starts = (0,) + self._splits
        ends = tuple(s - 1 for s in self._splits) + (0xFFFF,)
        return list(zip(starts, ends))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Buckets):
            return NotImplemented
        return self._splits == other._splits

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        if len(self._splits) <= 8:
            shown = ", ".join(str(s) for s in self._splits)
            if len(self._splits) == 1:
                shown += ","
        else:
            head = ", ".join(str(s) for s in self._splits[:3])
            tail = ", ".join(str(s) for s in self._splits[-2:])
            shown = f"{head}, ..., {tail}"
        return f"Buckets(count={self.count}, splits=({shown}))"

    # --- lookups -----------------------------------------------------------------------------

    def lookup_table(self) -> np.ndarray:
        """Read-only np.uint16 array of 65536 entries: ``table[h] == bucket_of(h)``.

        Built on first use (4-60 µs) and kept: 128 KiB per boundary list.
        """
        table = self._table
        if table is None:
            table = np.empty(RING, dtype=np.uint16)
            _layout.build_table(self._array, table)
            table.flags.writeable = False
            object.__setattr__(self, "_table", table)
        return table

    def table_pays_off(self, size: int) -> bool:
        """Whether looking up ``size`` hashes should go through :meth:`lookup_table`.

        The one rule every caller (routing, bucketing, dispatch) follows: with three or more
        buckets, use the table once it exists, or once the column is long enough to pay for
        building it; with one or two buckets a constant or one compare is cheaper.

        Parameters
        ----------
        size : int
            Number of hashes about to be looked up.

        Returns
        -------
        bool
        """
        count = len(self._splits) + 1
        return count > 2 and (self._table is not None or size >= _table_threshold(count))

    def _plan(self, size: int) -> tuple[int, np.ndarray | None]:
        """The fastest exact method for a column of ``size`` hashes.

        N=1: constant; N=2: one compare; otherwise the 64 Ki table once it exists or once the
        column is large enough to pay for building it, else the branchless search (lookup.h).
        """
        count = self.count
        if count == 1:
            return _layout.METHOD_CONST, None
        if count == 2:
            return _layout.METHOD_COMPARE, None
        if self.table_pays_off(size):
            return _layout.METHOD_TABLE, self.lookup_table()
        return _layout.METHOD_SEARCH, None

    def bucket_of(self, bucket_hashes: Any) -> Any:
        """Bucket index of each bucket hash (the number of splits <= h).

        An int (or numpy integer) gives an int; an integer array or list gives an np.int32 array of
        the same shape. Values outside 0..0xFFFF raise ValueError naming the index.
        """
        if _is_int(bucket_hashes):
            return bisect.bisect_right(self._splits, _scalar_hash(bucket_hashes, "bucket hash"))
        if isinstance(bucket_hashes, (bool, np.bool_, float, np.floating, str, bytes)):
            raise TypeError(f"bucket hashes must be ints in 0..0xFFFF, not {_describe(bucket_hashes)}")
        flat, shape = _hash_column(bucket_hashes, "bucket hash")
        out = np.empty(flat.size, dtype=np.int32)
        method, table = self._plan(flat.size)
        bad = _layout.bucket_of(self._array, flat, out, table, method)
        if bad >= 0:
            raise _out_of_range("bucket hash", flat, bad, shape)
        return out.reshape(shape)

    def canonical_hash(self, bucket_index: Any) -> Any:
        """Start hash of a bucket, but 1 for bucket 0 (0 means "not set" in a stamp).

        An int gives an int; an integer array gives an np.int32 array.
        """
        count = self.count
        if _is_int(bucket_index):
            b = int(bucket_index)
            if not 0 <= b < count:
                raise ValueError(f"bucket index {b} is outside 0..{count - 1}")
            return 1 if b == 0 else self._splits[b - 1]
        if isinstance(bucket_index, (bool, np.bool_, float, np.floating, str, bytes)):
            raise TypeError(f"bucket index must be an int, not {_describe(bucket_index)}")
        if isinstance(bucket_index, (list, tuple)):
            # item by item: numpy would turn bools into ints and [] into float64
            for i, item in enumerate(bucket_index):
                if not _is_int(item):
                    raise TypeError(f"bucket index at index {i} is {_describe(item)}; expected an int")
                if not 0 <= int(item) < count:
                    raise ValueError(f"bucket index {int(item)} at index {i} is outside 0..{count - 1}")
            arr = np.array([int(item) for item in bucket_index], dtype=np.int64)
        else:
            arr = np.asarray(bucket_index)
        if arr.dtype.kind not in "ui":
            raise TypeError(f"bucket indexes must be integers, not an array of dtype {arr.dtype}")
        flat = arr.reshape(-1)
        bad = (flat < 0) | (flat >= count)
        if bad.any():
            index = int(np.argmax(bad))
            raise ValueError(
                f"bucket index {int(flat[index])} at index {_index_label(index, arr.shape)} is outside 0..{count - 1}"
            )
        starts = np.concatenate(([1], self._array)).astype(np.int32)
        return starts[flat.astype(np.intp)].reshape(arr.shape)

    # --- constructors -------------------------------------------------------------------------

    @classmethod
    def equal_width(cls, n: int) -> "Buckets":
        """``splits = [floor(i * 65536 / n) for i in 1..n-1]`` (the Java reference's list)."""
        count = _check_bucket_count(n)
        splits = (np.arange(1, count, dtype=np.int64) * RING) // count
        return cls._trusted(tuple(splits.tolist()))

    @classmethod
    def balanced(cls, bucket_hashes: Any, n: int, *, weights: Any = None) -> "Buckets":
        """The n-bucket list whose heaviest bucket carries the least possible load.

        Load of a bucket = number of the observed ``bucket_hashes`` inside its range, or the sum of
        their ``weights`` (e.g. bytes). The contiguous linear partition of the 65,536 hash bins
        is solved by binary search on the answer with a greedy feasibility check: exactly for
        counts and integral weights (over the integers); for float weights, exactly for the loads
        as float64 prefix sums compute them, which can differ from the real-number optimum by a
        rounding step. Among the optimal lists: boundaries as far left-packed as the optimum
        allows, spare buckets split off the heaviest ones, and boundaries that fall in a stretch
        of hashes nobody used spread evenly over it (with no data at all: ``equal_width(n)``).
        Deterministic: the same inputs give the same list.
        """
        count = _check_bucket_count(n)
        bins = _histogram(bucket_hashes, weights)
        if count == MAX_BUCKETS:
            return cls._trusted(tuple(range(1, RING)))
        starts = _linear_partition(bins, count)
        return cls._trusted(tuple(starts[1:]))

    def load(self, bucket_hashes: Any, *, weights: Any = None) -> BucketLoad:
        """Per-bucket load of observed bucket hashes (optionally weighted) and its max/mean ratio."""
        bins = _histogram(bucket_hashes, weights)
        per_bucket = np.add.reduceat(bins, np.concatenate(([0], self._array)).astype(np.intp))
        total = float(per_bucket.sum())
        peak = float(per_bucket.max())
        mean = total / self.count
        ratio = peak / mean if mean > 0 else float("nan")
        return BucketLoad(per_bucket, total, peak, mean, ratio)


def _check_bucket_count(n: object) -> int:
    if not _is_int(n):
        raise TypeError(f"bucket count n must be an int, not {_describe(n)}")
    count = int(n)  # type: ignore[call-overload]
    if not 1 <= count <= MAX_BUCKETS:
        raise InvalidBoundaryError(
            f"bucket count {count} is outside 1..65536 (every bucket owns at least one hash value)"
        )
    return count


def buckets_for_budget(budget: int, segment_count: int) -> int:
    """Buckets per segment for a topic-wide bucket budget: ``max(1, budget // segment_count)``."""
    total = _check_int(budget, "budget", 0)
    segments = _check_int(segment_count, "segment_count", 1)
    return max(1, total // segments)


# --------------------------------------------------------------------------------------------------
# Traffic-balanced boundaries


def _histogram(bucket_hashes: Any, weights: Any) -> np.ndarray:
    """Load of every hash value 0..0xFFFF: np.int64 when exact integers, else np.float64."""
    if _is_int(bucket_hashes):
        bucket_hashes = [bucket_hashes]
        if weights is not None and not isinstance(weights, (list, tuple, np.ndarray)):
            weights = [weights]
    hashes, shape = _as_u16(bucket_hashes, "bucket hash")
    if weights is None:
        counts = np.zeros(RING, dtype=np.int64)
        _layout.histogram(hashes, counts)
        return counts
    if isinstance(weights, (list, tuple)):
        for i, w in enumerate(weights):
            if isinstance(w, (bool, np.bool_)) or not isinstance(w, (int, float, np.integer, np.floating)):
                raise TypeError(f"weight at index {i} is {_describe(w)}; expected a non-negative number")
    w = np.asarray(weights)
    if w.shape != shape:
        raise ValueError(f"weights have shape {w.shape}, bucket_hashes have shape {shape}: one weight per hash")
    flat = w.reshape(-1)
    if w.dtype.kind in "ui":
        if w.dtype == np.uint64 and flat.size and flat.max() > np.iinfo(np.int64).max:
            index = int(np.argmax(flat > np.iinfo(np.int64).max))
            raise ValueError(f"weight {int(flat[index])} at index {_index_label(index, shape)} does not fit int64")
        bins = np.zeros(RING, dtype=np.int64)
        bad = _layout.weighted_histogram(hashes, np.ascontiguousarray(flat, dtype=np.int64), bins)
        if bad >= 0:
            value = int(flat[bad])
            if value < 0:
                raise ValueError(f"weight {value} at index {_index_label(bad, shape)} is negative")
            raise ValueError(f"the sum of the weights overflows int64 at index {_index_label(bad, shape)}")
        return bins
    if w.dtype.kind == "f":
        sums = np.zeros(RING, dtype=np.float64)
        bad = _layout.weighted_histogram_f64(hashes, np.ascontiguousarray(flat, dtype=np.float64), sums)
        if bad >= 0:
            raise ValueError(
                f"weight {float(flat[bad])!r} at index {_index_label(bad, shape)} is not a finite non-negative number"
            )
        # the running total, summed in the order the partition's prefix sums use: every bin can
        # be finite while their total is not
        with np.errstate(over="ignore"):
            total = np.cumsum(sums)[-1]
        if not np.isfinite(total):
            raise ValueError("the sum of the weights overflows float64")
        return sums
    raise TypeError(f"weights must be non-negative numbers, not an array of dtype {w.dtype}")


def _linear_partition(bins: np.ndarray, count: int) -> list[int]:
    """First bin of each of ``count`` contiguous non-empty groups minimising the heaviest group."""
    integral = bins.dtype.kind == "i"
    prefix = np.zeros(RING + 1, dtype=bins.dtype)
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
        starts = _split_heaviest(prefix.tolist(), starts, count)
    return _spread_over_unused(bins, starts)


def _split_heaviest(prefix: list[Any], starts: list[int], count: int) -> list[int]:
    """Add groups until there are ``count``: split the heaviest (then widest, then leftmost)
    splittable group where its two halves are most even. Never raises the heaviest load."""
    ends = starts[1:] + [RING]
    heap = [(-(prefix[b] - prefix[a]), a - b, a, b) for a, b in zip(starts, ends) if b - a >= 2]
    heapq.heapify(heap)
    result = list(starts)
    while len(result) < count:
        _, _, a, b = heapq.heappop(heap)  # never empty: 65536 bins leave room for every group
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
    index = np.arange(RING, dtype=np.int64)
    used = bins != 0
    last_used = np.maximum.accumulate(np.where(used, index, -1))  # last used bin <= i
    first_used = np.minimum.accumulate(np.where(used, index, RING)[::-1])[::-1]  # first used bin >= i
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


# --------------------------------------------------------------------------------------------------
# Segments and layouts


def _layout_error(segment_id: object, message: str) -> InvalidLayoutError:
    return InvalidLayoutError(f"segment {segment_id}: {message}")


def _id_tuple(values: Any, field: str, segment_id: object) -> tuple[int, ...]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise _layout_error(segment_id, f"{field} must be a tuple of segment ids, not {_describe(values)}")
    ids = tuple(values)
    for i, value in enumerate(ids):
        if not _is_int(value) or int(value) < 0:
            raise _layout_error(segment_id, f"{field}[{i}] is {_describe(value)}; segment ids are ints >= 0")
        if int(value) > MAX_SEGMENT_ID:
            raise _layout_error(segment_id, f"{field}[{i}] is {int(value)}, above 2**63-1 (segment ids are 64-bit)")
    ids = tuple(int(v) for v in ids)
    if len(set(ids)) != len(ids):
        raise _layout_error(segment_id, f"{field} {ids} lists a segment twice")
    if segment_id in ids:
        raise _layout_error(segment_id, f"{field} {ids} includes the segment itself")
    return ids


@dataclass(frozen=True)
class Segment:
    """One segment of a scalable topic: an inclusive range of segment hashes and its buckets."""

    segment_id: int
    hash_start: int
    hash_end: int
    buckets: Buckets = Buckets()
    state: str = ACTIVE
    parent_ids: tuple[int, ...] = ()
    legacy_topic_name: str | None = None
    child_ids: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        sid = self.segment_id
        if not _is_int(sid) or int(sid) < 0:
            raise InvalidLayoutError(f"segment_id must be an int >= 0, not {_describe(sid)}")
        if int(sid) > MAX_SEGMENT_ID:
            raise InvalidLayoutError(f"segment_id {int(sid)} is above 2**63-1 (segment ids are 64-bit)")
        sid = int(sid)
        object.__setattr__(self, "segment_id", sid)
        for field in ("hash_start", "hash_end"):
            value = getattr(self, field)
            if not _is_int(value):
                raise _layout_error(sid, f"{field} must be an int in 0..0xFFFF, not {_describe(value)}")
            if not 0 <= int(value) <= 0xFFFF:
                raise _layout_error(sid, f"{field} {int(value)} is outside 0..0xFFFF")
            object.__setattr__(self, field, int(value))
        if self.hash_start > self.hash_end:
            raise _layout_error(sid, f"hash_start 0x{self.hash_start:04x} is after hash_end 0x{self.hash_end:04x}")
        if not isinstance(self.buckets, Buckets):
            raise _layout_error(sid, f"buckets must be a Buckets, not {_describe(self.buckets)}")
        if self.state not in _STATES:
            raise _layout_error(sid, f"state must be 'active' or 'sealed', not {self.state!r}")
        object.__setattr__(self, "parent_ids", _id_tuple(self.parent_ids, "parent_ids", sid))
        object.__setattr__(self, "child_ids", _id_tuple(self.child_ids, "child_ids", sid))
        if self.state == ACTIVE and self.child_ids:
            raise _layout_error(sid, f"an active segment has no children, but child_ids is {self.child_ids}")
        name = self.legacy_topic_name
        if name is not None and (not isinstance(name, str) or not name):
            raise _layout_error(sid, f"legacy_topic_name must be a non-empty str or None, not {_describe(name)}")

    @property
    def is_active(self) -> bool:
        return self.state == ACTIVE

    @property
    def is_legacy(self) -> bool:
        """A v4 partition adopted as a segment (routed by signSafeMod when all active ones are)."""
        return self.legacy_topic_name is not None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-friendly dict (ints, str, lists)."""
        return {
            "segment_id": self.segment_id,
            "hash_start": self.hash_start,
            "hash_end": self.hash_end,
            "splits": list(self.buckets.splits),
            "state": self.state,
            "parent_ids": list(self.parent_ids),
            "child_ids": list(self.child_ids),
            "legacy_topic_name": self.legacy_topic_name,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Segment":
        """Inverse of :meth:`to_dict`; ``splits``, ``state``, the id lists and the legacy name are optional."""
        if not isinstance(data, Mapping):
            raise InvalidLayoutError(f"a segment must be a mapping, not {_describe(data)}")
        sid = data.get("segment_id", "?")
        missing = [k for k in ("segment_id", "hash_start", "hash_end") if k not in data]
        if missing:
            raise InvalidLayoutError(f"segment {sid}: missing field(s) {', '.join(missing)}")
        unknown = sorted(str(k) for k in data if k not in _SEGMENT_FIELDS)
        if unknown:
            raise InvalidLayoutError(f"segment {sid}: unknown field(s) {', '.join(unknown)}")
        try:
            buckets = Buckets(data.get("splits", ()))
        except InvalidBoundaryError as err:
            raise InvalidBoundaryError(f"segment {sid}: {err}") from err
        return cls(
            data["segment_id"],
            data["hash_start"],
            data["hash_end"],
            buckets,
            data.get("state", ACTIVE),
            data.get("parent_ids", ()),
            data.get("legacy_topic_name"),
            data.get("child_ids", ()),
        )


_SEGMENT_FIELDS = frozenset(
    ("segment_id", "hash_start", "hash_end", "splits", "state", "parent_ids", "child_ids", "legacy_topic_name")
)
_LAYOUT_FIELDS = frozenset(("epoch", "topic", "segments"))


def _parse_topic(topic: object) -> tuple[str, str, str]:
    """``<scheme>://<tenant>/<namespace>/<name>`` → (tenant, namespace, name)."""
    if not isinstance(topic, str):
        raise InvalidLayoutError(f"topic must be a str like 'persistent://tenant/ns/topic', not {_describe(topic)}")
    scheme, sep, rest = topic.partition("://")
    parts = rest.split("/")
    if not sep or not scheme or len(parts) != 3 or not all(parts):
        raise InvalidLayoutError(f"topic {topic!r} is not of the form '<scheme>://<tenant>/<namespace>/<topic>'")
    return parts[0], parts[1], parts[2]


class TopicLayout:
    """The segments of one scalable topic at one epoch; immutable.

    The active segments' ranges tile 0x0000..0xFFFF exactly. Routing and transitions are methods;
    every transition returns a new layout with ``epoch + 1``.
    """

    __slots__ = (
        "_epoch", "_topic", "_names", "_segments", "_active", "_by_id", "_starts", "_active_ids",
        "_legacy", "_hash",
    )

    _epoch: int
    _topic: str
    _names: tuple[str, str, str]
    _segments: tuple[Segment, ...]
    _active: tuple[Segment, ...]
    _by_id: dict[int, Segment]
    _starts: Buckets  # the active segments' starts after the first: routing is bucket_of over them
    _active_ids: np.ndarray
    _legacy: np.ndarray | None
    _hash: int

    def __init__(self, epoch: int, segments: Iterable[Segment], topic: str = "persistent://t/ns/topic") -> None:
        if not _is_int(epoch) or int(epoch) < 0:
            raise InvalidLayoutError(f"epoch must be an int >= 0, not {_describe(epoch)}")
        names = _parse_topic(topic)
        if isinstance(segments, (str, bytes, Mapping)) or not isinstance(segments, Iterable):
            raise InvalidLayoutError(f"segments must be an iterable of Segment, not {_describe(segments)}")
        segs = tuple(segments)
        by_id: dict[int, Segment] = {}
        for position, seg in enumerate(segs):
            if not isinstance(seg, Segment):
                raise InvalidLayoutError(f"segments[{position}] is {_describe(seg)}, not a Segment")
            if seg.segment_id in by_id:
                first = next(i for i, s in enumerate(segs) if s.segment_id == seg.segment_id)
                raise InvalidLayoutError(
                    f"duplicate segment id {seg.segment_id} at segments[{first}] and segments[{position}]"
                )
            by_id[seg.segment_id] = seg
        _check_lineage(segs, by_id)
        active = tuple(sorted((s for s in segs if s.state == ACTIVE), key=lambda s: s.hash_start))
        _check_tiling(active)
        put = object.__setattr__
        put(self, "_epoch", int(epoch))
        put(self, "_topic", topic)
        put(self, "_names", names)
        put(self, "_segments", segs)
        put(self, "_active", active)
        put(self, "_by_id", by_id)
        put(self, "_starts", Buckets(s.hash_start for s in active[1:]))
        ids = np.array([s.segment_id for s in active], dtype=np.int64)
        ids.flags.writeable = False
        put(self, "_active_ids", ids)
        legacy = None
        if all(s.legacy_topic_name is not None for s in active):
            index_of = {s.segment_id: i for i, s in enumerate(active)}
            legacy = np.array([index_of[s.segment_id] for s in segs if s.state == ACTIVE], dtype=np.int32)
            legacy.flags.writeable = False
        put(self, "_legacy", legacy)
        put(self, "_hash", hash((int(epoch), topic, segs)))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("TopicLayout is immutable; transitions return a new layout")

    def __reduce__(self) -> tuple[Any, ...]:
        return (TopicLayout, (self._epoch, self._segments, self._topic))

    # --- properties ---------------------------------------------------------------------------

    @property
    def epoch(self) -> int:
        return self._epoch

    @property
    def topic(self) -> str:
        return self._topic

    @property
    def segments(self) -> tuple[Segment, ...]:
        """Every segment, in the order given."""
        return self._segments

    @property
    def active_segments(self) -> tuple[Segment, ...]:
        """The active segments sorted by hash_start (route_index indexes into this tuple)."""
        return self._active

    @property
    def active_segment_ids(self) -> np.ndarray:
        """segment_id of each active segment, in active_segments order (read-only np.int64)."""
        return self._active_ids

    @property
    def is_legacy(self) -> bool:
        """Every active segment is a legacy (v4 partition) segment: routing uses signSafeMod."""
        return self._legacy is not None

    def segment(self, segment_id: int) -> Segment:
        """The segment with this id (KeyError if the layout has none)."""
        if not _is_int(segment_id):
            raise TypeError(f"segment_id must be an int, not {_describe(segment_id)}")
        try:
            return self._by_id[int(segment_id)]
        except KeyError:
            raise KeyError(f"no segment {int(segment_id)} in layout epoch {self._epoch} of {self._topic}") from None

    def segment_topic(self, segment_id: int) -> str:
        """``segment://<tenant>/<ns>/<topic>/<%04x start>-<%04x end>-<segment_id>``."""
        seg = self.segment(segment_id)
        tenant, namespace, name = self._names
        return f"segment://{tenant}/{namespace}/{name}/{seg.hash_start:04x}-{seg.hash_end:04x}-{seg.segment_id}"

    def is_newer_than(self, other: "TopicLayout") -> bool:
        """True when this layout's epoch is greater (an update with epoch <= applied is ignored)."""
        if not isinstance(other, TopicLayout):
            raise TypeError(f"can only compare with a TopicLayout, not {type(other).__name__}")
        return self._epoch > other._epoch

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TopicLayout):
            return NotImplemented
        return (self._epoch, self._topic, self._segments) == (other._epoch, other._topic, other._segments)

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        sealed = len(self._segments) - len(self._active)
        ranges = ", ".join(f"{s.segment_id}:{s.hash_start:04x}-{s.hash_end:04x}" for s in self._active[:8])
        if len(self._active) > 8:
            ranges += ", ..."
        legacy = ", legacy" if self.is_legacy else ""
        return (
            f"TopicLayout(epoch={self._epoch}, topic={self._topic!r}, active=[{ranges}], "
            f"sealed={sealed}{legacy})"
        )

    # --- routing ------------------------------------------------------------------------------

    def route_index(self, key_hashes: Any, *, round_robin: int = 0) -> tuple[Any, int]:
        """Index into ``active_segments`` of every message, and the next round-robin position.

        Keyed messages go by ``segment_hash`` to the active range containing it (all-legacy
        layout: ``signSafeMod(raw & 0x7FFFFFFF, n)`` over the legacy segments in layout order);
        the i-th keyless message goes to position ``(round_robin + i) % n`` (of the legacy order
        for a legacy layout). ``key_hashes`` is a :class:`KeyHashes` or any key input of
        :func:`bucketcore.hash_keys`. A single key gives an int index.
        """
        kh = key_hashes if isinstance(key_hashes, KeyHashes) else hash_keys(key_hashes)
        rr = _check_int(round_robin, "round_robin", 0)
        raw, segment_hash, has_key, shape = _key_columns(kh)
        out = np.empty(raw.size, dtype=np.int32)
        if self._legacy is not None:
            parts = self._legacy.size
            next_rr = _layout.route_legacy(raw, has_key, out, self._legacy, rr % parts)
        else:
            n_active = len(self._active)
            table = None
            if self._starts.table_pays_off(raw.size):
                table = self.segment_table()
            next_rr = _layout.route_keyed(self._starts.splits_array, segment_hash, has_key, out, table,
                                          rr % n_active, n_active)
        if shape == ():
            return int(out[0]), int(next_rr)
        return out.reshape(shape), int(next_rr)

    def route(self, key_hashes: Any, *, round_robin: int = 0) -> Any:
        """segment_id of every message (np.int64 array of the keys' shape; an int for one key).

        Built on :meth:`route_index`; pass ``round_robin`` to continue a keyless rotation, and use
        :meth:`route_index` to get the next position back.
        """
        index, _ = self.route_index(key_hashes, round_robin=round_robin)
        if isinstance(index, int):
            return int(self._active_ids[index])
        flat = index.reshape(-1)
        ids = np.empty(flat.size, dtype=np.int64)
        _layout.gather_ids(flat, self._active_ids, ids)
        return ids.reshape(index.shape)

    def segment_table(self) -> np.ndarray:
        """The 64 Ki table of keyed routing: index into :attr:`active_segments` by segment hash
        (read-only np.uint16; the lookup table of the active starts' boundary list, built once)."""
        return self._starts.lookup_table()

    # --- transitions --------------------------------------------------------------------------

    def _active_segment(self, segment_id: int, action: str) -> Segment:
        seg = self.segment(segment_id)
        if seg.state != ACTIVE:
            raise InvalidLayoutError(f"cannot {action} segment {seg.segment_id}: it is sealed")
        return seg

    def _next_id(self) -> int:
        # above every id the layout still names: a garbage-collected parent or child keeps its id
        named = (i for s in self._segments for i in (s.segment_id, *s.parent_ids, *s.child_ids))
        return max(named) + 1

    def _successor(self, sealed: dict[int, Segment], children: list[Segment]) -> "TopicLayout":
        segments = [sealed.get(s.segment_id, s) for s in self._segments] + children
        return TopicLayout(self._epoch + 1, segments, self._topic)

    def split(self, segment_id: int) -> "TopicLayout":
        """Seal an active segment and replace it by two children at its range midpoint.

        Lower child ``[start, mid]`` gets id ``max_id + 1``, upper ``[mid + 1, end]`` ``max_id + 2``;
        each has ``max(1, N // 2)`` equal-width buckets.
        """
        seg = self._active_segment(segment_id, "split")
        if seg.hash_start == seg.hash_end:
            raise InvalidLayoutError(
                f"cannot split segment {seg.segment_id}: its range 0x{seg.hash_start:04x} is a single hash"
            )
        mid = seg.hash_start + (seg.hash_end - seg.hash_start) // 2
        low_id = self._next_id()
        buckets = Buckets.equal_width(max(1, seg.buckets.count // 2))
        low = Segment(low_id, seg.hash_start, mid, buckets, ACTIVE, (seg.segment_id,))
        high = Segment(low_id + 1, mid + 1, seg.hash_end, buckets, ACTIVE, (seg.segment_id,))
        parent = Segment(seg.segment_id, seg.hash_start, seg.hash_end, seg.buckets, SEALED, seg.parent_ids,
                         seg.legacy_topic_name, (low_id, low_id + 1))
        return self._successor({seg.segment_id: parent}, [low, high])

    def merge(self, id_a: int, id_b: int) -> "TopicLayout":
        """Seal two adjacent active segments and replace them by one child over both ranges.

        The child (id ``max_id + 1``, parents in hash order) has ``N_a + N_b`` equal-width buckets.
        """
        a = self._active_segment(id_a, "merge")
        b = self._active_segment(id_b, "merge")
        if a.segment_id == b.segment_id:
            raise InvalidLayoutError(f"cannot merge segment {a.segment_id} with itself")
        low, high = (a, b) if a.hash_start < b.hash_start else (b, a)
        if low.hash_end + 1 != high.hash_start:
            raise InvalidLayoutError(
                f"cannot merge segments {low.segment_id} (0x{low.hash_start:04x}-0x{low.hash_end:04x}) and "
                f"{high.segment_id} (0x{high.hash_start:04x}-0x{high.hash_end:04x}): they are not adjacent"
            )
        count = low.buckets.count + high.buckets.count
        if count > MAX_BUCKETS:
            raise InvalidLayoutError(
                f"cannot merge segments {low.segment_id} and {high.segment_id}: {low.buckets.count} + "
                f"{high.buckets.count} buckets exceed 65536; rebucket one of them first"
            )
        child_id = self._next_id()
        child = Segment(child_id, low.hash_start, high.hash_end, Buckets.equal_width(count), ACTIVE,
                        (low.segment_id, high.segment_id))
        sealed = {
            s.segment_id: Segment(s.segment_id, s.hash_start, s.hash_end, s.buckets, SEALED, s.parent_ids,
                                  s.legacy_topic_name, (child_id,))
            for s in (low, high)
        }
        return self._successor(sealed, [child])

    def rebucket(self, segment_id: int, buckets: Buckets) -> "TopicLayout":
        """Rebucket rollover: seal the segment, add a successor with the same range and ``buckets``."""
        seg = self._active_segment(segment_id, "rebucket")
        if not isinstance(buckets, Buckets):
            raise TypeError(f"buckets must be a Buckets, not {_describe(buckets)}")
        child_id = self._next_id()
        child = Segment(child_id, seg.hash_start, seg.hash_end, buckets, ACTIVE, (seg.segment_id,))
        parent = Segment(seg.segment_id, seg.hash_start, seg.hash_end, seg.buckets, SEALED, seg.parent_ids,
                         seg.legacy_topic_name, (child_id,))
        return self._successor({seg.segment_id: parent}, [child])

    # --- conversions --------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-friendly dict: ``{"epoch", "topic", "segments": [segment dicts]}``."""
        return {"epoch": self._epoch, "topic": self._topic, "segments": [s.to_dict() for s in self._segments]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "TopicLayout":
        """Inverse of :meth:`to_dict` (``topic`` optional); validated like the constructor."""
        if not isinstance(data, Mapping):
            raise InvalidLayoutError(f"a layout must be a mapping, not {_describe(data)}")
        missing = [k for k in ("epoch", "segments") if k not in data]
        if missing:
            raise InvalidLayoutError(f"layout: missing field(s) {', '.join(missing)}")
        unknown = sorted(str(k) for k in data if k not in _LAYOUT_FIELDS)
        if unknown:
            raise InvalidLayoutError(f"layout: unknown field(s) {', '.join(unknown)}")
        raw_segments = data["segments"]
        if isinstance(raw_segments, (str, bytes, Mapping)) or not isinstance(raw_segments, Iterable):
            raise InvalidLayoutError(f"layout: segments must be a list of segment mappings, not {_describe(raw_segments)}")
        segments = [Segment.from_dict(s) for s in raw_segments]
        return cls(data["epoch"], segments, data.get("topic", "persistent://t/ns/topic"))


def _check_lineage(segs: tuple[Segment, ...], by_id: dict[int, Segment]) -> None:
    """Parent and child ids that name a segment present in the layout must agree with it.

    Ids of segments no longer in the layout are allowed: a drained sealed segment is
    garbage-collected while its successors keep naming it (DESIGN.md §3.6, "parents present in
    the layout").
    """
    for seg in segs:
        sid = seg.segment_id
        for parent_id in seg.parent_ids:
            parent = by_id.get(parent_id)
            if parent is None:
                continue
            if parent.state != SEALED:
                raise _layout_error(sid, f"parent {parent_id} is {parent.state}: a segment is sealed when its successors are created")
            if parent.child_ids and sid not in parent.child_ids:
                raise _layout_error(sid, f"parent {parent_id} lists child_ids {parent.child_ids}, which do not include {sid}")
        for child_id in seg.child_ids:
            child = by_id.get(child_id)
            if child is not None and sid not in child.parent_ids:
                raise _layout_error(sid, f"child {child_id} lists parent_ids {child.parent_ids}, which do not include {sid}")


def _check_tiling(active: tuple[Segment, ...]) -> None:
    """Active ranges (sorted by start) must tile 0x0000..0xFFFF: report the first gap or overlap."""
    if not active:
        raise InvalidLayoutError("the layout has no active segment: the active ranges must tile 0x0000..0xFFFF")
    expected = 0
    previous: Segment | None = None
    for seg in active:
        if seg.hash_start > expected:
            after = f" after segment {previous.segment_id}" if previous else ""
            raise InvalidLayoutError(
                f"gap 0x{expected:04x}-0x{seg.hash_start - 1:04x}{after} before segment {seg.segment_id}: "
                "the active ranges must tile 0x0000..0xFFFF"
            )
        if seg.hash_start < expected:
            assert previous is not None
            raise InvalidLayoutError(
                f"overlap 0x{seg.hash_start:04x}-0x{min(expected - 1, seg.hash_end):04x} between active segments "
                f"{previous.segment_id} (0x{previous.hash_start:04x}-0x{previous.hash_end:04x}) and "
                f"{seg.segment_id} (0x{seg.hash_start:04x}-0x{seg.hash_end:04x})"
            )
        expected = seg.hash_end + 1
        previous = seg
    if expected <= 0xFFFF:
        assert previous is not None
        raise InvalidLayoutError(
            f"gap 0x{expected:04x}-0xffff after segment {previous.segment_id}: "
            "the active ranges must tile 0x0000..0xFFFF"
        )


def _key_columns(kh: KeyHashes) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[int, ...]]:
    """Flat contiguous (raw u32, segment_hash u16, has_key as u8) of a KeyHashes, and its shape."""
    raw = np.asarray(kh.raw)
    segment_hash = np.asarray(kh.segment_hash)
    has_key = np.asarray(kh.has_key)
    shape = raw.shape
    if segment_hash.shape != shape or has_key.shape != shape:
        raise ValueError(
            f"KeyHashes columns disagree in shape: raw {shape}, segment_hash {segment_hash.shape}, "
            f"has_key {has_key.shape}"
        )
    if raw.dtype != np.uint32 or segment_hash.dtype != np.uint16 or has_key.dtype != np.bool_:
        raise TypeError(
            "KeyHashes columns must be raw uint32, segment_hash uint16 and has_key bool (as hash_keys makes "
            f"them), not {raw.dtype}, {segment_hash.dtype}, {has_key.dtype}"
        )
    return (
        np.ascontiguousarray(raw).reshape(-1),
        np.ascontiguousarray(segment_hash).reshape(-1),
        np.ascontiguousarray(has_key).reshape(-1).view(np.uint8),
        shape,
    )
