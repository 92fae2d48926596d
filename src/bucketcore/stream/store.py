"""The stream store: the fenced append protocol (docs/design.md, "The append protocol") over a
head store and an object WAL.

One append, in order:

1. take whole entries; check ``expected_start_offset`` against the committed end (no WAL I/O yet);
2. check the stream's durability profile has a writer here (fail closed, no I/O);
3. serialise on the stream's in-process lane (an append whose outcome is unknown is resolved
   before the next one starts) and check the session still owns the head;
4. PUT the WAL object: exact bytes, declared length, CRC32C; an existing key must hold the
   same bytes;
5. protect the object from GC, then reread it (closes the race with a concurrent ``gc``);
6. write, or reuse, the commit intent (its id is derived from stream, writer, attempt id and
   start offset, so a retry finds it);
7. the head CAS — one conditional update of version, committed end, epoch, token and lease,
   together with the entry-index row: the linearisation point;
8. the profile's completion boundary (``object-wal``: the durable head itself);
9. return :class:`AppendResult`.

The protocol lives here; reads are in ``reads.py``; all SQL lives in the head stores
(``sql_heads.py``, with its SQLite and PostgreSQL dialects).
"""

from __future__ import annotations

import hashlib
import os
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..entries import EntryTable
from ..errors import (
    CapabilityError,
    FencedError,
    InvariantViolationError,
    OffsetMismatchError,
    StoreClosedError,
    UncertainAppendError,
)
from .heads import LOCATION_DTYPE, STAMP_DTYPE, HeadStore, IndexRow
from .payload import CommittedEntry, EntryColumns, StampColumns
from .reads import read_entries, read_stamp_columns, require_head
from .records import (
    PROFILES,
    AppendResult,
    Intent,
    ReadTarget,
    Session,
    StreamHead,
    check_attempt_id,
    check_count,
    check_offset,
    check_profile,
    check_stream_id,
    check_ttl,
    check_writer,
)
from .rows import row_checksums
from .sqlite_heads import SQLiteHeadStore
from .wal import OBJECT_SUFFIX, EncodedObject, ObjectWal, encode_object

__all__ = ["StreamStore"]

_HEADS_FILE = "heads.sqlite3"
_WAL_DIR = "wal"
_MAX_OFFSET = 2**63 - 1

#: A fault hook gets the number of the step just completed (4, 5, 6 or 7).
FaultHook = Callable[[int], None]


class _Lane:
    """The in-process lane of one stream: appends to it run one at a time."""

    __slots__ = ("lock", "uncertain")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        # commit id of an append whose head CAS raised: it may or may not have committed
        self.uncertain: str | None = None


def _commit_id(stream_id: str, writer: str, attempt_id: str, start_offset: int) -> str:
    h = hashlib.sha256()
    for part in (stream_id, writer, attempt_id, str(start_offset)):
        h.update(part.encode("utf-8"))
        h.update(b"\x00")
    return h.hexdigest()[:32]


def _same_intent(a: Intent, b: Intent) -> bool:
    """Whether two intents describe the same append (the session epoch may differ: a retry)."""
    return (
        a.stream_id,
        a.writer,
        a.attempt_id,
        a.start_offset,
        a.end_offset,
        a.record_count,
        a.entry_count,
        a.logical_bytes,
        a.object_key,
        a.object_length,
        a.object_crc,
        a.content_crc,
    ) == (
        b.stream_id,
        b.writer,
        b.attempt_id,
        b.start_offset,
        b.end_offset,
        b.record_count,
        b.entry_count,
        b.logical_bytes,
        b.object_key,
        b.object_length,
        b.object_crc,
        b.content_crc,
    )


