"""Every error bucketcore raises on purpose, in one place; each subclasses :class:`BucketcoreError`.

An error caused by bad input is also a :class:`ValueError` (or the caller gets a plain
:class:`TypeError` for a value of the wrong type), so code that catches the builtin exceptions keeps
working. Errors about one element of a column carry its position as ``index``.
"""

from __future__ import annotations

__all__ = [
    "BucketcoreError",
    "KeyEncodingError",
    "InvalidBoundaryError",
    "InvalidLayoutError",
    "StaleLayoutError",
    "MalformedStampError",
    "ConsumerStateError",
    "WireFormatError",
    "StreamError",
    "OffsetMismatchError",
    "FencedError",
    "CapabilityError",
    "InvariantViolationError",
    "ChecksumError",
    "MissingObjectError",
    "UnknownStreamError",
    "StreamExistsError",
    "OffsetOutOfRangeError",
    "StoreClosedError",
    "UncertainAppendError",
    "CorruptionError",
]


class BucketcoreError(Exception):
    """Base of every error bucketcore raises on purpose."""


class KeyEncodingError(BucketcoreError, ValueError):
    """A str key cannot be encoded as UTF-8 (it holds a surrogate code point); names the key's index."""

    def __init__(self, message: str, index: int | None = None) -> None:
        super().__init__(message)
        self.index = index


class InvalidBoundaryError(BucketcoreError, ValueError):
    """A boundary list (splits) is not strictly ascending integers in 1..0xFFFF."""


class InvalidLayoutError(BucketcoreError, ValueError):
    """A topic layout is inconsistent: active ranges do not tile the ring, unknown ids, ..."""


class StaleLayoutError(BucketcoreError, ValueError):
    """A sharer declared a boundary list different from the segment's."""


class MalformedStampError(BucketcoreError, ValueError):
    """An entry's stamp is not a hash range: ``hash_min > hash_max``, or a value outside 0..0xFFFF.

    ``index`` is the entry's position in the column that was passed.
    """

    def __init__(self, message: str, index: int) -> None:
        super().__init__(message)
        self.index = index


class ConsumerStateError(BucketcoreError, ValueError):
    """A delivery or ack that contradicts the consumer's state (unknown segment, undelivered id, ...)."""


class WireFormatError(BucketcoreError, ValueError):
    """Bytes that are not a well-formed encoded entry (or MessageMetadata).

    ``offset`` is the byte position, inside the entry (or metadata) given, where the malformed
    part starts; ``index`` the entry's position when several were read at once.
    """

    def __init__(self, message: str, offset: int, index: int | None = None) -> None:
        super().__init__(message)
        self.offset = offset
        self.index = index


class StreamError(BucketcoreError):
    """Base of the stream store's errors (:mod:`bucketcore.stream`)."""


class OffsetMismatchError(StreamError, ValueError):
    """An append cannot commit at the offset it was prepared for.

    Either its ``expected_start_offset`` differs from the stream's committed end (checked before
    any WAL I/O), or another append of the same session moved the head first (found at the head
    CAS; the prepared WAL object is left for ``gc``). Nothing was committed.
    """


class FencedError(StreamError):
    """An append session is stale: a newer session (higher epoch) owns the stream, or it expired."""


class CapabilityError(StreamError):
    """A stream's durability profile has no installed writer; refused before any I/O (fail closed)."""


class InvariantViolationError(StreamError):
    """An immutable key (a WAL object or a commit intent) exists with different content."""


class ChecksumError(StreamError):
    """A stored object's length or CRC32C does not match what was recorded; names the object."""


class MissingObjectError(ChecksumError):
    """A WAL object that a committed entry references is gone from the object directory.

    A :class:`ChecksumError` too: the object fails validation (nothing of the declared length is
    there); names the object.
    """


class UnknownStreamError(StreamError, ValueError):
    """The stream id names no stream of this store (create it first with ``create_stream``)."""


class StreamExistsError(StreamError, ValueError):
    """``create_stream`` was given the id of a stream that already exists."""


class OffsetOutOfRangeError(StreamError, ValueError):
    """A read starts outside the retained log: below its log start (trimmed) or past its committed end.

    ``log_start`` and ``committed_end`` give the readable range ``[log_start, committed_end]``.
    """

    def __init__(self, message: str, log_start: int, committed_end: int) -> None:
        super().__init__(message)
        self.log_start = log_start
        self.committed_end = committed_end


class StoreClosedError(StreamError):
    """The stream store was closed; open it again to use it."""


class UncertainAppendError(StreamError):
    """An earlier append on this stream's lane failed at an unknown point and its outcome could not
    be resolved yet (the head store did not answer); later appends wait for the answer rather than
    guess the next offset."""


class CorruptionError(StreamError):
    """What the head store holds is damaged: its database cannot be read (a SQLite file that is
    not a database or is malformed, text that is not UTF-8, a row PostgreSQL reports corrupt), or
    an entry-index row breaks its own structure or fails its checksum.

    The message names the file (or server) and, for an index row, the stream, the row (by its
    first offset) and the field. Nothing is guessed or repaired: the damaged part stays unreadable
    until it is restored; the rest of the store stays usable where it does not depend on it.
    """
