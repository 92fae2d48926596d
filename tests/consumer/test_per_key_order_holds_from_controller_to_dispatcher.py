"""Per-key order end to end: controller -> Stream consumer state -> broker Dispatcher (docs/design.md:
"Dispatch" to "Consumer rules").

One segment (N=4). Consumers join and leave the subscription; after each change the controller's
assignment is applied by every client (mode flips Exclusive <-> Key_Shared, removals), the clients
carry out Drain / Close / Subscribe against the broker Dispatcher (a Close with prefetched entries
the application never saw hands them back for redelivery), the application is handed messages
only while its segment is not draining and acks them individually or by position. Checked at every
hand-over to an application: every earlier message of the same key is acked, or was handed to this
same application and is still unacked (so it is processed first). At the end everything is acked.
"""

from __future__ import annotations

from collections import deque

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bucketcore as bc
from bucketcore.consumer import Close, CumulativeAck, Drain, IndividualAck, StreamConsumerState, Subscribe
from bucketcore.controller import Assignment, compute_assignment

KEYS = [f"k{i}" for i in range(12)]
NAMES = ["ann", "bob", "cy"]


class Client:
    def __init__(self, name: str) -> None:
        self.name = name
        self.state = StreamConsumerState()
        self.cid: int | None = None  # broker-side consumer id of the open per-segment consumer
        self.prefetch: deque[int] = deque()
        self.app_unacked: list[int] = []


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_per_key_order_survives_membership_changes_and_mode_flips(data):
    layout = bc.TopicLayout(1, [bc.Segment(0, 0, 0xFFFF, bc.Buckets.equal_width(4))], "persistent://t/ns/x")
    seg = layout.segment(0)
    broker = bc.Dispatcher(seg.buckets)
    key_of: dict[int, str] = {}
    bucket_hash = {k: int(bc.hash_keys([k]).bucket_hash[0]) for k in KEYS}
    offered: list[int] = []
    acked: set[int] = set()
    clients: dict[str, Client] = {}
    members: set[str] = set()
    next_id = 0
    next_cid = [0]

    def broker_ack(c: Client, ids) -> None:
        broker.ack(c.name, c.cid, list(ids))
        acked.update(ids)

    def run(c: Client, commands) -> None:
        for cmd in commands:
            if isinstance(cmd, Drain):
                pass  # the client stops handing the application messages of the segment
            elif isinstance(cmd, Close):
                assert not c.app_unacked, "closed with application deliveries unacked"
                pending = broker.consumer_stats(c.name, c.cid).pending_entries
                # what is still pending was prefetched and never handed over: redeliver it
                broker.remove_consumer(c.name, c.cid, crash=pending > 0)
                c.cid = None
                c.prefetch.clear()
            elif isinstance(cmd, Subscribe):
                assert c.cid is None
                next_cid[0] += 1
                c.cid = next_cid[0]
                broker.add_consumer(c.name, c.cid, declared=cmd.hash_ranges if cmd.shared else None)
            elif isinstance(cmd, IndividualAck):
                broker_ack(c, cmd.message_ids)
            elif isinstance(cmd, CumulativeAck):
                # Exclusive: everything handed to the application up to the position
                ids = [e for e in c.app_unacked if e <= cmd.message_id]
                broker_ack(c, ids)
            else:  # pragma: no cover
                raise AssertionError(cmd)

    def reassign() -> None:
        result = compute_assignment(layout, sorted(members))
        for name, c in list(clients.items()):
            run(c, c.state.apply(result.get(name, Assignment(layout.epoch, ()))))

    def app_acks(c: Client, ids: list[int]) -> None:
        for e in ids:
            c.app_unacked.remove(e)

    for _ in range(data.draw(st.integers(5, 60))):
        op = data.draw(st.sampled_from(["member", "offer", "offer", "poll", "hand", "hand", "ack", "ack"]))
        if op == "member":
            name = data.draw(st.sampled_from(NAMES))
            if name in members:
                members.discard(name)
            else:
                members.add(name)
                clients.setdefault(name, Client(name))
            reassign()
        elif op == "offer":
            keys = data.draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=5))
            ids = list(range(next_id, next_id + len(keys)))
            next_id += len(keys)
            for e, k in zip(ids, keys, strict=False):
                key_of[e] = k
            broker.offer(ids, hash_min=[bucket_hash[k] for k in keys])
            offered.extend(ids)
        elif op == "poll":
            for (name, cid), batch in broker.poll().items():
                c = clients[name]
                assert c.cid == cid
                c.prefetch.extend(batch.entry_ids.tolist())
        elif op == "hand" and clients:
            c = clients[data.draw(st.sampled_from(sorted(clients)))]
            if c.cid is None or 0 in c.state.draining or not c.prefetch:
                continue
            e = c.prefetch.popleft()
            k = key_of[e]
            for earlier in offered:
                if earlier >= e:
                    break
                if key_of[earlier] == k:
                    assert earlier in acked or earlier in c.app_unacked, (
                        f"entry {e} of key {k} handed to {c.name} before earlier entry {earlier} was acked"
                    )
            c.state.delivered(0, e)
            c.app_unacked.append(e)
        elif op == "ack" and clients:
            c = clients[data.draw(st.sampled_from(sorted(clients)))]
            if not c.app_unacked:
                continue
            if data.draw(st.booleans()):
                e = data.draw(st.sampled_from(c.app_unacked))
                cmds = c.state.acked(0, e)
                app_acks(c, [e])
            else:
                pos = data.draw(st.sampled_from(c.app_unacked))
                taken = [e for e in c.app_unacked if e <= pos]
                cmds = c.state.ack_cumulative({0: pos})
                acks = [cmd for cmd in cmds if isinstance(cmd, (IndividualAck, CumulativeAck))]
                run(c, acks)  # acks first (a CumulativeAck reads app_unacked), then the rest
                app_acks(c, taken)
                cmds = [cmd for cmd in cmds if cmd not in acks]
            run(c, cmds)

    # Wind down: one consumer stays, the applications process and ack everything.
    members = {"ann"}
    clients.setdefault("ann", Client("ann"))
    reassign()
    for _ in range(4 * len(offered) + 20):
        for (name, _cid), batch in broker.poll().items():
            clients[name].prefetch.extend(batch.entry_ids.tolist())
        progressed = False
        for c in clients.values():
            if c.app_unacked:
                e = c.app_unacked[0]
                c.app_unacked.pop(0)
                run(c, c.state.acked(0, e))
                progressed = True
            elif c.cid is not None and 0 not in c.state.draining and c.prefetch:
                e = c.prefetch.popleft()
                for earlier in offered:
                    if earlier >= e:
                        break
                    if key_of[earlier] == key_of[e]:
                        assert earlier in acked or earlier in c.app_unacked
                c.state.delivered(0, e)
                c.app_unacked.append(e)
                progressed = True
        if not progressed and not broker.queued_entries and not broker.pending_entries:
            break
    assert acked == set(offered)
    assert broker.pending_entries == 0 and broker.queued_entries == 0
    assert clients["ann"].state.draining == {}
    assert [c.name for c in clients.values() if c.cid is not None] == ["ann"]
