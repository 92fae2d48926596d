"""Stamped entries on Pulsar's wire: what a producer sends and a broker stores, in one C pass.

:func:`encode_entries` turns the entries an :class:`~bucketcore.EntryBucketBatcher` emits (with
their payloads) into Pulsar batches, all of them in one contiguous buffer with offsets. Each
encoded entry is, as Pulsar frames a message after its command and as the broker stores it::

    0x0e01 | CRC32C (4 bytes, big-endian) | metadata size (4) | MessageMetadata | batch payload

where the CRC32C covers everything after it, the ``MessageMetadata`` holds the producer name, the
entry's sequence id (its highest message sequence id, as Pulsar's bucket batcher sets it),
publish time, compression ``NONE``, uncompressed size, ``num_messages_in_batch`` and the PIP-486
stamp ``entry_hash_min`` / ``entry_hash_max``, and the batch payload is, per message,
``SingleMessageMetadata`` size (4) | ``SingleMessageMetadata`` (properties, partition key (a str
key) or ordering key (a bytes key), payload size, sequence id) | payload.

:func:`decode_entry` reads every field back (for consumers and tests); :func:`read_stamp` and
:func:`read_stamps` are the broker's fast path: only the stamp, every other field skipped
unparsed.

Field numbers are those of ``pulsar-common/src/main/proto/PulsarApi.proto`` in apache/pulsar
(commit e0a31eae9d538b23ceafe04d8ad98520526089c3). The stamp's field numbers were not found in any
revision of that file available to this project; they are the single constant
:data:`STAMP_FIELDS` (33, 34, as reported for the Pulsar 5.0 proto).
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import google_crc32c
import numpy as np

from _bucketcore import _wire

from .entries import Entry
from .errors import KeyEncodingError, WireFormatError
from .validation import is_int

__all__ = [
    "STAMP_FIELDS",
    "WireFormatError",
    "EncodedEntries",
    "DecodedMessage",
    "DecodedEntry",
    "WireStamps",
    "encode_entries",
    "encode_entry",
    "decode_entry",
    "decode_entries",
    "read_stamp",
    "read_stamps",
    "metadata_of",
    "checksum",
]

#: The MessageMetadata field numbers of ``entry_hash_min`` and ``entry_hash_max`` (one constant,
#: defined in the C header ``wire.h``; see the module documentation for their source).
STAMP_FIELDS: tuple[int, int] = (_wire.FIELD_HASH_MIN, _wire.FIELD_HASH_MAX)


def _install_crc() -> None:
    """Use google-crc32c's C function directly where its extension exposes it (one call per
    entry without a copy); otherwise its ``value`` on a copy of each entry's bytes."""
    address = 0
    if google_crc32c.implementation == "c":
        try:
            from google_crc32c import _crc32c  # type: ignore[attr-defined]

            fn = ctypes.CDLL(_crc32c.__file__).crc32c_extend
            address = ctypes.cast(fn, ctypes.c_void_p).value or 0
        except (ImportError, OSError, AttributeError):
            address = 0
    _wire.set_crc(address, google_crc32c.value)


_install_crc()
_wire.set_errors(KeyEncodingError, WireFormatError)


def checksum(data: bytes | bytearray | memoryview) -> int:
    """CRC32C (Castagnoli) of ``data``, as Pulsar's frame checksum computes it.

    Parameters
    ----------
    data : bytes-like
        The bytes covered (an entry's bytes after its checksum field).

    Returns
    -------
    int
        The unsigned 32-bit checksum.
    """
    return int(google_crc32c.value(bytes(data)))


