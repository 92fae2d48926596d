"""The object WAL: a local directory of immutable objects, one per append.

An object is written to a temporary file in the same directory, fsynced, published under its final
name without replacing anything already there (a hard link, then the temporary name is removed),
and the directory is fsynced. A name that already exists is never overwritten: if its bytes equal
the new ones the PUT is a reuse, otherwise it is an invariant violation.

Object format ``bucketcore-wal/1`` (all integers little-endian)::

    magic        8 bytes  b"BCSWAL\\x00\\x01"
    header_len   u32      bytes of the header that follows
    header       entry_count u32, start_offset u64, stream_id (u16 length + UTF-8),
                 commit_id (u16 length + ASCII)
    manifest     entry_count records of MANIFEST_DTYPE (37 bytes each)
    data         per entry: its metadata bytes, then its payload bytes
    trailer      u32 CRC32C of every byte before it

The head store records each object's length and CRC32C; the entry index records every payload's
position, length and CRC32C, so one entry is validated without reading the rest of its object.
"""

from __future__ import annotations

import os
import secrets
import struct
import sys
import time
from dataclasses import dataclass

import google_crc32c
import numpy as np

from ..errors import ChecksumError, InvariantViolationError, MissingObjectError
from .payload import EntryColumns

__all__ = [
    "MAGIC",
    "MANIFEST_DTYPE",
    "OBJECT_SUFFIX",
    "TEMP_PREFIX",
    "EncodedObject",
    "ObjectWal",
    "crc32c",
    "encode_object",
]

MAGIC = b"BCSWAL\x00\x01"
OBJECT_SUFFIX = ".obj"
TEMP_PREFIX = ".tmp-"
_U32 = struct.Struct("<I")
_HEAD = struct.Struct("<IQ")

#: One manifest record per entry.
MANIFEST_DTYPE = np.dtype(
    [
        ("record_count", "<u4"),
        ("metadata_len", "<u4"),
        ("payload_len", "<u8"),
        ("payload_crc", "<u4"),
        ("stamped", "u1"),
        ("hash_min", "<u2"),
        ("hash_max", "<u2"),
        ("segment_id", "<i8"),
        ("bucket", "<i4"),
    ]
)


def crc32c(data: bytes) -> int:
    """CRC32C (Castagnoli) of ``data``.

    Parameters
    ----------
    data : bytes

    Returns
    -------
    int
        The checksum, 0..2**32-1.
    """
    return google_crc32c.value(data)


@dataclass(frozen=True, slots=True)
class EncodedObject:
    """The frozen bytes of one WAL object and what the entry index needs to find each entry in it.

    Attributes
    ----------
    data : bytes
        The whole object, trailer included.
    object_crc : int
        CRC32C of ``data`` without its 4-byte trailer (the trailer's value).
    content_crc : int
        CRC32C of the manifest and data regions (the entries, independent of position and id).
    payload_off, payload_len : numpy.ndarray of int64
        Each payload's byte position and length within ``data``.
    payload_crc : numpy.ndarray of uint32
    meta_off : numpy.ndarray of int64
        ``entry_count + 1`` positions into the concatenated metadata.
    metadata : bytes
        Every entry's metadata, concatenated.
    logical_bytes : int
        Sum of the payload lengths.
    """

    data: bytes
    object_crc: int
    content_crc: int
    payload_off: np.ndarray
    payload_len: np.ndarray
    payload_crc: np.ndarray
    meta_off: np.ndarray
    metadata: bytes
    logical_bytes: int


