"""The slow pure-Python oracles of the dispatch tests (docs/design.md, "Boundary lists" and
"Dispatch") and the small scenario they share: bucket_of as a count of splits <= h, the spread
formula, a per-entry routing loop; three consumers and a hash inside each bucket of
equal_width(4). fuzz/fuzz_routing.py checks against the same oracles."""

from __future__ import annotations

from hypothesis import strategies as st

import bucketcore as bc
from bucketcore.dispatch import Dispatcher, EntryBucketSelector

# --------------------------------------------------------------------------------------------
# oracles


def ref_bucket_of(splits: tuple[int, ...], h: int) -> int:
    return sum(1 for s in splits if s <= h)


def ref_owners(n_buckets: int, consumers: list[tuple[str, int]]) -> list[tuple[str, int] | None]:
    ordered = sorted(consumers)
    k = len(ordered)
    owners: list[tuple[str, int] | None] = [None] * n_buckets
    for j, c in enumerate(ordered):
        for b in range(j * n_buckets // k, (j + 1) * n_buckets // k):
            owners[b] = c
    return owners


def ref_route(splits, consumers, hash_min, stamped, key_hash):
    owners = ref_owners(len(splits) + 1, consumers)
    ordered = sorted(consumers)
    out = []
    for i, lo in enumerate(hash_min):
        h = lo if stamped is None or stamped[i] else key_hash[i] & 0xFFFF
        owner = owners[ref_bucket_of(splits, h)]
        out.append(-1 if owner is None else ordered.index(owner))
    return out


# dispatchable lists: bucket 0 holds its canonical hash 1 (a first split of 1 is refused)
splits_strategy = st.lists(st.integers(2, 0xFFFF), max_size=40, unique=True).map(lambda s: tuple(sorted(s)))


consumer_strategy = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c", "zed", "ü"]), st.integers(0, 5)), max_size=12, unique=True
)


def selector_with(splits, consumers) -> EntryBucketSelector:
    sel = EntryBucketSelector(bc.Buckets(splits))
    for name, cid in consumers:
        sel.add_consumer(name, cid)
    return sel


def covered_hashes(buckets: bc.Buckets, bucket_indexes) -> list[tuple[int, int]]:
    """Merge the hash ranges of a set of buckets into maximal inclusive ranges."""
    out: list[tuple[int, int]] = []
    for b in sorted(bucket_indexes):
        start, end = buckets.ranges[b]
        if out and out[-1][1] + 1 == start:
            out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return out


# --------------------------------------------------------------------------------------------
# Dispatcher: scenarios


def ids(batch) -> list[int]:
    return batch.entry_ids.tolist()


def make_dispatcher(n_buckets: int, *consumers: tuple[str, int]) -> Dispatcher:
    d = Dispatcher(bc.Buckets.equal_width(n_buckets))
    for c in consumers:
        d.add_consumer(*c)
    return d


A, B, C = ("a", 1), ("b", 1), ("c", 1)


# equal_width(4): bucket starts 0x0000, 0x4000, 0x8000, 0xC000
H = [0x0100, 0x4100, 0x8100, 0xC100]
