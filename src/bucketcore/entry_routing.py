"""Vectorised, GIL-free routing of entry columns to a selector's consumers (docs/design.md, "Dispatch").

:func:`route_entries` routes whole entries (stamped: by the bucket of ``hash_min``; unstamped:
by the bucket of the key's low 16 bits) to indexes into ``selector.consumers``;
:func:`sticky_hashes` gives the hash a broker records per entry; :func:`fits_one_bucket` tells
which stamps stay inside one bucket of another boundary list. No Python object is made per
entry. The argument rules for the stamp and key columns are written once here
(:func:`_route_input`) and used by the stateful :class:`bucketcore.Dispatcher` too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from _bucketcore import _entry_routing

from .hashing import KeyHashes
from .selector import BucketsLike, EntryBucketSelector, _as_buckets
from .status import Status, check_status
from .validation import MAX_HASH, MAX_RAW_HASH, bool_column, first_outside, int_column

__all__ = ["NO_CONSUMER", "MALFORMED", "route_entries", "sticky_hashes", "fits_one_bucket"]

#: Slot of an entry no consumer can take (the segment has no sharer right now).
NO_CONSUMER: int = _entry_routing.NO_CONSUMER
#: Slot of an entry whose stamp is malformed, with ``malformed="mark"``.
MALFORMED: int = _entry_routing.MALFORMED


def _check_route_arguments(hash_min: Any, hash_max: Any, key_hash: Any, stamped: Any) -> None:
    """Which of the stamp and key arguments go together: the one rule for column calls
    (:func:`_route_input`) and for one entry given as scalars (``Dispatcher.offer``)."""
    if hash_min is None:
        # no stamp at all: every entry routes by its key hash
        if key_hash is None:
            raise TypeError("pass hash_min (stamped entries) or key_hash (unstamped entries)")
        if stamped is not None or hash_max is not None:
            raise TypeError("stamped and hash_max need hash_min")
    elif stamped is None and key_hash is not None:
        raise TypeError(
            "key_hash routes only unstamped entries: pass stamped= (a bool column) to say which entries carry a stamp"
        )


def _unstamped_without_key_hash(index: int) -> ValueError:
    """The error for an entry marked unstamped when no key hash was given."""
    return ValueError(f"entry at index {index} is unstamped and no key_hash was given")


def _key_hash_outside(index: int, value: int) -> ValueError:
    """The error for a key hash outside the raw 32-bit range."""
    return ValueError(f"key_hash at index {index} is {value}, outside 0..0xFFFFFFFF")


def _stamp_column(values: Any, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(original column, contiguous uint16 copy/view, mask of values outside 0..0xFFFF or None).

    Values outside the range are not an error here: the kernel reports the first malformed
    stamp (or, with ``malformed="mark"``, marks every one), so the mask travels with the column.
    """
    arr = int_column(values, name)
    if arr.dtype == np.uint16:
        return arr, np.ascontiguousarray(arr), None
    flagged = None if first_outside(arr, 0, MAX_HASH) is None else (arr < 0) | (arr > MAX_HASH)
    return arr, arr.astype(np.uint16), flagged


def _key_hash_column(values: Any, n: int | None = None) -> np.ndarray:
    if isinstance(values, KeyHashes):
        values = values.raw
    arr = int_column(values, "key_hash")
    if n is not None and arr.size != n:
        raise ValueError(f"key_hash has {arr.size} items; expected {n}")
    bad = first_outside(arr, 0, MAX_RAW_HASH)
    if bad is not None:
        raise _key_hash_outside(bad, int(arr[bad]))
    return np.ascontiguousarray(arr, dtype=np.uint32)


@dataclass
class _RouteInput:
    n: int
    hash_min: np.ndarray  # original, for messages
    hash_max: np.ndarray | None
    lo: np.ndarray  # uint16
    hi: np.ndarray | None
    stamped: np.ndarray | None  # uint8
    key_hash: np.ndarray | None  # uint32
    flagged: np.ndarray | None  # uint8


