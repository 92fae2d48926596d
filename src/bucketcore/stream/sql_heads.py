"""The head store over SQL, written once: its tables, its statements and the append protocol's
transactions, for the embedded SQLite store (``sqlite_heads.py``) and the shared PostgreSQL one
(``postgres_heads.py``).

Every method is one transaction. The head CAS (:meth:`SQLHeadStore.commit_append`) is one
conditional ``UPDATE`` on (stream, version, committed end, epoch, token, lease), committed
together with the intent's state, the index row and the release of the protection; nothing else
is written unless it changed exactly one row. Protections and intents commit without waiting for
their log to be flushed (durable with the next durable commit, as :class:`HeadStore` allows).

A database's store is a subclass that says only what its database does differently, each in one
place:

- its placeholder (``PARAM``: every statement here is written with ``?`` and translated once
  per subclass), its column types (``INT``, ``REAL``, ``BLOB``) and how its index table declares
  the (stream, end offset) key (``APPENDS_KEY``, ``EXTRA_SCHEMA``), so the tables of a store made
  before this module are the tables it makes;
- its spelling of a few clauses: byte order (``BYTEWISE``), a row lock (``LOCK_ROW``), the locks
  that keep writers out while ``collect`` checks and removes (``LOCK_COLLECT``) or while a first
  opener creates the tables (``LOCK_SCHEMA``), whether a table exists (``TABLE_EXISTS``);
- :meth:`SQLHeadStore._tx`: one transaction on its connection, with its errors raised as the
  store's (:class:`StreamError`, :class:`CorruptionError`, :class:`UncertainAppendError`);
- :meth:`SQLHeadStore._write_stream`: a write to one stream's row that answers with the row
  after it (``RETURNING`` where the database has it, a read in the same transaction otherwise).
"""

from __future__ import annotations

import abc
import secrets
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import fields
from operator import attrgetter
from typing import Any, ClassVar, Protocol

import numpy as np

from ..errors import InvariantViolationError, StreamError, StreamExistsError, UnknownStreamError
from .heads import (
    COLLECT_CHUNK,
    HEAD_COLUMNS,
    INDEX_COLUMNS,
    INTENT_COLUMNS,
    INTENT_FIELDS,
    MAX_BATCH_ROWS,
    HeadStore,
    IndexRow,
    intent_row,
)
from .records import Intent, Session, StreamHead
from .rows import checked_stamps, schema_version

__all__ = ["SCHEMA_VERSION", "Cursor", "Rows", "SQLHeadStore"]

#: Version of the table layout written and read here. Schema 2 added the index rows' checksums
#: (``stamps_crc``, ``locations_crc``); a schema-1 store is upgraded when opened, its old rows
#: keeping NULL there (checked by their structure alone).
SCHEMA_VERSION = 2