class StreamStore:
    """An embedded stream store: streams of whole entries with stable offsets, fenced appends.

    Create one with :meth:`open`. A store is safe to share between threads (appends to one stream
    are serialised in its lane), and several processes may open the same directory: the head
    store's CAS fences them.
    """

    def __init__(
        self, path: str, heads: HeadStore, wal: ObjectWal, *, owns_heads: bool = True, _fault: FaultHook | None = None
    ) -> None:
        self.path = path
        self._heads = heads
        self._wal = wal
        self._owns_heads = owns_heads
        self._fault = _fault
        self._lanes: dict[str, _Lane] = {}
        self._lanes_lock = threading.Lock()
        self._closed = False

    # --- lifecycle -----------------------------------------------------------------------------

    @classmethod
    def open(
        cls, path: str | os.PathLike[str], heads: HeadStore | str | None = None, *, _fault: FaultHook | None = None
    ) -> StreamStore:
        """Open (creating if needed) the store in directory ``path``.

        The directory holds ``heads.sqlite3`` (the head store, unless ``heads`` is given) and
        ``wal/`` (the object WAL).

        Parameters
        ----------
        path : str or os.PathLike
            The store's directory.
        heads : HeadStore, str or None
            None: the embedded SQLite head store in ``path``. A :class:`HeadStore` instance: use
            it (the caller closes it). A ``postgresql://`` (or ``postgres://``) URL: the shared
            PostgreSQL head store there (extra ``bucketcore[postgres]``), closed with the store.

        Returns
        -------
        StreamStore

        Raises
        ------
        TypeError
            ``path`` or ``heads`` of the wrong type.
        CapabilityError
            ``heads`` is a URL of a kind no installed head store serves (nothing is created).
        StreamError
            The PostgreSQL head store cannot be reached (nothing is created), or SQLite cannot
            open the head database.
        CorruptionError
            The head database is damaged (named).
        """
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path must be a str or os.PathLike, not {type(path).__name__}")
        path = os.fspath(path)
        if not isinstance(path, str):
            raise TypeError("path must name a directory as text, not bytes")
        if heads is not None and not isinstance(heads, (str, HeadStore)):
            raise TypeError(f"heads must be None, a HeadStore or a URL, not {type(heads).__name__}")
        owned: HeadStore | None = None
        if isinstance(heads, str):
            # the head store is reached (and fails, if it must) before anything is created here
            owned = cls._heads_from_url(heads)
        try:
            os.makedirs(path, exist_ok=True)
            wal = ObjectWal(os.path.join(path, _WAL_DIR))
        except BaseException:
            if owned is not None:
                owned.close()
            raise
        if owned is not None:
            return cls(path, owned, wal, _fault=_fault)
        if heads is None:
            return cls(path, SQLiteHeadStore(os.path.join(path, _HEADS_FILE)), wal, _fault=_fault)
        assert isinstance(heads, HeadStore)
        return cls(path, heads, wal, owns_heads=False, _fault=_fault)

    @staticmethod
    def _heads_from_url(url: str) -> HeadStore:
        """The shared head store a URL names; CapabilityError if this install has none for it."""
        if url.startswith(("postgresql://", "postgres://")):
            try:
                from .postgres_heads import PostgresHeadStore
            except ImportError as err:
                raise CapabilityError(f"no PostgreSQL head store is installed ({err})") from None
            return PostgresHeadStore(url)
        scheme = url.split(":", 1)[0] if ":" in url else url
        raise CapabilityError(
            f"no head store for {scheme!r} is installed (heads=None: the embedded "
            f"SQLite head store; heads='postgresql://...': a shared PostgreSQL one)"
        )

    def close(self) -> None:
        """Close the store (its head store too, if the store opened it). Idempotent."""
        if not self._closed:
            self._closed = True
            if self._owns_heads:
                self._heads.close()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def __enter__(self) -> StreamStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError(f"the stream store at {self.path} is closed")

    def _lane(self, stream_id: str) -> _Lane:
        with self._lanes_lock:
            lane = self._lanes.get(stream_id)
            if lane is None:
                lane = self._lanes[stream_id] = _Lane()
            return lane

    def _head(self, stream_id: str) -> StreamHead:
        return require_head(self._heads, stream_id)

    # --- streams and sessions ------------------------------------------------------------------

    def create_stream(self, stream_id: str, profile: str = "object-wal") -> StreamHead:
        """Create an empty stream.

        Parameters
        ----------
        stream_id : str
            See :func:`bucketcore.stream.records.check_stream_id` for the accepted form.
        profile : str
            The durability profile; ``"object-wal"`` (immutable objects, complete at the stable
            head) is the one this build writes.

        Returns
        -------
        StreamHead
            The new head (committed end 0, version 0).

        Raises
        ------
        TypeError, ValueError
            A malformed stream id or profile type.
        CapabilityError
            No writer for ``profile`` (checked before any I/O).
        StreamExistsError
            The stream exists.
        StoreClosedError
        """
        self._check_open()
        check_stream_id(stream_id)
        check_profile(profile)
        return self._heads.create_stream(stream_id, profile)

    def streams(self) -> list[str]:
        """Ids of every stream in the store, sorted.

        Returns
        -------
        list of str

        Raises
        ------
        StoreClosedError
        """
        self._check_open()
        return self._heads.stream_ids()

    def head(self, stream_id: str) -> StreamHead:
        """The stream's current durable head.

        Parameters
        ----------
        stream_id : str

        Returns
        -------
        StreamHead

        Raises
        ------
        UnknownStreamError
        StoreClosedError
        """
        self._check_open()
        check_stream_id(stream_id)
        return self._head(stream_id)

    def open_session(self, stream_id: str, writer: str, ttl: float = 30.0) -> Session:
        """Open an append session: a higher epoch than every earlier session, which become stale.

        Parameters
        ----------
        stream_id : str
        writer : str
            The writer's identity (1..200 printable characters); part of every commit id.
        ttl : float
            Seconds the session stays valid (renew with :meth:`renew_session`).

        Returns
        -------
        Session

        Raises
        ------
        TypeError, ValueError
            Malformed arguments.
        UnknownStreamError
        StoreClosedError
        """
        self._check_open()
        check_stream_id(stream_id)
        check_writer(writer)
        ttl = check_ttl(ttl)
        return self._heads.open_session(stream_id, writer, ttl, time.time())

    def renew_session(self, session: Session, ttl: float = 30.0) -> Session:
        """Extend a session that still owns its stream and has not expired.

        Parameters
        ----------
        session : Session
        ttl : float
            New time to live, counted from now.

        Returns
        -------
        Session
            The session with its new expiry (use it for later appends).

        Raises
        ------
        FencedError
            A newer session owns the stream, or this one expired.
        StoreClosedError
        """
        self._check_open()
        if not isinstance(session, Session):
            raise TypeError(f"session must be a Session, not {type(session).__name__}")
        ttl = check_ttl(ttl)
        renewed = self._heads.renew_session(session, ttl, time.time())
        if renewed is None:
            raise self._fenced(self._head(session.stream_id), session, time.time())
        return renewed

    @staticmethod
    def _fenced(head: StreamHead, session: Session, now: float) -> FencedError:
        if head.epoch != session.epoch or head.token != session.token:
            return FencedError(
                f"session epoch {session.epoch} of writer {session.writer!r} is stale: "
                f"epoch {head.epoch} (writer {head.writer!r}) owns stream {head.stream_id!r}"
            )
        return FencedError(
            f"session epoch {session.epoch} of writer {session.writer!r} expired "
            f"{now - head.lease_expires:.3f} s ago on stream {head.stream_id!r}"
        )

    # --- append --------------------------------------------------------------------------------

    def append(
        self,
        stream_id: str,
        entries: Sequence[Any],
        *,
        session: Session,
        expected_start_offset: int | None = None,
        attempt_id: str | None = None,
    ) -> AppendResult:
        """Append whole entries as one commit: one WAL object and one head transaction.

        Parameters
        ----------
        stream_id : str
        entries : list or tuple of EntryPayload
            At least one entry; each occupies ``record_count`` offsets.
        session : Session
            The writer's current session (from :meth:`open_session`).
        expected_start_offset : int, optional
            If given, the append commits only if the stream's committed end equals it.
        attempt_id : str, optional
            Identity of this logical append. A retry with the same ``attempt_id`` (same writer,
            same entries) after an error commits at most once: if the first try committed, the
            retry returns its result; if it did not, the retry reuses its WAL object and intent.
            Omitted: a fresh id (no retry can be recognised).

        Returns
        -------
        AppendResult

        Raises
        ------
        TypeError, ValueError
            Malformed arguments (nothing written).
        UnknownStreamError
        OffsetMismatchError
            The committed end is not ``expected_start_offset`` (before WAL I/O), or another append
            of the same session won the head CAS.
        CapabilityError
            The stream's profile has no writer in this build (before WAL I/O).
        FencedError
            The session is stale or expired.
        InvariantViolationError
            ``attempt_id`` was used before with different entries, or an immutable object or intent
            key holds different content; nothing is overwritten.
        UncertainAppendError
            An earlier append of this lane failed at its head CAS and its outcome cannot be read yet.
        StoreClosedError
        """
        self._check_open()
        cols = EntryColumns.from_payloads(entries)
        return self._append(stream_id, cols, session, expected_start_offset, attempt_id)

    def append_table(
        self,
        stream_id: str,
        table: EntryTable,
        payloads: Sequence[Any],
        *,
        session: Session,
        metadata: Sequence[Any] | None = None,
        expected_start_offset: int | None = None,
        attempt_id: str | None = None,
    ) -> AppendResult:
        """Append every entry of a producer's :class:`EntryTable` in one commit, stamps included.

        Entry ``i`` holds the payloads of its messages (``table.order[start:start+count]``) framed
        by :func:`bucketcore.stream.pack_messages`; its record count is its message count.

        Parameters
        ----------
        stream_id : str
        table : EntryTable
        payloads : sequence of bytes-like
            One per message of the input the table was made from, in message index order.
        session : Session
        metadata : sequence of bytes-like, optional
            One per entry.
        expected_start_offset, attempt_id
            As for :meth:`append`.

        Returns
        -------
        AppendResult

        Raises
        ------
        As :meth:`append`.
        """
        self._check_open()
        cols = EntryColumns.from_table(table, payloads, metadata)
        return self._append(stream_id, cols, session, expected_start_offset, attempt_id)

    def _append(
        self,
        stream_id: str,
        cols: EntryColumns,
        session: Session,
        expected_start_offset: int | None,
        attempt_id: str | None,
    ) -> AppendResult:
        check_stream_id(stream_id)
        if not isinstance(session, Session):
            raise TypeError(f"session must be a Session, not {type(session).__name__}")
        if session.stream_id != stream_id:
            raise ValueError(f"session belongs to stream {session.stream_id!r}, not {stream_id!r}")
        expected = (
            None if expected_start_offset is None else check_offset(expected_start_offset, "expected_start_offset")
        )
        attempt = secrets.token_hex(16) if attempt_id is None else check_attempt_id(attempt_id)
        records = int(cols.record_count.sum())
        lane = self._lane(stream_id)
        with lane.lock:
            self._resolve(lane, stream_id)
            head = self._head(stream_id)
            if attempt_id is not None:
                done = self._heads.committed_attempt(stream_id, session.writer, attempt)
                if done is not None:
                    return self._replay(done, cols)
            # step 1: the expected start, before any WAL I/O
            if expected is not None and expected != head.committed_end:
                raise OffsetMismatchError(
                    f"expected_start_offset {expected} but stream {stream_id!r} ends at "
                    f"{head.committed_end}; nothing was written"
                )
            # step 2: the profile must have a writer here (fail closed)
            if head.profile not in PROFILES:
                raise CapabilityError(
                    f"stream {stream_id!r} has profile {head.profile!r}, for which "
                    f"no writer is installed; nothing was written"
                )
            # step 3: the lane is held; the session must own the head (the CAS re-checks)
            now = time.time()
            if head.epoch != session.epoch or head.token != session.token or head.lease_expires <= now:
                raise self._fenced(head, session, now)
            start = head.committed_end
            end = start + records
            if end > _MAX_OFFSET:
                raise ValueError(f"the append's {records} records would run past offset 2**63-1")
            commit_id = _commit_id(stream_id, session.writer, attempt, start)
            key = commit_id + OBJECT_SUFFIX
            obj = encode_object(stream_id, commit_id, start, cols)
            intent = Intent(
                commit_id,
                stream_id,
                session.writer,
                attempt,
                session.epoch,
                start,
                end,
                records,
                len(cols),
                obj.logical_bytes,
                key,
                len(obj.data),
                obj.object_crc,
                obj.content_crc,
            )
            existing = self._heads.get_intent(commit_id)
            if existing is not None and not _same_intent(existing, intent):
                raise InvariantViolationError(
                    f"commit intent {commit_id!r} (attempt {attempt!r} of writer {session.writer!r}) "
                    f"exists with different content; nothing was written"
                )
            # step 4: the WAL PUT (reuses an identical object left by an earlier try)
            self._wal.put(key, obj.data)
            self._step(4)
            # step 5: protect, then reread: a gc that ran between the PUT and the protection may
            # have removed the object, which is then published again
            self._heads.protect(key, stream_id, commit_id, start, now)
            if not self._wal.present(key, len(obj.data)):
                self._wal.put(key, obj.data)
            self._step(5)
            # step 6: write or reuse the intent
            stored = self._heads.put_intent(intent, now)
            if not _same_intent(stored, intent):
                raise InvariantViolationError(
                    f"commit intent {commit_id!r} exists with different content; nothing was committed "
                    f"(the prepared WAL object is left for gc)"
                )
            if stored.state == "committed":  # the same attempt committed meanwhile, from elsewhere
                return self._replay(stored, cols)
            self._step(6)
            # step 7: the head CAS, the linearisation point
            row = self._index_row(stream_id, start, end, commit_id, key, cols, obj)
            lane.uncertain = commit_id
            new_head = self._heads.commit_append(head, session, stored, row, time.time())
            lane.uncertain = None
            if new_head is None:
                raise self._cas_refused(stream_id, session, head)
            self._step(7)
            # step 8: the object-wal profile completes at the stable head, which the CAS
            # transaction made durable; nothing more to wait for
            # step 9
            return AppendResult(
                stream_id,
                start,
                end,
                new_head.committed_end,
                new_head.logical_size,
                new_head.version,
                commit_id,
                self._target(key, len(obj.data), obj.object_crc),
                records,
                len(cols),
            )

    def _step(self, step: int) -> None:
        if self._fault is not None:
            self._fault(step)

    @staticmethod
    def _target(key: str, length: int, crc: int) -> ReadTarget:
        return ReadTarget(key, length, crc)

    def _resolve(self, lane: _Lane, stream_id: str) -> None:
        """Settle the outcome of an append whose head CAS raised before the next append starts."""
        if lane.uncertain is None:
            return
        try:
            self._heads.get_intent(lane.uncertain)
        except Exception as exc:
            raise UncertainAppendError(
                f"an earlier append to stream {stream_id!r} (commit {lane.uncertain!r}) failed at its "
                f"head CAS and its outcome cannot be read yet: {exc}"
            ) from exc
        # the head store answers again: the head read next shows whether that append committed
        lane.uncertain = None

    def _replay(self, done: Intent, cols: EntryColumns) -> AppendResult:
        """The result of an attempt that already committed, if the retry carries the same entries."""
        obj = encode_object(done.stream_id, done.commit_id, done.start_offset, cols)
        if (len(obj.data), obj.object_crc, len(cols)) != (done.object_length, done.object_crc, done.entry_count):
            raise InvariantViolationError(
                f"attempt {done.attempt_id!r} of writer {done.writer!r} committed different entries "
                f"at [{done.start_offset}, {done.end_offset}) of stream {done.stream_id!r}"
            )
        assert done.commit_version is not None and done.logical_size is not None
        return AppendResult(
            done.stream_id,
            done.start_offset,
            done.end_offset,
            done.end_offset,
            done.logical_size,
            done.commit_version,
            done.commit_id,
            self._target(done.object_key, done.object_length, done.object_crc),
            done.record_count,
            done.entry_count,
        )

    def _cas_refused(self, stream_id: str, session: Session, expected: StreamHead) -> Exception:
        now = time.time()
        head = self._head(stream_id)
        if head.epoch != session.epoch or head.token != session.token or head.lease_expires <= now:
            return self._fenced(head, session, now)
        return OffsetMismatchError(
            f"stream {stream_id!r} moved from version {expected.version} (end {expected.committed_end}) "
            f"to version {head.version} (end {head.committed_end}) during the append, by another "
            f"append of the same session; nothing was committed"
        )

    @staticmethod
    def _index_row(
        stream_id: str, start: int, end: int, commit_id: str, key: str, cols: EntryColumns, obj: EncodedObject
    ) -> IndexRow:
        n = len(cols)
        stamps = np.zeros(n, dtype=STAMP_DTYPE)
        starts = stamps["start_offset"]
        starts[0] = start
        if n > 1:
            np.cumsum(cols.record_count[:-1], out=starts[1:])
            starts[1:] += start
        stamps["hash_min"] = cols.hash_min
        stamps["hash_max"] = cols.hash_max
        stamps["stamped"] = cols.stamped
        stamps["segment_id"] = cols.segment_id
        stamps["bucket"] = cols.bucket
        locations = np.zeros(n, dtype=LOCATION_DTYPE)
        locations["payload_off"] = obj.payload_off
        locations["payload_len"] = obj.payload_len
        locations["payload_crc"] = obj.payload_crc
        locations["meta_off"] = obj.meta_off[:-1]
        b_stamps, b_locations = stamps.tobytes(), locations.tobytes()
        crcs = row_checksums(stream_id, start, end, n, key, len(obj.data), b_stamps, b_locations, obj.metadata)
        return IndexRow(
            stream_id,
            start,
            end,
            n,
            end - start,
            obj.logical_bytes,
            commit_id,
            key,
            len(obj.data),
            obj.object_crc,
            b_stamps,
            b_locations,
            obj.metadata,
            *crcs,
        )

    # --- reads ---------------------------------------------------------------------------------

    def read(self, stream_id: str, from_offset: int = 0, max_entries: int = 100) -> list[CommittedEntry]:
        """Committed entries from ``from_offset`` on, payload checksums verified.

        An offset inside an entry returns that whole entry first. Reads see only committed
        appends.

        Parameters
        ----------
        stream_id : str
        from_offset : int
            In ``[log_start, committed_end]``; the committed end gives an empty list.
        max_entries : int
            At most this many entries (>= 1).

        Returns
        -------
        list of CommittedEntry

        Raises
        ------
        TypeError, ValueError
            Malformed arguments.
        UnknownStreamError
        OffsetOutOfRangeError
            ``from_offset`` below the log start (trimmed) or past the committed end.
        ChecksumError
            An entry's bytes or its object's length do not match the index (names the object);
            :class:`MissingObjectError` if the object is gone.
        CorruptionError
            An index row on the way is damaged (names the stream, the row and the field), or the
            head database is.
        StoreClosedError
        """
        self._check_open()
        check_stream_id(stream_id)
        from_offset = check_offset(from_offset, "from_offset")
        max_entries = check_count(max_entries, "max_entries")
        return read_entries(self._heads, self._wal, stream_id, from_offset, max_entries)

    def read_stamps(self, stream_id: str, from_offset: int = 0, max_entries: int | None = None) -> StampColumns:
        """The stamps of committed entries from ``from_offset`` on, as numpy columns; no payload is read.

        ``columns.hash_min`` feeds :func:`bucketcore.route_entries` directly.

        Parameters
        ----------
        stream_id : str
        from_offset : int
            In ``[log_start, committed_end]``; an offset inside an entry starts with that entry.
        max_entries : int or None
            At most this many entries; None: up to the committed end.

        Returns
        -------
        StampColumns
            Read-only columns.

        Raises
        ------
        TypeError, ValueError
            Malformed arguments.
        UnknownStreamError
        OffsetOutOfRangeError
        CorruptionError
            The stamps of an index row on the way are damaged (names the stream, the row and the
            field), or the head database is.
        StoreClosedError
        """
        self._check_open()
        check_stream_id(stream_id)
        from_offset = check_offset(from_offset, "from_offset")
        limit = None if max_entries is None else check_count(max_entries, "max_entries")
        return read_stamp_columns(self._heads, stream_id, from_offset, limit)

    # --- retention and GC ----------------------------------------------------------------------

    def trim(self, stream_id: str, before_offset: int) -> int:
        """Retention: drop the entries that end at or before ``before_offset``.

        The log start becomes the start of the entry holding ``before_offset`` (an entry is never
        split; the log start never moves back). Index rows of appends wholly before it go, so
        their WAL objects become collectable by :meth:`gc`.

        Parameters
        ----------
        stream_id : str
        before_offset : int
            At most the committed end.

        Returns
        -------
        int
            The new log start.

        Raises
        ------
        TypeError, ValueError
            Malformed arguments or ``before_offset`` past the committed end.
        UnknownStreamError
        StoreClosedError
        """
        self._check_open()
        check_stream_id(stream_id)
        before_offset = check_offset(before_offset, "before_offset")
        with self._lane(stream_id).lock:
            log_start, _ = self._heads.trim(stream_id, before_offset)
        return log_start

    def gc(self, *, temp_grace: float = 3600.0) -> int:
        """Remove WAL objects that no committed entry references and no pending append protects.

        Pending appends that can never commit (their stream's head moved past their start) lose
        their protection first. Temporary files of interrupted PUTs are removed once
        ``temp_grace`` seconds old.

        Parameters
        ----------
        temp_grace : float
            Age in seconds from which a temporary file is taken as abandoned (>= 0).

        Returns
        -------
        int
            Number of WAL objects removed.

        Raises
        ------
        StoreClosedError
        """
        self._check_open()
        if isinstance(temp_grace, bool) or not isinstance(temp_grace, (int, float)) or not temp_grace >= 0:
            raise ValueError(f"temp_grace must be a number of seconds >= 0, got {temp_grace!r}")
        self._heads.release_dead_protections()
        removed = self._heads.collect(self._wal.objects(), self._wal.remove)
        temps = [t for t in self._wal.stale_temps(float(temp_grace)) if self._wal.remove(t)]
        if removed or temps:
            self._wal.sync()
        return len(removed)