def _route_input(hash_min: Any, hash_max: Any, key_hash: Any, stamped: Any) -> _RouteInput:
    """Validated kernel columns of one routing call (see :func:`route_entries` for the rules)."""
    _check_route_arguments(hash_min, hash_max, key_hash, stamped)
    if hash_min is None:
        keys_only = _key_hash_column(key_hash)
        n = keys_only.size
        zeros = np.zeros(n, dtype=np.uint16)
        return _RouteInput(n, zeros, None, zeros, None, np.zeros(n, dtype=np.uint8), keys_only, None)
    original, lo, flagged = _stamp_column(hash_min, "hash_min")
    n = lo.size
    hi: np.ndarray | None = None
    original_max: np.ndarray | None = None
    if hash_max is not None:
        original_max, hi, flagged_max = _stamp_column(hash_max, "hash_max")
        if hi.size != n:
            raise ValueError(f"hash_max has {hi.size} items; hash_min has {n}")
        if flagged_max is not None:
            flagged = flagged_max if flagged is None else flagged | flagged_max
    st: np.ndarray | None = None
    kh: np.ndarray | None = None
    if stamped is not None:
        st = bool_column(stamped, "stamped", n)
        if key_hash is None:
            if n and not st.all():
                raise _unstamped_without_key_hash(int(np.flatnonzero(st == 0)[0]))
            st = None  # every entry is stamped after all
        else:
            kh = _key_hash_column(key_hash, n)
    return _RouteInput(
        n,
        original,
        original_max,
        lo,
        hi,
        st,
        kh,
        None if flagged is None else np.ascontiguousarray(flagged, dtype=np.uint8),
    )


def _raise_malformed(status: int, index: int, inp: _RouteInput) -> None:
    check_status(status, index, hash_min=inp.hash_min, hash_max=inp.hash_max)


def route_entries(
    selector: EntryBucketSelector,
    hash_min: Any,
    *,
    key_hash: Any = None,
    stamped: Any = None,
    hash_max: Any = None,
    malformed: str = "raise",
) -> np.ndarray:
    """Route entries whole to the consumers that own their buckets.

    Parameters
    ----------
    selector : EntryBucketSelector
        The segment's selector; its counters ``routed_entries``, ``straddling_entries`` and
        ``malformed_entries`` are updated.
    hash_min : array-like of int or None
        The stamps' minimum bucket hash; a stamped entry routes by the bucket of ``hash_min``.
        None: no entry is stamped.
    key_hash : array-like of int or KeyHashes, optional
        The message key's Murmur3 hash (raw 32-bit, or just its low 16 bits), or a
        :class:`KeyHashes`; required when some entry is unstamped. An unstamped entry routes by the
        bucket of ``key_hash & 0xFFFF`` (the bucket the producer would have stamped).
    stamped : array-like of bool, optional
        Which entries carry a stamp; None means every entry (or none, when ``hash_min`` is None).
    hash_max : array-like of int, optional
        The stamps' maximum; checked (``hash_min <= hash_max``) and used to count entries whose
        stamp crosses a boundary of the selector's list (they still route whole by ``hash_min``).
    malformed : {"raise", "mark"}, optional
        What a malformed stamp (outside 0..0xFFFF, or ``hash_min > hash_max``) does: raise before
        anything is counted, or get slot :data:`MALFORMED` (-2) while the rest route normally.

    Returns
    -------
    numpy.ndarray
        ``np.int32`` index into ``selector.consumers`` per entry; :data:`NO_CONSUMER` (-1) where no
        consumer owns the bucket.

    Raises
    ------
    TypeError
        A column of the wrong type (bools among ints, floats, a non-bool ``stamped``), or an
        argument combination that cannot route (no ``hash_min`` and no ``key_hash``; ``key_hash``
        without ``stamped``; ``stamped`` or ``hash_max`` without ``hash_min``).
    ValueError
        Columns of different lengths, a key hash outside 0..0xFFFFFFFF, an unstamped entry with no
        key hash, or an unknown ``malformed`` (each naming the entry's index).
    MalformedStampError
        A malformed stamp with ``malformed="raise"``, naming the entry's index.
    """
    if not isinstance(selector, EntryBucketSelector):
        raise TypeError(f"selector must be an EntryBucketSelector, not {type(selector).__name__}")
    if malformed not in ("raise", "mark"):
        raise ValueError(f"malformed must be 'raise' or 'mark', not {malformed!r}")
    inp = _route_input(hash_min, hash_max, key_hash, stamped)
    out = np.empty(inp.n, dtype=np.int32)
    status, index, straddling, bad = _entry_routing.route(
        selector._table,
        selector._owner,
        inp.lo,
        inp.hi,
        inp.stamped,
        inp.key_hash,
        inp.flagged,
        out,
        None,
        None,
        malformed == "mark",
    )
    if status != Status.BC_OK:
        _raise_malformed(status, index, inp)
    selector.routed_entries += inp.n - bad
    selector.straddling_entries += straddling
    selector.malformed_entries += bad
    return out