# The tables, in the dialect's types; the index table is created last (when it exists, every
# table does).
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS streams (
    stream_id TEXT PRIMARY KEY,
    profile TEXT NOT NULL,
    version {INT} NOT NULL,
    committed_end {INT} NOT NULL,
    logical_size {INT} NOT NULL,
    last_commit_id TEXT,
    epoch {INT} NOT NULL,
    token TEXT NOT NULL,
    writer TEXT,
    lease_expires {REAL} NOT NULL,
    log_start {INT} NOT NULL
);
CREATE TABLE IF NOT EXISTS sessions (
    stream_id TEXT NOT NULL,
    epoch {INT} NOT NULL,
    token TEXT NOT NULL,
    writer TEXT NOT NULL,
    opened_at {REAL} NOT NULL,
    expires_at {REAL} NOT NULL,
    PRIMARY KEY (stream_id, epoch)
);
CREATE TABLE IF NOT EXISTS protections (
    object_key TEXT PRIMARY KEY,
    stream_id TEXT NOT NULL,
    commit_id TEXT NOT NULL,
    start_offset {INT} NOT NULL,
    created_at {REAL} NOT NULL
);
CREATE TABLE IF NOT EXISTS intents (
    commit_id TEXT PRIMARY KEY,
    stream_id TEXT NOT NULL,
    writer TEXT NOT NULL,
    attempt_id TEXT NOT NULL,
    epoch {INT} NOT NULL,
    start_offset {INT} NOT NULL,
    end_offset {INT} NOT NULL,
    record_count {INT} NOT NULL,
    entry_count {INT} NOT NULL,
    logical_bytes {INT} NOT NULL,
    object_key TEXT NOT NULL,
    object_length {INT} NOT NULL,
    object_crc {INT} NOT NULL,
    content_crc {INT} NOT NULL,
    state TEXT NOT NULL,
    commit_version {INT},
    logical_size {INT},
    created_at {REAL} NOT NULL
);
CREATE INDEX IF NOT EXISTS intents_attempt ON intents (stream_id, writer, attempt_id);
CREATE TABLE IF NOT EXISTS appends (
    stream_id TEXT NOT NULL,
    end_offset {INT} NOT NULL,
    start_offset {INT} NOT NULL,
    entry_count {INT} NOT NULL,
    record_count {INT} NOT NULL,
    logical_bytes {INT} NOT NULL,
    commit_id TEXT NOT NULL,
    object_key TEXT NOT NULL,
    object_length {INT} NOT NULL,
    object_crc {INT} NOT NULL,
    stamps_crc {INT},
    locations_crc {INT},
    stamps {BLOB} NOT NULL,
    locations {BLOB} NOT NULL,
    metadata {BLOB} NOT NULL{APPENDS_KEY}
);
CREATE INDEX IF NOT EXISTS appends_object ON appends (object_key)
"""

_SCANNABLE = frozenset(INDEX_COLUMNS)
# An index row's fields in the order of IndexRow, as its INSERT takes them
_INDEX_FIELDS = tuple(f.name for f in fields(IndexRow))
_index_values = attrgetter(*_INDEX_FIELDS)
# What a scan row starts with, before the columns asked for
_SCAN_HEAD = "start_offset, end_offset, entry_count, object_key, object_length"


class Rows(Protocol):
    """What a statement returns: its rows, or how many rows it wrote."""

    rowcount: int

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Cursor(Protocol):
    """What a dialect's transaction gives the shared code: one ``execute`` after another."""

    def execute(self, sql: str, params: Sequence[Any] = ...) -> Rows: ...


