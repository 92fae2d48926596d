"""Boundary lists: the buckets of one segment (docs/design.md, "Boundary lists").

:class:`Buckets` is a validated, immutable boundary list with a vectorised :meth:`Buckets.bucket_of`
and :meth:`Buckets.canonical_hash`; :meth:`Buckets.equal_width` is the reference's list and
:meth:`Buckets.balanced` places the boundaries by observed traffic (:mod:`bucketcore.balancing`).
:meth:`Buckets.table_pays_off` is the one rule for when a lookup goes through the 64 Ki table.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from _bucketcore import _layout

from .balancing import histogram, linear_partition
from .errors import InvalidBoundaryError
from .hash_histogram import BucketHistogram, HashHistogram
from .validation import (
    MAX_HASH,
    check_hash,
    check_int,
    describe,
    hash_column,
    hash_out_of_range,
    index_label,
    is_int,
)

__all__ = ["RING", "MAX_BUCKETS", "MAX_BUCKETS_PER_SEGMENT", "BucketLoad", "Buckets", "buckets_for_budget"]

RING = MAX_HASH + 1  #: number of values of a 16-bit hash
MAX_BUCKETS = RING  #: every bucket owns at least one hash value
#: The reference broker's default ceiling on a segment's bucket count (its configuration's
#: entry-buckets-per-segment limit): the default of the ``max_buckets`` argument of
#: :meth:`bucketcore.TopicLayout.split`, ``merge`` and ``rebucket``.
MAX_BUCKETS_PER_SEGMENT = 1024


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
            raise InvalidBoundaryError(
                f"split at position {position} is a bool ({value!r}); splits are ints in 1..0xFFFF"
            )
        if not isinstance(value, (int, np.integer)):
            raise InvalidBoundaryError(
                f"split at position {position} is {describe(value)}, not an int; splits are ints in 1..0xFFFF"
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

    ``Buckets()`` is one bucket over the whole 16-bit ring. Equality and hashing go by splits; a
    changed list is a new object (for a segment, a rebucket rollover).

    Parameters
    ----------
    splits : iterable of int, optional
        Strictly ascending ints in 1..0xFFFF (a :class:`Buckets` or a 1-D integer array also do).

    Raises
    ------
    InvalidBoundaryError
        ``splits`` is not an iterable of ints, or a split is a bool, not an int, 0, negative, above
        0xFFFF, repeated or out of order (the message names the value and its position).
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
    def _trusted(cls, splits: tuple[int, ...]) -> Buckets:
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
        return list(zip(starts, ends, strict=False))

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
        """The 64 Ki lookup table of this list: ``table[h] == bucket_of(h)`` for every hash ``h``.

        Built on first use and kept with the boundary list (128 KiB).

        Returns
        -------
        numpy.ndarray
            Read-only ``np.uint16`` array of 65536 entries.
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
            return _layout.LookupMethod.METHOD_CONST, None
        if count == 2:
            return _layout.LookupMethod.METHOD_COMPARE, None
        if self.table_pays_off(size):
            return _layout.LookupMethod.METHOD_TABLE, self.lookup_table()
        return _layout.LookupMethod.METHOD_SEARCH, None

    def bucket_of(self, bucket_hashes: Any) -> Any:
        """Bucket index of each bucket hash: the number of splits ``<= h``.

        Parameters
        ----------
        bucket_hashes : int or array-like of int
            Hashes in 0..0xFFFF: an int, a list or tuple of ints, or an integer array of any shape
            (also a pyarrow integer array without nulls).

        Returns
        -------
        int or numpy.ndarray
            An int for an int; otherwise an ``np.int32`` array of the input's shape.

        Raises
        ------
        TypeError
            A bool, float, str or bytes, an element of a list that is not an int, or an array of a
            non-integer dtype.
        ValueError
            A hash outside 0..0xFFFF (named with its index), or an Arrow null.
        """
        if is_int(bucket_hashes):
            return bisect.bisect_right(self._splits, check_hash(bucket_hashes, "bucket hash"))
        if isinstance(bucket_hashes, (bool, np.bool_, float, np.floating, str, bytes)):
            raise TypeError(f"bucket hashes must be ints in 0..0xFFFF, not {describe(bucket_hashes)}")
        flat, shape = hash_column(bucket_hashes, "bucket hash")
        out = np.empty(flat.size, dtype=np.int32)
        method, table = self._plan(flat.size)
        bad = _layout.bucket_of(self._array, flat, out, table, method)
        if bad >= 0:
            raise hash_out_of_range("bucket hash", flat, bad, shape)
        return out.reshape(shape)

    @property
    def dispatchable(self) -> bool:
        """Whether bucket 0 holds its canonical hash 1, so a broker can dispatch by this list.

        False only for a list whose first split is 1 (bucket 0 is ``[0x0000, 0x0000]``, e.g.
        ``equal_width(65536)``): such a list still partitions the ring and a producer can stamp
        by it, but a broker cannot represent bucket 0 (its canonical hash 1 lies in bucket 1),
        so :class:`bucketcore.EntryBucketSelector` and :class:`bucketcore.Dispatcher` refuse it.
        """
        return not self._splits or self._splits[0] >= 2

    def check_dispatchable(self, what: str = "boundary list") -> None:
        """Raise unless a broker can dispatch by this list (see :attr:`dispatchable`).

        Parameters
        ----------
        what : str
            How the list is named in the message (e.g. ``"declared boundary list"``).

        Raises
        ------
        InvalidBoundaryError
            The first split is 1: bucket 0 is ``[0x0000, 0x0000]`` and cannot hold its canonical
            hash 1.
        """
        if not self.dispatchable:
            raise InvalidBoundaryError(
                f"{what} cannot be dispatched: its first split is 1, so bucket 0 is [0x0000, 0x0000] and "
                "cannot hold its canonical hash 1 (0 means 'not set'); give bucket 0 at least two hash values"
            )

    def _check_bucket_zero_holds_one(self) -> None:
        if not self.dispatchable:
            raise InvalidBoundaryError(
                "bucket 0 has no canonical hash in this list: its first split is 1, so bucket 0 is "
                "[0x0000, 0x0000] and the canonical hash 1 (0 means 'not set') lies in bucket 1"
            )

    def canonical_hash(self, bucket_index: Any) -> Any:
        """The hash that stands for a bucket: its start hash, but 1 for bucket 0 (0 means "not set").

        Parameters
        ----------
        bucket_index : int or array-like of int
            Bucket indexes in 0..N-1.

        Returns
        -------
        int or numpy.ndarray
            An int for an int; otherwise an ``np.int32`` array of the input's shape.

        Raises
        ------
        TypeError
            A bool, float, str or bytes, or a non-integer element or dtype.
        ValueError
            An index outside 0..N-1 (named with its position).
        InvalidBoundaryError
            Bucket 0 was asked for and this list's first split is 1: bucket 0 is ``[0, 0]`` and has no
            canonical hash (1 lies in bucket 1); see :attr:`dispatchable`.
        """
        count = self.count
        if is_int(bucket_index):
            b = int(bucket_index)
            if not 0 <= b < count:
                raise ValueError(f"bucket index {b} is outside 0..{count - 1}")
            if b == 0:
                self._check_bucket_zero_holds_one()
                return 1
            return self._splits[b - 1]
        if isinstance(bucket_index, (bool, np.bool_, float, np.floating, str, bytes)):
            raise TypeError(f"bucket index must be an int, not {describe(bucket_index)}")
        if isinstance(bucket_index, (list, tuple)):
            # item by item: numpy would turn bools into ints and [] into float64
            for i, item in enumerate(bucket_index):
                if not is_int(item):
                    raise TypeError(f"bucket index at index {i} is {describe(item)}; expected an int")
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
                f"bucket index {int(flat[index])} at index {index_label(index, arr.shape)} is outside 0..{count - 1}"
            )
        if not self.dispatchable and flat.size and not flat.all():
            self._check_bucket_zero_holds_one()
        starts = np.concatenate(([1], self._array)).astype(np.int32)
        return starts[flat.astype(np.intp)].reshape(arr.shape)

    # --- constructors -------------------------------------------------------------------------

    @classmethod
    def equal_width(cls, n: int) -> Buckets:
        """The reference's equal-width list: ``splits = [floor(i * 65536 / n) for i in 1..n-1]``.

        Parameters
        ----------
        n : int
            Number of buckets, 0..65536; 0 and 1 both give the empty list (one bucket over the
            ring), as in the reference.

        Returns
        -------
        Buckets

        Raises
        ------
        TypeError
            ``n`` is not an int.
        InvalidBoundaryError
            ``n`` is negative or above 65536 (the reference clamps; we refuse: such a count is a
            caller's mistake, and a clamped list would not have the N the caller asked for).
        """
        count = _check_bucket_count(n, lo=0)
        if count == 0:
            return cls._trusted(())
        splits = (np.arange(1, count, dtype=np.int64) * RING) // count
        return cls._trusted(tuple(splits.tolist()))

    @classmethod
    def balanced(cls, bucket_hashes: Any, n: int, *, weights: Any = None) -> Buckets:
        """The n-bucket list whose heaviest bucket carries the least possible load.

        Load of a bucket = number of the observed ``bucket_hashes`` inside its range, or the sum of
        their ``weights`` (e.g. bytes). The contiguous linear partition of the 65,536 hash bins (hashes
        0 and 1 taken as one: bucket 0 keeps both, so every balanced list is dispatchable, however heavy
        the keyless hash 0 is) is solved by binary search on the answer with a greedy feasibility check:
        exactly for counts and integral weights (over the integers); for float weights, exactly for the
        loads as float64 prefix sums compute them, which can differ from the real-number optimum by a
        rounding step. Among the optimal lists: boundaries as far left-packed as the optimum allows,
        spare buckets split off the heaviest ones, and boundaries that fall in a stretch of hashes
        nobody used spread evenly over it. Deterministic: the same inputs give the same list.

        Parameters
        ----------
        bucket_hashes : int, array-like of int, or HashHistogram
            Observed bucket hashes (0..0xFFFF), e.g. ``KeyHashes.bucket_hash`` of a sample; or
            their histogram (one segment of :func:`bucketcore.bucket_histogram`), which gives
            the same list as the hashes it counted.
        n : int
            Number of buckets, 1..65535 (bucket 0 keeps the hashes 0 and 1).
        weights : array-like of numbers, optional
            One non-negative weight per hash (same shape); default 1 each. Not with a
            histogram (its bins are the loads already).

        Returns
        -------
        Buckets
            With nothing observed (an empty column, or every weight 0) every list is equally
            balanced and the result is ``equal_width(n)`` (for n up to 32768; above, where
            ``equal_width`` gives bucket 0 the hash 0 alone, boundaries evenly spread over hashes
            2..0xFFFF): no error, on purpose, so a planner can start from an empty sample.

        Raises
        ------
        TypeError
            A hash or weight is not a number of the accepted kind (bools refused).
        ValueError
            A hash is outside 0..0xFFFF, a weight is negative, not finite or overflows, or the
            shapes differ (each named with its index).
        InvalidBoundaryError
            ``n`` is outside 1..65535 (a dispatchable list's bucket 0 holds at least the hashes 0
            and 1, so 65536 buckets cannot be balanced).
        """
        count = _check_bucket_count(n)
        if count == MAX_BUCKETS:
            raise InvalidBoundaryError(
                f"a balanced list has at most {MAX_BUCKETS - 1} buckets, not {count}: bucket 0 keeps the hashes 0 "
                "and 1 (its canonical hash 1) so that the list can be dispatched"
            )
        bins = _observed_bins(bucket_hashes, weights)
        # Bucket 0 keeps hashes 0 and 1, however heavy hash 0 is (every keyless message has bucket
        # hash 0): the two are one unit of the partition, so no split lands on 1 and the list stays
        # dispatchable; unit u >= 1 is hash u + 1.
        units = bins[1:].copy()
        units[0] += bins[0]
        if not units.any() and count <= RING // 2:
            return cls.equal_width(count)
        if count == MAX_BUCKETS - 1:
            return cls._trusted(tuple(range(2, RING)))
        starts = linear_partition(units, count)
        return cls._trusted(tuple(start + 1 for start in starts[1:]))

    def load(self, bucket_hashes: Any, *, weights: Any = None) -> BucketLoad:
        """How observed bucket hashes (optionally weighted) spread over this list.

        Parameters
        ----------
        bucket_hashes : int, array-like of int, or HashHistogram
            Observed bucket hashes in 0..0xFFFF, or their histogram.
        weights : array-like of numbers, optional
            One non-negative weight per hash (same shape); default 1 each. Not with a histogram.

        Returns
        -------
        BucketLoad
            Per-bucket load, total, max, mean and ``max / mean`` (NaN when nothing was observed).

        Raises
        ------
        TypeError, ValueError
            As :meth:`balanced` for the hashes and weights.
        """
        bins = _observed_bins(bucket_hashes, weights)
        per_bucket = np.add.reduceat(bins, np.concatenate(([0], self._array)).astype(np.intp))
        total = float(per_bucket.sum())
        peak = float(per_bucket.max())
        mean = total / self.count
        ratio = peak / mean if mean > 0 else float("nan")
        return BucketLoad(per_bucket, total, peak, mean, ratio)


