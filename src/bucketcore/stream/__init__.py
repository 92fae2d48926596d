"""bucketcore.stream: the embedded stream store, following the fenced append protocol.

Streams of whole entries with stable offsets. Every append is one immutable WAL object and one
head transaction; the head CAS (version, committed end, session epoch and token) is its
linearisation point, so appends survive crashes and stale writers are fenced. Entries keep their
bucket stamps as index columns, which :meth:`StreamStore.read_stamps` returns as numpy columns
for :func:`bucketcore.route_entries`. See docs/stream.md.
"""

from __future__ import annotations

from ..errors import (
    CapabilityError,
    ChecksumError,
    CorruptionError,
    FencedError,
    InvariantViolationError,
    MissingObjectError,
    OffsetMismatchError,
    OffsetOutOfRangeError,
    StoreClosedError,
    StreamError,
    StreamExistsError,
    UncertainAppendError,
    UnknownStreamError,
)
from .heads import HeadStore, IndexRow
from .payload import (
    CommittedEntry,
    EntryPayload,
    StampColumns,
    pack_messages,
    unpack_messages,
)
from .records import (
    PROFILES,
    AppendResult,
    Intent,
    Profile,
    ReadTarget,
    Session,
    StreamHead,
)
from .sqlite_heads import SQLiteHeadStore
from .store import StreamStore

__all__ = [
    "PROFILES",
    "AppendResult",
    "CapabilityError",
    "ChecksumError",
    "CommittedEntry",
    "CorruptionError",
    "EntryPayload",
    "FencedError",
    "HeadStore",
    "IndexRow",
    "Intent",
    "InvariantViolationError",
    "MissingObjectError",
    "OffsetMismatchError",
    "OffsetOutOfRangeError",
    "Profile",
    "ReadTarget",
    "SQLiteHeadStore",
    "Session",
    "StampColumns",
    "StoreClosedError",
    "StreamError",
    "StreamExistsError",
    "StreamHead",
    "StreamStore",
    "UncertainAppendError",
    "UnknownStreamError",
    "pack_messages",
    "unpack_messages",
]