class _Statements:
    """Every statement of the head store in one dialect (written with ``?``, translated here)."""

    def __init__(self, d: type[SQLHeadStore]) -> None:
        def q(sql: str) -> str:
            return sql.replace("?", d.PARAM)

        self.q = q
        ddl = _SCHEMA.format(INT=d.INT, REAL=d.REAL, BLOB=d.BLOB, APPENDS_KEY=d.APPENDS_KEY)
        self.schema = (*(s.strip() for s in ddl.split(";")), *d.EXTRA_SCHEMA)
        self.table_exists = q(d.TABLE_EXISTS)
        self.schema_version = "SELECT value FROM meta WHERE key = 'schema'"
        self.add_schema_version = q("INSERT INTO meta (key, value) VALUES ('schema', ?)")
        self.set_schema_version = q("UPDATE meta SET value = ? WHERE key = 'schema'")
        # schema 1 -> 2; the columns go after the BLOBs in an upgraded table (a database adds
        # columns at the end), before them in a new one (a read of them skips the BLOBs' pages)
        self.add_checksums = tuple(
            f"ALTER TABLE appends ADD COLUMN {c} {d.INT}" for c in ("stamps_crc", "locations_crc")
        )

        self.head = q(f"SELECT {HEAD_COLUMNS} FROM streams WHERE stream_id = ?")
        self.locked_head = self.head + d.LOCK_ROW
        self.stream_ids = f"SELECT stream_id FROM streams ORDER BY stream_id{d.BYTEWISE}"
        self.create_stream = q(
            f"INSERT INTO streams ({HEAD_COLUMNS}) VALUES (?, ?, 0, 0, 0, NULL, 0, '', NULL, 0.0, 0) "
            "ON CONFLICT (stream_id) DO NOTHING"
        )

        self.take_head = q(
            "UPDATE streams SET epoch = epoch + 1, token = ?, writer = ?, lease_expires = ? WHERE stream_id = ?"
        )
        self.add_session = q(
            "INSERT INTO sessions (stream_id, epoch, token, writer, opened_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)"
        )
        self.renew_head = q(
            "UPDATE streams SET lease_expires = ? WHERE stream_id = ? AND epoch = ? AND token = ? AND lease_expires > ?"
        )
        self.renew_session = q("UPDATE sessions SET expires_at = ? WHERE stream_id = ? AND epoch = ?")

        self.protect = q(
            "INSERT INTO protections (object_key, stream_id, commit_id, start_offset, created_at) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (object_key) DO NOTHING"
        )
        self.put_intent = q(
            f"INSERT INTO intents ({INTENT_COLUMNS}, created_at) "
            f"VALUES ({', '.join('?' * (len(INTENT_FIELDS) + 1))}) ON CONFLICT (commit_id) DO NOTHING"
        )
        self.intent = q(f"SELECT {INTENT_COLUMNS} FROM intents WHERE commit_id = ?")
        self.committed_attempt = q(
            f"SELECT {INTENT_COLUMNS} FROM intents WHERE stream_id = ? AND writer = ? "
            "AND attempt_id = ? AND state = 'committed'"
        )

        # the head CAS: the append's linearisation point
        self.cas = q(
            "UPDATE streams SET version = version + 1, committed_end = ?, logical_size = logical_size + ?, "
            "last_commit_id = ? WHERE stream_id = ? AND version = ? AND committed_end = ? AND epoch = ? "
            "AND token = ? AND lease_expires > ?"
        )
        self.commit_intent = q(
            "UPDATE intents SET state = 'committed', commit_version = ?, logical_size = ? "
            "WHERE commit_id = ? AND state = 'pending'"
        )
        self.add_index_row = q(
            f"INSERT INTO appends ({', '.join(_INDEX_FIELDS)}) VALUES ({', '.join('?' * len(_INDEX_FIELDS))})"
        )
        self.release = q("DELETE FROM protections WHERE object_key = ?")

        self.first_row_after = q(
            f"SELECT {_SCAN_HEAD}, stamps, stamps_crc FROM appends "
            "WHERE stream_id = ? AND end_offset > ? ORDER BY end_offset LIMIT 1"
        )
        self.set_log_start = q("UPDATE streams SET log_start = ? WHERE stream_id = ?")
        self.drop_rows = q("DELETE FROM appends WHERE stream_id = ? AND end_offset <= ?")
        self.drop_intents = q("DELETE FROM intents WHERE stream_id = ? AND state = 'committed' AND end_offset <= ?")
        self.dead_protections = (
            "DELETE FROM protections WHERE start_offset < "
            "(SELECT committed_end FROM streams WHERE streams.stream_id = protections.stream_id)"
        )
        self.abandon_intents = (
            "UPDATE intents SET state = 'abandoned' WHERE state = 'pending' AND start_offset < "
            "(SELECT committed_end FROM streams WHERE streams.stream_id = intents.stream_id)"
        )
        self.drop_abandoned = "DELETE FROM intents WHERE state = 'abandoned'"
        self.lock_collect = d.LOCK_COLLECT
        self.lock_schema = d.LOCK_SCHEMA


