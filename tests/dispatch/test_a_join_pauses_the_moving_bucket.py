"""A membership change moves buckets without breaking per-key order: a join pauses the moving
bucket until the old owner has acked it, a clean leave keeps the leaver's entries ackable and
pauses its buckets, a crash redelivers to the new owner first and in order; and the whole
consumption path (producer -> dispatcher -> consumers) keeps per-key order through random churn,
checked by a model of the consumers at every delivery."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest
from dispatch_reference import A, B, C, H, ids, make_dispatcher
from hypothesis import HealthCheck, given, settings, target
from hypothesis import strategies as st

import bucketcore as bc
from bucketcore.dispatch import BucketMove, Dispatcher


def test_join_pauses_the_moving_bucket_until_the_old_owner_acks():
    d = make_dispatcher(4, A)
    d.offer([1, 2, 3], [H[2], H[3], H[0]])
    assert ids(d.poll(*A)) == [1, 2, 3]
    moves = d.add_consumer(*B)
    assert moves == (BucketMove(range(2, 4), A, B),)
    assert d.paused_buckets().tolist() == [2, 3]
    assert d.consumer_stats(*B).paused_buckets == 2
    # New entries of the paused buckets queue, in order; bucket 0 still flows to A.
    assert d.offer([4, 5, 6, 7], [H[2], H[3], H[2], H[0]]) == 1
    assert ids(d.poll(*A)) == [7]
    assert ids(d.poll(*B)) == []
    assert d.bucket_stats().queued.tolist() == [0, 0, 2, 1]
    # A acks entry 2 (bucket 3): bucket 3 drains to B; bucket 2 still waits for entry 1.
    d.ack(*A, 2)
    assert ids(d.poll(*B)) == [5]
    assert d.paused_buckets().tolist() == [2]
    d.ack(*A, 1)
    assert ids(d.poll(*B)) == [4, 6]
    assert d.paused_buckets().tolist() == []
    d.offer(8, H[2])
    assert ids(d.poll(*B)) == [8]
    assert d.consumer_stats(*B).paused_buckets == 0


def test_clean_leave_keeps_the_leavers_entries_ackable_and_pauses_its_buckets():
    d = make_dispatcher(4, A, B)
    d.offer([1, 2], [H[2], H[3]])
    assert ids(d.poll(*B)) == [1, 2]
    assert d.remove_consumer(*B) == (BucketMove(range(2, 4), B, A),)
    assert d.leaving == (B,) and d.consumers == (A,)
    assert d.consumer_stats(*B).state == "leaving"
    d.offer([3, 4], [H[2], H[0]])
    assert ids(d.poll(*A)) == [4]
    d.ack(*B, 1)
    assert ids(d.poll(*A)) == [3]
    assert B in d.leaving
    d.ack(*B, 2)
    assert d.leaving == ()
    with pytest.raises(KeyError):
        d.consumer_stats(*B)
    d2 = make_dispatcher(2, A, B)
    d2.offer(1, 0x9000)
    d2.remove_consumer(*B)
    with pytest.raises(ValueError, match="already left"):
        d2.remove_consumer(*B)
    with pytest.raises(TypeError, match="crash must be a bool"):
        d2.remove_consumer(*B, crash=1)


def test_a_leaver_may_not_rejoin_before_it_has_acked():
    d = make_dispatcher(2, A, B)
    d.offer(1, 0x9000)
    d.remove_consumer(*B)
    with pytest.raises(ValueError, match="still holds 1 unacked"):
        d.add_consumer(*B)
    d.ack(*B, 1)
    d.add_consumer(*B)
    assert d.consumers == (A, B)


def test_crash_redelivers_to_the_new_owner_first_and_in_order():
    d = make_dispatcher(4, A, B)
    d.offer([1, 2, 3, 4], [H[2], H[2], H[3], H[2]])
    assert ids(d.poll(*B)) == [1, 2, 3, 4]
    d.ack(*B, 2)  # out-of-order individual ack
    d.add_consumer(*C)  # A:0, B:1..? with 3 consumers: a[0,1) b[1,2) c[2,4)
    assert d.paused_buckets().tolist() == [2, 3]
    d.offer([5, 6], [H[2], H[3]])
    assert d.poll() == {}
    moves = d.remove_consumer(*B, crash=True)
    assert moves == (BucketMove(range(1, 2), B, A),)
    got = d.poll(*C)
    assert ids(got) == [1, 3, 4, 5, 6]
    assert got.redelivered.tolist() == [True, True, True, False, False]
    st_c = d.consumer_stats(*C)
    assert st_c.redelivered_entries == 3 and st_c.pending_entries == 5
    with pytest.raises(KeyError):
        d.ack(*B, 1)


def test_crash_also_redelivers_what_was_never_polled():
    d = make_dispatcher(2, A, B)
    d.offer([1, 2], [0x9000, 0x9001])
    d.remove_consumer(*B, crash=True)
    got = d.poll(*A)
    assert ids(got) == [1, 2] and got.redelivered.all()


def test_a_leaver_that_crashes_has_its_entries_redelivered():
    d = make_dispatcher(2, A, B)
    d.offer([1, 2, 3], [0x9000, 0x9001, 0x100])
    d.poll()
    d.remove_consumer(*B)
    d.offer(4, 0x9002)
    assert d.poll() == {}
    assert d.remove_consumer(*B, crash=True) == ()
    got = d.poll(*A)
    assert ids(got) == [1, 2, 4] and got.redelivered.tolist() == [True, True, False]
    assert d.leaving == ()


# --------------------------------------------------------------------------------------------
# The whole consumption path: producer → dispatcher → consumers (property test)


class ConsumerModel:
    """What the application side of every consumer saw; checks the invariants as it goes."""

    def __init__(self, message_keys: list[str], entries: list[list[int]]) -> None:
        self.keys = message_keys
        self.entries = entries  # entry id -> message indices (send order)
        self.seq: list[int] = []  # per message: its position among its key's messages
        seen: dict[str, int] = defaultdict(int)
        for k in message_keys:
            self.seq.append(seen[k])
            seen[k] += 1
        self.earlier: dict[str, list[int]] = defaultdict(list)  # key -> message indices in send order
        for i, k in enumerate(message_keys):
            self.earlier[k].append(i)
        self.holding: dict[int, tuple[str, int]] = {}  # entry -> consumer holding it (received, unacked)
        self.unacked: dict[tuple[str, int], list[int]] = defaultdict(list)
        self.acked: set[int] = set()
        self.deliveries: dict[int, int] = defaultdict(int)
        self.lost: dict[int, int] = defaultdict(int)  # entry -> times its holder crashed with it
        self.last_seq: dict[tuple[tuple[str, int], str], int] = {}
        self.entry_of_message = {}
        for e, msgs in enumerate(entries):
            for m in msgs:
                self.entry_of_message[m] = e

    def receive(self, consumer, batch) -> None:
        for e, redelivered in zip(batch.entry_ids.tolist(), batch.redelivered.tolist(), strict=False):
            assert e not in self.acked, f"entry {e} delivered after it was acked"
            assert e not in self.holding, f"entry {e} delivered while {self.holding.get(e)} holds it"
            if not redelivered:
                assert self.deliveries[e] == 0, f"entry {e} delivered twice without a crash"
            self.deliveries[e] += 1
            for m in self.entries[e]:
                key = self.keys[m]
                # Per consumer, a key's messages arrive in send order.
                prev = self.last_seq.get((consumer, key), -1)
                assert self.seq[m] > prev, f"{consumer} got {key}#{self.seq[m]} after #{prev}"
                self.last_seq[(consumer, key)] = self.seq[m]
                # Handoff safety: every earlier message of the key is acked or held by this consumer.
                for m2 in self.earlier[key][: self.seq[m]]:
                    e2 = self.entry_of_message[m2]
                    assert e2 == e or e2 in self.acked or self.holding.get(e2) == consumer, (
                        f"{consumer} got {key}#{self.seq[m]} while #{self.seq[m2]} (entry {e2}) is "
                        f"held by {self.holding.get(e2)}"
                    )
            self.holding[e] = consumer
            self.unacked[consumer].append(e)

    def ack(self, d: Dispatcher, consumer, chosen: list[int]) -> None:
        if not chosen:
            return
        d.ack(*consumer, chosen)
        for e in chosen:
            del self.holding[e]
            self.acked.add(e)
            self.unacked[consumer].remove(e)

    def crash(self, consumer) -> None:
        for e in self.unacked.pop(consumer, []):
            del self.holding[e]
            self.lost[e] += 1


OPS = ["offer"] * 3 + ["poll"] * 2 + ["ack"] * 3 + ["join", "leave", "crash"]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_whole_consumption_path_keeps_per_key_order_through_churn(data):
    n_buckets = data.draw(st.sampled_from([1, 2, 3, 4, 8]), label="buckets")
    buckets = bc.Buckets.equal_width(n_buckets)
    n_keys = data.draw(st.integers(1, 12), label="keys")
    keys = data.draw(st.lists(st.integers(0, n_keys - 1), min_size=10, max_size=160), label="stream")
    message_keys = [f"user-{k}" for k in keys]
    table = bc.bucket_entries(
        message_keys,
        buckets,
        max_messages=data.draw(st.integers(1, 4)),
        policy=data.draw(st.sampled_from(["shared", "per_bucket"])),
    )
    entries = [
        table.order[s : s + c].tolist() for s, c in zip(table.start.tolist(), table.count.tolist(), strict=False)
    ]
    raw = bc.murmur3_32(message_keys)
    # One-message entries may come unstamped (a producer that does not bucket): key-hash routing.
    unstamped = np.array([len(m) == 1 and data.draw(st.booleans()) for m in entries], dtype=bool)
    first_raw = np.array([raw[m[0]] for m in entries], dtype=np.uint32)
    model = ConsumerModel(message_keys, entries)
    d = Dispatcher(buckets)
    names = ["a", "b", "c", "d"]
    next_cid = 0
    offered = 0

    def poll_all():
        for consumer, batch in d.poll().items():
            model.receive(consumer, batch)

    def connected():
        return list(d.consumers) + list(d.leaving)

    for _ in range(data.draw(st.integers(0, 3), label="initial consumers")):
        d.add_consumer(names[next_cid % len(names)], next_cid)
        next_cid += 1
    paused_seen = 0
    steps = data.draw(st.integers(20, 80), label="steps")
    for _ in range(steps):
        paused_seen += int(d.paused_buckets().size > 0 and offered < len(entries))
        op = data.draw(st.sampled_from(OPS))
        if op == "offer" and offered < len(entries):
            k = data.draw(st.integers(1, min(4, len(entries) - offered)))
            sl = slice(offered, offered + k)
            d.offer(
                np.arange(offered, offered + k),
                table.hash_min[sl],
                hash_max=table.hash_max[sl],
                key_hash=first_raw[sl],
                stamped=~unstamped[sl],
                message_count=table.count[sl],
            )
            offered += k
        elif op == "poll":
            poll_all()
        elif op == "ack":
            poll_all()
            holders = [c for c in connected() if model.unacked.get(c)]
            if holders:
                c = data.draw(st.sampled_from(sorted(holders)))
                pending = list(model.unacked[c])
                chosen = data.draw(st.lists(st.sampled_from(pending), unique=True, max_size=len(pending)))
                model.ack(d, c, chosen)  # any subset, in any order: individual acks
        elif op == "join":
            d.add_consumer(data.draw(st.sampled_from(names)) + "", next_cid)
            next_cid += 1
        elif op in ("leave", "crash") and connected():
            c = data.draw(st.sampled_from(sorted(connected())))
            crash = op == "crash" or c in d.leaving
            if crash:
                # The application never saw what sat in the outbox: only acknowledged state counts.
                d.remove_consumer(*c, crash=True)
                model.crash(c)
            else:
                d.remove_consumer(*c)
    target(float(paused_seen), label="steps with a paused bucket and entries still to offer")
    # Finish: everything offered, someone present, everyone acks all it holds until quiet.
    if offered < len(entries):
        sl = slice(offered, len(entries))
        d.offer(
            np.arange(offered, len(entries)),
            table.hash_min[sl],
            hash_max=table.hash_max[sl],
            key_hash=first_raw[sl],
            stamped=~unstamped[sl],
            message_count=table.count[sl],
        )
    if not d.consumers:
        d.add_consumer("last", next_cid)
    for _ in range(len(entries) + 2):
        poll_all()
        for c in connected():
            model.ack(d, c, list(model.unacked.get(c, [])))
        if d.pending_entries == 0 and d.queued_entries == 0:
            break
    poll_all()
    assert d.pending_entries == 0 and d.queued_entries == 0 and d.leaving == ()
    # Nothing lost: every entry acked exactly once; delivered once plus once per crash that held it.
    assert model.acked == set(range(len(entries)))
    for e in range(len(entries)):
        assert model.deliveries[e] == 1 + model.lost[e], (e, model.deliveries[e], model.lost[e])
    assert all(s.pending_entries == 0 and s.pending_messages == 0 for s in d.consumer_stats().values())
    assert d.bucket_stats().delivered.sum() >= len(entries)
