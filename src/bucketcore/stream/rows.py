"""Entry-index rows read back from a head store, checked before anything is taken from them.

An index row (one committed append) packs its entries into BLOBs (``heads.py``: ``stamps``,
``locations``, ``metadata``). A damaged row must never turn into wrong answers — payloads at the
wrong offsets, wrong stamps — nor into numpy's or Python's own errors: every reader takes the
row's records from here, which checks every structural invariant the append wrote and raises
:class:`~bucketcore.errors.CorruptionError` naming the stream, the row (by its first offset) and
the field otherwise.

The invariants of a row ``[start, end)`` of ``n`` entries in an object of ``length`` bytes:

- ``n >= 1``, ``start < end``; ``stamps`` is exactly ``n`` records of :data:`STAMP_DTYPE` and
  ``locations`` exactly ``n`` of :data:`LOCATION_DTYPE`;
- the entries' start offsets begin at ``start`` and strictly increase, the last below ``end``
  (every entry holds at least one record, so the record count is ``end - start``); consecutive
  rows of a scan are contiguous (a row's end is the next row's start);
- ``stamped`` is 0 or 1; a stamped entry has ``hash_min <= hash_max``, an unstamped one zeros;
  ``segment_id`` and ``bucket`` are -1 (none) or more;
- payloads lie inside the object's data (before its 4-byte trailer), in entry order without
  overlapping; metadata offsets start at 0 and never decrease nor pass the ``metadata`` BLOB's end.

A row written by schema 2 or later also carries two CRC32Cs (:func:`row_checksums`), checked after
the structure: ``stamps_crc`` over the stream id, the row's range, entry count, object key and
length and its ``stamps``; ``locations_crc`` continuing that one over ``locations`` and
``metadata``. They catch damage that leaves the structure whole (a start offset moved inside its
range, a changed stamp or payload position). Rows of schema 1 hold NULL there and are checked by
their structure alone.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import google_crc32c
import numpy as np

from ..errors import CorruptionError
from .heads import LOCATION_DTYPE, STAMP_DTYPE

__all__ = ["check_follows", "checked_locations", "checked_stamps", "row_checksums", "row_error", "schema_version"]

# positions in a scan_index row: (start_offset, end_offset, entry_count, object_key, object_length, *columns)
_START, _END, _COUNT, _KEY, _LENGTH = range(5)
_TRAILER = 4
_SCALARS = ((_START, "start_offset"), (_END, "end_offset"), (_COUNT, "entry_count"), (_LENGTH, "object_length"))


def schema_version(stored: object, where: str) -> int:
    """The schema version a head store's ``meta`` table holds, as a number.

    Parameters
    ----------
    stored : object
        The stored value (text).
    where : str
        The head store (file or server), for the message.

    Returns
    -------
    int

    Raises
    ------
    CorruptionError
        The value is not a decimal number.
    """
    if isinstance(stored, str) and stored.isascii() and stored.isdigit():
        return int(stored)
    raise CorruptionError(f"the head store {where} is damaged: its schema version {stored!r} is not a number")


_HEADER = struct.Struct("<qqqq")  # start offset, end offset, entry count, object length
_U16 = struct.Struct("<H")


def row_checksums(
    stream_id: str,
    start: int,
    end: int,
    entry_count: int,
    object_key: str,
    object_length: int,
    stamps: bytes,
    locations: bytes,
    metadata: bytes,
) -> tuple[int, int]:
    """The two checksums of an index row: ``(stamps_crc, locations_crc)``.

    ``stamps_crc`` is the CRC32C of the stream id and object key (each as UTF-8 with its u16
    length), the start and end offsets, entry count and object length (i64 each, little-endian)
    and the ``stamps`` BLOB; ``locations_crc`` continues ``stamps_crc`` over ``locations`` and
    then ``metadata``.

    Parameters
    ----------
    stream_id : str
    start, end, entry_count : int
    object_key : str
    object_length : int
    stamps, locations, metadata : bytes
        The row's BLOBs.

    Returns
    -------
    tuple of int
        Unsigned 32-bit checksums.
    """
    head = _head_crc(_stream_prefix(stream_id), start, end, entry_count, object_key, object_length)
    first = google_crc32c.extend(head, stamps)
    return first, google_crc32c.extend(google_crc32c.extend(first, locations), metadata)


def _stream_prefix(stream_id: str) -> bytes:
    sid = stream_id.encode("utf-8")
    return _U16.pack(len(sid)) + sid


def _head_crc(prefix: bytes, start: int, end: int, entry_count: int, object_key: str, object_length: int) -> int:
    """CRC32C of a row's header: ``prefix`` (:func:`_stream_prefix`), the key, the four integers."""
    key = object_key.encode("utf-8")
    return google_crc32c.value(
        prefix + _U16.pack(len(key)) + key + _HEADER.pack(start, end, entry_count, object_length)
    )


