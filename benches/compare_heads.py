"""Side by side in one run: appends per second through the SQLite and the PostgreSQL head store.

    python benches/compare.py heads [--seconds 2] [--writers 1,4,16] [--pg-url URL] [--dir /tmp]

(``python benches/compare_heads.py ...`` is the same group.)

Each writer is its own process with its own store handle on one shared store directory (the WAL),
the way brokers share a store. Every append is one 1 KiB stamped entry. Two shapes:

- distinct streams: writer ``i`` appends to stream ``s<i>`` with its own session (no contention
  on a head; the head store itself is shared);
- one stream: every writer appends to stream ``shared`` with the same session, so appends race on
  the head CAS; a loser gets ``OffsetMismatchError`` and tries again (counted as a conflict).

Durability is on for both: SQLite ``synchronous=FULL`` and fsynced WAL objects; PostgreSQL with
``fsync=on`` and ``synchronous_commit=on`` for the head CAS. Without ``--pg-url`` a throw-away
server is started from the system's PostgreSQL (:class:`bucketcore.harness.postgres.PgServer`)
and removed at the end. Reports committed appends per second for each store, writer count and shape, and the
PostgreSQL/SQLite ratio.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import sys
import tempfile
from typing import Any

from bucketcore.harness.postgres import PgServer, find_bindir
from bucketcore.harness.timing import run_for

PAYLOAD = 1024


def _open(path: str, url: str | None) -> tuple[Any, Any]:
    from bucketcore.stream import StreamStore

    if url is None:
        return StreamStore.open(path), None
    from bucketcore.stream.postgres_heads import PostgresHeadStore

    heads = PostgresHeadStore(url)
    return StreamStore.open(path, heads=heads), heads


def _writer(
    path: str, url: str | None, stream: str, session: dict[str, Any] | None, go: Any, seconds: float, out: Any
) -> None:
    from bucketcore.stream import EntryPayload, OffsetMismatchError, Session

    store, heads = _open(path, url)
    sess = Session(**session) if session else store.open_session(stream, f"w-{os.getpid()}", ttl=600)
    payload = os.urandom(PAYLOAD)
    entry = [EntryPayload(payload, 1, b"", 100, 300)]
    conflicts = 0

    def append(_: int) -> None:
        nonlocal conflicts
        try:
            store.append(stream, entry, session=sess)
        except OffsetMismatchError:
            conflicts += 1

    out.put("ready")
    go.wait()  # every writer is started and connected
    calls, _ = run_for(append, seconds)
    done = calls - conflicts
    store.close()
    if heads is not None:
        heads.close()
    out.put((done, conflicts))


def run(path: str, url: str | None, writers: int, shared: bool, seconds: float) -> tuple[float, int]:
    """Committed appends per second and CAS conflicts of ``writers`` processes for ``seconds``."""
    store, heads = _open(path, url)
    streams = ["shared"] if shared else [f"s{i}" for i in range(writers)]
    for s in streams:
        if s not in store.streams():
            store.create_stream(s)
    session = None
    if shared:
        sess = store.open_session("shared", "bench", ttl=600)
        session = {
            "stream_id": sess.stream_id,
            "epoch": sess.epoch,
            "token": sess.token,
            "writer": sess.writer,
            "expires_at": sess.expires_at,
        }
    before = sum(store.head(s).committed_end for s in streams)
    store.close()
    if heads is not None:
        heads.close()
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    go = ctx.Event()
    procs = [
        ctx.Process(target=_writer, args=(path, url, streams[0] if shared else streams[i], session, go, seconds, out))
        for i in range(writers)
    ]
    for p in procs:
        p.start()
    for _ in procs:
        assert out.get(timeout=300) == "ready"
    go.set()
    results = [out.get(timeout=seconds + 120) for _ in procs]
    for p in procs:
        p.join()
    store, heads = _open(path, url)
    after = sum(store.head(s).committed_end for s in streams)
    store.close()
    if heads is not None:
        heads.close()
    committed = sum(r[0] for r in results)
    assert after - before == committed, f"{after - before} offsets committed, writers report {committed}"
    return committed / seconds, sum(r[1] for r in results)


def main(argv: list[str] | None = None) -> None:
    """The heads group (``benches/compare.py heads``); ``argv`` as the command line's."""
    parser = argparse.ArgumentParser(prog="compare.py heads", description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--writers", default="1,4,16")
    parser.add_argument("--pg-url", default=None, help="an existing PostgreSQL (default: a throw-away server)")
    parser.add_argument("--dir", default=None, help="where the store directories go (default: a temp dir)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    counts = [int(x) for x in args.writers.split(",")]
    root = tempfile.mkdtemp(prefix="bc-heads-", dir=args.dir)
    server = None
    url = args.pg_url
    if url is None:
        bindir = find_bindir()
        if bindir is None:
            sys.exit("no PostgreSQL found: apt-get install -y postgresql, or pass --pg-url")
        server = PgServer(bindir, fsync=True)
        url = server.url
    rows = []
    try:
        for shared in (False, True):
            for n in counts:
                row: dict[str, Any] = {"shape": "one stream" if shared else "distinct streams", "writers": n}
                for name, u in (("sqlite", None), ("postgres", url)):
                    path = os.path.join(root, f"{name}-{'one' if shared else 'many'}-{n}")
                    rate, conflicts = run(path, u, n, shared, args.seconds)
                    row[name] = round(rate, 1)
                    row[f"{name}_conflicts"] = conflicts
                row["pg_over_sqlite"] = round(row["postgres"] / row["sqlite"], 2) if row["sqlite"] else None
                rows.append(row)
                if not args.json:
                    print(
                        f"{row['shape']:>16}  writers={n:>2}  sqlite {row['sqlite']:>8.1f}/s "
                        f"(conflicts {row['sqlite_conflicts']})  postgres {row['postgres']:>8.1f}/s "
                        f"(conflicts {row['postgres_conflicts']})  pg/sqlite {row['pg_over_sqlite']}",
                        flush=True,
                    )
    finally:
        if server is not None:
            server.destroy()
        shutil.rmtree(root, ignore_errors=True)
    if args.json:
        print(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
