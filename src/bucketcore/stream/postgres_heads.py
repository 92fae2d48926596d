"""A shared head store in PostgreSQL, for stream stores on several hosts (extra ``bucketcore[postgres]``).

Brokers on different machines append to the same streams: each opens
``StreamStore.open(shared_dir, heads="postgresql://...")`` with the WAL directory on a filesystem
they all mount and the heads, sessions, intents, protections and entry index in one database.
The tables and the transaction discipline are those of the SQLite store
(:mod:`bucketcore.stream.sqlite_heads`):

- every method is one transaction (psycopg 3, autocommit off only inside ``transaction()``);
- the head CAS is one conditional ``UPDATE ... RETURNING`` on (stream, version, committed end,
  epoch, token, lease), committed together with the intent's state, the index row and the
  release of the protection; nothing else is written unless it returned exactly one row;
- protections and intents commit with ``synchronous_commit = off``: visible to every client at
  once, durable with the next synchronously committed transaction (PostgreSQL flushes its log
  in order, so a crash that loses them loses every later transaction too), at the latest the
  append's own CAS;
- ``collect`` holds ``EXCLUSIVE`` locks on the index and protection tables while it checks and
  removes, so no protection or commit slips in between.

Tables live in the first schema of the connection's ``search_path`` (choose one per store with
``?options=-csearch_path%3Dname`` in the URL). A dropped connection is reopened by the next call;
a head CAS whose connection dropped raises :class:`UncertainAppendError` (it may have
committed: a retry with the same attempt id resolves it); data the server reports corrupt, or
text that is not UTF-8, a :class:`CorruptionError`; every other failure — an unreachable
server, a statement the server refused (its transaction rolled back) — a :class:`StreamError`
naming the server. Index rows are checked as the SQLite store's are (``rows.py``).
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from ..errors import (
    CorruptionError,
    InvariantViolationError,
    StreamError,
    StreamExistsError,
    UncertainAppendError,
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

try:
    import psycopg
except ImportError as _err:  # pragma: no cover - exercised only without the extra
    raise ImportError("the PostgreSQL head store needs psycopg 3: pip install 'bucketcore[postgres]'") from _err

__all__ = ["SCHEMA_VERSION", "PostgresHeadStore", "is_postgres_url"]

#: Version of the table layout this module writes and reads (the SQLite store's layout; schema 2
#: added the index rows' checksums, and a schema-1 database is upgraded when opened).
SCHEMA_VERSION = 2

# Any key serialises the schema creation of concurrent first openers (CREATE ... IF NOT EXISTS
# alone races on the catalogs).
_SCHEMA_LOCK = 0x6263_6865_6164_7331  # "bcheads1"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS streams (
    stream_id TEXT PRIMARY KEY,
    profile TEXT NOT NULL,
    version BIGINT NOT NULL,
    committed_end BIGINT NOT NULL,
    logical_size BIGINT NOT NULL,
    last_commit_id TEXT,
    epoch BIGINT NOT NULL,
    token TEXT NOT NULL,
    writer TEXT,
    lease_expires DOUBLE PRECISION NOT NULL,
    log_start BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS sessions (
    stream_id TEXT NOT NULL,
    epoch BIGINT NOT NULL,
    token TEXT NOT NULL,
    writer TEXT NOT NULL,
    opened_at DOUBLE PRECISION NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (stream_id, epoch)
);
CREATE TABLE IF NOT EXISTS protections (
    object_key TEXT PRIMARY KEY,
    stream_id TEXT NOT NULL,
    commit_id TEXT NOT NULL,
    start_offset BIGINT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL
);
CREATE TABLE IF NOT EXISTS intents (
    commit_id TEXT PRIMARY KEY,
    stream_id TEXT NOT NULL,
    writer TEXT NOT NULL,
    attempt_id TEXT NOT NULL,
    epoch BIGINT NOT NULL,
    start_offset BIGINT NOT NULL,
    end_offset BIGINT NOT NULL,
    record_count BIGINT NOT NULL,
    entry_count BIGINT NOT NULL,
    logical_bytes BIGINT NOT NULL,
    object_key TEXT NOT NULL,
    object_length BIGINT NOT NULL,
    object_crc BIGINT NOT NULL,
    content_crc BIGINT NOT NULL,
    state TEXT NOT NULL,
    commit_version BIGINT,
    logical_size BIGINT,
    created_at DOUBLE PRECISION NOT NULL
);
CREATE INDEX IF NOT EXISTS intents_attempt ON intents (stream_id, writer, attempt_id);
CREATE TABLE IF NOT EXISTS appends (
    stream_id TEXT NOT NULL,
    end_offset BIGINT NOT NULL,
    start_offset BIGINT NOT NULL,
    entry_count BIGINT NOT NULL,
    record_count BIGINT NOT NULL,
    logical_bytes BIGINT NOT NULL,
    commit_id TEXT NOT NULL,
    object_key TEXT NOT NULL,
    object_length BIGINT NOT NULL,
    object_crc BIGINT NOT NULL,
    stamps_crc BIGINT,
    locations_crc BIGINT,
    stamps BYTEA NOT NULL,
    locations BYTEA NOT NULL,
    metadata BYTEA NOT NULL,
    PRIMARY KEY (stream_id, end_offset)
);
CREATE INDEX IF NOT EXISTS appends_object ON appends (object_key);
ALTER TABLE appends ADD COLUMN IF NOT EXISTS stamps_crc BIGINT;
ALTER TABLE appends ADD COLUMN IF NOT EXISTS locations_crc BIGINT
"""