def encode_object(stream_id: str, commit_id: str, start_offset: int, cols: EntryColumns) -> EncodedObject:
    """Freeze an append's entries into the bytes of one object (format ``bucketcore-wal/1``).

    Parameters
    ----------
    stream_id, commit_id : str
    start_offset : int
        The offset the append will commit at (part of the object, so a target is tied to its range).
    cols : EntryColumns

    Returns
    -------
    EncodedObject
    """
    n = len(cols)
    sid = stream_id.encode("utf-8")
    cid = commit_id.encode("ascii")
    header = b"".join((_HEAD.pack(n, start_offset), struct.pack("<H", len(sid)), sid, struct.pack("<H", len(cid)), cid))
    prefix = MAGIC + _U32.pack(len(header)) + header
    manifest = np.zeros(n, dtype=MANIFEST_DTYPE)
    payload_len = np.fromiter((len(p) for p in cols.payloads), dtype=np.int64, count=n)
    meta_len = np.fromiter((len(m) for m in cols.metadata), dtype=np.int64, count=n)
    payload_crc = np.fromiter((google_crc32c.value(p) for p in cols.payloads), dtype=np.uint32, count=n)
    manifest["record_count"] = cols.record_count
    manifest["metadata_len"] = meta_len
    manifest["payload_len"] = payload_len
    manifest["payload_crc"] = payload_crc
    manifest["stamped"] = cols.stamped
    manifest["hash_min"] = cols.hash_min
    manifest["hash_max"] = cols.hash_max
    manifest["segment_id"] = cols.segment_id
    manifest["bucket"] = cols.bucket
    manifest_bytes = manifest.tobytes()
    # data region: metadata_i then payload_i, entry after entry
    data_start = len(prefix) + len(manifest_bytes)
    sizes = np.empty(2 * n, dtype=np.int64)
    sizes[0::2] = meta_len
    sizes[1::2] = payload_len
    ends = np.cumsum(sizes)
    payload_off = data_start + ends[0::2]
    parts: list[bytes] = [b""] * (2 * n)
    parts[0::2] = cols.metadata
    parts[1::2] = cols.payloads
    body = manifest_bytes + b"".join(parts)
    content_crc = google_crc32c.value(body)
    object_crc = google_crc32c.extend(google_crc32c.value(prefix), body)
    data = b"".join((prefix, body, _U32.pack(object_crc)))
    meta_off = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(meta_len, out=meta_off[1:])
    return EncodedObject(
        data,
        object_crc,
        content_crc,
        payload_off,
        payload_len,
        payload_crc,
        meta_off,
        b"".join(cols.metadata),
        int(payload_len.sum()),
    )


def _fsync(fd: int) -> None:
    """Flush a file to stable storage (on macOS fsync alone stops at the drive's cache)."""
    if sys.platform == "darwin":
        import fcntl

        fcntl.fcntl(fd, fcntl.F_FULLFSYNC)
    else:
        os.fsync(fd)


def _fsync_dir(path: str) -> None:
    if os.name == "nt":  # directories cannot be opened for fsync there; NTFS journals the link
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        _fsync(fd)
    finally:
        os.close(fd)


