"""A throw-away PostgreSQL server for the head-store tests (``bucketcore.harness.postgres.PgServer``:
initdb + pg_ctl on a unix socket), stopped and removed at the end of the session. Each test gets
its own schema (``pg_url``), so tests never see each other's streams. Without PostgreSQL's server
binaries or psycopg, the tests that need them skip with one line saying how to get them.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator

import pytest

from bucketcore.harness.postgres import PgServer, find_bindir

HOW_TO_GET = (
    "PostgreSQL server binaries (initdb, pg_ctl) not found: install them with "
    "'apt-get install -y postgresql' (or set BUCKETCORE_PG_BINDIR) to run the PostgreSQL head-store tests"
)
PSYCOPG_MISSING = (
    "psycopg 3 is not installed: pip install 'bucketcore[postgres]' to run the PostgreSQL head-store tests"
)

_schemas = itertools.count()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """A running throw-away PostgreSQL server for the whole session (skips, saying how to get one)."""
    pytest.importorskip("psycopg", reason=PSYCOPG_MISSING, exc_type=ImportError)
    bindir = find_bindir()
    if bindir is None:
        pytest.skip(HOW_TO_GET)
    try:
        server = PgServer(bindir)
    except KeyError:
        pytest.skip("running as root, the PostgreSQL tests need the 'postgres' system user: " + HOW_TO_GET)
    except FileNotFoundError:
        pytest.skip("running as root, the PostgreSQL tests need runuser (util-linux) to start the server as 'postgres'")
    try:
        yield server
    finally:
        server.destroy()


@pytest.fixture
def pg_url(pg_server: PgServer) -> str:
    """A URL of the test server whose tables go to a schema of this test's own."""
    schema = f"t{os.getpid()}_{next(_schemas)}"
    pg_server.execute(f"CREATE SCHEMA {schema}")
    return pg_server.url_for_schema(schema)


# --- the stream-store suite against both head stores -------------------------------------------------
#
# Every test of a tests/stream/ module (those setting ONE_HEAD_STORE aside) runs twice: with
# the embedded SQLite head store, and with its heads in the throw-away PostgreSQL server. In the
# second run, StreamStore.open without a head store gets a PostgreSQL head store instead, one
# schema per store directory of the test (so a test's separate stores stay separate, and reopening
# a directory finds its streams again). Child processes get the same through
# BUCKETCORE_TEST_HEADS_SCHEMAS (directory -> URL, JSON), read by the stream tests' child helper.

HEAD_STORES = ("sqlite", "postgresql")

#: Tests that run once: about the SQLite file itself, or choosing their head store themselves.
SQLITE_ONLY = frozenset(
    {
        "test_a_database_of_a_newer_schema_is_refused",
        "test_stream_whose_profile_has_no_writer_refuses_appends_before_io",
        "test_unreachable_postgres_head_store_creates_nothing",
    }
)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrise the stream-store modules' tests (tests/stream/) over both head stores."""
    module = metafunc.module
    if os.path.basename(os.path.dirname(module.__file__)) != "stream" or getattr(module, "ONE_HEAD_STORE", False):
        return
    if metafunc.function.__name__ in SQLITE_ONLY:
        return
    if "stream_heads" in metafunc.fixturenames:
        metafunc.parametrize("stream_heads", HEAD_STORES, indirect=True)


@pytest.fixture(autouse=True)
def stream_heads(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Which head store StreamStore.open uses in this test: "sqlite" (default) or "postgresql"."""
    kind = getattr(request, "param", "sqlite")
    if kind == "sqlite":
        yield kind
        return
    server = request.getfixturevalue("pg_server")
    import json

    from bucketcore.stream import StreamStore

    urls: dict[str, str] = {}
    real_open = StreamStore.open.__func__  # type: ignore[attr-defined]

    def url_for(path: str) -> str:
        key = os.path.realpath(os.fspath(path))
        if key not in urls:
            schema = f"t{os.getpid()}_{next(_schemas)}"
            server.execute(f"CREATE SCHEMA {schema}")
            urls[key] = server.url_for_schema(schema)
            monkeypatch.setenv("BUCKETCORE_TEST_HEADS_SCHEMAS", json.dumps(urls))
        return urls[key]

    def open_with_postgres(cls, path, heads=None, **kwargs):  # type: ignore[no-untyped-def]
        if heads is None and isinstance(path, (str, os.PathLike)):
            heads = url_for(os.fspath(path))  # the store opens and owns this head store
        return real_open(cls, path, heads, **kwargs)

    monkeypatch.setattr(StreamStore, "open", classmethod(open_with_postgres))
    yield kind


def heads_for_child(path: str) -> str | None:
    """In a child process of a stream test: the head store URL the parent chose for ``path``, or None."""
    import json

    urls = json.loads(os.environ.get("BUCKETCORE_TEST_HEADS_SCHEMAS", "{}"))
    return urls.get(os.path.realpath(path))