class EncodedEntries:
    """Encoded entries in one contiguous buffer: entry ``i`` is ``buffer[offsets[i]:offsets[i + 1]]``.

    Parameters
    ----------
    buffer : bytes or bytearray
        All entries back to back (the ``into`` bytearray when one was given).
    offsets : numpy.ndarray of int64
        ``len(self) + 1`` boundaries, starting at 0 and ending at ``len(buffer)``.
    """

    __slots__ = ("buffer", "offsets")

    def __init__(self, buffer: bytes | bytearray, offsets: np.ndarray) -> None:
        offsets.setflags(write=False)
        self.buffer = buffer
        self.offsets = offsets

    def __len__(self) -> int:
        return int(self.offsets.shape[0]) - 1

    @property
    def nbytes(self) -> int:
        """Total encoded size in bytes."""
        return len(self.buffer)

    def __getitem__(self, index: int) -> memoryview:
        n = len(self)
        if not is_int(index):
            raise TypeError(f"EncodedEntries indices must be integers, not {type(index).__name__}")
        i = int(index)
        if not -n <= i < n:
            raise IndexError(f"entry index {i} out of range for {n} entries")
        i %= n
        return memoryview(self.buffer)[int(self.offsets[i]) : int(self.offsets[i + 1])]

    def __iter__(self) -> Iterator[memoryview]:
        view = memoryview(self.buffer)
        bounds = self.offsets.tolist()
        for a, b in zip(bounds[:-1], bounds[1:]):
            yield view[a:b]

    def __repr__(self) -> str:
        return f"EncodedEntries(entries={len(self)}, nbytes={self.nbytes})"


def _per_entry(value: Any, name: str, n: int) -> list[Any] | None:
    if value is None:
        return None
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"{name} must be a list with one item per entry, not {type(value).__name__}")
    if len(value) != n:
        raise ValueError(f"{name} has {len(value)} items for {n} entries")
    out = list(value)
    for i, item in enumerate(out):
        if item is None or type(item) is list:
            continue
        if isinstance(item, tuple):
            out[i] = list(item)
        elif isinstance(item, np.ndarray) and item.ndim == 1:
            out[i] = item.tolist()
        else:
            raise TypeError(f"{name}[{i}] must be a list of per-message values or None, not {type(item).__name__}")
    return out


def _check_uint(value: Any, name: str, bits: int) -> int:
    if not is_int(value):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    v = int(value)
    if not 0 <= v < (1 << bits):
        raise ValueError(f"{name} = {v} is outside 0..2**{bits}-1")
    return v


