"""From a Pulsar SDK's sends to Pulsar's wire bytes, and from the broker's stored bytes to an owner.

Producer side: sends go through an ``EntryBucketBatcher``; each emitted entry (one bucket, stamped)
is encoded with ``bucketcore.wire`` as a Pulsar batch (MessageMetadata with the stamp, one
SingleMessageMetadata + payload per message, CRC32C) into one buffer. Broker side: only the stamp
of each stored entry is read (``wire.read_stamps``, nothing else parsed) and the entry goes whole
to the consumer owning its bucket (``route_entries``). A consumer decodes its entries back.
With pulsar-client installed, the same keys are also routed over a partitioned topic by the
``message_router`` a ``create_producer`` call would take.

    python3 examples/sdk_wire.py
"""

from __future__ import annotations

import bucketcore as bc
from bucketcore import wire

# --- producer (the SDK) ----------------------------------------------------------------------
buckets = bc.Buckets.equal_width(8)  # the segment's boundary list, as the broker advertises it
batcher = bc.EntryBucketBatcher(buckets, max_messages=4, policy="per_bucket")

sent_keys: dict[int, str] = {}  # message index -> key, until its entry is encoded
entries = []
for i in range(40):
    key = f"customer-{i % 10}"
    sent_keys[batcher.position] = key
    entries += batcher.add(key, f"order {i}".encode())
entries += batcher.flush()

keys = [[sent_keys.pop(int(m)) for m in e.message_indices] for e in entries]
encoded = wire.encode_entries(entries, producer_name="orders-producer", keys=keys)
print(f"{len(entries)} stamped entries, {encoded.nbytes} bytes on the wire")
print(f"entry 0: {bytes(encoded[0][:16]).hex()}... (magic 0e01, CRC32C, metadata size)")

# --- broker ----------------------------------------------------------------------------------
selector = bc.EntryBucketSelector(buckets)
for name in ("alice", "bob", "carol"):
    selector.add_consumer(name, 1)
stamps = wire.read_stamps(encoded)  # the stamp of every entry, no other field parsed
owners = bc.route_entries(selector, stamps.hash_min)
consumers = selector.consumers
delivered: dict[str, list[int]] = {}
for i, owner in enumerate(owners.tolist()):
    delivered.setdefault(consumers[owner][0], []).append(i)
for name, got in sorted(delivered.items()):
    print(f"{name} gets entries {got}")

# --- consumer --------------------------------------------------------------------------------
first = wire.decode_entry(encoded[delivered["alice"][0]])
print(
    f"alice's first entry: stamp [{first.hash_min:#06x}, {first.hash_max:#06x}], "
    f"{[(m.key, m.payload) for m in first.messages]}"
)
assert all(bc.murmur3_32(m.key) & 0xFFFF in range(first.hash_min, first.hash_max + 1) for m in first.messages)

# --- a partitioned topic with pulsar-client (optional) ----------------------------------------
try:
    import _pulsar
    import pulsar
except ImportError:
    print("pulsar-client is not installed: pip install 'bucketcore[pulsar]' for the router part")
else:
    from bucketcore.pulsar_router import Murmur3PartitionRouter, producer_options

    router = Murmur3PartitionRouter()
    # client.create_producer(topic, **producer_options(router)) sends with it; here the router
    # is called as the client calls it, with the client's own Message objects
    options = producer_options(router)
    message = pulsar.Message._wrap(_pulsar.MessageBuilder().content(b"x").partition_key("customer-3").build())
    print(f"{options['message_routing_mode']}: customer-3 goes to partition {router(message, 6)} of 6")
