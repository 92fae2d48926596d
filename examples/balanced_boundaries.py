"""Traffic-balanced boundaries for a skewed key log, as ``bucketcore plan`` computes them.

With a few hot keys, equal-width buckets load unevenly; ``Buckets.balanced`` places the N-1
boundaries so that the heaviest bucket carries the least load the observed traffic allows. A
rebucket rollover then gives the segment a successor with the new list.

    python3 examples/balanced_boundaries.py
"""

from __future__ import annotations

import numpy as np

import bucketcore as bc

rng = np.random.default_rng(7)
customers = [f"customer-{i}" for i in range(2000)]
weights = 1.0 / np.arange(1, len(customers) + 1) ** 0.9  # Zipf-like popularity
log = [customers[i] for i in rng.choice(len(customers), size=50_000, p=weights / weights.sum())]

bucket_hashes = bc.hash_keys(log).bucket_hash
n = 8
equal = bc.Buckets.equal_width(n)
balanced = bc.Buckets.balanced(bucket_hashes, n)
for name, buckets in (("equal width", equal), ("balanced", balanced)):
    load = buckets.load(bucket_hashes)
    print(f"{name:<12} splits {list(buckets.splits)}")
    print(f"{'':<12} messages per bucket {load.per_bucket.tolist()}  max/mean {load.ratio:.2f}")

layout = bc.TopicLayout(1, [bc.Segment(0, 0x0000, 0xFFFF, equal)])
rolled = layout.rebucket(0, balanced)
successor = rolled.active_segments[0]
print(
    f"rebucket rollover: epoch {rolled.epoch}, segment {successor.segment_id} (parent {successor.parent_ids}) "
    f"takes the balanced list; segment 0 is {rolled.segment(0).state}"
)