def encode_entries(
    entries: Sequence[Entry],
    *,
    producer_name: str,
    publish_time: int | None = None,
    keys: Sequence[Sequence[str | bytes | None] | None] | None = None,
    properties: Sequence[Sequence[dict[str, str] | None] | None] | None = None,
    sequence_ids: Sequence[Sequence[int] | None] | None = None,
    sequence_base: int = 0,
    stamp: bool = True,
    into: bytearray | None = None,
) -> EncodedEntries:
    """Encode entries as Pulsar batches into one buffer (one C pass, CRC32C included).

    Parameters
    ----------
    entries : sequence of Entry
        Entries with payloads, as :class:`~bucketcore.EntryBucketBatcher` emits them.
    producer_name : str
        The ``producer_name`` of every entry.
    publish_time : int, optional
        Milliseconds since the epoch (default: now).
    keys : list, optional
        One item per entry: ``None`` or a list of that entry's message keys in order (``str``: the
        partition key; ``bytes``: the ordering key; ``None``: keyless).
    properties : list, optional
        One item per entry: ``None`` or a list of per-message ``dict[str, str]`` (or ``None``).
    sequence_ids : list, optional
        One item per entry: ``None`` or a list of per-message sequence ids (0..2**64-1). An entry
        without them numbers its messages ``sequence_base + message_indices``.
    sequence_base : int
        Added to the message indices where sequence ids are not given.
    stamp : bool
        Write ``entry_hash_min`` / ``entry_hash_max`` (default). ``False`` encodes an unstamped
        batch, as a producer without bucketing would.
    into : bytearray, optional
        Encode into this buffer (resized to fit) instead of a new ``bytes``: a producer that
        reuses one buffer saves the allocation (and the page faults) of a fresh one per call. The
        result refers to it until it is reused.

    Returns
    -------
    EncodedEntries
        The buffer and the entries' offsets in it.

    Raises
    ------
    TypeError
        An argument or item of the wrong type (named with its entry and message position).
    ValueError
        Lists of the wrong length, a bad stamp, sequence id or size, named.
    KeyEncodingError
        A str key, property or producer name that is not valid UTF-8.
    """
    if not isinstance(entries, list):
        if not isinstance(entries, (tuple, Sequence)):
            raise TypeError(f"entries must be a sequence of Entry, not {type(entries).__name__}")
        entries = list(entries)
    for i, e in enumerate(entries):
        if not isinstance(e, Entry):
            raise TypeError(f"entries[{i}] must be an Entry, not {type(e).__name__}")
    if not isinstance(producer_name, str):
        raise TypeError(f"producer_name must be a str, not {type(producer_name).__name__}")
    n = len(entries)
    when = time.time_ns() // 1_000_000 if publish_time is None else _check_uint(publish_time, "publish_time", 64)
    base = _check_uint(sequence_base, "sequence_base", 62)
    if not isinstance(stamp, (bool, np.bool_)):
        raise TypeError(f"stamp must be a bool, not {type(stamp).__name__}")
    if into is not None and not isinstance(into, bytearray):
        raise TypeError(f"into must be a bytearray, not {type(into).__name__}")
    # payload bytes plus a typical per-message and per-entry overhead; the buffer grows past it
    # when keys or properties need more
    hint = sum(e.nbytes for e in entries) + sum(e.count for e in entries) * 24 + n * (len(producer_name) + 64)
    buffer, offsets = _wire.encode_entries(
        entries,
        producer_name,
        when,
        _per_entry(keys, "keys", n),
        _per_entry(properties, "properties", n),
        _per_entry(sequence_ids, "sequence_ids", n),
        base,
        bool(stamp),
        into,
        hint,
    )
    return EncodedEntries(buffer, offsets)


def encode_entry(entry: Entry, **options: Any) -> bytes:
    """Encode one entry (see :func:`encode_entries`; per-entry options are given for this entry
    alone: ``keys=[...]`` rather than ``keys=[[...]]``).

    Parameters
    ----------
    entry : Entry
        An entry with payloads.
    **options
        As :func:`encode_entries`.

    Returns
    -------
    bytes
        The encoded entry.

    Raises
    ------
    TypeError, ValueError, KeyEncodingError
        As :func:`encode_entries`.
    """
    for name in ("keys", "properties", "sequence_ids"):
        if options.get(name) is not None:
            options[name] = [options[name]]
    return encode_entries([entry], **options).buffer


class DecodedMessage(NamedTuple):
    """One message of a decoded entry.

    Attributes
    ----------
    payload : bytes
    key : str, bytes or None
        The partition key (str), the ordering key (bytes; it takes precedence), or None.
    properties : dict of str to str
    sequence_id : int or None
    """

    payload: bytes
    key: str | bytes | None
    properties: dict[str, str]
    sequence_id: int | None


class DecodedEntry(NamedTuple):
    """The fields of one decoded entry.

    Attributes
    ----------
    producer_name : str
    sequence_id : int
    publish_time : int
    num_messages : int
        ``num_messages_in_batch`` (1 when absent).
    hash_min, hash_max : int or None
        The stamp (None when unstamped).
    uncompressed_size : int or None
    properties : dict of str to str
        The outer metadata's properties.
    messages : list of DecodedMessage
    checksummed : bool
        Whether the entry carried a CRC32C (checked unless ``verify_checksum=False``).
    """

    producer_name: str
    sequence_id: int
    publish_time: int
    num_messages: int
    hash_min: int | None
    hash_max: int | None
    uncompressed_size: int | None
    properties: dict[str, str]
    messages: list[DecodedMessage]
    checksummed: bool


