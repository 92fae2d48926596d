"""Crash and fault injection at every step boundary of the append (after steps 4, 5, 6 and 7).

After a fault — an exception in the process, or the process ending at once (``os._exit`` in a
child) — and a reopen: nothing committed is lost, nothing uncommitted is visible, offsets stay
contiguous, a retry with the same attempt id completes exactly once, and ``gc`` removes the
objects no append can use any more.
"""

from __future__ import annotations

import json
import random

import pytest
from stream_support import (
    EXIT_CODE,
    InjectedFault,
    entry_dict,
    raising_hook,
    random_entries,
    read_all,
    run_child,
    same_entry,
    wal_objects,
)

import bucketcore.stream as st
from bucketcore.stream import EntryPayload, StreamStore

STEPS = (4, 5, 6, 7)


def _check(store: StreamStore, stream: str, expected: list[EntryPayload]) -> None:
    got = read_all(store, stream)
    assert len(got) == len(expected)
    for i, (g, e) in enumerate(zip(got, expected, strict=True)):
        assert same_entry(g, e), f"entry {i} differs"
    stamps = store.read_stamps(stream, store.head(stream).log_start)
    assert stamps.start_offset.tolist() == [g.start_offset for g in got]
    assert stamps.end_offset.tolist() == [g.end_offset for g in got]


def _referenced(store: StreamStore, stream: str) -> set[str]:
    """Objects of the committed appends, found independently of gc through the head store's index."""
    keys = set()
    for rows in store._heads.scan_index(stream, 0, (), 100):
        keys.update(r[3] for r in rows)
    return keys


def _recover(
    store: StreamStore,
    path: str,
    session: st.Session,
    step: int,
    retry: bool,
    committed: list[EntryPayload],
    failing: list[EntryPayload],
) -> None:
    """After a fault after ``step`` of appending ``failing`` (attempt id "attempt") on top of
    ``committed``: only what was committed is visible, then either the retry with the same attempt
    id lands exactly once (a second retry answers the same result) or, abandoned, the next append
    lands after it; ``gc`` then leaves exactly the objects the committed appends use."""
    # step 7 is after the CAS: committed even though the caller saw an exception
    visible = committed + failing if step == 7 else committed
    _check(store, "x", visible)
    if retry:
        res = store.append("x", failing, session=session, attempt_id="attempt")
        assert res.start_offset == sum(e.record_count for e in committed)
        assert store.append("x", failing, session=session, attempt_id="attempt") == res
        visible = committed + failing
    else:
        store.append("x", [EntryPayload(b"next")], session=session)
        visible = visible + [EntryPayload(b"next")]
    _check(store, "x", visible)
    store.gc()
    assert set(wal_objects(path)) == _referenced(store, "x")
    _check(store, "x", visible)


def _one_fault_in_process(tmp_path, step: int, retry: bool, rng: random.Random) -> None:
    path = tmp_path / f"s{step}{retry}{rng.random()}"
    store = StreamStore.open(path, _fault=raising_hook(step))
    store.create_stream("x")
    session = store.open_session("x", "w1")
    committed = random_entries(rng)
    store_ok = StreamStore.open(path)
    store_ok.append("x", committed, session=session)  # the store with the hook is armed once
    failing = random_entries(rng)
    with pytest.raises(InjectedFault):
        store.append("x", failing, session=session, attempt_id="attempt")
    _recover(store, str(path), session, step, retry, committed, failing)
    store.close()
    store_ok.close()


@pytest.mark.parametrize("step", STEPS)
@pytest.mark.parametrize("retry", [True, False], ids=["retried", "abandoned"])
def test_exception_after_each_step_then_retry_or_abandon(tmp_path, step: int, retry: bool) -> None:
    rng = random.Random(step * 10 + retry)
    for _ in range(3):
        _one_fault_in_process(tmp_path, step, retry, rng)


def _append_in_crashing_child(path: str, step: int, attempt: str, entries: list[EntryPayload]) -> None:
    """Append ``entries`` to stream "x" as writer "w1" in a child process that ends at once
    (``os._exit``) after ``step`` of the append."""
    child = run_child(
        "crash",
        {
            "path": path,
            "stream": "x",
            "writer": "w1",
            "step": step,
            "attempt": attempt,
            "entries": [entry_dict(e) for e in entries],
        },
    )
    assert child.returncode == EXIT_CODE, child.stderr


def _crash_in_child(tmp_path, step: int, retry: bool, rng: random.Random) -> None:
    path = str(tmp_path / f"c{step}{retry}{rng.random()}")
    with StreamStore.open(path) as s:
        s.create_stream("x")
        session = s.open_session("x", "w1")
        committed = random_entries(rng)
        s.append("x", committed, session=session)
    failing = random_entries(rng)
    _append_in_crashing_child(path, step, "attempt", failing)
    with StreamStore.open(path) as s:
        session = s.open_session("x", "w1")  # the crashed process's session is gone with it
        _recover(s, path, session, step, retry, committed, failing)
        assert len(wal_objects(path)) == s.head("x").version


