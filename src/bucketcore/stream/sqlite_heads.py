"""The embedded head store: one SQLite database (WAL journal, ``synchronous=FULL``).

Every write is one ``BEGIN IMMEDIATE`` transaction, so heads, sessions, intents, protections and
the entry index change atomically and durably, and several processes can share the file (SQLite's
locks serialise their writers). All SQL of the stream store lives in this module.

No ``sqlite3`` error leaves this module: a damaged file (not a database, a malformed page, text
that is not UTF-8) is a :class:`CorruptionError` naming the file, any other failure of SQLite a
:class:`StreamError` naming it.
"""

from __future__ import annotations

import functools
import secrets
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import numpy as np

from ..errors import (
    CorruptionError,
    InvariantViolationError,
    StreamError,
    StreamExistsError,
    UnknownStreamError,
)
from .heads import (
    COLLECT_CHUNK,
    HEAD_COLUMNS,
    INDEX_COLUMNS,
    INTENT_COLUMNS,
    MAX_BATCH_ROWS,
    HeadStore,
    IndexRow,
    intent_row,
)
from .records import Intent, Session, StreamHead
from .rows import checked_stamps, schema_version

__all__ = ["SCHEMA_VERSION", "SQLiteHeadStore"]

#: Version of the database layout this module writes and reads. Schema 2 added the index rows'
#: checksums (``stamps_crc``, ``locations_crc``); a schema-1 file is upgraded when opened, its
#: old rows keeping NULL there (checked by their structure alone).
SCHEMA_VERSION = 2

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS streams (
    stream_id TEXT PRIMARY KEY,
    profile TEXT NOT NULL,
    version INTEGER NOT NULL,
    committed_end INTEGER NOT NULL,
    logical_size INTEGER NOT NULL,
    last_commit_id TEXT,
    epoch INTEGER NOT NULL,
    token TEXT NOT NULL,
    writer TEXT,
    lease_expires REAL NOT NULL,
    log_start INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS sessions (
    stream_id TEXT NOT NULL,
    epoch INTEGER NOT NULL,
    token TEXT NOT NULL,
    writer TEXT NOT NULL,
    opened_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    PRIMARY KEY (stream_id, epoch)
);
CREATE TABLE IF NOT EXISTS protections (
    object_key TEXT PRIMARY KEY,
    stream_id TEXT NOT NULL,
    commit_id TEXT NOT NULL,
    start_offset INTEGER NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS intents (
    commit_id TEXT PRIMARY KEY,
    stream_id TEXT NOT NULL,
    writer TEXT NOT NULL,
    attempt_id TEXT NOT NULL,
    epoch INTEGER NOT NULL,
    start_offset INTEGER NOT NULL,
    end_offset INTEGER NOT NULL,
    record_count INTEGER NOT NULL,
    entry_count INTEGER NOT NULL,
    logical_bytes INTEGER NOT NULL,
    object_key TEXT NOT NULL,
    object_length INTEGER NOT NULL,
    object_crc INTEGER NOT NULL,
    content_crc INTEGER NOT NULL,
    state TEXT NOT NULL,
    commit_version INTEGER,
    logical_size INTEGER,
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS intents_attempt ON intents (stream_id, writer, attempt_id);
CREATE TABLE IF NOT EXISTS appends (
    stream_id TEXT NOT NULL,
    end_offset INTEGER NOT NULL,
    start_offset INTEGER NOT NULL,
    entry_count INTEGER NOT NULL,
    record_count INTEGER NOT NULL,
    logical_bytes INTEGER NOT NULL,
    commit_id TEXT NOT NULL,
    object_key TEXT NOT NULL,
    object_length INTEGER NOT NULL,
    object_crc INTEGER NOT NULL,
    stamps_crc INTEGER,
    locations_crc INTEGER,
    stamps BLOB NOT NULL,
    locations BLOB NOT NULL,
    metadata BLOB NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS appends_range ON appends (stream_id, end_offset);
CREATE INDEX IF NOT EXISTS appends_object ON appends (object_key);
"""

_SCANNABLE = frozenset(INDEX_COLUMNS)

# The head CAS: the append's linearisation point. One conditional UPDATE; a head store on another
# database keeps exactly this shape.
_CAS = """
UPDATE streams
   SET version = version + 1, committed_end = ?, logical_size = logical_size + ?, last_commit_id = ?
 WHERE stream_id = ? AND version = ? AND committed_end = ? AND epoch = ? AND token = ?
   AND lease_expires > ?
"""


# SQLite's primary result codes for a damaged database file: SQLITE_CORRUPT, SQLITE_NOTADB
_DAMAGED = frozenset({11, 26})
_Method = TypeVar("_Method", bound=Callable[..., Any])


def _stream_error(path: str, err: sqlite3.Error | UnicodeDecodeError) -> StreamError:
    """The StreamError for an error of SQLite on the head store ``path``."""
    if isinstance(err, UnicodeDecodeError):
        return CorruptionError(f"the head store {path} is damaged: it holds text that is not UTF-8 ({err.reason})")
    code = getattr(err, "sqlite_errorcode", None)
    if code is not None and code & 0xFF in _DAMAGED:
        return CorruptionError(f"the head store {path} is damaged: {err}")
    if str(err).startswith("Could not decode to UTF-8"):
        # the sqlite3 module's own error for a TEXT value that is not UTF-8 (no SQLite code)
        return CorruptionError(f"the head store {path} is damaged: it holds text that is not UTF-8 ({err})")
    return StreamError(f"the head store {path} failed: {err}")


def _translated(method: _Method) -> _Method:
    """Raise SQLite's errors out of ``method`` as the store's (:func:`_stream_error`)."""

    @functools.wraps(method)
    def run(self: SQLiteHeadStore, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except (sqlite3.Error, UnicodeDecodeError) as err:
            raise _stream_error(self.path, err) from err

    return run  # type: ignore[return-value]


class SQLiteHeadStore(HeadStore):
    """The :class:`HeadStore` of an embedded store: one SQLite file shared by any number of processes.

    Parameters
    ----------
    path : str
        The database file (created with its schema if missing).
    busy_timeout : float
        Seconds a writer waits for another process's write lock before failing.

    Raises
    ------
    StreamError
        The file holds a newer schema than this build knows, or SQLite cannot open it.
    CorruptionError
        The file is damaged (not a database, malformed, text that is not UTF-8).
    """

    def __init__(self, path: str, *, busy_timeout: float = 30.0) -> None:
        self.path = path
        self._lock = threading.RLock()
        try:
            self._db = sqlite3.connect(path, timeout=busy_timeout, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as err:
            raise _stream_error(path, err) from err
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            # macOS: a journal sync reaches the disk, not just the drive's cache (no-op elsewhere)
            self._db.execute("PRAGMA fullfsync=ON")
            self._sync = "FULL"
            self._create_schema()
        except (sqlite3.Error, UnicodeDecodeError) as err:
            self._db.close()
            raise _stream_error(path, err) from err
        except BaseException:
            self._db.close()
            raise

    def _create_schema(self) -> None:
        with self._write() as db:
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    db.execute(statement)
            row = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
            if row is None:
                db.execute("INSERT INTO meta (key, value) VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
                return
            stored = schema_version(row[0], self.path)
            if stored > SCHEMA_VERSION:
                raise StreamError(
                    f"{self.path} holds stream-store schema {row[0]}; this build reads up to {SCHEMA_VERSION}"
                )
            if stored < 2:
                # the checksums go after the BLOBs here (SQLite adds columns at the end): a new
                # file has them before, so reading them does not walk the BLOBs' pages
                db.execute("ALTER TABLE appends ADD COLUMN stamps_crc INTEGER")
                db.execute("ALTER TABLE appends ADD COLUMN locations_crc INTEGER")
                db.execute("UPDATE meta SET value = ? WHERE key = 'schema'", (str(SCHEMA_VERSION),))

    @contextmanager
    def _write(self, durable: bool = True) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction: committed on success, rolled back on any error.

        ``durable=False`` commits without syncing the journal: the transaction is visible to every
        connection at once and becomes durable with the next synced commit, of this process or
        another (the WAL journal is replayed in order, so a crash that loses it loses every later
        transaction too).
        """
        with self._lock:
            db = self._db
            level = "FULL" if durable else "NORMAL"
            if self._sync != level:
                db.execute(f"PRAGMA synchronous={level}")
                self._sync = level
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                # SQLite may have rolled back already (some errors end the transaction)
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._db.close()

    # --- streams and heads ---------------------------------------------------------------------

    @_translated
    def create_stream(self, stream_id: str, profile: str) -> StreamHead:
        """See :meth:`HeadStore.create_stream`."""
        with self._write() as db:
            try:
                db.execute(
                    f"INSERT INTO streams ({HEAD_COLUMNS}) VALUES (?, ?, 0, 0, 0, NULL, 0, '', NULL, 0.0, 0)",
                    (stream_id, profile),
                )
            except sqlite3.IntegrityError:
                raise StreamExistsError(f"stream {stream_id!r} already exists") from None
            head = self._head(db, stream_id)
        assert head is not None
        return head

    @staticmethod
    def _head(db: sqlite3.Connection, stream_id: str) -> StreamHead | None:
        row = db.execute(f"SELECT {HEAD_COLUMNS} FROM streams WHERE stream_id = ?", (stream_id,)).fetchone()
        return None if row is None else StreamHead(*row)

    @_translated
    def read_head(self, stream_id: str) -> StreamHead | None:
        """See :meth:`HeadStore.read_head`."""
        with self._lock:
            return self._head(self._db, stream_id)

    @_translated
    def stream_ids(self) -> list[str]:
        """See :meth:`HeadStore.stream_ids`."""
        with self._lock:
            return [r[0] for r in self._db.execute("SELECT stream_id FROM streams ORDER BY stream_id")]

    # --- sessions ------------------------------------------------------------------------------

    @_translated
    def open_session(self, stream_id: str, writer: str, ttl: float, now: float) -> Session:
        """See :meth:`HeadStore.open_session`."""
        with self._write() as db:
            row = db.execute("SELECT epoch FROM streams WHERE stream_id = ?", (stream_id,)).fetchone()
            if row is None:
                raise UnknownStreamError(f"no stream {stream_id!r} in this store")
            epoch = int(row[0]) + 1
            token = secrets.token_hex(16)
            expires = now + ttl
            db.execute(
                "UPDATE streams SET epoch = ?, token = ?, writer = ?, lease_expires = ? WHERE stream_id = ?",
                (epoch, token, writer, expires, stream_id),
            )
            db.execute(
                "INSERT INTO sessions (stream_id, epoch, token, writer, opened_at, expires_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (stream_id, epoch, token, writer, now, expires),
            )
        return Session(stream_id, epoch, token, writer, expires)

    @_translated
    def renew_session(self, session: Session, ttl: float, now: float) -> Session | None:
        """See :meth:`HeadStore.renew_session`."""
        expires = now + ttl
        with self._write() as db:
            cur = db.execute(
                "UPDATE streams SET lease_expires = ? WHERE stream_id = ? AND epoch = ? "
                "AND token = ? AND lease_expires > ?",
                (expires, session.stream_id, session.epoch, session.token, now),
            )
            if cur.rowcount != 1:
                return None
            db.execute(
                "UPDATE sessions SET expires_at = ? WHERE stream_id = ? AND epoch = ?",
                (expires, session.stream_id, session.epoch),
            )
        return Session(session.stream_id, session.epoch, session.token, session.writer, expires)

    # --- protections and intents ---------------------------------------------------------------

    @_translated
    def protect(self, object_key: str, stream_id: str, commit_id: str, start_offset: int, now: float) -> None:
        """See :meth:`HeadStore.protect`."""
        with self._write(durable=False) as db:
            db.execute(
                "INSERT INTO protections (object_key, stream_id, commit_id, start_offset, created_at) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (object_key) DO NOTHING",
                (object_key, stream_id, commit_id, start_offset, now),
            )

    @_translated
    def put_intent(self, intent: Intent, now: float) -> Intent:
        """See :meth:`HeadStore.put_intent`."""
        with self._write(durable=False) as db:
            db.execute(
                f"INSERT INTO intents ({INTENT_COLUMNS}, created_at) "
                f"VALUES ({', '.join('?' * 18)}) ON CONFLICT (commit_id) DO NOTHING",
                (*intent_row(intent), now),
            )
            stored = self._intent(db, intent.commit_id)
        assert stored is not None
        return stored

    @staticmethod
    def _intent(db: sqlite3.Connection, commit_id: str) -> Intent | None:
        row = db.execute(f"SELECT {INTENT_COLUMNS} FROM intents WHERE commit_id = ?", (commit_id,)).fetchone()
        return None if row is None else Intent(*row)

    @_translated
    def get_intent(self, commit_id: str) -> Intent | None:
        """See :meth:`HeadStore.get_intent`."""
        with self._lock:
            return self._intent(self._db, commit_id)

    @_translated
    def committed_attempt(self, stream_id: str, writer: str, attempt_id: str) -> Intent | None:
        """See :meth:`HeadStore.committed_attempt`."""
        with self._lock:
            row = self._db.execute(
                f"SELECT {INTENT_COLUMNS} FROM intents WHERE stream_id = ? AND writer = ? "
                f"AND attempt_id = ? AND state = 'committed'",
                (stream_id, writer, attempt_id),
            ).fetchone()
        return None if row is None else Intent(*row)

    # --- the linearisation point ---------------------------------------------------------------

    @_translated
    def commit_append(
        self, expected: StreamHead, session: Session, intent: Intent, row: IndexRow, now: float
    ) -> StreamHead | None:
        """See :meth:`HeadStore.commit_append`."""
        with self._write() as db:
            cur = db.execute(
                _CAS,
                (
                    row.end_offset,
                    row.logical_bytes,
                    intent.commit_id,
                    expected.stream_id,
                    expected.version,
                    expected.committed_end,
                    session.epoch,
                    session.token,
                    now,
                ),
            )
            if cur.rowcount != 1:
                return None
            cur = db.execute(
                "UPDATE intents SET state = 'committed', commit_version = ?, logical_size = ? "
                "WHERE commit_id = ? AND state = 'pending'",
                (expected.version + 1, expected.logical_size + row.logical_bytes, intent.commit_id),
            )
            if cur.rowcount != 1:
                # leaving the block by raising rolls the head update back
                raise InvariantViolationError(
                    f"commit intent {intent.commit_id!r} is not pending; the head was left unchanged"
                )
            db.execute(
                "INSERT INTO appends (stream_id, end_offset, start_offset, entry_count, record_count, "
                "logical_bytes, commit_id, object_key, object_length, object_crc, stamps, locations, "
                "metadata, stamps_crc, locations_crc) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    row.stream_id,
                    row.end_offset,
                    row.start_offset,
                    row.entry_count,
                    row.record_count,
                    row.logical_bytes,
                    row.commit_id,
                    row.object_key,
                    row.object_length,
                    row.object_crc,
                    row.stamps,
                    row.locations,
                    row.metadata,
                    row.stamps_crc,
                    row.locations_crc,
                ),
            )
            db.execute("DELETE FROM protections WHERE object_key = ?", (row.object_key,))
            head = self._head(db, expected.stream_id)
        return head

    # --- reads ---------------------------------------------------------------------------------

    def scan_index(
        self, stream_id: str, from_offset: int, columns: Sequence[str], batch_rows: int
    ) -> Iterator[list[tuple]]:
        """See :meth:`HeadStore.scan_index`."""
        for c in columns:
            if c not in _SCANNABLE:
                raise ValueError(f"unknown index column {c!r}")
        extra = "".join(f", {c}" for c in columns)
        sql = (
            f"SELECT start_offset, end_offset, entry_count, object_key, object_length{extra} "
            f"FROM appends WHERE stream_id = ? AND end_offset > ? ORDER BY end_offset"
        )
        try:
            with self._lock:
                cur = self._db.execute(sql, (stream_id, from_offset))
            size = max(1, batch_rows)
            try:
                while True:
                    with self._lock:
                        rows = cur.fetchmany(size)
                    if not rows:
                        return
                    yield rows
                    size = min(2 * size, MAX_BATCH_ROWS)
            finally:
                with self._lock:
                    cur.close()
        except (sqlite3.Error, UnicodeDecodeError) as err:
            raise _stream_error(self.path, err) from err

    # --- retention and GC ----------------------------------------------------------------------

    @_translated
    def trim(self, stream_id: str, before_offset: int) -> tuple[int, int]:
        """See :meth:`HeadStore.trim`."""
        with self._write() as db:
            head = self._head(db, stream_id)
            if head is None:
                raise UnknownStreamError(f"no stream {stream_id!r} in this store")
            if before_offset > head.committed_end:
                raise ValueError(
                    f"before_offset {before_offset} is past the committed end "
                    f"{head.committed_end} of stream {stream_id!r}"
                )
            if before_offset <= head.log_start:
                return head.log_start, 0
            new_start = before_offset
            if before_offset < head.committed_end:
                row = db.execute(
                    "SELECT start_offset, end_offset, entry_count, object_key, object_length, stamps, stamps_crc "
                    "FROM appends "
                    "WHERE stream_id = ? AND end_offset > ? ORDER BY end_offset LIMIT 1",
                    (stream_id, before_offset),
                ).fetchone()
                if row is not None:
                    starts = checked_stamps(stream_id, [row], 5, 6)["start_offset"]
                    # the entry holding before_offset stays whole
                    new_start = int(starts[np.searchsorted(starts, before_offset, side="right") - 1])
            new_start = max(new_start, head.log_start)
            if new_start == head.log_start:
                return head.log_start, 0
            db.execute("UPDATE streams SET log_start = ? WHERE stream_id = ?", (new_start, stream_id))
            dropped = db.execute(
                "DELETE FROM appends WHERE stream_id = ? AND end_offset <= ?", (stream_id, new_start)
            ).rowcount
            db.execute(
                "DELETE FROM intents WHERE stream_id = ? AND state = 'committed' AND end_offset <= ?",
                (stream_id, new_start),
            )
        return new_start, dropped

    @_translated
    def release_dead_protections(self) -> int:
        """See :meth:`HeadStore.release_dead_protections`."""
        with self._write() as db:
            dropped = db.execute(
                "DELETE FROM protections WHERE start_offset < (SELECT committed_end FROM streams "
                "WHERE streams.stream_id = protections.stream_id)"
            ).rowcount
            db.execute(
                "UPDATE intents SET state = 'abandoned' WHERE state = 'pending' AND start_offset < "
                "(SELECT committed_end FROM streams WHERE streams.stream_id = intents.stream_id)"
            )
            # abandoned intents are kept no longer than the protections that pointed at them
            db.execute("DELETE FROM intents WHERE state = 'abandoned'")
        return dropped

    @_translated
    def collect(self, candidates: Sequence[str], remove: Callable[[str], bool]) -> list[str]:
        """See :meth:`HeadStore.collect`."""
        removed: list[str] = []
        # a bounded number of candidates per transaction, so appends wait for gc only briefly
        for i in range(0, len(candidates), COLLECT_CHUNK):
            with self._write() as db:
                for key in candidates[i : i + COLLECT_CHUNK]:
                    if db.execute("SELECT 1 FROM appends WHERE object_key = ? LIMIT 1", (key,)).fetchone():
                        continue
                    if db.execute("SELECT 1 FROM protections WHERE object_key = ?", (key,)).fetchone():
                        continue
                    if remove(key):
                        removed.append(key)
        return removed
