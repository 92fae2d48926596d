"""The Dispatcher agrees with an independent model of docs/design.md ("Dispatch") under random churn.

The model is written from the specification alone: spread by the formula over the live sharers,
one bucket's entries in offset order, a moving bucket withheld from its new owner while any other
consumer holds an unacked entry of it, crash = the holder's unacked entries go back to the front,
no consumer = entries wait. It is compared with the Dispatcher after every step of random
membership churn (joins, clean leaves, crashes, re-joins, several changes while drains are still
pending), deliveries, valid and invalid acks."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

import bucketcore as bc

POOL = [("a", 1), ("a", 2), ("b", 1), ("c", 7), ("d", 0)]


def bucket_of(splits: tuple[int, ...], h: int) -> int:
    return sum(1 for s in splits if s <= h)


class Model:
    def __init__(self, splits: tuple[int, ...]) -> None:
        self.splits = splits
        self.n = len(splits) + 1
        self.active: list[tuple[str, int]] = []
        self.leaving: set[tuple[str, int]] = set()
        self.bucket: dict[int, int] = {}
        self.state: dict[int, str] = {}  # queued / pending / acked
        self.holder: dict[int, tuple[str, int]] = {}
        self.redelivered: dict[int, bool] = {}
        self.queue: dict[int, list[int]] = defaultdict(list)
        self.outbox: dict[tuple[str, int], list[int]] = defaultdict(list)

    def owners(self) -> list[tuple[str, int] | None]:
        ordered = sorted(self.active)
        k = len(ordered)
        out: list[tuple[str, int] | None] = [None] * self.n
        for j, c in enumerate(ordered):
            for b in range(j * self.n // k, (j + 1) * self.n // k):
                out[b] = c
        return out

    def holders(self, b: int) -> set[tuple[str, int]]:
        return {self.holder[e] for e, s in self.state.items() if s == "pending" and self.bucket[e] == b}

    def settle(self) -> None:
        owners = self.owners()
        for b in range(self.n):
            o = owners[b]
            if o is None or not self.holders(b) <= {o}:
                continue
            for e in self.queue[b]:
                self.state[e] = "pending"
                self.holder[e] = o
                self.outbox[o].append(e)
            self.queue[b] = []

    def offer(self, e: int, b: int) -> None:
        self.bucket[e] = b
        self.state[e] = "queued"
        self.redelivered[e] = False
        self.queue[b].append(e)
        self.settle()

    def pending_of(self, c: tuple[str, int]) -> list[int]:
        return sorted(e for e, s in self.state.items() if s == "pending" and self.holder[e] == c)

    def forget_if_drained(self, c: tuple[str, int]) -> None:
        if c in self.leaving and not self.pending_of(c):
            self.leaving.discard(c)
            self.outbox.pop(c, None)

    def crash(self, c: tuple[str, int]) -> None:
        if c in self.active:
            self.active.remove(c)
        self.leaving.discard(c)
        for e in reversed(self.pending_of(c)):
            self.state[e] = "queued"
            self.redelivered[e] = True
            del self.holder[e]
            self.queue[self.bucket[e]].insert(0, e)
        self.outbox.pop(c, None)
        for b in range(self.n):
            assert self.queue[b] == sorted(self.queue[b])
        self.settle()


class DispatcherMachine(RuleBasedStateMachine):
    @initialize(splits=st.sampled_from([(), (0x8000,), (2,), (0x4000, 0x8000, 0xC000), (100, 200, 300, 40000, 50000)]))
    def setup(self, splits):
        self.d = bc.Dispatcher(bc.Buckets(splits))
        self.m = Model(splits)
        self.next_id = 0
        self.received: dict[tuple[str, int], list[int]] = defaultdict(list)
        self.acked: set[int] = set()

    # -- membership ---------------------------------------------------------------------------
    @rule(c=st.sampled_from(POOL))
    def join(self, c):
        if c in self.m.active:
            with pytest.raises(ValueError):
                self.d.add_consumer(*c)
            return
        if c in self.m.leaving:
            with pytest.raises(ValueError):
                self.d.add_consumer(*c)
            return
        self.d.add_consumer(*c)
        self.received.pop(c, None)
        self.m.active.append(c)
        self.m.settle()

    @rule(c=st.sampled_from(POOL))
    def leave(self, c):
        if c not in self.m.active:
            with pytest.raises((KeyError, ValueError)):
                self.d.remove_consumer(*c)
            return
        self.d.remove_consumer(*c)
        self.m.active.remove(c)
        self.m.leaving.add(c)
        self.m.forget_if_drained(c)
        self.m.settle()

    @rule(c=st.sampled_from(POOL))
    def crash(self, c):
        if c not in self.m.active and c not in self.m.leaving:
            with pytest.raises(KeyError):
                self.d.remove_consumer(*c, crash=True)
            return
        self.d.remove_consumer(*c, crash=True)
        self.m.crash(c)
        self.received.pop(c, None)

    # -- entries --------------------------------------------------------------------------------
    @rule(
        hashes=st.lists(st.integers(0, 0xFFFF), min_size=1, max_size=6),
        scalar=st.sampled_from(["", "int", "int+max", "numpy"]),  # "": columns
        unstamped=st.booleans(),
    )
    def offer(self, hashes, scalar, unstamped):
        ids = list(range(self.next_id, self.next_id + len(hashes)))
        self.next_id += len(hashes) + 1
        if scalar:
            for e, h in zip(ids, hashes, strict=False):
                if unstamped:
                    self.d.offer(e, 0, stamped=False, key_hash=(0xABCD << 16) | h)
                elif scalar == "int":
                    self.d.offer(e, h)  # the compiled one-entry path
                elif scalar == "int+max":
                    self.d.offer(e, h, hash_max=h, message_count=2)  # the compiled path, all its arguments
                else:
                    self.d.offer(np.int64(e), np.uint16(h))  # the general one-entry path
        elif unstamped:
            self.d.offer(ids, key_hash=[(0x1234 << 16) | h for h in hashes])
        else:
            self.d.offer(ids, hash_min=hashes, hash_max=hashes)
        for e, h in zip(ids, hashes, strict=False):
            self.m.offer(e, bucket_of(self.m.splits, h))

    @rule(c=st.sampled_from(POOL))
    def poll_one(self, c):
        if c not in self.m.active and c not in self.m.leaving:
            with pytest.raises(KeyError):
                self.d.poll(*c)
            return
        ids = self.d.poll(*c).entry_ids.tolist()
        assert sorted(ids) == sorted(self.m.outbox.pop(c, []))
        for b in {self.m.bucket[e] for e in ids}:  # per bucket, offset order
            seq = [e for e in ids if self.m.bucket[e] == b]
            assert seq == sorted(seq), (c, ids)
        self.received[c].extend(ids)

    @rule()
    def poll(self):
        got = self.d.poll()
        expected = {c: ids for c, ids in self.m.outbox.items() if ids}
        assert set(got) == set(expected), (got, expected)
        for c, batch in got.items():
            ids = batch.entry_ids.tolist()
            assert sorted(ids) == sorted(expected[c])
            # per bucket, offset order
            per_bucket = defaultdict(list)
            for e in ids:
                per_bucket[self.m.bucket[e]].append(e)
            for seq in per_bucket.values():
                assert seq == sorted(seq), (c, ids)
            assert batch.redelivered.tolist() == [self.m.redelivered[e] for e in ids]
            self.received[c].extend(ids)
        self.m.outbox.clear()

    @rule(c=st.sampled_from(POOL), data=st.data())
    def ack_some(self, c, data):
        mine = [e for e in self.received.get(c, []) if self.m.state.get(e) == "pending" and self.m.holder.get(e) == c]
        if not mine:
            return
        chosen = data.draw(st.lists(st.sampled_from(mine), min_size=1, max_size=len(mine), unique=True))
        form = data.draw(st.sampled_from(["int", "numpy", "int64 column", "list"]))
        if len(chosen) == 1 and form == "int":
            assert self.d.ack(*c, chosen[0]) == 1  # the compiled one-id path
        elif len(chosen) == 1 and form == "numpy":
            assert self.d.ack(*c, np.int64(chosen[0])) == 1  # the general one-id path
        elif form == "int64 column":
            assert self.d.ack(*c, np.array(chosen, dtype=np.int64)) == len(chosen)  # the compiled column path
        else:
            assert self.d.ack(*c, chosen) == len(chosen)
        for e in chosen:
            self.m.state[e] = "acked"
            del self.m.holder[e]
            self.acked.add(e)
        self.m.forget_if_drained(c)
        self.m.settle()

    @rule(c=st.sampled_from(POOL), e=st.integers(0, 60))
    def bad_ack(self, c, e):
        connected = c in self.m.active or c in self.m.leaving
        valid = connected and self.m.state.get(e) == "pending" and self.m.holder.get(e) == c
        if valid:
            return
        before = (self.d.pending_entries, self.d.queued_entries)
        with pytest.raises((KeyError, ValueError)):
            self.d.ack(*c, e)
        with pytest.raises((KeyError, ValueError)):
            self.d.ack(*c, [e])
        assert (self.d.pending_entries, self.d.queued_entries) == before

    # -- invariants -----------------------------------------------------------------------------
    @invariant()
    def same_counts_and_members(self):
        if not hasattr(self, "d"):
            return
        pending = sum(1 for s in self.m.state.values() if s == "pending")
        queued = sum(1 for s in self.m.state.values() if s == "queued")
        assert self.d.pending_entries == pending
        assert self.d.queued_entries == queued
        assert int(self.d.bucket_stats().queued.sum()) == queued
        assert self.d.consumers == tuple(sorted(self.m.active))
        assert self.d.leaving == tuple(sorted(self.m.leaving))
        owners = self.m.owners()
        assert self.d.owners() == owners
        paused = [b for b in range(self.m.n) if owners[b] is not None and self.m.holders(b) - {owners[b]}]
        assert self.d.paused_buckets().tolist() == paused
        stats = self.d.consumer_stats()
        assert set(stats) == set(self.m.active) | self.m.leaving
        for c, cs in stats.items():
            assert cs.pending_entries == len(self.m.pending_of(c))
            assert cs.state == ("leaving" if c in self.m.leaving else "active")
            if c in self.m.active:
                assert cs.paused_buckets == sum(1 for b in paused if owners[b] == c)
        bs = self.d.bucket_stats()
        assert bs.queued.tolist() == [len(self.m.queue[b]) for b in range(self.m.n)]


DispatcherMachine.TestCase.settings = settings(
    max_examples=150,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


test_dispatcher_matches_the_spec_model = DispatcherMachine.TestCase
