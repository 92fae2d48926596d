"""One Dispatcher (and one StreamConsumerState) hammered by 8 threads with no lock around the
per-call methods: each compiled call is atomic (a critical section on a free-threaded interpreter,
the GIL otherwise), so nothing is lost, duplicated or corrupted.

Under the GIL these tests interleave calls at a fine switch interval; CI's free-threaded job runs
them with the kernels' Py_mod_gil slots saying the GIL is not needed by _dispatcher, _selector and _consumer.
Entry ids must still increase, so the offering threads take turns (a lock around the id and its
offer only); joins and removals come from one thread, as the Dispatcher's documentation asks.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import numpy as np
from test_threads_under_stress_lose_nothing import fast_switching, run_threads

import bucketcore as bc
from bucketcore.dispatch import BucketMove, BucketMoves

SECONDS = 1.0
MEMBERS = [("c0", 0), ("c1", 1), ("c2", 2), ("c3", 3)]


class Ledger:
    """What the threads acked (each id at most once: a second ack of one id would be refused)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.acked: list[int] = []

    def add(self, ids: list[int]) -> None:
        with self.lock:
            self.acked.extend(ids)


def ascending_per_bucket(batch: bc.Deliveries, buckets: bc.Buckets) -> None:
    ids = batch.entry_ids.tolist()
    per_bucket: dict[int, list[int]] = {}
    for entry, bucket in zip(ids, buckets.bucket_of(batch.hashes).tolist(), strict=True):
        per_bucket.setdefault(bucket, []).append(entry)
    for bucket, seq in per_bucket.items():
        assert seq == sorted(seq), f"bucket {bucket} delivered out of offset order in one batch"


def test_one_dispatcher_hammered_by_8_threads_loses_and_duplicates_nothing():
    buckets = bc.Buckets.equal_width(64)
    d = bc.Dispatcher(buckets)
    for m in MEMBERS:
        d.add_consumer(*m)
    ledger = Ledger()
    id_lock = threading.Lock()
    next_id = [0]
    crashed: set[tuple[str, int]] = set()
    seen_moves: list[BucketMoves] = []
    deadline = time.monotonic() + SECONDS

    def offerer(seed: int) -> Callable[[], None]:
        def run() -> None:
            rng = np.random.default_rng(seed)
            while time.monotonic() < deadline:
                h = int(rng.integers(1, 0x10000))
                with id_lock:  # ids must increase: the offering threads take turns
                    d.offer(next_id[0], h, hash_max=h, message_count=2)
                    next_id[0] += 1

        return run

    def ack_batch(consumer: tuple[str, int], batch: bc.Deliveries) -> None:
        ids = batch.entry_ids
        if not len(ids):
            return
        ascending_per_bucket(batch, buckets)
        try:
            if len(ids) == 1:
                assert d.ack(*consumer, int(ids[0])) == 1
            else:
                assert d.ack(*consumer, ids) == len(ids)
        except KeyError:
            # only a consumer the churning thread crashed may lose its acks (they are redelivered)
            assert consumer in crashed, consumer
            return
        ledger.add(ids.tolist())

    def consumer(c: tuple[str, int]) -> Callable[[], None]:
        def run() -> None:
            while time.monotonic() < deadline:
                ack_batch(c, d.poll(*c))

        return run

    def poll_all() -> None:
        while time.monotonic() < deadline:
            for c, batch in d.poll().items():
                ack_batch(c, batch)

    def churner() -> None:
        k = 0
        while time.monotonic() < deadline:
            k += 1
            me = ("x", k)
            seen_moves.append(d.add_consumer(*me))
            for _ in range(3):
                ack_batch(me, d.poll(*me))
            crashed.add(me)
            seen_moves.append(d.remove_consumer(*me, crash=True))

    def reader() -> None:
        while time.monotonic() < deadline:
            owners = d.owners()
            assert len(owners) == 64 and all(o is None or o[0] in ("c0", "c1", "c2", "c3", "x") for o in owners)
            stats = d.bucket_stats()
            assert stats.pending.min() >= 0 and stats.queued.min() >= 0
            assert d.pending_entries >= 0 and d.queued_entries >= 0
            for moves in seen_moves[-3:]:
                assert all(isinstance(m, BucketMove) for m in moves) and len(list(moves)) == len(moves)
            repr(d)

    with fast_switching():
        run_threads(
            [offerer(0), offerer(1), consumer(MEMBERS[0]), consumer(MEMBERS[1]), consumer(MEMBERS[2]), poll_all]
            + [churner, reader],
            timeout=SECONDS + 60,
        )
    # drain on this thread: the members ack everything; nothing is lost
    for _ in range(1000):
        if d.pending_entries == 0 and d.queued_entries == 0:
            break
        for c, batch in d.poll().items():
            ack_batch(c, batch)
    assert next_id[0] > 0 and d.offered_entries == next_id[0]
    assert d.pending_entries == 0 and d.queued_entries == 0
    assert len(ledger.acked) == len(set(ledger.acked)), "an entry was acked twice"
    assert sorted(ledger.acked) == list(range(next_id[0])), "entries lost"
    assert d.consumers == tuple(MEMBERS)


def test_one_selector_read_by_7_threads_while_one_changes_its_members():
    sel = bc.EntryBucketSelector(bc.Buckets.equal_width(1024))
    deadline = time.monotonic() + SECONDS

    def changer() -> None:
        k = 0
        while time.monotonic() < deadline:
            k += 1
            moves = sel.add_consumer("m", k)
            assert sum(len(m.buckets) for m in moves) <= 1024
            if k > 5:
                sel.remove_consumer("m", k - 5)

    def reader() -> None:
        while time.monotonic() < deadline:
            for h in (0, 1, 0x7FFF, 0xFFFF):
                owner = sel.owner_of(h)
                assert owner is None or owner[0] == "m"
            slots = sel.owner_slots
            assert slots.shape == (1024,) and not slots.flags.writeable

    with fast_switching():
        run_threads([changer] + [reader] * 7, timeout=SECONDS + 60)


def test_one_consumer_state_hammered_by_8_threads_tracks_every_message_once():
    state = bc.StreamConsumerState()
    topic = "segment://t/ns/topic/0000-ffff-7"
    state.apply(bc.Assignment(1, (bc.AssignedSegment(7, 0, 0xFFFF, topic, ((0, 0xFFFF),)),)))
    per_thread = 3000
    acks: list[list[object]] = [[] for _ in range(8)]

    def worker(t: int) -> Callable[[], None]:
        def run() -> None:
            ids = range(t, 8 * per_thread, 8)  # disjoint message ids per thread
            for i in ids:
                assert state.delivered(7, i) is True
                assert state.delivered(7, i) is False  # a redelivery of an unacked message
            for i in ids:
                acks[t].extend(state.acked(7, i))

        return run

    with fast_switching():
        run_threads([worker(t) for t in range(8)], timeout=120)
    acked = sorted(a.message_ids[0] for per in acks for a in per)  # type: ignore[attr-defined]
    assert acked == list(range(8 * per_thread))
    assert state.unacked(7) == ()