def _observed_bins(bucket_hashes: Any, weights: Any) -> np.ndarray:
    """The 65,536 load bins of observed hashes (and weights), or of a ready histogram."""
    if isinstance(bucket_hashes, HashHistogram):
        if weights is not None:
            raise TypeError("weights must be None when bucket_hashes is a HashHistogram: its bins are the loads")
        return bucket_hashes.bins
    if isinstance(bucket_hashes, BucketHistogram):
        raise TypeError(
            "bucket_hashes is a BucketHistogram of several segments: pass one segment's histogram, hist[segment_id]"
        )
    return histogram(bucket_hashes, weights)


def _check_bucket_count(n: object, lo: int = 1) -> int:
    if not is_int(n):
        raise TypeError(f"bucket count n must be an int, not {describe(n)}")
    count = int(n)  # type: ignore[call-overload]
    if not lo <= count <= MAX_BUCKETS:
        raise InvalidBoundaryError(
            f"bucket count {count} is outside {lo}..65536 (every bucket owns at least one hash value)"
        )
    return count


def buckets_for_budget(budget: int, segment_count: int) -> int:
    """Buckets per segment for a topic-wide bucket budget: ``max(1, budget // segment_count)``.

    Parameters
    ----------
    budget : int
        Topic-wide number of buckets, >= 0.
    segment_count : int
        Number of segments sharing it, >= 1.

    Returns
    -------
    int

    Raises
    ------
    TypeError
        An argument is not an int.
    ValueError
        ``budget`` is negative or ``segment_count`` is below 1.
    """
    total = check_int(budget, "budget", lo=0)
    segments = check_int(segment_count, "segment_count", lo=1)
    return max(1, total // segments)
