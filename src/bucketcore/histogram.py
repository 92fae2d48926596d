"""Counting keys into histograms: :func:`bucket_histogram` routes keys through a layout.

Keys (or their :class:`~bucketcore.KeyHashes`) are routed as a producer routes them and each
active segment's keyed messages are counted (or weighted) on the 65,536 bucket-hash values, into
a :class:`~bucketcore.hash_histogram.BucketHistogram` (the mergeable summary type, which lives
below the layout so that :class:`~bucketcore.Buckets` and :class:`~bucketcore.TopicLayout` can
take it). Histograms of the same layout add with ``+``; ``layout.rebalanced(hist, n)`` plans
from one. The types are re-exported here: ``from bucketcore.histogram import BucketHistogram``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from _bucketcore import _layout

from .balancing import RING, check_float_total, weight_column
from .hash_histogram import BucketHistogram, HashHistogram, exact_total
from .hashing import KeyHashes, hash_keys
from .topic_layout import TopicLayout
from .validation import describe, index_label

__all__ = ["BucketHistogram", "HashHistogram", "bucket_histogram"]


def bucket_histogram(
    keys_or_hashes: Any, layout: Any, *, weights: Any = None, errors: str = "strict", threads: int | None = None
) -> BucketHistogram:
    """Per active segment of ``layout``, the 65,536-bin histogram of its keyed messages' bucket hashes.

    Keyed messages are routed as a producer routes them (:meth:`TopicLayout.route_index`);
    keyless ones are counted in :attr:`BucketHistogram.keyless` and not binned. Histograms of
    the same layout add (``+``, or ``sum``), and :meth:`bucketcore.Buckets.balanced` gives the
    same list for ``hist[segment_id]`` as for the raw bucket hashes routed to that segment.

    Parameters
    ----------
    keys_or_hashes : keys or KeyHashes
        Any key input of :func:`bucketcore.hash_keys`, or its result.
    layout : TopicLayout
    weights : array-like of numbers, optional
        One non-negative weight per message (e.g. its size in bytes); integer weights give
        ``int64`` bins (exact sums), float weights ``float64`` bins (summed in message order
        within one call; merged sums round in the order they are added). Default: counts.
    errors : {"strict", "replace"}
        As in :func:`bucketcore.hash_keys` (used when keys are given).
    threads : int or None
        As in :func:`bucketcore.hash_keys`: how many threads hash a large key column (None:
        automatic). The result never depends on it.

    Returns
    -------
    BucketHistogram

    Raises
    ------
    TypeError
        Keys or weights of the wrong kind, or ``layout`` not a TopicLayout.
    ValueError
        A negative, non-finite or overflowing weight, or weights of another shape (named with
        its index).
    KeyEncodingError
        A str key that is not valid UTF-8 (``errors="strict"``).
    """
    if not isinstance(layout, TopicLayout):
        raise TypeError(f"layout must be a TopicLayout, not {describe(layout)}")
    kh = (
        keys_or_hashes
        if isinstance(keys_or_hashes, KeyHashes)
        else hash_keys(keys_or_hashes, errors=errors, threads=threads)
    )
    index, _ = layout.route_index(kh)
    index = np.asarray(index, dtype=np.int32).reshape(-1)
    shape = np.shape(kh.raw)
    has_key = np.asarray(kh.has_key, dtype=bool).reshape(-1)
    bucket_hash = np.ascontiguousarray(np.asarray(kh.bucket_hash).reshape(-1), dtype=np.uint16)
    ids = tuple(int(s.segment_id) for s in layout.active_segments)
    flat_w: np.ndarray | None = None
    if weights is not None:
        if shape == () and not isinstance(weights, (list, tuple, np.ndarray)):
            weights = np.asarray(weights)
        flat_w = weight_column(weights, shape)
        _check_weight_signs(flat_w, shape)
    dtype = np.dtype(np.int64) if flat_w is None else flat_w.dtype
    measure = "count" if flat_w is None else "weight"
    keyless = int(has_key.size - np.count_nonzero(has_key))
    positions = np.flatnonzero(has_key) if keyless else None
    if positions is not None:
        index, bucket_hash = index[positions], bucket_hash[positions]
        if flat_w is not None:
            flat_w = flat_w[positions]
    hists: dict[int, HashHistogram] = {}
    if index.size:
        sizes = np.bincount(index, minlength=len(ids))
        reached = np.flatnonzero(sizes)
        if reached.size > 1:
            # a stable counting order by segment (radix sort over 16-bit indexes): each segment's
            # messages become contiguous and keep their order, so float sums round as in one pass
            order = np.argsort(index.astype(np.uint16), kind="stable")
            bucket_hash = bucket_hash[order]
            if flat_w is not None:
                flat_w = flat_w[order]
        else:
            order = None
        start = 0
        for seg in reached.tolist():
            stop = start + int(sizes[seg])
            part = bucket_hash[start:stop]
            bins = np.zeros(RING, dtype=dtype)
            if flat_w is None:
                _layout.histogram(part, bins)
                total: int | float = stop - start
            elif dtype == np.int64:
                bad = _layout.weighted_histogram(part, flat_w[start:stop], bins)
                if bad >= 0:
                    at = _original_index(start + bad, order, positions)
                    raise ValueError(
                        f"the sum of the weights of segment {ids[seg]} overflows int64 at index "
                        f"{index_label(at, shape)}"
                    )
                total = exact_total(bins)
            else:
                _layout.weighted_histogram_f64(part, flat_w[start:stop], bins)
                check_float_total(bins)
                total = exact_total(bins)
            hists[ids[seg]] = HashHistogram._trusted(bins, measure, total)
            start = stop
    return BucketHistogram._make(ids, hists, keyless, measure, dtype)


def _check_weight_signs(flat: np.ndarray, shape: tuple[int, ...]) -> None:
    """Refuse a negative (or, for floats, non-finite) weight, naming the first one's index."""
    if flat.dtype == np.int64:
        bad = np.flatnonzero(flat < 0)
        if bad.size:
            i = int(bad[0])
            raise ValueError(f"weight {int(flat[i])} at index {index_label(i, shape)} is negative")
    else:
        bad = np.flatnonzero(~((flat >= 0.0) & np.isfinite(flat)))
        if bad.size:
            i = int(bad[0])
            raise ValueError(
                f"weight {float(flat[i])!r} at index {index_label(i, shape)} is not a finite non-negative number"
            )


def _original_index(i: int, order: np.ndarray | None, positions: np.ndarray | None) -> int:
    """Map a position in the sorted keyed column back to the message's index in the input."""
    if order is not None:
        i = int(order[i])
    if positions is not None:
        i = int(positions[i])
    return i
