"""The embedded head store: one SQLite database (WAL journal, ``synchronous=FULL``).

Every write is one ``BEGIN IMMEDIATE`` transaction, so heads, sessions, intents, protections and
the entry index change atomically and durably, and several processes can share the file (SQLite's
locks serialise their writers). The statements and the protocol are :mod:`.sql_heads`'s; this
module holds what SQLite does its own way: the connection, its transactions and journal syncs,
its type names, and its errors.

No ``sqlite3`` error leaves this module: a damaged file (not a database, a malformed page, text
that is not UTF-8) is a :class:`CorruptionError` naming the file, any other failure of SQLite a
:class:`StreamError` naming it.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from ..errors import CorruptionError, StreamError
from .sql_heads import SCHEMA_VERSION, Cursor, SQLHeadStore

__all__ = ["SCHEMA_VERSION", "SQLiteHeadStore"]

# SQLite's primary result codes for a damaged database file: SQLITE_CORRUPT, SQLITE_NOTADB
_DAMAGED = frozenset({11, 26})


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


class _Autocommitted:
    """The connection under its store's lock, each statement its own transaction, SQLite's errors
    raised as the store's: the read-only block of :meth:`SQLiteHeadStore._tx`. A class rather than
    a generator, for the cost of a read (every append reads its head through it)."""

    __slots__ = ("_db", "_lock", "_path")

    def __init__(self, db: sqlite3.Connection, lock: threading.RLock, path: str) -> None:
        self._db = db
        self._lock = lock
        self._path = path

    def __enter__(self) -> sqlite3.Connection:
        self._lock.acquire()
        return self._db

    def __exit__(self, kind: object, err: BaseException | None, tb: object) -> None:
        self._lock.release()
        if isinstance(err, (sqlite3.Error, UnicodeDecodeError)):
            raise _stream_error(self._path, err) from err


class SQLiteHeadStore(SQLHeadStore):
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

    PARAM = "?"
    INT = "INTEGER"
    REAL = "REAL"
    BLOB = "BLOB"
    # the index table's key is a unique index here (SQLite's files have always had it so)
    APPENDS_KEY = ""
    EXTRA_SCHEMA = ("CREATE UNIQUE INDEX IF NOT EXISTS appends_range ON appends (stream_id, end_offset)",)
    BYTEWISE = ""  # BINARY, SQLite's default collation, is byte order
    # BEGIN IMMEDIATE takes the database's write lock: a writing transaction needs no other lock
    LOCK_ROW = ""
    LOCK_COLLECT = ""
    LOCK_SCHEMA = ""
    TABLE_EXISTS = "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?"

    def __init__(self, path: str, *, busy_timeout: float = 30.0) -> None:
        self.path = path
        self._name = path
        self._lock = threading.RLock()
        try:
            self._db = sqlite3.connect(path, timeout=busy_timeout, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as err:
            raise _stream_error(path, err) from err
        self._autocommit = _Autocommitted(self._db, self._lock, path)
        try:
            with self._autocommit as db:
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=FULL")
                # macOS: a journal sync reaches the disk, not just the drive's cache (no-op elsewhere)
                db.execute("PRAGMA fullfsync=ON")
            self._sync = "FULL"
            self._create_schema()
        except BaseException:
            self._db.close()
            raise

    def _tx(
        self, durable: bool = True, uncertain: bool = False, read_only: bool = False
    ) -> AbstractContextManager[Cursor]:
        """See :meth:`SQLHeadStore._tx`: one ``BEGIN IMMEDIATE`` transaction.

        ``durable=False`` commits without syncing the journal (``synchronous=NORMAL``): the WAL
        journal is replayed in order, so it becomes durable with the next synced commit, of this
        process or another. ``uncertain`` changes nothing: an embedded database answers every
        commit it makes.
        """
        return self._autocommit if read_only else self._write(durable)

    @contextmanager
    def _write(self, durable: bool) -> Iterator[Cursor]:
        with self._lock:
            db = self._db
            try:
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
            except (sqlite3.Error, UnicodeDecodeError) as err:
                raise _stream_error(self.path, err) from err

    def _write_stream(
        self, cur: Cursor, sql: str, params: Sequence[Any], stream_id: str, columns: str
    ) -> tuple[Any, ...] | None:
        """See :meth:`SQLHeadStore._write_stream`: the row is read back in the same transaction
        (no ``RETURNING`` before SQLite 3.35)."""
        if cur.execute(sql, params).rowcount != 1:
            return None
        return cur.execute(f"SELECT {columns} FROM streams WHERE stream_id = ?", (stream_id,)).fetchone()

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._db.close()
