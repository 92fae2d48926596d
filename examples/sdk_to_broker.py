"""An SDK's producer, the stream store and a broker, end to end in one process.

A producer batches sends per bucket with ``EntryBucketBatcher`` (one entry per bucket batch,
stamped), appends the entries whole to a stream of the embedded store, and a broker reads back
only the stamps (``read_stamps``) to hand each entry to the sharer that owns its bucket
(``Dispatcher``), draining a bucket before it moves when a third consumer joins.

    python3 examples/sdk_to_broker.py
"""

from __future__ import annotations

import tempfile

import bucketcore as bc
from bucketcore import stream

buckets = bc.Buckets.equal_width(8)  # one segment of 8 buckets
batcher = bc.EntryBucketBatcher(buckets, max_messages=4)

with tempfile.TemporaryDirectory() as path:
    store = stream.StreamStore.open(path)
    store.create_stream("orders")
    session = store.open_session("orders", writer="producer-1")

    # 40 sends over 10 customers; each full batch comes back from add() as a stamped Entry
    entries = []
    for i in range(40):
        entries += batcher.add(f"customer-{i % 10}", f"order {i}".encode())
    entries += batcher.flush()
    result = store.append("orders", [stream.EntryPayload.from_entry(e) for e in entries], session=session)
    print(f"appended {result.entry_count} entries, offsets [{result.start_offset}, {result.end_offset})")

    # the broker: two sharers, then a third joins while the first still holds unacked entries
    dispatcher = bc.Dispatcher(buckets)
    dispatcher.add_consumer("alice", 1)
    dispatcher.add_consumer("bob", 2)
    stamps = store.read_stamps("orders")
    half = len(stamps) // 2
    dispatcher.offer(stamps.start_offset[:half], stamps.hash_min[:half], message_count=stamps.record_count[:half])
    first = dispatcher.poll()
    for (name, _), got in first.items():
        print(f"{name} gets entries at offsets {got.entry_ids.tolist()}")

    moves = dispatcher.add_consumer("carol", 3)
    for move in moves:
        print(
            f"buckets {list(move.buckets)} move {move.old_owner[0] if move.old_owner else None} -> "
            f"{move.new_owner[0] if move.new_owner else None}"
        )
    dispatcher.offer(stamps.start_offset[half:], stamps.hash_min[half:], message_count=stamps.record_count[half:])
    print(f"paused buckets while their old owners drain: {dispatcher.paused_buckets().tolist()}")

    # everyone acks what it holds: the paused buckets flow to carol, in offset order
    for (name, cid), got in first.items():
        dispatcher.ack(name, cid, got.entry_ids)
    for (name, _), got in dispatcher.poll().items():
        print(f"{name} gets entries at offsets {got.entry_ids.tolist()}")

    # a consumer reads the payloads of what it was handed
    entry = store.read("orders", from_offset=0, max_entries=1)[0]
    print(f"offset 0 holds {stream.unpack_messages(entry.payload)}")
    store.close()