class ObjectWal:
    """A directory of immutable WAL objects.

    Parameters
    ----------
    path : str
        The directory (created if missing).
    """

    def __init__(self, path: str) -> None:
        self.path = path
        os.makedirs(path, exist_ok=True)

    def _file(self, key: str) -> str:
        return os.path.join(self.path, key)

    def put(self, key: str, data: bytes) -> bool:
        """Publish ``data`` under ``key`` durably, never replacing an existing object.

        Parameters
        ----------
        key : str
            The object's file name.
        data : bytes
            The exact bytes.

        Returns
        -------
        bool
            True if this call created the object, False if identical bytes were already there.

        Raises
        ------
        InvariantViolationError
            An object named ``key`` exists with different bytes (it is left as it was).
        OSError
            The file system failed; the temporary file is removed and nothing is published.
        """
        final = self._file(key)
        if os.path.exists(final):
            self._same_or_raise(key, data)
            return False
        tmp = self._file(f"{TEMP_PREFIX}{key}-{secrets.token_hex(6)}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o644)
        try:
            try:
                view = memoryview(data)
                while view:
                    written = os.write(fd, view)
                    view = view[written:]
                _fsync(fd)
            finally:
                os.close(fd)
            try:
                os.link(tmp, final)  # fails if the final name exists: nothing is ever replaced
            except FileExistsError:
                self._same_or_raise(key, data)
                return False
        finally:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
        _fsync_dir(self.path)
        return True

    def _same_or_raise(self, key: str, data: bytes) -> None:
        try:
            with open(self._file(key), "rb") as f:
                existing = f.read()
        except FileNotFoundError:
            raise InvariantViolationError(f"WAL object {key!r} vanished while being compared to a new PUT") from None
        if existing != data:
            raise InvariantViolationError(
                f"WAL object {key!r} already exists with different content "
                f"({len(existing)} bytes, CRC32C {google_crc32c.value(existing[:-4]):#010x}; the new "
                f"PUT has {len(data)} bytes): immutable keys are never overwritten"
            )

    def present(self, key: str, length: int) -> bool:
        """Whether the object ``key`` exists with ``length`` bytes (objects are only ever added
        whole or removed whole, so this tells whether a published object is still there).

        Parameters
        ----------
        key : str
        length : int

        Returns
        -------
        bool
        """
        try:
            return os.stat(self._file(key)).st_size == length
        except FileNotFoundError:
            return False

    def read_span(self, key: str, length: int, lo: int, hi: int) -> bytes:
        """Bytes ``[lo, hi)`` of the object ``key``, after checking its size is the declared ``length``.

        Parameters
        ----------
        key : str
        length : int
            The object's declared length.
        lo, hi : int
            The byte range to read.

        Returns
        -------
        bytes

        Raises
        ------
        MissingObjectError
            No object named ``key``.
        ChecksumError
            The object's size differs from ``length`` (truncated or grown).
        """
        try:
            fd = os.open(self._file(key), os.O_RDONLY | getattr(os, "O_BINARY", 0))
        except FileNotFoundError:
            raise MissingObjectError(f"WAL object {key!r} is missing from {self.path}") from None
        try:
            size = os.fstat(fd).st_size
            if size != length:
                raise ChecksumError(f"WAL object {key!r} is {size} bytes; its declared length is {length}")
            if hasattr(os, "pread"):
                out = os.pread(fd, hi - lo, lo)
            else:
                os.lseek(fd, lo, os.SEEK_SET)
                out = os.read(fd, hi - lo)
            if len(out) != hi - lo:
                raise ChecksumError(f"WAL object {key!r}: read {len(out)} of {hi - lo} bytes at {lo}")
            return out
        finally:
            os.close(fd)

    def validate(self, key: str, length: int, crc: int) -> None:
        """Check an object whole: its size, its trailer and its CRC32C against the recorded ones.

        Parameters
        ----------
        key : str
        length : int
            Declared length.
        crc : int
            Recorded CRC32C.

        Raises
        ------
        MissingObjectError
            No object named ``key``.
        ChecksumError
            Size, trailer or checksum differ (names the object).
        """
        data = self.read_span(key, length, 0, length)
        actual = google_crc32c.value(data[:-4])
        (trailer,) = _U32.unpack_from(data, length - 4)
        if data[:8] != MAGIC or actual != crc or trailer != crc:
            raise ChecksumError(
                f"WAL object {key!r} fails validation: CRC32C {actual:#010x}, trailer "
                f"{trailer:#010x}, recorded {crc:#010x}"
            )

    def objects(self) -> list[str]:
        """Names of the published objects (temporary files excluded).

        Returns
        -------
        list of str
        """
        return sorted(n for n in os.listdir(self.path) if n.endswith(OBJECT_SUFFIX) and not n.startswith("."))

    def stale_temps(self, older_than: float) -> list[str]:
        """Temporary files (of interrupted PUTs) not modified for ``older_than`` seconds.

        Parameters
        ----------
        older_than : float

        Returns
        -------
        list of str
        """
        now = time.time()
        out = []
        for n in os.listdir(self.path):
            if n.startswith(TEMP_PREFIX):
                try:
                    if now - os.stat(self._file(n)).st_mtime >= older_than:
                        out.append(n)
                except FileNotFoundError:
                    pass
        return out

    def remove(self, name: str) -> bool:
        """Unlink one object or temporary file (no directory fsync: call :meth:`sync` after a batch).

        Parameters
        ----------
        name : str

        Returns
        -------
        bool
            False if it was already gone.
        """
        try:
            os.unlink(self._file(name))
            return True
        except FileNotFoundError:
            return False

    def sync(self) -> None:
        """fsync the directory (makes earlier unlinks durable)."""
        _fsync_dir(self.path)
