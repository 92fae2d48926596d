"""Mergeable bucket-hash histograms: the summary a planner needs, made anywhere and added up.

:class:`HashHistogram` is one segment's load on each of the 65,536 bucket-hash values,
:class:`BucketHistogram` one per active segment of a layout. Histograms of the same layout add
with ``+``, so partitions of a key log can be summarised on different machines and merged in any
grouping; with counts or integer weights the sum is exact, so the merged histogram, and the
boundary lists planned from it, equal those of the whole log read in one place.

This module sits beside :mod:`bucketcore.balancing`, below the layout: it imports neither
:mod:`bucketcore.buckets` nor :mod:`bucketcore.topic_layout`, which take its types
(:meth:`bucketcore.Buckets.balanced` and :meth:`~bucketcore.Buckets.load` take one segment's
:class:`HashHistogram`, :meth:`bucketcore.TopicLayout.rebalanced` a :class:`BucketHistogram`).
:func:`bucketcore.bucket_histogram` (in :mod:`bucketcore.histogram`) makes them from keys.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from .balancing import RING, check_float_total
from .errors import InvalidLayoutError
from .validation import describe, is_int

__all__ = ["BucketHistogram", "HashHistogram", "is_histogram_file"]

_INT64_MAX = int(np.iinfo(np.int64).max)
_MAGIC = b"BCHIST1\n"
_MEASURES = ("count", "weight")


def exact_total(bins: np.ndarray) -> int | float:
    """The exact total of non-negative int64 bins as a Python int (no wrap), or the float sum."""
    if bins.dtype == np.int64:
        # split each bin into 31-bit halves: neither half-sum over 65,536 bins can overflow
        high = int((bins >> 31).sum())
        low = int((bins & 0x7FFFFFFF).sum())
        return (high << 31) + low
    with np.errstate(over="ignore"):
        return float(np.cumsum(bins)[-1])


class HashHistogram:
    """One segment's load on each of the 65,536 bucket-hash values; immutable, adds with ``+``.

    Parameters
    ----------
    bins : array-like
        65,536 non-negative values: ``np.int64`` (counts or integer weights) or ``np.float64``
        (float weights); other integer dtypes are widened to int64.
    measure : {"count", "weight"}
        What the bins hold; histograms of different measures do not add.

    Raises
    ------
    TypeError
        Bins of a non-numeric dtype (bools refused), or an unknown measure type.
    ValueError
        Not 65,536 bins, a negative or non-finite bin (named with its hash value), a total that
        overflows int64 or float64, or an unknown measure.
    """

    __slots__ = ("_bins", "_measure", "_total")
    _bins: np.ndarray
    _measure: str
    _total: int | float

    def __init__(self, bins: Any, measure: str = "count") -> None:
        if not isinstance(measure, str):
            raise TypeError(f"measure must be 'count' or 'weight', not {describe(measure)}")
        if measure not in _MEASURES:
            raise ValueError(f"measure must be 'count' or 'weight', not {measure!r}")
        arr = np.asarray(bins)
        if arr.shape != (RING,):
            raise ValueError(f"a hash histogram has 65536 bins, not shape {arr.shape}")
        if arr.dtype.kind in "ui":
            if arr.dtype == np.uint64 and arr.max() > _INT64_MAX:
                h = int(np.argmax(arr > _INT64_MAX))
                raise ValueError(f"bin of hash {h:#06x} holds {int(arr[h])}, which does not fit int64")
            arr = arr.astype(np.int64)
            negative = np.flatnonzero(arr < 0)
            if negative.size:
                h = int(negative[0])
                raise ValueError(f"bin of hash {h:#06x} holds {int(arr[h])}; bins are non-negative")
        elif arr.dtype.kind == "f":
            arr = arr.astype(np.float64)
            bad = np.flatnonzero(~((arr >= 0.0) & np.isfinite(arr)))
            if bad.size:
                h = int(bad[0])
                raise ValueError(f"bin of hash {h:#06x} holds {float(arr[h])!r}; bins are finite and non-negative")
        else:
            raise TypeError(f"histogram bins must be integers or floats, not dtype {arr.dtype}")
        total = exact_total(arr)
        if arr.dtype == np.int64 and total > _INT64_MAX:
            raise ValueError(f"the bins add up to {total}, which overflows int64")
        if arr.dtype == np.float64:
            check_float_total(arr)
        arr.setflags(write=False)
        self._init(arr, measure, total)

    def _init(self, bins: np.ndarray, measure: str, total: int | float) -> None:
        object.__setattr__(self, "_bins", bins)
        object.__setattr__(self, "_measure", measure)
        object.__setattr__(self, "_total", total)

    @classmethod
    def _trusted(cls, bins: np.ndarray, measure: str, total: int | float) -> HashHistogram:
        """Wrap bins this module produced (already checked); makes them read-only."""
        bins.setflags(write=False)
        self = cls.__new__(cls)
        self._init(bins, measure, total)
        return self

    @classmethod
    def zeros(cls, dtype: Any = np.int64, measure: str = "count") -> HashHistogram:
        """An empty histogram (nothing observed).

        Parameters
        ----------
        dtype : numpy dtype
            ``np.int64`` or ``np.float64``.
        measure : {"count", "weight"}

        Returns
        -------
        HashHistogram
        """
        return cls(np.zeros(RING, dtype=dtype), measure)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("HashHistogram is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("HashHistogram is immutable")

    def __reduce__(self) -> tuple[Any, ...]:
        return (HashHistogram, (np.array(self._bins), self._measure))

    @property
    def bins(self) -> np.ndarray:
        """The 65,536 bins (read-only), indexed by bucket hash."""
        return self._bins

    @property
    def measure(self) -> str:
        """``"count"`` or ``"weight"``."""
        return self._measure

    # Array-like: the 65,536-bin count itself (np.asarray(h).shape == (65536,)), read-only.
    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        if copy:
            return self._bins.astype(dtype if dtype is not None else self._bins.dtype, copy=True)
        if dtype is None or np.dtype(dtype) == self._bins.dtype:
            return self._bins
        if copy is False:
            raise ValueError(
                f"the histogram's {self._bins.dtype} bins cannot be read as {np.dtype(dtype)} without a copy"
            )
        return self._bins.astype(dtype)

    def __len__(self) -> int:
        return int(self._bins.shape[0])

    def __getitem__(self, index: Any) -> Any:
        """The bin of one bucket hash (an int), or the bins a slice or an index array selects."""
        return self._bins[index]

    def __iter__(self) -> Any:
        return iter(self._bins)

    @property
    def total(self) -> int | float:
        """The sum of the bins (exact for integer bins)."""
        return self._total

    def __add__(self, other: object) -> HashHistogram:
        if isinstance(other, int) and not isinstance(other, bool) and other == 0:
            return self  # sum() starts from 0
        if not isinstance(other, HashHistogram):
            return NotImplemented
        _check_same_kind(self._measure, self._bins.dtype, other._measure, other._bins.dtype)
        total = self._total + other._total
        if self._bins.dtype == np.int64:
            if total > _INT64_MAX:
                raise ValueError(f"the merged histogram adds up to {total}, which overflows int64")
            # every bin is at most the total, so no bin overflows either
            return HashHistogram._trusted(self._bins + other._bins, self._measure, total)
        sums = self._bins + other._bins
        check_float_total(sums)
        return HashHistogram._trusted(sums, self._measure, exact_total(sums))

    def __radd__(self, other: object) -> HashHistogram:
        return self.__add__(other)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, HashHistogram):
            return NotImplemented
        return (
            self._measure == other._measure
            and self._bins.dtype == other._bins.dtype
            and bool(np.array_equal(self._bins, other._bins))
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        used = int(np.count_nonzero(self._bins))
        return f"HashHistogram(measure={self._measure!r}, total={self._total}, hash values used={used})"


def _check_same_kind(measure_a: str, dtype_a: np.dtype, measure_b: str, dtype_b: np.dtype) -> None:
    if measure_a != measure_b or dtype_a != dtype_b:
        raise TypeError(
            f"cannot add a histogram of {measure_a} ({dtype_a}) to one of {measure_b} ({dtype_b}): "
            f"summaries of different measures do not add"
        )


class BucketHistogram(Mapping[int, HashHistogram]):
    """Per active segment of a layout, the :class:`HashHistogram` of its keyed messages.

    Indexable by ``segment_id`` (every active segment of the layout it was made for; a segment
    no message reached has an empty histogram), iterable over those ids (sorted by hash range),
    added with ``+`` to a histogram of the same active segments, serialised with
    :meth:`to_bytes` / :meth:`from_bytes` (and pickle). Keyless messages are counted in
    :attr:`keyless`, not binned: they carry no bucket hash.

    Parameters
    ----------
    segment_ids : sequence of int
        The active segments' ids in hash-range order.
    histograms : mapping of int to HashHistogram
        The reached segments' histograms (a subset of ``segment_ids``, all of one measure).
    keyless : int
        Number of keyless messages seen.
    measure : {"count", "weight"}
    dtype : numpy dtype
        ``np.int64`` or ``np.float64``: the dtype of every histogram.

    Raises
    ------
    TypeError
        A histogram of another measure or dtype, or arguments of the wrong type.
    ValueError
        Duplicate segment ids, a histogram for a segment not in ``segment_ids``, or a negative
        keyless count.
    """

    __slots__ = ("_segment_ids", "_hists", "_keyless", "_measure", "_dtype")
    _segment_ids: tuple[int, ...]
    _hists: dict[int, HashHistogram]
    _keyless: int
    _measure: str
    _dtype: np.dtype

    def __init__(
        self,
        segment_ids: Any,
        histograms: Mapping[int, HashHistogram],
        keyless: int = 0,
        measure: str = "count",
        dtype: Any = np.int64,
    ) -> None:
        ids = tuple(segment_ids)
        for i, sid in enumerate(ids):
            if not is_int(sid) or int(sid) < 0:
                raise TypeError(f"segment id at index {i} is {describe(sid)}; expected an int >= 0")
        ids = tuple(int(s) for s in ids)
        if len(set(ids)) != len(ids):
            raise ValueError(f"segment ids {list(ids)} hold duplicates")
        if measure not in _MEASURES:
            raise ValueError(f"measure must be 'count' or 'weight', not {measure!r}")
        kind = np.dtype(dtype)
        if kind not in (np.dtype(np.int64), np.dtype(np.float64)):
            raise TypeError(f"dtype must be int64 or float64, not {kind}")
        if not is_int(keyless) or int(keyless) < 0:
            raise ValueError(f"keyless must be an int >= 0, not {keyless!r}")
        known = set(ids)
        hists: dict[int, HashHistogram] = {}
        for sid, h in histograms.items():
            if sid not in known:
                raise ValueError(f"a histogram for segment {sid}, which is not one of the segments {list(ids)}")
            if not isinstance(h, HashHistogram):
                raise TypeError(f"histogram of segment {sid} is {describe(h)}, not a HashHistogram")
            _check_same_kind(measure, kind, h.measure, h.bins.dtype)
            hists[int(sid)] = h
        self._segment_ids = ids
        self._hists = hists
        self._keyless = int(keyless)
        self._measure = measure
        self._dtype = kind

    @property
    def segment_ids(self) -> tuple[int, ...]:
        """Ids of the layout's active segments, in hash-range order."""
        return self._segment_ids

    @property
    def keyless(self) -> int:
        """Number of keyless messages seen (not binned)."""
        return self._keyless

    @property
    def measure(self) -> str:
        """``"count"`` or ``"weight"``."""
        return self._measure

    @property
    def dtype(self) -> np.dtype:
        """``int64`` or ``float64``."""
        return self._dtype

    @property
    def total(self) -> int | float:
        """The sum over every segment's bins."""
        return sum((h.total for h in self._hists.values()), self._dtype.type(0).item())

    def __getitem__(self, segment_id: int) -> HashHistogram:
        if not is_int(segment_id):
            raise TypeError(f"segment_id must be an int, not {describe(segment_id)}")
        sid = int(segment_id)
        h = self._hists.get(sid)
        if h is not None:
            return h
        if sid in self._segment_ids:
            return HashHistogram._trusted(np.zeros(RING, dtype=self._dtype), self._measure, self._dtype.type(0).item())
        raise KeyError(
            f"segment {sid} is not an active segment of this histogram's layout "
            f"(active: {list(self._segment_ids[:8])}{' ...' if len(self._segment_ids) > 8 else ''})"
        )

    def __iter__(self) -> Iterator[int]:
        return iter(self._segment_ids)

    def __len__(self) -> int:
        return len(self._segment_ids)

    def reached(self) -> tuple[int, ...]:
        """Ids of the segments at least one keyed message reached, in hash-range order.

        Returns
        -------
        tuple of int
        """
        return tuple(s for s in self._segment_ids if s in self._hists)

    def __add__(self, other: object) -> BucketHistogram:
        if isinstance(other, int) and not isinstance(other, bool) and other == 0:
            return self  # sum() starts from 0
        if not isinstance(other, BucketHistogram):
            return NotImplemented
        if self._segment_ids != other._segment_ids:
            raise InvalidLayoutError(
                f"cannot add histograms of different layouts: active segments {list(self._segment_ids[:8])} "
                f"and {list(other._segment_ids[:8])}"
            )
        _check_same_kind(self._measure, self._dtype, other._measure, other._dtype)
        merged = dict(self._hists)
        for sid, h in other._hists.items():
            mine = merged.get(sid)
            merged[sid] = h if mine is None else mine + h
        return BucketHistogram._make(
            self._segment_ids, merged, self._keyless + other._keyless, self._measure, self._dtype
        )

    def __radd__(self, other: object) -> BucketHistogram:
        return self.__add__(other)

    @classmethod
    def _make(
        cls, ids: tuple[int, ...], hists: dict[int, HashHistogram], keyless: int, measure: str, dtype: np.dtype
    ) -> BucketHistogram:
        self = cls.__new__(cls)
        self._segment_ids = ids
        self._hists = hists
        self._keyless = keyless
        self._measure = measure
        self._dtype = np.dtype(dtype)
        return self

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BucketHistogram):
            return NotImplemented
        return (
            self._segment_ids == other._segment_ids
            and self._keyless == other._keyless
            and self._measure == other._measure
            and self._dtype == other._dtype
            and all(self[s] == other[s] for s in self._segment_ids)
        )

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self) -> tuple[Any, ...]:
        return (BucketHistogram.from_bytes, (self.to_bytes(),))

    def __repr__(self) -> str:
        return (
            f"BucketHistogram(segments={len(self._segment_ids)}, reached={len(self._hists)}, "
            f"measure={self._measure!r}, total={self.total}, keyless={self._keyless})"
        )

    # --- serialisation --------------------------------------------------------------------------

    def to_bytes(self) -> bytes:
        """A self-describing binary form: a JSON header, then each reached segment's bins (little-endian).

        Returns
        -------
        bytes
        """
        reached = self.reached()
        header = json.dumps(
            {
                "segment_ids": list(self._segment_ids),
                "reached": list(reached),
                "keyless": self._keyless,
                "measure": self._measure,
                "dtype": self._dtype.name,
            },
            separators=(",", ":"),
        ).encode("utf-8")
        little = self._dtype.newbyteorder("<")
        parts = [_MAGIC, struct.pack("<I", len(header)), header]
        parts.extend(self._hists[s].bins.astype(little, copy=False).tobytes() for s in reached)
        return b"".join(parts)

    @classmethod
    def from_bytes(cls, data: bytes) -> BucketHistogram:
        """Read what :meth:`to_bytes` wrote; every field and bin is checked.

        Parameters
        ----------
        data : bytes-like

        Returns
        -------
        BucketHistogram

        Raises
        ------
        TypeError
            ``data`` is not bytes-like.
        ValueError
            Not a histogram, a truncated or over-long body, or a malformed header or bin (named).
        """
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"data must be bytes, not {describe(data)}")
        buf = bytes(data)
        if not buf.startswith(_MAGIC) or len(buf) < len(_MAGIC) + 4:
            raise ValueError("not a serialised BucketHistogram (bad magic)")
        (n,) = struct.unpack_from("<I", buf, len(_MAGIC))
        body = len(_MAGIC) + 4 + n
        if len(buf) < body:
            raise ValueError("serialised BucketHistogram is truncated inside its header")
        try:
            head = json.loads(buf[len(_MAGIC) + 4 : body].decode("utf-8"))
            ids, reached = head["segment_ids"], head["reached"]
            keyless, measure, dtype = head["keyless"], head["measure"], np.dtype(head["dtype"])
        except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as err:
            raise ValueError(f"serialised BucketHistogram has a malformed header: {err!r}") from None
        if dtype not in (np.dtype(np.int64), np.dtype(np.float64)):
            raise ValueError(f"serialised BucketHistogram has dtype {dtype}, not int64 or float64")
        width = RING * dtype.itemsize
        if not isinstance(reached, list) or len(buf) != body + width * len(reached):
            raise ValueError(
                f"serialised BucketHistogram holds {len(buf) - body} bytes of bins, expected "
                f"{width} for each of its reached segments"
            )
        if len(set(reached)) != len(reached):
            raise ValueError(f"serialised BucketHistogram names reached segments twice: {reached}")
        hists = {}
        for i, sid in enumerate(reached):
            bins = np.frombuffer(buf, dtype=dtype.newbyteorder("<"), count=RING, offset=body + i * width)
            try:
                hists[sid] = HashHistogram(bins.astype(dtype), measure)
            except (TypeError, ValueError) as err:
                raise ValueError(f"serialised BucketHistogram, segment {sid}: {err}") from None
        return cls(ids, hists, keyless, measure, dtype)

    # --- planning -------------------------------------------------------------------------------

    def balanced_layout(self, layout: Any, n: int) -> Any:
        """``layout.rebalanced(self, n)``: every active segment's list balanced for this histogram.

        Parameters
        ----------
        layout : TopicLayout
            The layout this histogram was made with (same active segment ids).
        n : int
            Buckets per active segment, 1..65535.

        Returns
        -------
        TopicLayout

        Raises
        ------
        TypeError
            ``layout`` is not a TopicLayout.
        InvalidLayoutError, InvalidBoundaryError
            As :meth:`bucketcore.TopicLayout.rebalanced`.
        """
        # the layout plans itself (this module sits below topic_layout and cannot name the class)
        rebalanced = getattr(layout, "rebalanced", None)
        if not callable(rebalanced):
            raise TypeError(f"layout must be a TopicLayout, not {describe(layout)}")
        return rebalanced(self, n)


def is_histogram_file(path: str) -> bool:
    """Whether ``path`` is a file written from :meth:`BucketHistogram.to_bytes`.

    Parameters
    ----------
    path : str

    Returns
    -------
    bool
        False for anything unreadable or not starting with the histogram's magic bytes.
    """
    try:
        with open(path, "rb") as f:
            return f.read(len(_MAGIC)) == _MAGIC
    except OSError:
        return False
