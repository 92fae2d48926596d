"""The head-store interface: the durable metadata the append protocol needs, behind one small class.

A head store keeps, per stream, the head (version, committed end, logical size, newest session's
epoch/token/expiry, log start), the append sessions, the commit intents, the protections of
physical targets, and the entry index (one row per committed append, its per-entry columns
packed). :class:`bucketcore.stream.StreamStore` runs the protocol against this interface only. Its
SQL implementation is written once (``sql_heads.py``: the CAS is one conditional ``UPDATE``), with
a dialect for the embedded default, SQLite (``sqlite_heads.py``), and one for a shared PostgreSQL
database (``postgres_heads.py``).

Every method is atomic on its own (one transaction) and durable when it returns, except
:meth:`HeadStore.protect` and :meth:`HeadStore.put_intent`: those must be visible to every client
of the head store at once but may become durable only with the next durable write (at the latest
the append's own :meth:`HeadStore.commit_append`), provided a crash that loses them also loses
every write made after them. A protection or intent lost that way protected nothing that had
committed, and a retry writes it again. Times are wall-clock seconds (``time.time()``), passed in
by the caller so every check of one append uses one clock reading.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, fields

import numpy as np

from .records import Intent, Session, StreamHead

__all__ = ["INDEX_COLUMNS", "LOCATION_DTYPE", "STAMP_DTYPE", "HeadStore", "IndexRow"]

#: One record per entry of an index row's ``stamps`` BLOB: what ``read_stamps`` returns.
STAMP_DTYPE = np.dtype(
    [
        ("start_offset", "<i8"),
        ("hash_min", "<u2"),
        ("hash_max", "<u2"),
        ("stamped", "u1"),
        ("segment_id", "<i8"),
        ("bucket", "<i4"),
    ]
)

#: One record per entry of an index row's ``locations`` BLOB: where its bytes are in the object.
LOCATION_DTYPE = np.dtype(
    [
        ("payload_off", "<i8"),
        ("payload_len", "<i8"),
        ("payload_crc", "<u4"),
        ("meta_off", "<i8"),
    ]
)

#: The packed columns of an index row that :meth:`HeadStore.scan_index` may be asked for: the
#: BLOBs, and their checksums (``rows.row_checksums``; NULL in rows written before schema 2).
INDEX_COLUMNS = ("stamps", "locations", "metadata", "stamps_crc", "locations_crc")

# What every head store's tables hold, in the order its SQL reads and writes them: a stream's
# head, and an intent (its fields, in the order of :class:`Intent`).
HEAD_COLUMNS = (
    "stream_id, profile, version, committed_end, logical_size, last_commit_id, epoch, "
    "token, writer, lease_expires, log_start"
)
INTENT_FIELDS = tuple(f.name for f in fields(Intent))
INTENT_COLUMNS = ", ".join(INTENT_FIELDS)
#: Index rows a scan reads per statement, and objects a collection removes per transaction.
MAX_BATCH_ROWS = 4096
COLLECT_CHUNK = 256


def intent_row(intent: Intent) -> tuple[object, ...]:
    """The intent's fields in ``INTENT_COLUMNS`` order, as a head store's INSERT takes them."""
    return tuple(getattr(intent, name) for name in INTENT_FIELDS)


@dataclass(frozen=True, slots=True)
class IndexRow:
    """One committed append in the entry index: its range, target and packed per-entry records.

    ``stamps`` holds ``entry_count`` records of :data:`STAMP_DTYPE` and ``locations`` as many of
    :data:`LOCATION_DTYPE` (little-endian, packed); ``metadata`` is every entry's metadata
    concatenated (entry ``i``'s runs from its ``meta_off`` to the next one's, or to the end).
    ``stamps_crc`` is the CRC32C of the row's range, entry count, object and ``stamps``;
    ``locations_crc`` continues it over ``locations`` and ``metadata`` (``rows.row_checksums``),
    so a reader of the stamps alone can check them without reading the rest.
    """

    stream_id: str
    start_offset: int
    end_offset: int
    entry_count: int
    record_count: int
    logical_bytes: int
    commit_id: str
    object_key: str
    object_length: int
    object_crc: int
    stamps: bytes
    locations: bytes
    metadata: bytes
    stamps_crc: int
    locations_crc: int


class HeadStore(abc.ABC):
    """Durable heads, sessions, intents, protections and the entry index of a stream store."""

    # --- lifecycle -----------------------------------------------------------------------------

    @abc.abstractmethod
    def close(self) -> None:
        """Release the connection; later calls may fail."""

    # --- streams and heads ---------------------------------------------------------------------

    @abc.abstractmethod
    def create_stream(self, stream_id: str, profile: str) -> StreamHead:
        """Create a stream's head: version 0, committed end 0, no session.

        Parameters
        ----------
        stream_id, profile : str

        Returns
        -------
        StreamHead

        Raises
        ------
        StreamExistsError
            The stream exists.
        """

    @abc.abstractmethod
    def read_head(self, stream_id: str) -> StreamHead | None:
        """The stream's head, or None if there is no such stream.

        Parameters
        ----------
        stream_id : str

        Returns
        -------
        StreamHead or None
        """

    @abc.abstractmethod
    def stream_ids(self) -> list[str]:
        """Every stream id, sorted.

        Returns
        -------
        list of str
        """

    # --- sessions ------------------------------------------------------------------------------

    @abc.abstractmethod
    def open_session(self, stream_id: str, writer: str, ttl: float, now: float) -> Session:
        """Start a session with an epoch above every earlier one; the head now names it.

        Parameters
        ----------
        stream_id, writer : str
        ttl, now : float

        Returns
        -------
        Session

        Raises
        ------
        UnknownStreamError
            No such stream.
        """

    @abc.abstractmethod
    def renew_session(self, session: Session, ttl: float, now: float) -> Session | None:
        """Extend a session that is still the newest and not expired; None if it is not.

        Parameters
        ----------
        session : Session
        ttl, now : float

        Returns
        -------
        Session or None
        """

    # --- protections and intents ---------------------------------------------------------------

    @abc.abstractmethod
    def protect(self, object_key: str, stream_id: str, commit_id: str, start_offset: int, now: float) -> None:
        """Mark ``object_key`` as used by a pending append, so GC keeps it. Idempotent; durable by
        the next durable write at the latest (see the module notes).

        Parameters
        ----------
        object_key, stream_id, commit_id : str
        start_offset : int
            The offset the pending append expects to commit at.
        now : float
        """

    @abc.abstractmethod
    def put_intent(self, intent: Intent, now: float) -> Intent:
        """Insert ``intent`` unless one with its commit id exists; return the stored one.

        Parameters
        ----------
        intent : Intent
        now : float

        Returns
        -------
        Intent
            The stored intent (the caller compares it to its own).
        """

    @abc.abstractmethod
    def get_intent(self, commit_id: str) -> Intent | None:
        """The intent with this commit id, or None.

        Parameters
        ----------
        commit_id : str

        Returns
        -------
        Intent or None
        """

    @abc.abstractmethod
    def committed_attempt(self, stream_id: str, writer: str, attempt_id: str) -> Intent | None:
        """The committed intent of this (stream, writer, attempt id), or None.

        Parameters
        ----------
        stream_id, writer, attempt_id : str

        Returns
        -------
        Intent or None
        """

    # --- the linearisation point ---------------------------------------------------------------

    @abc.abstractmethod
    def commit_append(
        self, expected: StreamHead, session: Session, intent: Intent, row: IndexRow, now: float
    ) -> StreamHead | None:
        """The head CAS: in one transaction, advance the head if it is still ``expected`` and
        ``session`` still owns it, then index the append, mark the intent committed and drop its
        protection.

        The head update is one conditional ``UPDATE`` on (stream, version, committed end, epoch,
        token, lease not expired); nothing else happens unless it changed exactly one row.

        Parameters
        ----------
        expected : StreamHead
            The head the append was prepared against.
        session : Session
        intent : Intent
            The pending intent being committed.
        row : IndexRow
        now : float

        Returns
        -------
        StreamHead or None
            The new head, or None if the CAS did not apply (nothing was written).

        Raises
        ------
        InvariantViolationError
            The head advanced but the intent was not pending (rolled back, nothing written).
        """

    # --- reads ---------------------------------------------------------------------------------

    @abc.abstractmethod
    def scan_index(
        self, stream_id: str, from_offset: int, columns: Sequence[str], batch_rows: int
    ) -> Iterator[list[tuple]]:
        """Index rows of committed appends ending after ``from_offset``, in offset order, in batches.

        Each row is ``(start_offset, end_offset, entry_count, object_key, object_length,
        *columns)`` where each requested column is its packed bytes.

        Parameters
        ----------
        stream_id : str
        from_offset : int
        columns : sequence of str
            Names from :data:`INDEX_COLUMNS`.
        batch_rows : int
            Rows in the first yielded batch; later batches may grow (a caller that stops early
            fetches little, a long scan fetches in large batches).

        Yields
        ------
        list of tuple
        """

    # --- retention and GC ----------------------------------------------------------------------

    @abc.abstractmethod
    def trim(self, stream_id: str, before_offset: int) -> tuple[int, int]:
        """Raise the log start to the start of the entry holding ``before_offset`` (never lower it),
        and drop the index rows (and committed intents) that end at or before it.

        Parameters
        ----------
        stream_id : str
        before_offset : int
            At most the committed end.

        Returns
        -------
        tuple of int
            (new log start, index rows dropped).
        """

    @abc.abstractmethod
    def release_dead_protections(self) -> int:
        """Drop protections and abandon pending intents that can never commit: their start offset
        is below their stream's committed end (the head moved past them).

        Returns
        -------
        int
            Protections dropped.
        """

    @abc.abstractmethod
    def collect(self, candidates: Sequence[str], remove: Callable[[str], bool]) -> list[str]:
        """Call ``remove(key)`` for every candidate object that no index row references and no
        protection holds, while holding the store's write lock so no protection or commit can
        slip in between the check and the removal.

        Parameters
        ----------
        candidates : sequence of str
            Object keys found in the WAL directory.
        remove : callable
            Removes one object; returns False if it was already gone.

        Returns
        -------
        list of str
            The keys removed.
        """
