"""A throw-away PostgreSQL server: initdb + pg_ctl on a unix socket in a temporary directory.

The PostgreSQL head-store benchmark (``benches/compare_heads.py``) starts one when no server is
given, and the PostgreSQL tests' fixture (``tests/pg_fixture.py``) runs on the same class. The
server runs as the ``postgres`` system user when this process is root (PostgreSQL refuses to run
as root), and :meth:`PgServer.destroy` stops it and removes its directory.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from urllib.parse import quote

__all__ = ["PgServer", "find_bindir"]


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


def _runuser() -> str:
    """util-linux's runuser, which starts a command as another user (root may not run PostgreSQL),
    wherever it is: a restricted PATH may not hold the sbin directories."""
    found = shutil.which("runuser") or next(
        (p for p in ("/usr/sbin/runuser", "/sbin/runuser", "/usr/bin/runuser") if os.access(p, os.X_OK)), None
    )
    if found is None:
        raise FileNotFoundError("runuser")
    return found