@pytest.mark.parametrize("step", STEPS)
@pytest.mark.parametrize("retry", [True, False], ids=["retried", "abandoned"])
def test_process_exit_after_each_step_then_reopen(tmp_path, step: int, retry: bool) -> None:
    _crash_in_child(tmp_path, step, retry, random.Random(step * 100 + retry))


def test_pending_append_keeps_its_object_through_gc_until_the_head_moves_past_it(tmp_path) -> None:
    path = tmp_path / "s"
    with StreamStore.open(path, _fault=raising_hook(6)) as s:
        s.create_stream("x")
        session = s.open_session("x", "w1")
        with pytest.raises(InjectedFault):
            s.append("x", [EntryPayload(b"pending")], session=session, attempt_id="p")
        [key] = wal_objects(str(path))
        assert s.gc() == 0 and wal_objects(str(path)) == [key]  # protected: a retry may still come
        s.append("x", [EntryPayload(b"other")], session=session)  # the head moves past it
        assert s.gc() == 1 and key not in wal_objects(str(path))
        assert [e.payload for e in read_all(s, "x")] == [b"other"]


def test_gc_between_put_and_protection_does_not_lose_the_object(tmp_path) -> None:
    path = tmp_path / "s"
    with StreamStore.open(path) as other:
        other.create_stream("x")

        def gc_now(step: int) -> None:
            if step == 4:
                assert other.gc() == 1  # the new object is not yet protected: a concurrent gc takes it

        with StreamStore.open(path, _fault=gc_now) as s:
            session = s.open_session("x", "w1")
            res = s.append("x", [EntryPayload(b"survives", 3)], session=session)
            assert wal_objects(str(path)) == [res.read_target.object_key]
            assert [e.payload for e in s.read("x")] == [b"survives"]


def _randomized(tmp_path, rounds: int, seed: int) -> None:
    """Many faults in one stream: random step, raise or crash, retry or abandon, random payloads."""
    rng = random.Random(seed)
    path = str(tmp_path / f"r{seed}")
    expected: list[EntryPayload] = []
    with StreamStore.open(path) as s:
        s.create_stream("x")
    for r in range(rounds):
        step = rng.choice(STEPS)
        entries = random_entries(rng)
        attempt = f"a{r}"
        if rng.random() < 0.5:
            _append_in_crashing_child(path, step, attempt, entries)
        else:
            with StreamStore.open(path, _fault=raising_hook(step)) as s:
                session = s.open_session("x", "w1")
                with pytest.raises(InjectedFault):
                    s.append("x", entries, session=session, attempt_id=attempt)
        with StreamStore.open(path) as s:
            if step == 7:
                expected.extend(entries)
            _check(s, "x", expected)
            session = s.open_session("x", "w1")
            if rng.random() < 0.6:
                s.append("x", entries, session=session, attempt_id=attempt)
                if step != 7:
                    expected.extend(entries)
            extra = random_entries(rng)
            s.append("x", extra, session=session)
            expected.extend(extra)
            if rng.random() < 0.5:
                s.gc()
                assert set(wal_objects(path)) == _referenced(s, "x")
            _check(s, "x", expected)
    with StreamStore.open(path) as s:
        s.gc()
        assert set(wal_objects(path)) == _referenced(s, "x")
        _check(s, "x", expected)


def test_randomized_faults_short_run(tmp_path) -> None:
    _randomized(tmp_path, rounds=8, seed=1)


@pytest.mark.slow
def test_randomized_faults_long_run(tmp_path, request) -> None:
    if "slow" not in (request.config.option.markexpr or ""):
        pytest.skip("long randomized fault run: opt in with -m slow")
    for seed in range(2, 7):
        _randomized(tmp_path, rounds=40, seed=seed)


def test_fault_child_reports_a_clean_append_when_no_fault_is_hit(tmp_path) -> None:
    path = str(tmp_path / "s")
    with StreamStore.open(path) as s:
        s.create_stream("x")
    child = run_child(
        "crash",
        {
            "path": path,
            "stream": "x",
            "writer": "w1",
            "step": 99,
            "attempt": "a",
            "entries": [entry_dict(EntryPayload(b"ok", 2))],
        },
    )
    assert child.returncode == 0, child.stderr
    assert json.loads(child.stdout) == {"start": 0, "end": 2}
    with StreamStore.open(path) as s:
        assert [e.payload for e in read_all(s, "x")] == [b"ok"]


def test_errors_raised_by_the_store_are_stream_errors() -> None:
    for cls in (
        st.OffsetMismatchError,
        st.FencedError,
        st.CapabilityError,
        st.InvariantViolationError,
        st.ChecksumError,
        st.MissingObjectError,
        st.UncertainAppendError,
    ):
        assert issubclass(cls, st.StreamError)