def _contiguous(data: Any, name: str) -> Any:
    if isinstance(data, (bytes, bytearray)):
        return data
    if isinstance(data, memoryview):
        if not data.c_contiguous:
            raise ValueError(f"{name} must be a C-contiguous buffer")
        return data.cast("B") if data.format != "B" or data.ndim != 1 else data
    raise TypeError(f"{name} must be bytes, bytearray or memoryview, not {type(data).__name__}")


def decode_entry(data: bytes | bytearray | memoryview, *, verify_checksum: bool = True) -> DecodedEntry:
    """Read every field of one encoded entry back.

    Accepts what :func:`encode_entries` writes and what Pulsar stores: an optional broker entry
    metadata prefix (magic 0x0e02, skipped), an optional checksum header (magic 0x0e01), the
    metadata size, the MessageMetadata and an uncompressed batch payload. Unknown fields are
    skipped.

    Parameters
    ----------
    data : bytes-like
        One encoded entry.
    verify_checksum : bool
        Check the CRC32C when the entry has one (default).

    Returns
    -------
    DecodedEntry

    Raises
    ------
    WireFormatError
        Malformed bytes (truncated varints, lengths past the end, missing fields, a checksum
        mismatch, a compressed batch) or a stamp :func:`read_stamp` refuses (half a stamp, a value
        above 0xFFFF, ``hash_min > hash_max``: the same rule, named by field): the message and
        ``offset`` name where.
    TypeError
        ``data`` is not bytes-like.
    """
    md, msgs, checksummed = _wire.decode_entry(_contiguous(data, "data"), bool(verify_checksum))
    return DecodedEntry(
        producer_name=md[1],
        sequence_id=int(md[2]),
        publish_time=int(md[3]),
        num_messages=int(md.get(11, 1)),
        hash_min=md.get(STAMP_FIELDS[0]),
        hash_max=md.get(STAMP_FIELDS[1]),
        uncompressed_size=md.get(9),
        properties=md["properties"],
        messages=[DecodedMessage(m["payload"], m["key"], m["properties"], m["sequence_id"]) for m in msgs],
        checksummed=bool(checksummed),
    )


def decode_entries(encoded: EncodedEntries, *, verify_checksum: bool = True) -> list[DecodedEntry]:
    """Decode every entry of an :class:`EncodedEntries`.

    Parameters
    ----------
    encoded : EncodedEntries
    verify_checksum : bool
        As :func:`decode_entry`.

    Returns
    -------
    list of DecodedEntry

    Raises
    ------
    WireFormatError
        As :func:`decode_entry`, with ``index`` the entry's position.
    """
    if not isinstance(encoded, EncodedEntries):
        raise TypeError(f"encoded must be an EncodedEntries, not {type(encoded).__name__}")
    out = []
    for i, view in enumerate(encoded):
        try:
            out.append(decode_entry(view, verify_checksum=verify_checksum))
        except WireFormatError as exc:
            raise WireFormatError(f"entry {i}: {exc}", exc.offset, i) from None
    return out


def metadata_of(data: bytes | bytearray | memoryview) -> memoryview:
    """The MessageMetadata bytes of one encoded entry (no copy), for :func:`read_stamp`.

    Parameters
    ----------
    data : bytes-like
        One encoded entry.

    Returns
    -------
    memoryview
        A view of its MessageMetadata.

    Raises
    ------
    WireFormatError
        A header that is too short or a metadata size past the end.
    """
    view = memoryview(_contiguous(data, "data"))
    n = len(view)
    p = 0
    if n >= 2 and view[0] == 0x0E and view[1] == 0x02:
        if n < 6:
            raise WireFormatError("too few bytes for the broker entry metadata size at byte 2", 2)
        size = int.from_bytes(view[2:6], "big")
        if size > n - 6:
            raise WireFormatError("the broker entry metadata size at byte 2 reaches past the end", 2)
        p = 6 + size
    if n - p >= 2 and view[p] == 0x0E and view[p + 1] == 0x01:
        if n - p < 6:
            raise WireFormatError(f"too few bytes for the checksum at byte {p + 2}", p + 2)
        p += 6
    if n - p < 4:
        raise WireFormatError(f"too few bytes for the metadata size at byte {p}", p)
    size = int.from_bytes(view[p : p + 4], "big")
    if size > n - p - 4:
        raise WireFormatError(f"the metadata size at byte {p} ({size}) reaches past the end", p)
    return view[p + 4 : p + 4 + size]


