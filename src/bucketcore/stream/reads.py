"""The read side of the stream store: committed entries and their stamp columns, from the entry index.

Reads see only what a head CAS committed (the index rows it inserted). Every index row is checked
(``rows.py``) before anything is taken from it; an entry's payload is checked against its CRC32C
and its object's declared length; stamps come from the index alone.
"""

from __future__ import annotations

import numpy as np

from ..errors import ChecksumError, MissingObjectError, OffsetOutOfRangeError, UnknownStreamError
from .heads import STAMP_DTYPE, HeadStore
from .payload import CommittedEntry, StampColumns
from .records import StreamHead
from .rows import check_follows, checked_locations, checked_stamps
from .wal import ObjectWal, crc32c

__all__ = ["require_head", "read_entries", "read_stamp_columns"]

# positions in the scanned rows: 5 onwards, in this order
_READ_COLUMNS = ("stamps", "locations", "metadata", "stamps_crc", "locations_crc")
# CommittedEntry is a named tuple: built straight from its fields' tuple in the per-entry loop
_new = tuple.__new__
_STAMP_COLUMNS = ("stamps", "stamps_crc")


def require_head(heads: HeadStore, stream_id: str) -> StreamHead:
    """The stream's head.

    Parameters
    ----------
    heads : HeadStore
    stream_id : str

    Returns
    -------
    StreamHead

    Raises
    ------
    UnknownStreamError
        No such stream.
    """
    head = heads.read_head(stream_id)
    if head is None:
        raise UnknownStreamError(f"no stream {stream_id!r} in this store")
    return head


def _readable_head(heads: HeadStore, stream_id: str, from_offset: int) -> StreamHead:
    head = require_head(heads, stream_id)
    if not head.log_start <= from_offset <= head.committed_end:
        raise OffsetOutOfRangeError(
            f"from_offset {from_offset} is outside stream {stream_id!r}'s readable range "
            f"[{head.log_start}, {head.committed_end}]",
            head.log_start,
            head.committed_end,
        )
    return head


def _trimmed_meanwhile(heads: HeadStore, stream_id: str, from_offset: int) -> OffsetOutOfRangeError:
    """The error for a read whose start was trimmed between its range check and its scan."""
    head = require_head(heads, stream_id)
    return OffsetOutOfRangeError(
        f"from_offset {from_offset} was trimmed while being read; stream {stream_id!r}'s readable "
        f"range is now [{head.log_start}, {head.committed_end}]",
        head.log_start,
        head.committed_end,
    )


def read_entries(
    heads: HeadStore, wal: ObjectWal, stream_id: str, from_offset: int, max_entries: int
) -> list[CommittedEntry]:
    """Up to ``max_entries`` committed entries from ``from_offset`` on (arguments already valid).

    Parameters
    ----------
    heads : HeadStore
    wal : ObjectWal
    stream_id : str
    from_offset : int
    max_entries : int

    Returns
    -------
    list of CommittedEntry

    Raises
    ------
    UnknownStreamError, OffsetOutOfRangeError, ChecksumError, MissingObjectError, CorruptionError
        As :meth:`StreamStore.read`.
    """
    head = _readable_head(heads, stream_id, from_offset)
    out: list[CommittedEntry] = []
    seen = False
    prev: tuple | None = None
    batches = heads.scan_index(stream_id, from_offset, _READ_COLUMNS, 2)
    try:
        for rows in batches:
            check_follows(stream_id, prev, rows[0])
            cols = checked_stamps(stream_id, rows, 5, 8)
            if not seen:
                seen = True
                if rows[0][0] > from_offset:
                    raise _trimmed_meanwhile(heads, stream_id, from_offset)
            at = 0
            for row in rows:
                stamps = {name: c[at : at + row[2]] for name, c in cols.items()}
                at += row[2]
                try:
                    _read_row(stream_id, wal, row, stamps, from_offset, max_entries - len(out), out)
                except MissingObjectError:
                    # trimmed and collected after the scan found it, or really lost
                    if require_head(heads, stream_id).log_start >= row[1]:
                        raise _trimmed_meanwhile(heads, stream_id, from_offset) from None
                    raise
                if len(out) >= max_entries:
                    return out
            prev = rows[-1]
    finally:
        batches.close()  # type: ignore[attr-defined]
    if not seen and from_offset < head.committed_end:
        raise _trimmed_meanwhile(heads, stream_id, from_offset)
    return out


