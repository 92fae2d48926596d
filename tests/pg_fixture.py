"""A throw-away PostgreSQL server for the head-store tests: initdb + pg_ctl on a unix socket.

The server runs from a temporary directory (data and socket), as the ``postgres`` system user
when the tests run as root (PostgreSQL refuses to run as root), and is stopped and removed at the
end of the session. Each test gets its own schema (``pg_url``), so tests never see each other's
streams. Without PostgreSQL's server binaries or psycopg, the tests that need them skip with one
line saying how to get them.
"""

from __future__ import annotations

import glob
import itertools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from urllib.parse import quote

import pytest

HOW_TO_GET = (
    "PostgreSQL server binaries (initdb, pg_ctl) not found: install them with "
    "'apt-get install -y postgresql' (or set BUCKETCORE_PG_BINDIR) to run the PostgreSQL head-store tests"
)
PSYCOPG_MISSING = (
    "psycopg 3 is not installed: pip install 'bucketcore[postgres]' to run the PostgreSQL head-store tests"
)


def find_bindir() -> str | None:
    """The directory holding initdb and pg_ctl, or None.

    ``BUCKETCORE_PG_BINDIR``, when set, is the only place looked at; otherwise the newest
    ``/usr/lib/postgresql/*/bin`` (Debian's layout), then wherever ``initdb`` is on the PATH.
    """
    chosen = os.environ.get("BUCKETCORE_PG_BINDIR")
    if chosen is not None:
        candidates = [chosen]
    else:
        candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version_key, reverse=True)
        initdb = shutil.which("initdb")
        if initdb:
            candidates.append(os.path.dirname(initdb))
    for d in candidates:
        if d and os.access(os.path.join(d, "initdb"), os.X_OK) and os.access(os.path.join(d, "pg_ctl"), os.X_OK):
            return d
    return None


def _version_key(path: str) -> int:
    try:
        return int(path.rstrip("/").split("/")[-2])
    except ValueError:
        return 0


class PgServer:
    """One running server: its socket directory, a ``postgresql://`` URL, stop/start/restart."""

    def __init__(self, bindir: str, *, fsync: bool = False) -> None:
        self.bindir = bindir
        self.fsync = fsync
        self.root = tempfile.mkdtemp(prefix="bc-pg-")
        self.data = os.path.join(self.root, "data")
        self.log = os.path.join(self.root, "server.log")
        self.port = 5432
        self._as_root = hasattr(os, "geteuid") and os.geteuid() == 0
        if self._as_root:
            import pwd  # POSIX only, like running as root

            owner = pwd.getpwnam("postgres")
            os.chown(self.root, owner.pw_uid, owner.pw_gid)
        os.chmod(self.root, 0o700)
        self._run("initdb", "-D", self.data, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8")
        self.start()

    def _run(self, tool: str, *args: str) -> None:
        cmd = [os.path.join(self.bindir, tool), *args]
        if self._as_root:
            cmd = [_runuser(), "-u", "postgres", "--", *cmd]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            log = open(self.log).read()[-2000:] if os.path.exists(self.log) else ""
            raise RuntimeError(f"{tool} failed ({done.returncode}): {done.stderr.strip()}\n{log}")

    @property
    def url(self) -> str:
        """Connection URL of the ``postgres`` database over the unix socket."""
        return f"postgresql://postgres@/postgres?host={quote(self.root, safe='')}&port={self.port}"

    def url_for_schema(self, schema: str) -> str:
        """A URL whose connections put their tables in ``schema``."""
        return f"{self.url}&options={quote('-csearch_path=' + schema, safe='')}"

    def start(self) -> None:
        """Start the server and wait until it accepts connections.

        Without ``fsync`` (the tests' default) a crash of the machine could lose commits; a crash of
        the server process cannot (the tests crash only the server). Benchmarks turn it on.
        """
        fsync = "on" if self.fsync else "off"
        options = f"-k {self.root} -c listen_addresses='' -p {self.port} -c fsync={fsync} -c max_connections=200"
        self._run("pg_ctl", "-D", self.data, "-l", self.log, "-o", options, "-w", "-t", "60", "start")

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``immediate`` is a crash: no checkpoint, recovery at the next start)."""
        self._run("pg_ctl", "-D", self.data, "-m", mode, "-w", "-t", "60", "stop")

    def restart(self, mode: str = "fast") -> None:
        """Stop, then start again."""
        self.stop(mode)
        self.start()

    def execute(self, sql: str) -> None:
        """Run one statement in its own autocommitted connection."""
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(sql)

    def destroy(self) -> None:
        """Stop the server (if running) and remove its directory."""
        try:
            self.stop("immediate")
        except RuntimeError:
            pass
        shutil.rmtree(self.root, ignore_errors=True)


_schemas = itertools.count()


def _runuser() -> str:
    """util-linux's runuser, which starts a command as another user (root may not run PostgreSQL),
    wherever it is: a restricted PATH may not hold the sbin directories."""
    found = shutil.which("runuser") or next(
        (p for p in ("/usr/sbin/runuser", "/sbin/runuser", "/usr/bin/runuser") if os.access(p, os.X_OK)), None
    )
    if found is None:
        raise FileNotFoundError("runuser")
    return found


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
