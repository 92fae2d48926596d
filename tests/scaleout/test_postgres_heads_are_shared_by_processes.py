"""The PostgreSQL head store: the append protocol through a shared database, across processes and faults.

A throw-away server is started for the session (tests/pg_fixture.py); each test gets its own
schema. Run as a script (``python tests/scaleout/test_postgres_heads_are_shared_by_processes.py
<command> <json>``) this file is the child process of the multi-process tests.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import pytest

from bucketcore import stream as st
from bucketcore.stream import EntryPayload, StreamStore

HERE = os.path.abspath(__file__)
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))

if TYPE_CHECKING:  # only a type here: the child process, run as a script, has no tests/ on sys.path
    from bucketcore.harness.postgres import PgServer


def _heads(url: str) -> Any:
    from bucketcore.stream.postgres_heads import PostgresHeadStore

    return PostgresHeadStore(url)


@contextmanager
def pg_store(path: str, url: str, **kwargs: Any) -> Iterator[StreamStore]:
    """A stream store on ``path`` (the shared WAL directory) with its heads in PostgreSQL at ``url``."""
    store = StreamStore.open(path, heads=url, **kwargs)
    try:
        yield store
    finally:
        store.close()


def read_all(store: StreamStore, stream_id: str) -> list[Any]:
    """Every entry of a stream, checking the offsets are contiguous from the log start with no overlap."""
    head = store.head(stream_id)
    out: list[Any] = []
    pos = head.log_start
    while pos < head.committed_end:
        batch = store.read(stream_id, pos, 64)
        assert batch, f"no entry at offset {pos} below the committed end {head.committed_end}"
        for e in batch:
            assert e.start_offset == pos, f"gap or overlap at offset {pos}: entry starts at {e.start_offset}"
            pos = e.end_offset
        out.extend(batch)
    assert pos == head.committed_end
    return out


# --- the protocol through PostgreSQL --------------------------------------------------------------


def test_appends_commit_contiguous_ranges_and_read_back_with_stamps(tmp_path, pg_url) -> None:
    with pg_store(str(tmp_path / "s"), pg_url) as s:
        s.create_stream("x")
        session = s.open_session("x", "w1")
        first = s.append("x", [EntryPayload(b"a", 100)], session=session)
        res = s.append(
            "x",
            [EntryPayload(b"bbb", 3, b"m", 5, 9), EntryPayload(b"cc", 2)],
            session=session,
            expected_start_offset=100,
        )
        assert (first.start_offset, first.end_offset) == (0, 100)
        assert (res.start_offset, res.end_offset, res.committed_end, res.commit_version) == (100, 105, 105, 2)
        assert res.logical_size == 1 + 3 + 2
        got = s.read("x", 100)
        assert [(e.start_offset, e.end_offset, e.payload, e.metadata) for e in got] == [
            (100, 103, b"bbb", b"m"),
            (103, 105, b"cc", b""),
        ]
        stamps = s.read_stamps("x", 100)
        assert stamps.hash_min.tolist()[0] == 5 and stamps.hash_max.tolist()[0] == 9
        with pytest.raises(st.OffsetMismatchError):
            s.append("x", [EntryPayload(b"z")], session=session, expected_start_offset=100)


def test_two_store_handles_share_heads_and_the_newer_session_fences_the_older(tmp_path, pg_url) -> None:
    path = str(tmp_path / "s")
    with pg_store(path, pg_url) as a, pg_store(path, pg_url) as b:
        a.create_stream("x")
        old = a.open_session("x", "broker-a")
        a.append("x", [EntryPayload(b"1")], session=old)
        new = b.open_session("x", "broker-b")
        assert new.epoch == old.epoch + 1
        with pytest.raises(st.FencedError, match="stale"):
            a.append("x", [EntryPayload(b"2")], session=old)
        b.append("x", [EntryPayload(b"3")], session=new)
        assert [e.payload for e in read_all(a, "x")] == [b"1", b"3"]
        with pytest.raises(st.StreamExistsError):
            b.create_stream("x")
        assert a.streams() == b.streams() == ["x"]


def test_retry_of_a_committed_attempt_returns_its_result_once(tmp_path, pg_url) -> None:
    with pg_store(str(tmp_path / "s"), pg_url) as s:
        s.create_stream("x")
        session = s.open_session("x", "w")
        one = s.append("x", [EntryPayload(b"p", 2)], session=session, attempt_id="a-1")
        again = s.append("x", [EntryPayload(b"p", 2)], session=session, attempt_id="a-1")
        assert again == one and s.head("x").committed_end == 2
        with pytest.raises(st.InvariantViolationError):
            s.append("x", [EntryPayload(b"other", 2)], session=session, attempt_id="a-1")


def test_trim_and_gc_through_postgres_keep_exactly_the_retained_objects(tmp_path, pg_url) -> None:
    path = str(tmp_path / "s")
    with pg_store(path, pg_url) as s:
        s.create_stream("x")
        session = s.open_session("x", "w")
        for i in range(5):
            s.append("x", [EntryPayload(bytes([i]) * 4, 2), EntryPayload(b"t", 1)], session=session)
        assert s.trim("x", 7) == 6  # offset 7 lies in the entry [6, 8): it stays whole
        assert s.gc() == 2
        assert [e.start_offset for e in read_all(s, "x")][0] == 6
        assert len(os.listdir(os.path.join(path, "wal"))) == 3


def test_an_expired_session_is_refused(tmp_path, pg_url) -> None:
    with pg_store(str(tmp_path / "s"), pg_url) as s:
        s.create_stream("x")
        session = s.open_session("x", "w", ttl=0.2)
        time.sleep(0.3)
        with pytest.raises(st.FencedError, match="expired"):
            s.append("x", [EntryPayload(b"late")], session=session)
        with pytest.raises(st.FencedError):
            s.renew_session(session)
        assert s.head("x").committed_end == 0


def test_a_database_of_a_newer_schema_is_refused(pg_server: PgServer, pg_url) -> None:
    _heads(pg_url).close()
    schema = pg_url.rsplit("search_path%3D", 1)[1]
    pg_server.execute(f"UPDATE {schema}.meta SET value = '99' WHERE key = 'schema'")
    with pytest.raises(st.StreamError, match="schema 99"):
        _heads(pg_url)


def test_an_unreachable_server_is_a_stream_error_naming_it(tmp_path) -> None:
    pytest.importorskip("psycopg", reason="psycopg 3 is not installed: pip install 'bucketcore[postgres]'")
    url = f"postgresql://postgres@/postgres?host={tmp_path}&port=1"
    with pytest.raises(st.StreamError, match=f"cannot reach the head store at PostgreSQL {tmp_path}:1"):
        _heads(url)


# --- faults ---------------------------------------------------------------------------------------


def _drop_connection_of(heads: Any, server: PgServer) -> None:
    """End the server side of the head store's connection (what a network cut does to it)."""
    pid = heads._db.info.backend_pid
    server.execute(f"SELECT pg_terminate_backend({pid})")


