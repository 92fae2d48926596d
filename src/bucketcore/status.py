"""Kernel status codes and the one function that turns a failure into the exception a user sees.

Every kernel reports failure the same way: a :data:`Status` value (``status.h``) and the index of
the element it concerns. :func:`check_status` is the only place that maps a status to an error
type and message; callers pass what the message should name (the keys, the column, the stamp or
the entry involved).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from _bucketcore._status import bc_status as Status

from .errors import KeyEncodingError, MalformedStampError
from .validation import MAX_HASH, index_label

__all__ = ["Status", "check_status"]

# column status: (the argument holding the bad value, message)
_COLUMN_MESSAGES = {
    Status.BC_ERR_SEGMENT_INDEX: ("segments", "segment index {value} at message {index} is out of range"),
    Status.BC_ERR_BUCKET_INDEX: ("buckets", "bucket index {value} at message {index} is out of range for its segment"),
    Status.BC_ERR_GLOBAL_INDEX: ("buckets", "global bucket index {value} at message {index} is out of range"),
    Status.BC_ERR_NEGATIVE_SIZE: ("sizes", "size {value} at message {index} is negative"),
}

_ACK_REASONS = {
    Status.BC_ERR_ACK_UNKNOWN: "not a dispatched entry of this segment, or already acked",
    Status.BC_ERR_ACK_ALREADY: "already acked",
    Status.BC_ERR_ACK_QUEUED: "queued for (re)delivery, not delivered",
}


def check_status(
    status: int,
    index: int = -1,
    *,
    keys: Any = None,
    shape: tuple[int, ...] | None = None,
    allow_none: bool = True,
    segments: Any = None,
    buckets: Any = None,
    sizes: Any = None,
    hash_min: Any = None,
    hash_max: Any = None,
    entry: int | None = None,
    consumer: object = None,
    holder: object = None,
) -> None:
    """Raise the error a kernel's status stands for; return when it is ``BC_OK``.

    Parameters
    ----------
    status
        A :data:`Status` value returned by a kernel.
    index
        Position of the element the status concerns (a flat index into ``keys`` or ``column``,
        or an entry's position in the stamp columns).
    keys, shape, allow_none
        Key errors: the keys that were passed, their shape (to name an N-D index) and whether
        ``None`` was an accepted (keyless) key.
    segments, buckets, sizes
        Column errors: the segment index, bucket index (or global bucket index) and size columns
        the kernel read; the one holding the bad value is named.
    hash_min, hash_max
        Stamp errors: the stamp columns as passed.
    entry, consumer, holder
        Ack errors: the entry id, the consumer acking it and, for an entry held elsewhere, the
        consumer that holds it (shown with ``repr``).

    Raises
    ------
    KeyEncodingError
        A str key with a surrogate code point under ``errors="strict"``.
    TypeError
        A key of another type, or ``None`` where a key is required.
    ValueError
        A key too long to hash, corrupt Arrow offsets or views, a dictionary index outside its
        dictionary, a released or strided memoryview key, an unreadable StringDType item, an
        out-of-range index or a negative size, or an entry acked twice in one call.
    MalformedStampError
        A stamp outside ``0..0xFFFF`` or with ``hash_min > hash_max``.
    KeyError
        An ack of an entry that is not pending on the consumer.
    RuntimeError
        A key list changed size while it was hashed, or an internal status leaked.
    MemoryError
        The kernel ran out of memory.
    """
    if status == Status.BC_OK:
        return
    if status == Status.BC_ERR_NOMEM:
        raise MemoryError()
    label = index_label(index, shape if shape is not None else ())
    if status == Status.BC_ERR_SURROGATE:
        raise KeyEncodingError(
            f"key at index {label} contains a surrogate code point (U+D800..U+DFFF) and is not valid "
            "UTF-8; pass errors='replace' to encode it the way Java's String.getBytes(UTF_8) does "
            "(an unpaired surrogate becomes '?', a high+low pair one supplementary character)",
            index,
        )
    if status == Status.BC_ERR_KEY_NONE:
        raise TypeError(
            f"key at index {label} is None (a missing key: None, NaN, pandas.NA or an Arrow null): "
            "murmur3_32 has no hash for a keyless message; use hash_keys, which reports it as has_key=False"
        )
    if status == Status.BC_ERR_KEY_TOO_LONG:
        raise ValueError(f"key at index {label} is longer than 2 GiB of UTF-8, the largest key Pulsar can hash")
    if status == Status.BC_ERR_ARROW_OFFSETS:
        raise ValueError(f"Arrow key array has corrupt offsets at index {label}")
    if status == Status.BC_ERR_ARROW_VIEW:
        raise ValueError(
            f"Arrow key array has a corrupt string/binary view at index {label}: a negative length, or a "
            "data buffer index or byte range outside the array's data buffers"
        )
    if status == Status.BC_ERR_DICT_INDEX:
        raise ValueError(f"Arrow dictionary-encoded key array has an index outside its dictionary at index {label}")
    if status == Status.BC_ERR_KEY_BUFFER:
        raise ValueError(
            f"key at index {label} is a memoryview that is released or not C-contiguous; a buffer key is "
            "hashed as its bytes in C order (pass bytes(view) for a strided one)"
        )
    if status == Status.BC_ERR_NPSTRING:
        raise ValueError(f"StringDType key at index {label} could not be unpacked by numpy (corrupt string data)")
    if status == Status.BC_ERR_LIST_CHANGED:
        raise RuntimeError(f"the key list changed size while it was being hashed (at index {label})")
    if status == Status.BC_ERR_KEY_TYPE:
        item = keys[index] if isinstance(keys, (list, tuple)) else np.ravel(keys)[index]
        expected = "str, bytes or None" if allow_none else "str or bytes"
        raise TypeError(f"key at index {label} has type {type(item).__name__}; expected {expected}")
    column_message = _COLUMN_MESSAGES.get(status)
    if column_message is not None:
        name, message = column_message
        column = {"segments": segments, "buckets": buckets, "sizes": sizes}[name]
        raise ValueError(message.format(value=column[index], index=index))
    if status == Status.BC_ERR_STAMP_RANGE:
        lo = int(hash_min[index])
        what = f"hash_min={lo}" if not 0 <= lo <= MAX_HASH else f"hash_max={int(hash_max[index])}"
        raise MalformedStampError(f"entry at index {index} has a malformed stamp: {what} is outside 0..0xFFFF", index)
    if status == Status.BC_ERR_STAMP_ORDER:
        lo, hi = int(hash_min[index]), int(hash_max[index])
        raise MalformedStampError(
            f"entry at index {index} has a malformed stamp: hash_min={lo:#06x} > hash_max={hi:#06x}", index
        )
    if status == Status.BC_ERR_ACK_DUPLICATE:
        raise ValueError(f"entry {entry} is acked twice in one call")
    if status == Status.BC_ERR_ACK_OTHER:
        raise KeyError(f"entry {entry} is not pending on consumer {consumer!r}: pending on consumer {holder!r}")
    reason = _ACK_REASONS.get(status)
    if reason is not None:
        raise KeyError(f"entry {entry} is not pending on consumer {consumer!r}: {reason}")
    raise RuntimeError(f"internal error: kernel status {Status(status).name} at index {index}")