def read_stamp(metadata: bytes | bytearray | memoryview) -> tuple[int, int] | None:
    """The broker's fast path: the stamp of a MessageMetadata, every other field skipped unparsed.

    Parameters
    ----------
    metadata : bytes-like
        A serialized MessageMetadata (:func:`metadata_of` gives it from an encoded entry).

    Returns
    -------
    (int, int) or None
        ``(entry_hash_min, entry_hash_max)``, or None for an unstamped entry.

    Raises
    ------
    WireFormatError
        Malformed protobuf (named with its offset), half a stamp, or a stamp that is not a hash
        range (values above 0xFFFF, min > max), naming the field. :func:`read_stamps` and
        :func:`decode_entry` apply the same rule.
    """
    return _wire.read_stamp(_contiguous(metadata, "metadata"))


class WireStamps(NamedTuple):
    """The stamps of many encoded entries, as numpy columns (one row per entry).

    Attributes
    ----------
    hash_min, hash_max : numpy.ndarray of uint16
        The stamp (0 where unstamped).
    stamped : numpy.ndarray of bool
    """

    hash_min: np.ndarray
    hash_max: np.ndarray
    stamped: np.ndarray


def read_stamps(encoded: EncodedEntries | tuple[Any, Any]) -> WireStamps:
    """The stamp of every entry of a buffer, read in one C loop (no checksum check, no other field
    parsed): the columns :func:`bucketcore.route_entries` takes.

    Parameters
    ----------
    encoded : EncodedEntries or (buffer, offsets)
        Entries back to back with ``len + 1`` int64 boundaries.

    Returns
    -------
    WireStamps

    Raises
    ------
    WireFormatError
        A malformed entry, with ``index`` its position and ``offset`` the byte inside it; offsets
        that are not ascending within the buffer.
    """
    if isinstance(encoded, EncodedEntries):
        buffer, offsets = encoded.buffer, encoded.offsets
    elif isinstance(encoded, tuple) and len(encoded) == 2:
        buffer, offsets = encoded
    else:
        raise TypeError(f"encoded must be an EncodedEntries or (buffer, offsets), not {type(encoded).__name__}")
    buffer = _contiguous(buffer, "buffer")
    offsets = np.ascontiguousarray(offsets)
    if offsets.ndim != 1 or offsets.shape[0] < 1 or offsets.dtype.kind not in "iu":
        raise ValueError("offsets must be a one-dimensional integer array of len(entries) + 1 boundaries")
    offsets = offsets.astype(np.int64, copy=False)
    n = offsets.shape[0] - 1
    lo = np.zeros(n, dtype=np.uint16)
    hi = np.zeros(n, dtype=np.uint16)
    stamped = np.zeros(n, dtype=np.uint8)
    index, status, at, text = _wire.read_stamps(buffer, offsets, lo, hi, stamped)
    if index >= 0:
        if status < 0:
            raise WireFormatError(
                f"entry {index}: offsets {offsets[index]}..{offsets[index + 1]} are not an ascending range "
                f"inside the buffer of {len(buffer)} bytes",
                0,
                index,
            )
        raise WireFormatError(f"entry {index}: {text} at byte {at}", at, index)
    return WireStamps(lo, hi, stamped.view(np.bool_))