@pytest.mark.parametrize("step", [4, 5, 6])
def test_connection_dropped_between_the_wal_put_and_the_cas(tmp_path, pg_server: PgServer, pg_url, step) -> None:
    """The connection dies after step 4 (PUT), 5 (protection) or 6 (intent), before the head CAS:
    the append fails without committing, and a retry with the same attempt id commits exactly once."""
    heads = _heads(pg_url)
    armed = [False]

    def cut(done: int) -> None:
        if armed[0] and done == step:
            armed[0] = False
            _drop_connection_of(heads, pg_server)

    path = str(tmp_path / "s")
    store = StreamStore.open(path, heads=heads, _fault=cut)
    try:
        store.create_stream("x")
        session = store.open_session("x", "w", ttl=60)
        store.append("x", [EntryPayload(b"before")], session=session)
        entries = [EntryPayload(b"in-flight", 3)]
        armed[0] = True
        with pytest.raises(st.StreamError):
            store.append("x", entries, session=session, attempt_id="attempt-7")
        assert store.head("x").committed_end == 1  # the next call reconnects; nothing committed
        res = store.append("x", entries, session=session, attempt_id="attempt-7")
        assert (res.start_offset, res.end_offset) == (1, 4)
        again = store.append("x", entries, session=session, attempt_id="attempt-7")
        assert again == res
        assert [e.payload for e in read_all(store, "x")] == [b"before", b"in-flight"]
        assert store.gc() == 0  # the retry reused the first try's object: nothing left over
    finally:
        store.close()
        heads.close()