def _crc_error(stream_id: str, row: Sequence[object], field: str, recorded: object, computed: int) -> CorruptionError:
    return row_error(
        stream_id, row, f"{field} {recorded!r} does not match its fields' CRC32C {computed:#010x}: a field was altered"
    )


def row_error(stream_id: str, row: Sequence[object], problem: str) -> CorruptionError:
    """The error for a damaged index row: the stream, the row by its first offset, what is wrong.

    Parameters
    ----------
    stream_id : str
    row : sequence
        The row as :meth:`HeadStore.scan_index` yields it.
    problem : str
        The field and what is wrong with it.

    Returns
    -------
    CorruptionError
    """
    return CorruptionError(
        f"stream {stream_id!r}: the entry-index row of the append at offset {row[_START]} "
        f"(WAL object {row[_KEY]!r}) is damaged: {problem}"
    )


def _gap(end: int, next_start: int) -> str:
    return f"end_offset {end} is not the next row's start_offset {next_start}: a row is missing from the index"


def check_follows(stream_id: str, prev: Sequence[object] | None, row: Sequence[object]) -> None:
    """Check that ``row`` starts where ``prev``, the row before it in a scan, ended.

    Parameters
    ----------
    stream_id : str
    prev : tuple or None
        The previous row of the scan (None: ``row`` is the first).
    row : tuple

    Raises
    ------
    CorruptionError
        A gap or an overlap between the two rows, naming ``prev``.
    """
    if prev is not None and prev[_END] != row[_START]:
        raise row_error(stream_id, prev, _gap(prev[_END], row[_START]))  # type: ignore[arg-type]


def _check_scalars(stream_id: str, row: Sequence[object], blob: object, field: str, itemsize: int) -> int:
    """The row's entry count, after checking its scalar fields and the size of one packed BLOB."""
    start, end, n, _, length = row[:5]
    if (
        type(start) is int
        and type(end) is int
        and type(n) is int
        and type(length) is int
        and type(blob) is bytes
        and 0 <= start
        and 0 < n <= end - start
        and len(blob) == n * itemsize
    ):
        return n
    for at, name in _SCALARS:
        if type(row[at]) is not int:
            raise row_error(stream_id, row, f"{name} is {row[at]!r}, not an integer")
    assert isinstance(start, int) and isinstance(end, int) and isinstance(n, int)
    if n < 1:
        raise row_error(stream_id, row, f"entry_count is {n}; an append holds at least one entry")
    if not 0 <= start < end:
        raise row_error(stream_id, row, f"the range [{start}, {end}) is empty or negative")
    if n > end - start:
        raise row_error(stream_id, row, f"entry_count {n} exceeds the {end - start} records of [{start}, {end})")
    if not isinstance(blob, bytes):
        raise row_error(stream_id, row, f"{field} is a {type(blob).__name__}, not bytes")
    if len(blob) != n * itemsize:
        raise row_error(
            stream_id, row, f"{field} holds {len(blob)} bytes, not the {n} records of {itemsize} bytes entry_count says"
        )
    return n