def _read_row(
    stream_id: str,
    wal: ObjectWal,
    row: tuple,
    stamps: dict[str, np.ndarray],
    from_offset: int,
    room: int,
    out: list[CommittedEntry],
) -> None:
    _, end, n, key, length, _, b_locations, metadata, stamps_crc, locations_crc = row
    locations = checked_locations(stream_id, row, b_locations, metadata, stamps_crc, locations_crc)
    first = max(int(np.searchsorted(stamps["start_offset"], from_offset, side="right")) - 1, 0)
    last = min(n, first + room)
    sl = slice(first, last)
    starts = stamps["start_offset"][first : last + 1].tolist()
    if last == n:
        starts.append(end)
    off = locations["payload_off"][sl].tolist()
    size = locations["payload_len"][sl].tolist()
    crc = locations["payload_crc"][sl].tolist()
    meta_off = locations["meta_off"][first : last + 1].tolist()
    if last == n:
        meta_off.append(len(metadata))
    stamped = stamps["stamped"][sl].tolist()
    h_lo = stamps["hash_min"][sl].tolist()
    h_hi = stamps["hash_max"][sl].tolist()
    seg = stamps["segment_id"][sl].tolist()
    bucket = stamps["bucket"][sl].tolist()
    lo_b = off[0]
    span = wal.read_span(key, length, lo_b, off[-1] + size[-1])
    append = out.append
    for i in range(last - first):
        p0 = off[i] - lo_b
        payload = span[p0 : p0 + size[i]]
        if crc32c(payload) != crc[i]:
            raise ChecksumError(
                f"WAL object {key!r}: the entry at offset {starts[i]} fails its CRC32C check (recorded {crc[i]:#010x})"
            )
        s, e = starts[i], starts[i + 1]
        meta = metadata[meta_off[i] : meta_off[i + 1]]
        segment = None if seg[i] < 0 else seg[i]
        bkt = None if bucket[i] < 0 else bucket[i]
        if stamped[i]:
            append(_new(CommittedEntry, (s, e, e - s, payload, meta, h_lo[i], h_hi[i], segment, bkt)))
        else:
            append(_new(CommittedEntry, (s, e, e - s, payload, meta, None, None, segment, bkt)))


def read_stamp_columns(heads: HeadStore, stream_id: str, from_offset: int, limit: int | None) -> StampColumns:
    """The stamp columns of up to ``limit`` committed entries from ``from_offset`` on (arguments
    already valid; ``limit`` None: to the committed end).

    Parameters
    ----------
    heads : HeadStore
    stream_id : str
    from_offset : int
    limit : int or None

    Returns
    -------
    StampColumns

    Raises
    ------
    UnknownStreamError, OffsetOutOfRangeError, CorruptionError
        As :meth:`StreamStore.read_stamps`.
    """
    head = _readable_head(heads, stream_id, from_offset)
    parts: list[dict[str, np.ndarray]] = []
    last_end = from_offset
    have = 0
    skip = 0
    prev: tuple | None = None
    # the first batch is sized for a short read; the head store grows later ones
    batches = heads.scan_index(
        stream_id, from_offset, _STAMP_COLUMNS, 4096 if limit is None else min(4096, 1 + limit // 64)
    )
    try:
        for rows in batches:
            check_follows(stream_id, prev, rows[0])
            part = checked_stamps(stream_id, rows, 5, 6)
            if prev is None:
                if rows[0][0] > from_offset:
                    raise _trimmed_meanwhile(heads, stream_id, from_offset)
                starts0 = part["start_offset"][: rows[0][2]]
                skip = max(int(np.searchsorted(starts0, from_offset, side="right")) - 1, 0)
                have = -skip
            parts.append(part)
            have += part["start_offset"].shape[0]
            prev = rows[-1]
            last_end = prev[1]
            if limit is not None and have >= limit:
                break
    finally:
        batches.close()  # type: ignore[attr-defined]
    if prev is None and from_offset < head.committed_end:
        raise _trimmed_meanwhile(heads, stream_id, from_offset)
    names = STAMP_DTYPE.names or ()
    if len(parts) == 1:
        fetched = parts[0]
    elif parts:
        fetched = {name: np.concatenate([p[name] for p in parts]) for name in names}
    else:
        fetched = {name: np.empty(0, dtype=STAMP_DTYPE[name]) for name in names}
    total = fetched["start_offset"].shape[0]
    sl = slice(skip, None if limit is None else skip + limit)
    # the checked columns are aligned already: the result is slices of them, no further copy
    starts = fetched["start_offset"][sl]
    n = starts.shape[0]
    ends = np.empty(n, dtype=np.int64)
    if n:
        # appends are contiguous: an entry ends where the next one starts
        ends[:-1] = starts[1:]
        after = skip + n
        ends[-1] = fetched["start_offset"][after] if after < total else last_end
    cols = [
        starts,
        ends,
        fetched["hash_min"][sl],
        fetched["hash_max"][sl],
        fetched["stamped"][sl].view(np.bool_),
        fetched["segment_id"][sl],
        fetched["bucket"][sl],
    ]
    for c in cols:
        c.setflags(write=False)
    return StampColumns(*cols)