def test_postgres_restarted_in_the_middle_of_appends(tmp_path, pg_server: PgServer, pg_url) -> None:
    """A writer keeps appending, retrying each attempt id until it succeeds, while the server is
    crashed and restarted twice: every acknowledged append is there exactly once, in order."""
    path = str(tmp_path / "s")
    with pg_store(path, pg_url) as s:
        s.create_stream("x")
    acked: list[tuple[str, int, int]] = []
    errors: list[str] = []
    stop = threading.Event()

    def writer() -> None:
        with pg_store(path, pg_url) as s:
            session = s.open_session("x", "w", ttl=600)
            n = 0
            while not stop.is_set() or n < 5:
                attempt = f"a{n}"
                entries = [EntryPayload(attempt.encode(), 1 + n % 3, attempt.encode())]
                for _ in range(600):
                    try:
                        res = s.append("x", entries, session=session, attempt_id=attempt)
                        break
                    except (st.StreamError, st.UncertainAppendError) as err:
                        errors.append(type(err).__name__)
                        time.sleep(0.02)
                else:
                    raise AssertionError(f"attempt {attempt} never completed")
                acked.append((attempt, res.start_offset, res.end_offset))
                n += 1

    t = threading.Thread(target=writer)
    t.start()
    try:
        for _ in range(2):
            time.sleep(0.4)
            pg_server.restart("immediate")
    finally:
        time.sleep(0.3)
        stop.set()
        t.join(timeout=120)
    assert not t.is_alive()
    assert errors, "the restarts never hit an append: the test did not test anything"
    with pg_store(path, pg_url) as s:
        log = read_all(s, "x")
    assert [e.metadata.decode() for e in log] == [a for a, _, _ in acked]
    assert [(e.start_offset, e.end_offset) for e in log] == [(a, b) for _, a, b in acked]


# --- several processes ----------------------------------------------------------------------------