def checked_stamps(
    stream_id: str, rows: Sequence[Sequence[object]], column: int, crc_column: int | None = None
) -> dict[str, np.ndarray]:
    """The stamp records of consecutive index rows, joined, after checking every row.

    Parameters
    ----------
    stream_id : str
    rows : sequence of tuple
        Consecutive rows of one scan (:meth:`HeadStore.scan_index`), in offset order.
    column : int
        Position of the ``stamps`` BLOB in each row.
    crc_column : int, optional
        Position of ``stamps_crc`` in each row: checked where it is not NULL.

    Returns
    -------
    dict of str to numpy.ndarray
        One aligned array per field of :data:`STAMP_DTYPE` (by its name), every row's entries in
        order.

    Raises
    ------
    CorruptionError
        A row breaks one of the invariants of the module notes, named.
    """
    counts = np.array([_check_scalars(stream_id, r, r[column], "stamps", STAMP_DTYPE.itemsize) for r in rows])
    records = np.frombuffer(b"".join([r[column] for r in rows]), dtype=STAMP_DTYPE)  # type: ignore[misc]
    # each field copied once into an aligned array: checked here, handed to the reader as they are
    cols = {name: np.ascontiguousarray(records[name]) for name in STAMP_DTYPE.names or ()}
    if not rows:
        return cols
    row_start = np.array([r[_START] for r in rows], dtype=np.int64)
    row_end = np.array([r[_END] for r in rows], dtype=np.int64)
    firsts = np.cumsum(counts) - counts
    lasts = firsts + counts - 1
    if not _stamps_whole(cols, firsts, lasts, row_start, row_end):
        _diagnose(stream_id, rows, cols, firsts, lasts, row_start, row_end)
    if crc_column is not None:
        prefix = _stream_prefix(stream_id)
        for r in rows:
            if r[crc_column] is not None:
                _check_stamps_crc(stream_id, prefix, r, r[column], r[crc_column])  # type: ignore[arg-type]
    return cols


def _stamps_whole(
    cols: dict[str, np.ndarray], firsts: np.ndarray, lasts: np.ndarray, row_start: np.ndarray, row_end: np.ndarray
) -> bool:
    """Whether the joined stamp records of consecutive rows keep every invariant (a few whole-array
    reductions; :func:`_diagnose` finds which one broke)."""
    if (row_start[1:] != row_end[:-1]).any():
        return False
    starts = cols["start_offset"]
    # what each entry must start before: the next entry's start, or its row's end
    bound = np.empty_like(starts)
    bound[:-1] = starts[1:]
    bound[lasts] = row_end
    if not ((starts[firsts] == row_start).all() and (starts < bound).all()):
        return False
    stamped = cols["stamped"]
    lo = cols["hash_min"]
    hi = cols["hash_max"]
    # an unstamped entry has zero hashes: lo | hi must fit under 0 there, under 0xFFFF+1 when stamped
    return bool(
        stamped.max() <= 1
        and (lo <= hi).all()
        and ((lo | hi) <= stamped.astype(np.uint16) * np.uint16(0xFFFF)).all()
        and cols["segment_id"].min() >= -1
        and cols["bucket"].min() >= -1
    )


def _diagnose(
    stream_id: str,
    rows: Sequence[Sequence[object]],
    cols: dict[str, np.ndarray],
    firsts: np.ndarray,
    lasts: np.ndarray,
    row_start: np.ndarray,
    row_end: np.ndarray,
) -> None:
    """Raise the CorruptionError for the earliest row whose stamps break an invariant."""
    starts = cols["start_offset"]
    found: list[tuple[int, str]] = []  # (row index, problem): the earliest row is reported

    def first_entry(mask: np.ndarray) -> int | None:
        hits = np.flatnonzero(mask)
        return int(hits[0]) if hits.size else None

    def row_of(entry: int) -> int:
        return int(np.searchsorted(firsts, entry, side="right")) - 1

    gap = first_entry(row_start[1:] != row_end[:-1])
    if gap is not None:
        found.append((gap, _gap(int(row_end[gap]), int(row_start[gap + 1]))))
    bad = first_entry(starts[firsts] != row_start)
    if bad is not None:
        found.append((bad, f"stamps: entry 0 starts at {starts[firsts[bad]]}, not at the row's start_offset"))
    steps = np.diff(starts) <= 0
    steps[lasts[:-1]] = False  # across a row boundary the rows' own ranges are checked
    bad = first_entry(steps)
    if bad is not None:
        r = row_of(bad)
        found.append(
            (
                r,
                f"stamps: entry {bad + 1 - firsts[r]} starts at {starts[bad + 1]}, not after entry "
                f"{bad - firsts[r]}'s start {starts[bad]}",
            )
        )
    bad = first_entry(starts[lasts] >= row_end)
    if bad is not None:
        found.append(
            (bad, f"stamps: the last entry starts at {starts[lasts[bad]]}, not before end_offset {row_end[bad]}")
        )
    stamped = cols["stamped"]
    lo, hi = cols["hash_min"], cols["hash_max"]
    for mask, what in (
        (stamped > 1, "stamped is {v[stamped]}, not 0 or 1"),
        ((stamped == 1) & (lo > hi), "the stamp ({v[hash_min]}, {v[hash_max]}) has hash_min > hash_max"),
        ((stamped == 0) & ((lo != 0) | (hi != 0)), "an unstamped entry has hashes ({v[hash_min]}, {v[hash_max]})"),
        (cols["segment_id"] < -1, "segment_id is {v[segment_id]}"),
        (cols["bucket"] < -1, "bucket is {v[bucket]}"),
    ):
        bad = first_entry(mask)
        if bad is not None:
            r = row_of(bad)
            found.append(
                (r, f"stamps: entry {bad - firsts[r]}: " + what.format(v={k: c[bad] for k, c in cols.items()}))
            )
    if found:
        r, problem = min(found, key=lambda f: f[0])
        raise row_error(stream_id, rows[r], problem)
    raise AssertionError("_stamps_whole refused records _diagnose finds whole")