class SQLHeadStore(HeadStore):
    """The :class:`HeadStore` of a SQL database: everything but the dialect (see the module notes)."""

    # --- what a dialect says (each subclass sets every one) ------------------------------------

    #: The driver's placeholder for a parameter.
    PARAM: ClassVar[str]
    #: Column types: 64-bit integers, doubles, byte strings.
    INT: ClassVar[str]
    REAL: ClassVar[str]
    BLOB: ClassVar[str]
    #: Appended to the index table's columns (a key clause, with its leading comma), and the
    #: statements that follow the tables.
    APPENDS_KEY: ClassVar[str]
    EXTRA_SCHEMA: ClassVar[tuple[str, ...]]
    #: Appended to ``ORDER BY stream_id``: the ids in byte order.
    BYTEWISE: ClassVar[str]
    #: Appended to the head read of a writing transaction: lock the row until it ends.
    LOCK_ROW: ClassVar[str]
    #: Run first in ``collect``'s transactions: no protection or index row can be written until
    #: it ends ("" where the transaction's own write lock does this).
    LOCK_COLLECT: ClassVar[str]
    #: Run first when creating or upgrading the tables: serialises concurrent first openers.
    LOCK_SCHEMA: ClassVar[str]
    #: One row whose first value is true when the table named by the parameter exists.
    TABLE_EXISTS: ClassVar[str]

    #: The statements in this dialect, built once per subclass.
    _sql: ClassVar[_Statements]
    #: The store as its messages name it ("<file>", "at PostgreSQL host:port/db").
    _name: str

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._sql = _Statements(cls)

    @abc.abstractmethod
    def _tx(
        self, durable: bool = True, uncertain: bool = False, read_only: bool = False
    ) -> AbstractContextManager[Cursor]:
        """One transaction: committed when the block ends, rolled back if it raises; the
        database's errors raised as the store's.

        ``durable=False`` commits without waiting for the log to reach the disk: visible to every
        client at once, durable with the next durable commit (the log is replayed in order, so a
        crash that loses it loses every later transaction too). ``uncertain=True``: a lost
        connection may have lost the commit's answer, not the commit (:class:`UncertainAppendError`).
        ``read_only=True``: a block of read-only statements, each its own transaction.
        """

    @abc.abstractmethod
    def _write_stream(
        self, cur: Cursor, sql: str, params: Sequence[Any], stream_id: str, columns: str
    ) -> tuple[Any, ...] | None:
        """Run ``sql``, a write of stream ``stream_id``'s row; ``columns`` of the row after it, or
        None if it wrote no row."""

    # --- the tables ----------------------------------------------------------------------------

    def _create_schema(self) -> None:
        """Create the tables unless a current layout is there, upgrade an older one; a newer one
        is refused before anything changes. An existing current store is opened with reads only."""
        with self._tx(read_only=True) as cur:
            if self._schema_version(cur) == SCHEMA_VERSION and self._has_table(cur, "appends"):
                return
        sql = self._sql
        with self._tx() as cur:
            if sql.lock_schema:
                cur.execute(sql.lock_schema)
            stored = self._schema_version(cur)  # another opener may have been first
            for statement in sql.schema:
                cur.execute(statement)
            if stored is None:
                cur.execute(sql.add_schema_version, (str(SCHEMA_VERSION),))
            elif stored < 2:
                for statement in sql.add_checksums:
                    cur.execute(statement)
                cur.execute(sql.set_schema_version, (str(SCHEMA_VERSION),))

    def _has_table(self, cur: Cursor, name: str) -> bool:
        return bool(cur.execute(self._sql.table_exists, (name,)).fetchone()[0])

    def _schema_version(self, cur: Cursor) -> int | None:
        """The layout's version (None before the first opener wrote it); refuses a newer one."""
        if not self._has_table(cur, "meta"):
            return None
        row = cur.execute(self._sql.schema_version).fetchone()
        if row is None:
            return None
        version = schema_version(row[0], self._name)
        if version > SCHEMA_VERSION:
            raise StreamError(
                f"the head store {self._name} holds stream-store schema {row[0]}; this build reads up to "
                f"{SCHEMA_VERSION}"
            )
        return version

    # --- streams and heads ---------------------------------------------------------------------

    def create_stream(self, stream_id: str, profile: str) -> StreamHead:
        """See :meth:`HeadStore.create_stream`."""
        with self._tx() as cur:
            row = self._write_stream(cur, self._sql.create_stream, (stream_id, profile), stream_id, HEAD_COLUMNS)
        if row is None:
            raise StreamExistsError(f"stream {stream_id!r} already exists")
        return StreamHead(*row)

    def read_head(self, stream_id: str) -> StreamHead | None:
        """See :meth:`HeadStore.read_head`."""
        with self._tx(read_only=True) as cur:
            row = cur.execute(self._sql.head, (stream_id,)).fetchone()
        return None if row is None else StreamHead(*row)

    def stream_ids(self) -> list[str]:
        """See :meth:`HeadStore.stream_ids`."""
        with self._tx(read_only=True) as cur:
            return [r[0] for r in cur.execute(self._sql.stream_ids)]

    # --- sessions ------------------------------------------------------------------------------

    def open_session(self, stream_id: str, writer: str, ttl: float, now: float) -> Session:
        """See :meth:`HeadStore.open_session`."""
        token = secrets.token_hex(16)
        expires = now + ttl
        with self._tx() as cur:
            row = self._write_stream(cur, self._sql.take_head, (token, writer, expires, stream_id), stream_id, "epoch")
            if row is None:
                raise UnknownStreamError(f"no stream {stream_id!r} in this store")
            epoch = int(row[0])
            cur.execute(self._sql.add_session, (stream_id, epoch, token, writer, now, expires))
        return Session(stream_id, epoch, token, writer, expires)

    def renew_session(self, session: Session, ttl: float, now: float) -> Session | None:
        """See :meth:`HeadStore.renew_session`."""
        expires = now + ttl
        with self._tx() as cur:
            renewed = cur.execute(
                self._sql.renew_head, (expires, session.stream_id, session.epoch, session.token, now)
            ).rowcount
            if renewed != 1:
                return None
            cur.execute(self._sql.renew_session, (expires, session.stream_id, session.epoch))
        return Session(session.stream_id, session.epoch, session.token, session.writer, expires)

    # --- protections and intents ---------------------------------------------------------------

    def protect(self, object_key: str, stream_id: str, commit_id: str, start_offset: int, now: float) -> None:
        """See :meth:`HeadStore.protect`."""
        with self._tx(durable=False) as cur:
            cur.execute(self._sql.protect, (object_key, stream_id, commit_id, start_offset, now))

    def put_intent(self, intent: Intent, now: float) -> Intent:
        """See :meth:`HeadStore.put_intent`."""
        with self._tx(durable=False) as cur:
            cur.execute(self._sql.put_intent, (*intent_row(intent), now))
            row = cur.execute(self._sql.intent, (intent.commit_id,)).fetchone()
        assert row is not None
        return Intent(*row)

    def get_intent(self, commit_id: str) -> Intent | None:
        """See :meth:`HeadStore.get_intent`."""
        with self._tx(read_only=True) as cur:
            row = cur.execute(self._sql.intent, (commit_id,)).fetchone()
        return None if row is None else Intent(*row)

    def committed_attempt(self, stream_id: str, writer: str, attempt_id: str) -> Intent | None:
        """See :meth:`HeadStore.committed_attempt`."""
        with self._tx(read_only=True) as cur:
            row = cur.execute(self._sql.committed_attempt, (stream_id, writer, attempt_id)).fetchone()
        return None if row is None else Intent(*row)

    # --- the linearisation point ---------------------------------------------------------------

    def commit_append(
        self, expected: StreamHead, session: Session, intent: Intent, row: IndexRow, now: float
    ) -> StreamHead | None:
        """See :meth:`HeadStore.commit_append`.

        Raises
        ------
        InvariantViolationError
            The head advanced but the intent was not pending (rolled back, nothing written).
        UncertainAppendError
            The connection to a server dropped before the commit's answer arrived: it may have
            committed.
        """
        sql = self._sql
        cas = (
            row.end_offset, row.logical_bytes, intent.commit_id, expected.stream_id, expected.version,
            expected.committed_end, session.epoch, session.token, now,
        )  # fmt: skip
        with self._tx(uncertain=True) as cur:
            head = self._write_stream(cur, sql.cas, cas, expected.stream_id, HEAD_COLUMNS)
            if head is None:
                return None
            committed = cur.execute(
                sql.commit_intent,
                (expected.version + 1, expected.logical_size + row.logical_bytes, intent.commit_id),
            ).rowcount
            if committed != 1:
                # leaving the transaction by raising rolls the head update back
                raise InvariantViolationError(
                    f"commit intent {intent.commit_id!r} is not pending; the head was left unchanged"
                )
            cur.execute(sql.add_index_row, _index_values(row))
            cur.execute(sql.release, (row.object_key,))
        return StreamHead(*head)

    # --- reads ---------------------------------------------------------------------------------

    def scan_index(
        self, stream_id: str, from_offset: int, columns: Sequence[str], batch_rows: int
    ) -> Iterator[list[tuple]]:
        """See :meth:`HeadStore.scan_index`.

        Each batch is one keyset query (rows after the last end offset seen), so a long scan holds
        no transaction open between batches.
        """
        for c in columns:
            if c not in _SCANNABLE:
                raise ValueError(f"unknown index column {c!r}")
        extra = "".join(f", {c}" for c in columns)
        sql = self._sql.q(
            f"SELECT {_SCAN_HEAD}{extra} FROM appends WHERE stream_id = ? AND end_offset > ? "
            "ORDER BY end_offset LIMIT ?"
        )
        size = max(1, batch_rows)
        after = from_offset
        while True:
            with self._tx(read_only=True) as cur:
                rows = cur.execute(sql, (stream_id, after, size)).fetchall()
            if not rows:
                return
            yield rows
            if len(rows) < size:
                return
            after = rows[-1][1]
            size = min(2 * size, MAX_BATCH_ROWS)

    # --- retention and GC ----------------------------------------------------------------------

    def trim(self, stream_id: str, before_offset: int) -> tuple[int, int]:
        """See :meth:`HeadStore.trim`."""
        sql = self._sql
        with self._tx() as cur:
            found = cur.execute(sql.locked_head, (stream_id,)).fetchone()
            if found is None:
                raise UnknownStreamError(f"no stream {stream_id!r} in this store")
            head = StreamHead(*found)
            if before_offset > head.committed_end:
                raise ValueError(
                    f"before_offset {before_offset} is past the committed end "
                    f"{head.committed_end} of stream {stream_id!r}"
                )
            if before_offset <= head.log_start:
                return head.log_start, 0
            new_start = before_offset
            if before_offset < head.committed_end:
                row = cur.execute(sql.first_row_after, (stream_id, before_offset)).fetchone()
                if row is not None:
                    starts = checked_stamps(stream_id, [row], 5, 6)["start_offset"]
                    # the entry holding before_offset stays whole
                    new_start = int(starts[np.searchsorted(starts, before_offset, side="right") - 1])
            new_start = max(new_start, head.log_start)
            if new_start == head.log_start:
                return head.log_start, 0
            cur.execute(sql.set_log_start, (new_start, stream_id))
            dropped = cur.execute(sql.drop_rows, (stream_id, new_start)).rowcount
            cur.execute(sql.drop_intents, (stream_id, new_start))
        return new_start, dropped

    def release_dead_protections(self) -> int:
        """See :meth:`HeadStore.release_dead_protections`."""
        sql = self._sql
        with self._tx() as cur:
            dropped = cur.execute(sql.dead_protections).rowcount
            cur.execute(sql.abandon_intents)
            # abandoned intents are kept no longer than the protections that pointed at them
            cur.execute(sql.drop_abandoned)
        return dropped

    def collect(self, candidates: Sequence[str], remove: Callable[[str], bool]) -> list[str]:
        """See :meth:`HeadStore.collect`."""
        sql = self._sql
        removed: list[str] = []
        # a bounded number of candidates per transaction, so appends wait for gc only briefly
        for i in range(0, len(candidates), COLLECT_CHUNK):
            chunk = list(candidates[i : i + COLLECT_CHUNK])
            marks = ", ".join("?" * len(chunk))
            used_sql = sql.q(
                f"SELECT object_key FROM appends WHERE object_key IN ({marks}) "
                f"UNION SELECT object_key FROM protections WHERE object_key IN ({marks})"
            )
            with self._tx() as cur:
                if sql.lock_collect:
                    cur.execute(sql.lock_collect)
                used = {r[0] for r in cur.execute(used_sql, (*chunk, *chunk))}
                for key in chunk:
                    if key not in used and remove(key):
                        removed.append(key)
        return removed