def test_processes_with_competing_sessions_only_the_newest_session_commits(tmp_path, pg_url) -> None:
    path = str(tmp_path / "s")
    with pg_store(path, pg_url) as s:
        s.create_stream("x")
    ready = tmp_path / "ready"
    ready.mkdir()
    parties = 3
    outs = [str(tmp_path / f"out{i}.json") for i in range(parties)]
    children = [
        subprocess.Popen(
            [
                sys.executable,
                HERE,
                "contender",
                json.dumps(
                    {
                        "path": path,
                        "url": pg_url,
                        "writer": f"p{i}",
                        "seed": i,
                        "seconds": 1.0,
                        "ready_dir": str(ready),
                        "parties": parties,
                        "out": outs[i],
                    }
                ),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(parties)
    ]
    for c in children:
        _, err = c.communicate(timeout=120)
        assert c.returncode == 0, err
    outcomes = []
    for o in outs:
        with open(o) as f:
            outcomes.extend(json.load(f))
    ok = {o["tag"]: o for o in outcomes if o["ok"]}
    with pg_store(path, pg_url) as s:
        log = read_all(s, "x")  # contiguous: no gap, no overlap
    tags = [e.metadata.decode() for e in log]
    assert sorted(tags) == sorted(ok)  # every acknowledged append, exactly once, and nothing else
    for e, tag in zip(log, tags):
        assert (e.start_offset, e.end_offset) == (ok[tag]["start"], ok[tag]["end"])
    epochs = [int(t.split(":")[1]) for t in tags]
    assert epochs == sorted(epochs)  # once a newer session committed, no older one ever did
    assert {t.split(":")[0] for t in tags} == {f"p{i}" for i in range(parties)}
    assert len(outcomes) > len(ok), "no append was ever fenced: the sessions did not compete"


def _child_contender(args: dict[str, Any]) -> None:
    """Alternate: open a session (fencing the others), append a few times until fenced."""
    rng = random.Random(args["seed"])
    name = args["writer"]
    outcomes = []
    with pg_store(args["path"], args["url"]) as store:
        open(os.path.join(args["ready_dir"], name), "w").close()
        give_up = time.time() + 60.0
        while len(os.listdir(args["ready_dir"])) < args["parties"] and time.time() < give_up:
            time.sleep(0.005)
        deadline = time.time() + args["seconds"]
        hard_limit = deadline + 30.0  # a loaded machine: go on until this writer committed once
        committed = False
        while time.time() < deadline or (not committed and time.time() < hard_limit):
            session = store.open_session("x", name, ttl=60.0)
            for seq in range(rng.randint(1, 4)):
                tag = f"{name}:{session.epoch}:{seq}"
                try:
                    res = store.append(
                        "x",
                        [EntryPayload(rng.randbytes(rng.randint(1, 64)), rng.randint(1, 3), tag.encode())],
                        session=session,
                    )
                except st.FencedError:
                    outcomes.append({"tag": tag, "ok": False})
                    break
                outcomes.append({"tag": tag, "ok": True, "start": res.start_offset, "end": res.end_offset})
                committed = True
    with open(args["out"], "w") as f:
        json.dump(outcomes, f)


def test_a_cas_whose_answer_is_lost_after_it_committed_is_completed_once_by_the_retry(tmp_path, pg_url) -> None:
    """The CAS commits but its answer never arrives (the connection dies right after COMMIT): the
    append is uncertain, the next append of the lane first settles it, and the retry with the same
    attempt id returns the committed result without committing again."""
    heads = _heads(pg_url)
    real_commit = heads.commit_append
    lose_answer = [True]

    def commit_then_lose_the_answer(*args: Any) -> Any:
        head = real_commit(*args)
        if lose_answer[0]:
            lose_answer[0] = False
            raise st.UncertainAppendError("the connection dropped before the commit's answer arrived")
        return head

    heads.commit_append = commit_then_lose_the_answer
    store = StreamStore.open(str(tmp_path / "s"), heads=heads)
    try:
        store.create_stream("x")
        session = store.open_session("x", "w", ttl=60)
        entries = [EntryPayload(b"once", 2)]
        with pytest.raises(st.UncertainAppendError):
            store.append("x", entries, session=session, attempt_id="only")
        res = store.append("x", entries, session=session, attempt_id="only")
        assert (res.start_offset, res.end_offset, res.commit_version) == (0, 2, 1)
        assert [e.payload for e in read_all(store, "x")] == [b"once"]
    finally:
        store.close()
        heads.close()


def test_a_cas_cut_while_it_waits_commits_nothing_and_the_retry_commits_once(tmp_path, pg_server, pg_url) -> None:
    """The head row is locked by another client, so the CAS waits; its connection is cut while it
    waits. Nothing committed; the retry with the same attempt id commits exactly once."""
    import psycopg

    heads = _heads(pg_url)
    store = StreamStore.open(str(tmp_path / "s"), heads=heads)
    try:
        store.create_stream("x")
        session = store.open_session("x", "w", ttl=60)
        with psycopg.connect(pg_url) as blocker:
            blocker.execute("SELECT 1 FROM streams WHERE stream_id = 'x' FOR UPDATE")
            pid = heads._db.info.backend_pid

            def cut_when_waiting() -> None:
                for _ in range(500):
                    with psycopg.connect(pg_server.url, autocommit=True) as admin:
                        row = admin.execute(
                            "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,)
                        ).fetchone()
                        if row and row[0] == "Lock":
                            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
                            return
                    time.sleep(0.01)

            cutter = threading.Thread(target=cut_when_waiting)
            cutter.start()
            with pytest.raises(st.UncertainAppendError):
                store.append("x", [EntryPayload(b"cut", 1)], session=session, attempt_id="r")
            cutter.join()
            blocker.rollback()
        assert store.head("x").committed_end == 0
        res = store.append("x", [EntryPayload(b"cut", 1)], session=session, attempt_id="r")
        assert (res.start_offset, res.end_offset) == (0, 1)
        assert [e.payload for e in read_all(store, "x")] == [b"cut"]
    finally:
        store.close()
        heads.close()


def test_without_postgresql_the_tests_skip_saying_how_to_get_it(tmp_path) -> None:
    env = {**os.environ, "BUCKETCORE_PG_BINDIR": str(tmp_path / "no-postgres-here")}
    res = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs",
         f"{HERE}::test_an_expired_session_is_refused"],
        capture_output=True, text=True, env=env, timeout=120, cwd=REPO,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    assert "1 skipped" in res.stdout
    assert "apt-get install -y postgresql" in res.stdout


def test_a_cas_the_server_refuses_commits_nothing_and_is_a_stream_error(tmp_path, pg_server, pg_url) -> None:
    """The head row stays locked past the connection's lock_timeout: the server refuses the CAS
    and rolls it back (the connection survives); the append fails with a StreamError naming the
    server, and a retry once the lock is gone commits exactly once."""
    import psycopg

    schema = pg_url.rsplit("search_path%3D", 1)[1]
    url = f"{pg_server.url}&options={quote(f'-csearch_path={schema} -clock_timeout=200')}"
    with pg_store(str(tmp_path / "s"), url) as store:
        store.create_stream("x")
        session = store.open_session("x", "w", ttl=60)
        with psycopg.connect(pg_url) as blocker:
            blocker.execute("SELECT 1 FROM streams WHERE stream_id = 'x' FOR UPDATE")
            with pytest.raises(st.StreamError, match="the head store at PostgreSQL .* failed: .*lock timeout"):
                store.append("x", [EntryPayload(b"held", 2)], session=session, attempt_id="h")
            blocker.rollback()
        assert store.head("x").committed_end == 0
        res = store.append("x", [EntryPayload(b"held", 2)], session=session, attempt_id="h")
        assert (res.start_offset, res.end_offset, res.commit_version) == (0, 2, 1)


if __name__ == "__main__":
    {"contender": _child_contender}[sys.argv[1]](json.loads(sys.argv[2]))
