"""The stream store against a plain in-memory model of a log, over random sequences of operations
(appends with and without expected starts and attempt ids, appends interrupted after steps 4-7
and retried or not, session takeovers, reads, stamp reads, trims, gc, reopen)."""

from __future__ import annotations

import shutil
import tempfile

from hypothesis import HealthCheck, settings
from hypothesis import strategies as stx
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from stream_support import InjectedFault, raising_hook, wal_objects

import bucketcore.stream as st
from bucketcore.stream import EntryPayload, StreamStore

_entry = stx.builds(
    lambda payload, count, meta, stamp: EntryPayload(payload, count, meta, *stamp),
    stx.binary(max_size=40),
    stx.integers(1, 4),
    stx.binary(max_size=4),
    stx.one_of(
        stx.just((None, None)),
        stx.tuples(stx.integers(0, 0xFFFF), stx.integers(0, 0xFFFF)).map(lambda t: (min(t), max(t))),
    ),
)


class StreamModel(RuleBasedStateMachine):
    """Model: a list of (start, end, entry) committed, a log start, the newest session."""

    @initialize()
    def setup(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="stream-model-")
        self.store = StreamStore.open(self.dir)
        self.store.create_stream("m")
        self.session = self.store.open_session("m", "w")
        self.stale: list[st.Session] = []
        self.log: list[tuple[int, int, EntryPayload]] = []
        self.end = 0
        self.log_start = 0
        self.attempts: dict[str, tuple[list[EntryPayload], st.AppendResult]] = {}
        self.faults = 0
        self.pending_starts: list[int] = []

    def teardown(self) -> None:
        if hasattr(self, "store"):
            self.store.close()
            shutil.rmtree(self.dir, ignore_errors=True)

    def _commit(self, entries: list[EntryPayload]) -> None:
        for e in entries:
            self.log.append((self.end, self.end + e.record_count, e))
            self.end += e.record_count

    @rule(
        entries=stx.lists(_entry, min_size=1, max_size=5),
        use_expected=stx.booleans(),
        attempt=stx.one_of(stx.none(), stx.sampled_from(["a", "b", "c"])),
    )
    def append(self, entries, use_expected, attempt) -> None:  # type: ignore[no-untyped-def]
        expected = self.end if use_expected else None
        if attempt is not None and attempt in self.attempts:
            old_entries, old_res = self.attempts[attempt]
            if old_entries == entries:
                assert self.store.append("m", entries, session=self.session, attempt_id=attempt) == old_res
                return
            try:
                self.store.append("m", entries, session=self.session, attempt_id=attempt)
            except st.InvariantViolationError:
                return
            raise AssertionError("reusing an attempt id with other entries must be refused")
        res = self.store.append("m", entries, session=self.session, expected_start_offset=expected, attempt_id=attempt)
        assert res.start_offset == self.end
        self._commit(entries)
        assert res.end_offset == self.end == res.committed_end
        if attempt is not None:
            self.attempts[attempt] = (entries, res)

    @rule(delta=stx.integers(1, 3))
    def append_with_wrong_expected_start(self, delta) -> None:  # type: ignore[no-untyped-def]
        try:
            self.store.append("m", [EntryPayload(b"x")], session=self.session, expected_start_offset=self.end + delta)
        except st.OffsetMismatchError:
            return
        raise AssertionError("a wrong expected start must be refused")

    @rule(entries=stx.lists(_entry, min_size=1, max_size=3), step=stx.sampled_from([4, 5, 6, 7]), retry=stx.booleans())
    def append_with_a_fault(self, entries, step, retry) -> None:  # type: ignore[no-untyped-def]
        self.faults += 1
        attempt = f"fault-{self.faults}"
        with StreamStore.open(self.dir, _fault=raising_hook(step)) as faulty:
            try:
                faulty.append("m", entries, session=self.session, attempt_id=attempt)
            except InjectedFault:
                pass
            else:
                raise AssertionError("the fault hook did not fire")
        if step in (5, 6) and not retry:
            self.pending_starts.append(self.end)  # protected until the head moves past it
        if step == 7:  # after the head CAS: committed although the caller saw an error
            start = self.end
            self._commit(entries)
        if retry:
            res = self.store.append("m", entries, session=self.session, attempt_id=attempt)
            if step != 7:
                start = self.end
                self._commit(entries)
            assert (res.start_offset, res.end_offset) == (start, self.end)

    @rule()
    def take_over(self) -> None:
        self.stale.append(self.session)
        self.session = self.store.open_session("m", "w")

    @precondition(lambda self: bool(self.stale))
    @rule()
    def stale_session_is_fenced(self) -> None:
        try:
            self.store.append("m", [EntryPayload(b"stale")], session=self.stale[-1])
        except st.FencedError:
            return
        raise AssertionError("a stale session must be fenced")

    @rule(at=stx.integers(0, 40))
    def trim(self, at) -> None:  # type: ignore[no-untyped-def]
        before = min(at, self.end)
        new_start = self.store.trim("m", before)
        expect = self.log_start
        for s, e, _ in self.log:
            if s <= before < e:
                expect = max(expect, s)
                break
        else:
            expect = max(expect, before)
        assert new_start == expect
        self.log_start = new_start
        self.log = [x for x in self.log if x[1] > new_start]
        # attempts whose range was trimmed are forgotten by the store
        self.attempts = {k: v for k, v in self.attempts.items() if v[1].end_offset > new_start}

    @rule()
    def gc(self) -> None:
        self.store.gc()
        referenced = set()
        for rows in self.store._heads.scan_index("m", self.log_start, (), 64):
            referenced.update(r[3] for r in rows)
        # what gc keeps beyond the retained appends: only the objects of interrupted appends that
        # could still commit (protected, and the head has not moved past their start)
        extra = set(wal_objects(self.dir)) - referenced
        assert len(extra) <= sum(1 for p in self.pending_starts if p == self.end)

    @rule()
    def reopen(self) -> None:
        self.store.close()
        self.store = StreamStore.open(self.dir)

    @rule(at=stx.integers(0, 60), limit=stx.integers(1, 8))
    def read_from(self, at, limit) -> None:  # type: ignore[no-untyped-def]
        offset = self.log_start + at % (self.end - self.log_start + 1)
        got = self.store.read("m", offset, limit)
        want = [x for x in self.log if x[1] > offset][:limit]
        assert [(g.start_offset, g.end_offset) for g in got] == [(s, e) for s, e, _ in want]
        assert [g.payload for g in got] == [e.payload for _, _, e in want]
        stamps = self.store.read_stamps("m", offset, limit)
        assert stamps.start_offset.tolist() == [s for s, _, _ in want]
        assert stamps.hash_min.tolist() == [e.hash_min or 0 for _, _, e in want]
        assert stamps.stamped.tolist() == [e.hash_min is not None for _, _, e in want]

    @invariant()
    def head_matches(self) -> None:
        if not hasattr(self, "store"):
            return
        head = self.store.head("m")
        assert (head.committed_end, head.log_start) == (self.end, self.log_start)

    @invariant()
    def objects_are_those_of_retained_or_pending_appends(self) -> None:
        if not hasattr(self, "store"):
            return
        # every retained entry's object is present (gc never takes a committed object)
        present = set(wal_objects(self.dir))
        for rows in self.store._heads.scan_index("m", self.log_start, (), 64):
            assert {r[3] for r in rows} <= present


StreamModel.TestCase.settings = settings(
    max_examples=40, stateful_step_count=30, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
test_stream_against_a_model = StreamModel.TestCase
