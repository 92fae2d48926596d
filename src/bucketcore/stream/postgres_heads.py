"""A shared head store in PostgreSQL, for stream stores on several hosts (extra ``bucketcore[postgres]``).

Brokers on different machines append to the same streams: each opens
``StreamStore.open(shared_dir, heads="postgresql://...")`` with the WAL directory on a filesystem
they all mount and the heads, sessions, intents, protections and entry index in one database.
The tables, the statements and the transactions are those of the SQLite store, written once in
:mod:`.sql_heads`; this module holds what PostgreSQL does its own way:

- every method is one transaction (psycopg 3, autocommit off only inside ``transaction()``);
  read-only calls run their statements autocommitted, each its own transaction;
- the head CAS and the other writes of a stream's row answer with ``RETURNING``;
- protections and intents commit with ``synchronous_commit = off``: visible to every client at
  once, durable with the next synchronously committed transaction (PostgreSQL flushes its log
  in order, so a crash that loses them loses every later transaction too), at the latest the
  append's own CAS;
- ``trim`` locks the head row (``FOR UPDATE``); ``collect`` holds ``EXCLUSIVE`` locks on the
  index and protection tables while it checks and removes, so no protection or commit slips in
  between; the first openers of a database create its tables one at a time (an advisory lock).

Tables live in the first schema of the connection's ``search_path`` (choose one per store with
``?options=-csearch_path%3Dname`` in the URL). A dropped connection is reopened by the next call;
a head CAS whose connection dropped raises :class:`UncertainAppendError` (it may have
committed: a retry with the same attempt id resolves it); data the server reports corrupt, or
text that is not UTF-8, a :class:`CorruptionError`; every other failure — an unreachable
server, a statement the server refused (its transaction rolled back) — a :class:`StreamError`
naming the server. Index rows are checked as the SQLite store's are (``rows.py``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from ..errors import CorruptionError, StreamError, UncertainAppendError
from .sql_heads import SCHEMA_VERSION, Cursor, SQLHeadStore

try:
    import psycopg
except ImportError as _err:  # pragma: no cover - exercised only without the extra
    raise ImportError("the PostgreSQL head store needs psycopg 3: pip install 'bucketcore[postgres]'") from _err

__all__ = ["SCHEMA_VERSION", "PostgresHeadStore", "is_postgres_url"]

# Any key serialises the schema creation of concurrent first openers (CREATE ... IF NOT EXISTS
# alone races on the catalogs).
_SCHEMA_LOCK = 0x6263_6865_6164_7331  # "bcheads1"


class PostgresHeadStore(SQLHeadStore):
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

    PARAM = "%s"  # psycopg's; no statement holds a literal %
    INT = "BIGINT"
    REAL = "DOUBLE PRECISION"
    BLOB = "BYTEA"
    APPENDS_KEY = ",\n    PRIMARY KEY (stream_id, end_offset)"
    EXTRA_SCHEMA = ()
    BYTEWISE = ' COLLATE "C"'
    LOCK_ROW = " FOR UPDATE"
    # no protection or index row can be written until collect's transaction ends
    LOCK_COLLECT = "LOCK TABLE appends, protections IN EXCLUSIVE MODE"
    LOCK_SCHEMA = f"SELECT pg_advisory_xact_lock({_SCHEMA_LOCK})"
    TABLE_EXISTS = "SELECT to_regclass(?) IS NOT NULL"

    def __init__(self, conninfo: str, *, connect_timeout: float = 10.0) -> None:
        if not isinstance(conninfo, str):
            raise TypeError(f"conninfo must be a str, not {type(conninfo).__name__}")
        self.conninfo = conninfo
        self._timeout = max(1, int(round(connect_timeout)))
        self._lock = threading.RLock()
        self._db: Any = None
        self._closed = False
        self._where = self._describe(conninfo)
        self._name = f"at {self._where}"
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

    @contextmanager
    def _tx(self, durable: bool = True, uncertain: bool = False, read_only: bool = False) -> Iterator[Cursor]:
        """See :meth:`SQLHeadStore._tx`: one transaction on a live connection (reopened if the
        last one dropped)."""
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

    def _write_stream(
        self, cur: Cursor, sql: str, params: Sequence[Any], stream_id: str, columns: str
    ) -> tuple[Any, ...] | None:
        """See :meth:`SQLHeadStore._write_stream`: the statement itself returns the row."""
        return cur.execute(f"{sql} RETURNING {columns}", params).fetchone()

    def close(self) -> None:
        """Close the connection. Idempotent."""
        with self._lock:
            self._closed = True
            if self._db is not None:
                self._db.close()


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