_SCANNABLE = frozenset(INDEX_COLUMNS)

# The head CAS, the append's linearisation point: the SQLite store's conditional UPDATE, with
# the new head returned by the same statement.
_CAS = f"""
UPDATE streams
   SET version = version + 1, committed_end = %s, logical_size = logical_size + %s, last_commit_id = %s
 WHERE stream_id = %s AND version = %s AND committed_end = %s AND epoch = %s AND token = %s
   AND lease_expires > %s
RETURNING {HEAD_COLUMNS}
"""


class PostgresHeadStore(HeadStore):
    """The :class:`HeadStore` of stream stores on several hosts: one PostgreSQL database they share.

    Parameters
    ----------
    conninfo : str
        A libpq connection string or ``postgresql://`` URL.
    connect_timeout : float
        Seconds to wait for the server on every (re)connection.

    Raises
    ------
    TypeError
        ``conninfo`` is not a str.
    StreamError
        The server cannot be reached, or the database holds a newer schema than this build knows.
    """

    def __init__(self, conninfo: str, *, connect_timeout: float = 10.0) -> None:
        if not isinstance(conninfo, str):
            raise TypeError(f"conninfo must be a str, not {type(conninfo).__name__}")
        self.conninfo = conninfo
        self._timeout = max(1, int(round(connect_timeout)))
        self._lock = threading.RLock()
        self._db: Any = None
        self._closed = False
        self._where = self._describe(conninfo)
        with self._lock:
            self._connect()
            try:
                self._create_schema()
            except BaseException:
                self.close()
                raise

    @staticmethod
    def _describe(conninfo: str) -> str:
        """Where the server is, without the password, for error messages."""
        try:
            params = psycopg.conninfo.conninfo_to_dict(conninfo)
        except psycopg.ProgrammingError as err:
            raise ValueError(f"not a PostgreSQL connection string: {err}") from None
        host = params.get("host") or "localhost"
        port = params.get("port") or "5432"
        return f"PostgreSQL {host}:{port}/{params.get('dbname') or params.get('user') or ''}"

    def _connect(self) -> None:
        try:
            self._db = psycopg.connect(self.conninfo, autocommit=True, connect_timeout=self._timeout)
        except psycopg.OperationalError as err:
            raise StreamError(f"cannot reach the head store at {self._where}: {_first_line(err)}") from err

    def _create_schema(self) -> None:
        """Create the tables unless a complete, readable layout is there already; refuse a newer one."""
        with self._tx(read_only=True) as cur:
            # the index table is created last: when it exists, every table does
            present = cur.execute("SELECT to_regclass('meta') IS NOT NULL AND to_regclass('appends') IS NOT NULL")
            if present.fetchone()[0]:
                row = cur.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
                if row is not None and self._check_version(row[0]) == SCHEMA_VERSION:
                    return
        with self._tx() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            has_meta = cur.execute("SELECT to_regclass('meta') IS NOT NULL").fetchone()[0]
            row = cur.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone() if has_meta else None
            if row is not None:
                self._check_version(row[0])  # a newer schema is refused before anything changes
            # creates what is missing and adds the schema-2 checksum columns to a schema-1 table
            cur.execute(_SCHEMA)  # one round trip: statements without parameters
            cur.execute(
                "INSERT INTO meta (key, value) VALUES ('schema', %s) ON CONFLICT (key) DO UPDATE SET value = %s",
                (str(SCHEMA_VERSION), str(SCHEMA_VERSION)),
            )

    def _check_version(self, stored: object) -> int:
        version = schema_version(stored, f"at {self._where}")
        if version > SCHEMA_VERSION:
            raise StreamError(
                f"the head store at {self._where} holds stream-store schema {stored}; this build "
                f"reads up to {SCHEMA_VERSION}"
            )
        return version

    @contextmanager
    def _tx(self, durable: bool = True, uncertain: bool = False, read_only: bool = False) -> Iterator[Any]:
        """One transaction on a live connection (reopened if the last one dropped).

        ``durable=False`` commits without waiting for the log flush (see the module notes).
        ``uncertain=True``: a lost connection may have lost the commit's answer, not the commit.
        ``read_only=True``: a block of one read-only statement, which runs as its own transaction.
        """
        with self._lock:
            if self._closed:
                raise StreamError(f"the head store at {self._where} is closed")
            if self._db is None or self._db.closed or self._db.broken:
                self._connect()
            try:
                if read_only:
                    with self._db.cursor() as cur:
                        yield cur
                    return
                with self._db.transaction(), self._db.cursor() as cur:
                    if not durable:
                        cur.execute("SET LOCAL synchronous_commit = off")
                    yield cur
            except psycopg.OperationalError as err:
                if self._db.broken or self._db.closed:
                    self._db.close()
                    if uncertain:
                        raise UncertainAppendError(
                            f"the connection to the head store at {self._where} was lost during the head "
                            f"CAS; the append may or may not have committed: {_first_line(err)}"
                        ) from err
                    raise StreamError(
                        f"lost the connection to the head store at {self._where}: {_first_line(err)}"
                    ) from err
                raise StreamError(f"the head store at {self._where} failed: {_first_line(err)}") from err
            except (psycopg.errors.DataCorrupted, psycopg.errors.IndexCorrupted) as err:
                raise CorruptionError(f"the head store at {self._where} is damaged: {_first_line(err)}") from err
            except psycopg.Error as err:
                # the transaction was rolled back: nothing of it happened
                raise StreamError(f"the head store at {self._where} failed: {_first_line(err)}") from err
            except UnicodeDecodeError as err:
                raise CorruptionError(
                    f"the head store at {self._where} is damaged: it holds text that is not UTF-8 ({err.reason})"
                ) from err

    def close(self) -> None:
        """Close the connection. Idempotent."""
        with self._lock:
            self._closed = True
            if self._db is not None:
                self._db.close()

    # --- streams and heads ---------------------------------------------------------------------

    def create_stream(self, stream_id: str, profile: str) -> StreamHead:
        """See :meth:`HeadStore.create_stream`."""
        with self._tx() as cur:
            row = cur.execute(
                f"INSERT INTO streams ({HEAD_COLUMNS}) VALUES (%s, %s, 0, 0, 0, NULL, 0, '', NULL, 0.0, 0) "
                f"ON CONFLICT (stream_id) DO NOTHING RETURNING {HEAD_COLUMNS}",
                (stream_id, profile),
            ).fetchone()
        if row is None:
            raise StreamExistsError(f"stream {stream_id!r} already exists")
        return StreamHead(*row)

    def read_head(self, stream_id: str) -> StreamHead | None:
        """See :meth:`HeadStore.read_head`."""
        with self._tx(read_only=True) as cur:
            row = cur.execute(f"SELECT {HEAD_COLUMNS} FROM streams WHERE stream_id = %s", (stream_id,)).fetchone()
        return None if row is None else StreamHead(*row)

    def stream_ids(self) -> list[str]:
        """See :meth:`HeadStore.stream_ids`."""
        with self._tx(read_only=True) as cur:
            return [r[0] for r in cur.execute('SELECT stream_id FROM streams ORDER BY stream_id COLLATE "C"')]

    # --- sessions ------------------------------------------------------------------------------

    def open_session(self, stream_id: str, writer: str, ttl: float, now: float) -> Session:
        """See :meth:`HeadStore.open_session`."""
        token = secrets.token_hex(16)
        expires = now + ttl
        with self._tx() as cur:
            row = cur.execute(
                "UPDATE streams SET epoch = epoch + 1, token = %s, writer = %s, lease_expires = %s "
                "WHERE stream_id = %s RETURNING epoch",
                (token, writer, expires, stream_id),
            ).fetchone()
            if row is None:
                raise UnknownStreamError(f"no stream {stream_id!r} in this store")
            epoch = int(row[0])
            cur.execute(
                "INSERT INTO sessions (stream_id, epoch, token, writer, opened_at, expires_at) "
                "VALUES (%s, %s, %s, %s, %s, %s)",
                (stream_id, epoch, token, writer, now, expires),
            )
        return Session(stream_id, epoch, token, writer, expires)

    def renew_session(self, session: Session, ttl: float, now: float) -> Session | None:
        """See :meth:`HeadStore.renew_session`."""
        expires = now + ttl
        with self._tx() as cur:
            row = cur.execute(
                "UPDATE streams SET lease_expires = %s WHERE stream_id = %s AND epoch = %s "
                "AND token = %s AND lease_expires > %s RETURNING 1",
                (expires, session.stream_id, session.epoch, session.token, now),
            ).fetchone()
            if row is None:
                return None
            cur.execute(
                "UPDATE sessions SET expires_at = %s WHERE stream_id = %s AND epoch = %s",
                (expires, session.stream_id, session.epoch),
            )
        return Session(session.stream_id, session.epoch, session.token, session.writer, expires)

    # --- protections and intents ---------------------------------------------------------------

    def protect(self, object_key: str, stream_id: str, commit_id: str, start_offset: int, now: float) -> None:
        """See :meth:`HeadStore.protect`."""
        with self._tx(durable=False) as cur:
            cur.execute(
                "INSERT INTO protections (object_key, stream_id, commit_id, start_offset, created_at) "
                "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (object_key) DO NOTHING",
                (object_key, stream_id, commit_id, start_offset, now),
            )

    def put_intent(self, intent: Intent, now: float) -> Intent:
        """See :meth:`HeadStore.put_intent`."""
        with self._tx(durable=False) as cur:
            cur.execute(
                f"INSERT INTO intents ({INTENT_COLUMNS}, created_at) "
                f"VALUES ({', '.join(['%s'] * 18)}) ON CONFLICT (commit_id) DO NOTHING",
                (*intent_row(intent), now),
            )
            row = cur.execute(
                f"SELECT {INTENT_COLUMNS} FROM intents WHERE commit_id = %s", (intent.commit_id,)
            ).fetchone()
        assert row is not None
        return Intent(*row)

    def get_intent(self, commit_id: str) -> Intent | None:
        """See :meth:`HeadStore.get_intent`."""
        with self._tx(read_only=True) as cur:
            row = cur.execute(f"SELECT {INTENT_COLUMNS} FROM intents WHERE commit_id = %s", (commit_id,)).fetchone()
        return None if row is None else Intent(*row)

    def committed_attempt(self, stream_id: str, writer: str, attempt_id: str) -> Intent | None:
        """See :meth:`HeadStore.committed_attempt`."""
        with self._tx(read_only=True) as cur:
            row = cur.execute(
                f"SELECT {INTENT_COLUMNS} FROM intents WHERE stream_id = %s AND writer = %s "
                f"AND attempt_id = %s AND state = 'committed'",
                (stream_id, writer, attempt_id),
            ).fetchone()
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
            The connection dropped before the commit's answer arrived: it may have committed.
        """
        with self._tx(uncertain=True) as cur:
            head = cur.execute(
                _CAS,
                (
                    row.end_offset, row.logical_bytes, intent.commit_id, expected.stream_id, expected.version,
                    expected.committed_end, session.epoch, session.token, now,
                ),
            ).fetchone()  # fmt: skip
            if head is None:
                return None
            cur.execute(
                "UPDATE intents SET state = 'committed', commit_version = %s, logical_size = %s "
                "WHERE commit_id = %s AND state = 'pending'",
                (expected.version + 1, expected.logical_size + row.logical_bytes, intent.commit_id),
            )
            if cur.rowcount != 1:
                # leaving the transaction by raising rolls the head update back
                raise InvariantViolationError(
                    f"commit intent {intent.commit_id!r} is not pending; the head was left unchanged"
                )
            cur.execute(
                "INSERT INTO appends (stream_id, end_offset, start_offset, entry_count, record_count, "
                "logical_bytes, commit_id, object_key, object_length, object_crc, stamps, locations, "
                "metadata, stamps_crc, locations_crc) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (
                    row.stream_id, row.end_offset, row.start_offset, row.entry_count, row.record_count,
                    row.logical_bytes, row.commit_id, row.object_key, row.object_length, row.object_crc,
                    row.stamps, row.locations, row.metadata, row.stamps_crc, row.locations_crc,
                ),
            )  # fmt: skip
            cur.execute("DELETE FROM protections WHERE object_key = %s", (row.object_key,))
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
        sql = (
            f"SELECT start_offset, end_offset, entry_count, object_key, object_length{extra} "
            f"FROM appends WHERE stream_id = %s AND end_offset > %s ORDER BY end_offset LIMIT %s"
        )
        size = max(1, batch_rows)
        after = from_offset
        while True:
            with self._tx(read_only=True) as cur:
                rows = cur.execute(sql, (stream_id, after, size)).fetchall()
            if not rows:
                return
            yield [tuple(bytes(v) if isinstance(v, memoryview) else v for v in r) for r in rows]
            if len(rows) < size:
                return
            after = rows[-1][1]
            size = min(2 * size, MAX_BATCH_ROWS)

    # --- retention and GC ----------------------------------------------------------------------

    def trim(self, stream_id: str, before_offset: int) -> tuple[int, int]:
        """See :meth:`HeadStore.trim`."""
        with self._tx() as cur:
            found = cur.execute(
                f"SELECT {HEAD_COLUMNS} FROM streams WHERE stream_id = %s FOR UPDATE", (stream_id,)
            ).fetchone()
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
                row = cur.execute(
                    "SELECT start_offset, end_offset, entry_count, object_key, object_length, stamps, stamps_crc "
                    "FROM appends "
                    "WHERE stream_id = %s AND end_offset > %s ORDER BY end_offset LIMIT 1",
                    (stream_id, before_offset),
                ).fetchone()
                if row is not None:
                    row = tuple(bytes(v) if isinstance(v, memoryview) else v for v in row)
                    starts = checked_stamps(stream_id, [row], 5, 6)["start_offset"]
                    # the entry holding before_offset stays whole
                    new_start = int(starts[np.searchsorted(starts, before_offset, side="right") - 1])
            new_start = max(new_start, head.log_start)
            if new_start == head.log_start:
                return head.log_start, 0
            cur.execute("UPDATE streams SET log_start = %s WHERE stream_id = %s", (new_start, stream_id))
            cur.execute("DELETE FROM appends WHERE stream_id = %s AND end_offset <= %s", (stream_id, new_start))
            dropped = cur.rowcount
            cur.execute(
                "DELETE FROM intents WHERE stream_id = %s AND state = 'committed' AND end_offset <= %s",
                (stream_id, new_start),
            )
        return new_start, dropped

    def release_dead_protections(self) -> int:
        """See :meth:`HeadStore.release_dead_protections`."""
        with self._tx() as cur:
            cur.execute(
                "DELETE FROM protections USING streams WHERE streams.stream_id = protections.stream_id "
                "AND protections.start_offset < streams.committed_end"
            )
            dropped = cur.rowcount
            cur.execute(
                "UPDATE intents SET state = 'abandoned' FROM streams WHERE intents.state = 'pending' "
                "AND streams.stream_id = intents.stream_id AND intents.start_offset < streams.committed_end"
            )
            # abandoned intents are kept no longer than the protections that pointed at them
            cur.execute("DELETE FROM intents WHERE state = 'abandoned'")
        return dropped

    def collect(self, candidates: Sequence[str], remove: Callable[[str], bool]) -> list[str]:
        """See :meth:`HeadStore.collect`."""
        removed: list[str] = []
        # a bounded number of candidates per transaction, so appends wait for gc only briefly
        for i in range(0, len(candidates), COLLECT_CHUNK):
            chunk = list(candidates[i : i + COLLECT_CHUNK])
            with self._tx() as cur:
                # no protection or index row can be written until this transaction ends
                cur.execute("LOCK TABLE appends, protections IN EXCLUSIVE MODE")
                used = {
                    r[0]
                    for r in cur.execute(
                        "SELECT object_key FROM appends WHERE object_key = ANY(%s) "
                        "UNION SELECT object_key FROM protections WHERE object_key = ANY(%s)",
                        (chunk, chunk),
                    )
                }
                for key in chunk:
                    if key not in used and remove(key):
                        removed.append(key)
        return removed


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def is_postgres_url(heads: str) -> bool:
    """Whether ``heads`` names a PostgreSQL server (``postgresql://`` or ``postgres://``).

    Parameters
    ----------
    heads : str

    Returns
    -------
    bool
    """
    return heads.startswith(("postgresql://", "postgres://"))