_ZERO_TABLE = np.zeros(65536, dtype=np.uint16)
_ZERO_TABLE.flags.writeable = False


def sticky_hashes(hash_min: Any, *, key_hash: Any = None, stamped: Any = None) -> np.ndarray:
    """The hash a broker records for each entry: the stamp's ``hash_min`` or the key's low 16 bits,
    with 0 nudged to 1 (a Pulsar broker reads 0 as "no hash").

    This is the hash exposed to pending-ack and redelivery bookkeeping; routing itself uses the
    bucket of the un-nudged value (see :func:`route_entries`).

    Parameters
    ----------
    hash_min, key_hash, stamped
        As :func:`route_entries`.

    Returns
    -------
    numpy.ndarray
        ``np.uint16``, one per entry.

    Raises
    ------
    TypeError, ValueError, MalformedStampError
        As :func:`route_entries`.
    """
    inp = _route_input(hash_min, None, key_hash, stamped)
    out = np.empty(inp.n, dtype=np.uint16)
    status, index, _, _ = _entry_routing.route(
        _ZERO_TABLE, None, inp.lo, None, inp.stamped, inp.key_hash, inp.flagged, None, None, out, False
    )
    if status != Status.BC_OK:
        _raise_malformed(status, index, inp)
    return out


def fits_one_bucket(buckets: BucketsLike, hash_min: Any, hash_max: Any) -> np.ndarray:
    """Per stamped entry, whether ``[hash_min, hash_max]`` lies inside one bucket of ``buckets``.

    Such an entry still routes whole under that boundary list (geo-replication into another
    layout, a rebucketed successor).

    Parameters
    ----------
    buckets : Buckets or sequence of int
        The boundary list to test against.
    hash_min, hash_max : array-like of int
        The stamps, one per entry.

    Returns
    -------
    numpy.ndarray
        ``np.bool_``, one per entry.

    Raises
    ------
    TypeError
        A column of the wrong type, or ``buckets`` of the wrong type.
    ValueError
        Columns of different lengths.
    MalformedStampError
        A malformed stamp, naming its index.
    """
    buckets = _as_buckets(buckets)
    original_min, lo, flagged = _stamp_column(hash_min, "hash_min")
    original_max, hi, flagged_max = _stamp_column(hash_max, "hash_max")
    if hi.size != lo.size:
        raise ValueError(f"hash_max has {hi.size} items; hash_min has {lo.size}")
    if flagged_max is not None:
        flagged = flagged_max if flagged is None else flagged | flagged_max
    out = np.empty(lo.size, dtype=np.bool_)
    table = buckets.lookup_table() if buckets.table_pays_off(lo.size) else None
    status, index = _entry_routing.fits(
        buckets.splits_array,
        table,
        lo,
        hi,
        None if flagged is None else np.ascontiguousarray(flagged, dtype=np.uint8),
        out.view(np.uint8),
    )
    if status != Status.BC_OK:
        _raise_malformed(status, index, _RouteInput(lo.size, original_min, original_max, lo, hi, None, None, None))
    return out