def _check_stamps_crc(stream_id: str, prefix: bytes, row: Sequence[object], stamps: bytes, recorded: object) -> None:
    start, end, n, key, length = row[:5]
    if not isinstance(key, str):
        raise row_error(stream_id, row, f"object_key is a {type(key).__name__}, not str")
    computed = google_crc32c.extend(_head_crc(prefix, start, end, n, key, length), stamps)  # type: ignore[arg-type]
    if recorded != computed:
        raise _crc_error(stream_id, row, "stamps_crc", recorded, computed)


def checked_locations(
    stream_id: str,
    row: Sequence[object],
    locations: object,
    metadata: object,
    stamps_crc: object = None,
    locations_crc: object = None,
) -> np.ndarray:
    """The location records of one index row, after checking them against the row and its object.

    Parameters
    ----------
    stream_id : str
    row : tuple
        The row as :meth:`HeadStore.scan_index` yields it (its stamps already checked).
    locations, metadata : bytes
        The row's ``locations`` and ``metadata`` BLOBs.
    stamps_crc, locations_crc : int or None
        The row's checksums; ``locations_crc`` is checked unless NULL (a schema-1 row), the
        stamps (and ``stamps_crc``) being checked already.

    Returns
    -------
    numpy.ndarray of LOCATION_DTYPE

    Raises
    ------
    CorruptionError
        A location outside the object or out of order, a metadata offset outside its BLOB, named.
    """
    n = _check_scalars(stream_id, row, locations, "locations", LOCATION_DTYPE.itemsize)
    if not isinstance(metadata, bytes):
        raise row_error(stream_id, row, f"metadata is a {type(metadata).__name__}, not bytes")
    records = np.frombuffer(locations, dtype=LOCATION_DTYPE)  # type: ignore[call-overload]
    off, size, meta = records["payload_off"], records["payload_len"], records["meta_off"]
    data_end = int(row[_LENGTH]) - _TRAILER  # type: ignore[call-overload]
    stop = off + size
    problems = (
        (off < 0, "locations: entry {i}'s payload starts at {o}"),
        (size < 0, "locations: entry {i}'s payload length is {s}"),
        (stop > data_end, "locations: entry {i}'s payload [{o}, {o}+{s}) ends past the object's data ({end} bytes)"),
        (np.append(stop[:-1] > off[1:], False), "locations: entry {i}'s payload [{o}, {o}+{s}) overlaps the next one"),
        (np.append(meta[0] != 0, meta[1:] < meta[:-1]), "locations: entry {i}'s meta_off {m} is out of order"),
        (meta > len(metadata), "locations: entry {i}'s meta_off {m} is past the {mlen} metadata bytes"),
    )
    for mask, what in problems:
        hits = np.flatnonzero(mask)
        if hits.size:
            i = int(hits[0])
            text = what.format(i=i, o=int(off[i]), s=int(size[i]), m=int(meta[i]), end=data_end, mlen=len(metadata))
            raise row_error(stream_id, row, text)
    assert records.shape[0] == n
    if locations_crc is not None:
        if type(stamps_crc) is not int:
            raise row_error(stream_id, row, f"stamps_crc is {stamps_crc!r} beside locations_crc {locations_crc!r}")
        computed = google_crc32c.extend(google_crc32c.extend(stamps_crc, locations), metadata)
        if locations_crc != computed:
            raise _crc_error(stream_id, row, "locations_crc", locations_crc, computed)
    return records
