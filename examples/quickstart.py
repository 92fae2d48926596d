"""The data flow of entry-bucketing in a few lines: hash, route, batch and stamp, dispatch."""

import bucketcore as bc

keys = ["key-1", "orders/customer-42", "ключ", "键🔑", None]
hashes = bc.hash_keys(keys)

print(f"bucketcore {bc.__version__}\n")
print(f"{'key':<22} {'raw':>10} {'segment':>8} {'bucket':>7}")
for key, raw, segment, bucket, has_key in zip(
    keys, hashes.raw, hashes.segment_hash, hashes.bucket_hash, hashes.has_key, strict=False
):
    label = repr(key) if has_key else "(keyless)"
    print(f"{label:<22} 0x{int(raw):08x}   0x{int(segment):04x}  0x{int(bucket):04x}")

# A topic of two segments, each with four equal-width buckets.
layout = bc.TopicLayout(
    1,
    [
        bc.Segment(0, 0x0000, 0x7FFF, bc.Buckets.equal_width(4)),
        bc.Segment(1, 0x8000, 0xFFFF, bc.Buckets.equal_width(4)),
    ],
)
messages = [f"user-{i % 23}" for i in range(200)]
entries = bc.bucket_entries(messages, layout, max_messages=16)
print(f"\n{len(messages)} messages -> {len(entries)} stamped entries (windows of 16 messages)")
for entry in list(entries)[:5]:
    print(
        f"  segment {entry.segment_id} bucket {entry.bucket} "
        f"stamp [0x{entry.hash_min:04x}, 0x{entry.hash_max:04x}] messages {entry.message_indices.tolist()}"
    )

# The broker side: two sharers of segment 0 split its buckets; each entry goes whole to one owner.
selector = bc.EntryBucketSelector(layout.segment(0).buckets)
selector.add_consumer("alice", 1)
selector.add_consumer("bob", 2)
in_segment_0 = entries.segment_id == 0
owners = bc.route_entries(selector, entries.hash_min[in_segment_0])
for slot, (name, _) in enumerate(selector.consumers):
    print(
        f"\n{name} owns buckets {[b for b, o in enumerate(selector.owners()) if o and o[0] == name]} "
        f"and receives {int((owners == slot).sum())} of segment 0's {len(owners)} entries",
        end="",
    )
print()
