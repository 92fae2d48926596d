"""What an append takes and what a read gives back: entry payloads, committed entries, stamp columns.

An entry is appended whole: its payload bytes, its record count (the offsets it occupies), opaque
metadata and, optionally, the bucket stamp it was batched with (``hash_min``/``hash_max`` and the
segment and bucket). The store keeps stamps as columns of its entry index so a dispatcher reads
them without touching payloads (:class:`StampColumns`).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from ..entries import Entry, EntryTable
from ..validation import INT64_MAX, check_hash, check_int

__all__ = [
    "MAX_RECORDS",
    "CommittedEntry",
    "EntryColumns",
    "EntryPayload",
    "StampColumns",
    "pack_messages",
    "unpack_messages",
]

#: Largest record count of one entry (stored as an unsigned 32-bit field).
MAX_RECORDS = 2**32 - 1
_MAX_FIELD = 2**32 - 1
_U32 = struct.Struct("<I")


def _frozen_bytes(value: Any, name: str) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        # the exact bytes are frozen now: a caller mutating its buffer later changes nothing
        return bytes(value)
    raise TypeError(f"{name} must be bytes, bytearray or memoryview, not {type(value).__name__}")


def _opt_hash(value: Any, name: str) -> int | None:
    return None if value is None else check_hash(value, name)


def _opt_int(value: Any, name: str, hi: int) -> int | None:
    return None if value is None else check_int(value, name, lo=0, hi=hi)


@dataclass(frozen=True, slots=True)
class EntryPayload:
    """One whole entry to append: payload bytes, record count, metadata and an optional stamp.

    Parameters
    ----------
    payload : bytes, bytearray or memoryview
        The entry's exact bytes (copied to ``bytes`` at construction).
    record_count : int
        Records in the entry, 1..2**32-1: the entry occupies that many offsets.
    metadata : bytes, bytearray or memoryview
        Opaque bytes kept with the entry (at most 2**32-1).
    hash_min, hash_max : int or None
        The bucket stamp, both given (0..0xFFFF, ``hash_min <= hash_max``) or both None.
    segment_id : int or None
        The segment the entry was batched for (>= 0), if known.
    bucket : int or None
        The bucket index within that segment (0..2**31-1), if known.

    Raises
    ------
    TypeError
        A field of the wrong type (``bool`` is not an int here).
    ValueError
        A count, stamp, segment or bucket out of range; only one of ``hash_min``/``hash_max``.
    """

    payload: bytes
    record_count: int = 1
    metadata: bytes = b""
    hash_min: int | None = None
    hash_max: int | None = None
    segment_id: int | None = None
    bucket: int | None = None

    def __post_init__(self) -> None:
        setattr_ = object.__setattr__
        setattr_(self, "payload", _frozen_bytes(self.payload, "payload"))
        setattr_(self, "metadata", _frozen_bytes(self.metadata, "metadata"))
        if len(self.metadata) > _MAX_FIELD:
            raise ValueError(f"metadata is {len(self.metadata)} bytes; at most {_MAX_FIELD}")
        setattr_(self, "record_count", check_int(self.record_count, "record_count", lo=1, hi=MAX_RECORDS))
        lo = _opt_hash(self.hash_min, "hash_min")
        hi = _opt_hash(self.hash_max, "hash_max")
        if (lo is None) != (hi is None):
            raise ValueError("a stamp needs both hash_min and hash_max (or neither)")
        if lo is not None and hi is not None and lo > hi:
            raise ValueError(f"stamp hash_min {lo:#06x} > hash_max {hi:#06x}")
        setattr_(self, "hash_min", lo)
        setattr_(self, "hash_max", hi)
        setattr_(self, "segment_id", _opt_int(self.segment_id, "segment_id", INT64_MAX))
        setattr_(self, "bucket", _opt_int(self.bucket, "bucket", 2**31 - 1))

    @property
    def stamped(self) -> bool:
        """Whether the entry carries a bucket stamp."""
        return self.hash_min is not None

    @classmethod
    def from_entry(cls, entry: Entry, *, metadata: bytes | bytearray | memoryview = b"") -> EntryPayload:
        """An entry from the producer (:class:`bucketcore.Entry` with payloads), stamp included.

        The payload is the entry's messages framed with :func:`pack_messages` (each message's
        length, then its bytes, in send order); ``record_count`` is the message count.

        Parameters
        ----------
        entry : bucketcore.Entry
            An entry that carries its messages' payloads (as :class:`EntryBucketBatcher` emits).
        metadata : bytes-like, optional
            Opaque bytes to keep with the entry.

        Returns
        -------
        EntryPayload

        Raises
        ------
        TypeError
            ``entry`` is not an Entry, or a message payload is not bytes-like.
        ValueError
            The entry carries no payloads (an :class:`EntryTable` row: use
            :meth:`StreamStore.append_table`), or their number differs from its message count.
        """
        if not isinstance(entry, Entry):
            raise TypeError(f"entry must be a bucketcore.Entry, not {type(entry).__name__}")
        if entry.payloads is None:
            raise ValueError(
                "entry carries no payloads (an EntryTable view): append the table "
                "with its payloads through StreamStore.append_table instead"
            )
        if len(entry.payloads) != entry.count:
            raise ValueError(f"entry has {len(entry.payloads)} payloads for {entry.count} messages")
        return cls(
            pack_messages(entry.payloads),
            entry.count,
            _frozen_bytes(metadata, "metadata"),
            entry.hash_min,
            entry.hash_max,
            entry.segment_id,
            entry.bucket,
        )


class CommittedEntry(NamedTuple):
    """A committed entry read back from a stream (its payload checksum verified); an immutable
    named tuple.

    Attributes
    ----------
    start_offset, end_offset : int
        The entry's offsets ``[start_offset, end_offset)``.
    record_count : int
        ``end_offset - start_offset``.
    payload, metadata : bytes
    hash_min, hash_max : int or None
        The bucket stamp (None for an unstamped entry).
    segment_id, bucket : int or None
        The segment and bucket the entry was batched for, if it was stamped with them.
    """

    start_offset: int
    end_offset: int
    record_count: int
    payload: bytes
    metadata: bytes
    hash_min: int | None = None
    hash_max: int | None = None
    segment_id: int | None = None
    bucket: int | None = None


class StampColumns:
    """The stamps of a range of committed entries, as read-only numpy columns (one row per entry).

    ``hash_min`` feeds :func:`bucketcore.route_entries` directly; where ``stamped`` is False the
    entry carries no stamp (its ``hash_min``/``hash_max`` are 0) and routes by its key's hash,
    which the caller supplies (``route_entries(selector, hash_min, stamped=stamped, key_hash=...)``).
    ``len()`` is the number of entries.

    Attributes
    ----------
    start_offset, end_offset : numpy.ndarray of int64
    hash_min, hash_max : numpy.ndarray of uint16
    stamped : numpy.ndarray of bool
    segment_id : numpy.ndarray of int64
        -1 where unknown.
    bucket : numpy.ndarray of int32
        -1 where unknown.
    """

    __slots__ = ("bucket", "end_offset", "hash_max", "hash_min", "segment_id", "stamped", "start_offset")
    start_offset: np.ndarray
    end_offset: np.ndarray
    hash_min: np.ndarray
    hash_max: np.ndarray
    stamped: np.ndarray
    segment_id: np.ndarray
    bucket: np.ndarray
    _NAMES = ("start_offset", "end_offset", "hash_min", "hash_max", "stamped", "segment_id", "bucket")

    def __init__(
        self,
        start_offset: np.ndarray,
        end_offset: np.ndarray,
        hash_min: np.ndarray,
        hash_max: np.ndarray,
        stamped: np.ndarray,
        segment_id: np.ndarray,
        bucket: np.ndarray,
    ) -> None:
        setattr_ = object.__setattr__
        for name, value in zip(
            self._NAMES, (start_offset, end_offset, hash_min, hash_max, stamped, segment_id, bucket), strict=True
        ):
            setattr_(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"StampColumns is read-only: cannot set {name!r}")

    def __len__(self) -> int:
        return int(self.start_offset.shape[0])

    @property
    def entry_count(self) -> int:
        """Number of entries (rows), as ``len()``."""
        return len(self)

    @property
    def record_count(self) -> np.ndarray:
        """Records per entry (``end_offset - start_offset``)."""
        return self.end_offset - self.start_offset

    def as_dict(self) -> dict[str, np.ndarray]:
        """All seven columns by name.

        Returns
        -------
        dict of str to numpy.ndarray
        """
        return {name: getattr(self, name) for name in self._NAMES}

    def __reduce__(self) -> tuple:
        return (StampColumns, tuple(getattr(self, name) for name in self._NAMES))

    def __repr__(self) -> str:
        return f"StampColumns(entries={len(self)})"


class EntryColumns:
    """An append's entries as frozen columns: what the WAL encoder and the entry index take.

    Built from a list of :class:`EntryPayload` (:meth:`from_payloads`) or straight from an
    :class:`EntryTable` and its message payloads (:meth:`from_table`).
    """

    __slots__ = (
        "bucket",
        "hash_max",
        "hash_min",
        "metadata",
        "payloads",
        "record_count",
        "segment_id",
        "stamped",
    )

    def __init__(
        self,
        payloads: list[bytes],
        metadata: list[bytes],
        record_count: np.ndarray,
        stamped: np.ndarray,
        hash_min: np.ndarray,
        hash_max: np.ndarray,
        segment_id: np.ndarray,
        bucket: np.ndarray,
    ) -> None:
        self.payloads = payloads
        self.metadata = metadata
        self.record_count = record_count
        self.stamped = stamped
        self.hash_min = hash_min
        self.hash_max = hash_max
        self.segment_id = segment_id
        self.bucket = bucket

    def __len__(self) -> int:
        return len(self.payloads)

    @classmethod
    def from_payloads(cls, entries: Any) -> EntryColumns:
        """Columns of a non-empty list or tuple of :class:`EntryPayload`.

        Parameters
        ----------
        entries : list or tuple of EntryPayload

        Returns
        -------
        EntryColumns

        Raises
        ------
        TypeError
            ``entries`` is not a list/tuple, or an item is not an EntryPayload (names its index).
        ValueError
            ``entries`` is empty.
        """
        if not isinstance(entries, (list, tuple)):
            raise TypeError(f"entries must be a list or tuple of EntryPayload, not {type(entries).__name__}")
        n = len(entries)
        if n == 0:
            raise ValueError("entries is empty: an append takes at least one entry")
        for i, e in enumerate(entries):
            if not isinstance(e, EntryPayload):
                raise TypeError(f"entries[{i}] must be an EntryPayload, not {type(e).__name__}")
        stamped = np.fromiter((e.hash_min is not None for e in entries), dtype=np.bool_, count=n)
        return cls(
            [e.payload for e in entries],
            [e.metadata for e in entries],
            np.fromiter((e.record_count for e in entries), dtype=np.int64, count=n),
            stamped,
            np.fromiter((e.hash_min or 0 for e in entries), dtype=np.uint16, count=n),
            np.fromiter((e.hash_max or 0 for e in entries), dtype=np.uint16, count=n),
            np.fromiter((-1 if e.segment_id is None else e.segment_id for e in entries), dtype=np.int64, count=n),
            np.fromiter((-1 if e.bucket is None else e.bucket for e in entries), dtype=np.int32, count=n),
        )

    @classmethod
    def from_table(
        cls, table: EntryTable, payloads: Sequence[Any], metadata: Sequence[Any] | None = None
    ) -> EntryColumns:
        """Columns of a producer's :class:`EntryTable` and the payloads of its messages.

        Entry ``i`` gets the messages ``payloads[j]`` for ``j`` in
        ``table.order[table.start[i]:table.start[i] + table.count[i]]``, framed with
        :func:`pack_messages`, its message count as record count and its stamp, segment and bucket.

        Parameters
        ----------
        table : EntryTable
        payloads : sequence of bytes-like
            One payload per message of the input the table was made from (message index order).
        metadata : sequence of bytes-like, optional
            One metadata value per entry; empty when omitted.

        Returns
        -------
        EntryColumns

        Raises
        ------
        TypeError
            Wrong types (names the message or entry index).
        ValueError
            An empty table, or ``payloads``/``metadata`` of the wrong length.
        """
        if not isinstance(table, EntryTable):
            raise TypeError(f"table must be a bucketcore.EntryTable, not {type(table).__name__}")
        if isinstance(payloads, (str, bytes, bytearray, memoryview)) or not isinstance(payloads, Sequence):
            raise TypeError(f"payloads must be a sequence of bytes-like, not {type(payloads).__name__}")
        n = len(table)
        if n == 0:
            raise ValueError("the EntryTable is empty: an append takes at least one entry")
        messages = int(table.order.shape[0])
        if len(payloads) != messages:
            raise ValueError(f"payloads has {len(payloads)} items; the table's entries hold {messages} messages")
        for j, p in enumerate(payloads):
            if not isinstance(p, (bytes, bytearray, memoryview)):
                raise TypeError(f"payloads[{j}] must be bytes, bytearray or memoryview, not {type(p).__name__}")
        if metadata is None:
            meta = [b""] * n
        else:
            if isinstance(metadata, (str, bytes, bytearray, memoryview)) or not isinstance(metadata, Sequence):
                raise TypeError(f"metadata must be a sequence of bytes-like, not {type(metadata).__name__}")
            if len(metadata) != n:
                raise ValueError(f"metadata has {len(metadata)} items for {n} entries")
            meta = [_frozen_bytes(m, f"metadata[{i}]") for i, m in enumerate(metadata)]
        order = table.order.tolist()
        start = table.start.tolist()
        count = table.count.tolist()
        framed = [pack_messages([payloads[j] for j in order[s : s + c]]) for s, c in zip(start, count, strict=True)]
        return cls(
            framed,
            meta,
            np.asarray(table.count, dtype=np.int64).copy(),
            np.ones(n, dtype=np.bool_),
            np.asarray(table.hash_min, dtype=np.uint16).copy(),
            np.asarray(table.hash_max, dtype=np.uint16).copy(),
            np.asarray(table.segment_id, dtype=np.int64).copy(),
            np.asarray(table.bucket, dtype=np.int32).copy(),
        )


def pack_messages(payloads: Sequence[Any]) -> bytes:
    """Frame a batch of message payloads as one entry payload: per message, its length (4 bytes,
    little-endian) then its bytes, in order.

    Parameters
    ----------
    payloads : sequence of bytes-like

    Returns
    -------
    bytes

    Raises
    ------
    TypeError
        An item is not bytes-like (names its index).
    ValueError
        A message longer than 2**32-1 bytes.
    """
    parts: list[bytes] = []
    for i, p in enumerate(payloads):
        if isinstance(p, memoryview):
            p = p.tobytes()
        elif not isinstance(p, (bytes, bytearray)):
            raise TypeError(f"payloads[{i}] must be bytes, bytearray or memoryview, not {type(p).__name__}")
        if len(p) > _MAX_FIELD:
            raise ValueError(f"payloads[{i}] is {len(p)} bytes; at most {_MAX_FIELD}")
        parts.append(_U32.pack(len(p)))
        parts.append(bytes(p))
    return b"".join(parts)


def unpack_messages(payload: bytes | bytearray | memoryview) -> list[bytes]:
    """Split an entry payload made by :func:`pack_messages` back into its messages.

    Parameters
    ----------
    payload : bytes-like

    Returns
    -------
    list of bytes

    Raises
    ------
    TypeError
        ``payload`` is not bytes-like.
    ValueError
        The framing is cut short or a length runs past the end (names the byte position).
    """
    data = memoryview(_frozen_bytes(payload, "payload"))
    out: list[bytes] = []
    pos = 0
    end = len(data)
    while pos < end:
        if end - pos < 4:
            raise ValueError(f"payload framing cut short at byte {pos}: {end - pos} bytes left, a length needs 4")
        (size,) = _U32.unpack_from(data, pos)
        pos += 4
        if size > end - pos:
            raise ValueError(f"message at byte {pos - 4} declares {size} bytes; only {end - pos} follow")
        out.append(bytes(data[pos : pos + size]))
        pos += size
    return out
