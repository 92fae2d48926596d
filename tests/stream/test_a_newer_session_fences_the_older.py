"""Fencing: append sessions (epoch, token, writer, expiry) within a process and across processes."""

from __future__ import annotations

import json
import time

import pytest
from stream_support import read_all, run_child, snapshot, spawn_child

import bucketcore.stream as st
from bucketcore.stream import EntryPayload, StreamStore


@pytest.fixture
def path(tmp_path) -> str:
    p = str(tmp_path / "store")
    with StreamStore.open(p) as s:
        s.create_stream("x")
    return p


def test_a_new_session_gets_a_higher_epoch_and_fences_the_previous_one(path) -> None:
    with StreamStore.open(path) as a, StreamStore.open(path) as b:
        old = a.open_session("x", "w1")
        a.append("x", [EntryPayload(b"a")], session=old)
        new = b.open_session("x", "w2")
        assert new.epoch == old.epoch + 1 and new.token != old.token
        before = snapshot(path)
        with pytest.raises(st.FencedError, match=f"epoch {old.epoch} .* stale"):
            a.append("x", [EntryPayload(b"stale")], session=old)
        assert snapshot(path) == before  # refused before the WAL PUT
        b.append("x", [EntryPayload(b"b")], session=new)
        assert [e.payload for e in read_all(a, "x")] == [b"a", b"b"]


def test_a_session_opened_by_another_process_fences_this_one(path) -> None:
    with StreamStore.open(path) as s:
        mine = s.open_session("x", "w1")
        s.append("x", [EntryPayload(b"mine")], session=mine)
        child = run_child("session", {"path": path, "stream": "x", "writer": "w2"})
        assert child.returncode == 0, child.stderr
        assert json.loads(child.stdout)["epoch"] == mine.epoch + 1
        with pytest.raises(st.FencedError, match="w2"):
            s.append("x", [EntryPayload(b"late")], session=mine)
        assert [e.payload for e in read_all(s, "x")] == [b"mine"]


def test_session_fenced_between_its_check_and_its_cas_commits_nothing(path) -> None:
    # the newer session is opened while the append is between its WAL PUT and its head CAS
    with StreamStore.open(path) as other:

        def take_over(step: int) -> None:
            if step == 6:
                other.open_session("x", "w2")

        with StreamStore.open(path, _fault=take_over) as s:
            session = s.open_session("x", "w1")
            with pytest.raises(st.FencedError, match="stale"):
                s.append("x", [EntryPayload(b"raced")], session=session)
            assert s.head("x").committed_end == 0 and s.read("x") == []


def test_an_expired_session_is_refused_and_cannot_be_renewed(path) -> None:
    with StreamStore.open(path) as s:
        session = s.open_session("x", "w1", ttl=0.5)
        s.append("x", [EntryPayload(b"in time")], session=session)
        time.sleep(max(0.0, session.expires_at - time.time()) + 0.05)
        with pytest.raises(st.FencedError, match="expired"):
            s.append("x", [EntryPayload(b"too late")], session=session)
        with pytest.raises(st.FencedError, match="expired"):
            s.renew_session(session)
        assert [e.payload for e in read_all(s, "x")] == [b"in time"]


def test_renewing_a_live_session_extends_it(path) -> None:
    with StreamStore.open(path) as s:
        session = s.open_session("x", "w1", ttl=0.5)
        renewed = s.renew_session(session, ttl=60.0)
        assert renewed.epoch == session.epoch and renewed.expires_at > session.expires_at
        time.sleep(max(0.0, session.expires_at - time.time()) + 0.05)  # the first lease ran out
        s.append("x", [EntryPayload(b"ok")], session=renewed)
        newer = s.open_session("x", "w2")
        with pytest.raises(st.FencedError):
            s.renew_session(renewed)
        s.append("x", [EntryPayload(b"ok2")], session=newer)


def test_two_processes_taking_turns_only_the_newest_session_commits(path, tmp_path) -> None:
    outs = [str(tmp_path / f"out{i}.json") for i in range(2)]
    ready = tmp_path / "ready"
    ready.mkdir()
    children = [
        spawn_child(
            "contender",
            {
                "path": path,
                "stream": "x",
                "writer": f"p{i}",
                "seed": i,
                "rounds": 10_000,
                "seconds": 1.0,
                "ready_dir": str(ready),
                "parties": 2,
                "out": outs[i],
            },
        )
        for i in range(2)
    ]
    for c in children:
        _, err = c.communicate(timeout=60)
        assert c.returncode == 0, err
    outcomes = []
    for o in outs:
        with open(o) as f:
            outcomes.extend(json.load(f))
    ok = {o["tag"]: o for o in outcomes if o["ok"]}
    with StreamStore.open(path) as s:
        log = read_all(s, "x")  # checks offsets are contiguous, no gap, no overlap
        tags = [e.metadata.decode() for e in log]
    # every committed entry is an append some process was told succeeded, exactly once, and back
    assert sorted(tags) == sorted(ok)
    for e, tag in zip(log, tags, strict=True):
        assert (e.start_offset, e.end_offset) == (ok[tag]["start"], ok[tag]["end"])
    # fencing: once a newer session has committed, no older session ever commits again
    epochs = [int(t.split(":")[1]) for t in tags]
    assert epochs == sorted(epochs)
    # and the sessions did interleave: both writers committed, and some appends were fenced
    assert {t.split(":")[0] for t in tags} == {"p0", "p1"}
    assert len(outcomes) > len(ok)
