"""Producer bucketing and stamping (docs/design.md, "Producer bucketing and stamping") against a
slow pure-Python reference batcher.

The reference below is written the way the Java producer batches: a per-segment window (shared
policy) or per-bucket batches (per_bucket policy) holding a dict of per-bucket message lists;
before adding a message, a non-empty window/batch it would push over max_bytes is sent; after
adding, a window/batch that reached a limit is sent. Hashing is mmh3, bucket lookup bisect,
routing a linear scan of the segment ranges: nothing of bucketcore is used in the oracle."""

from __future__ import annotations

import bisect
import pickle
import random
import uuid
from types import ModuleType
from typing import Any

import mmh3
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bucketcore as bc
from _bucketcore import _grouping
from bucketcore.layout import Buckets, Segment, TopicLayout
from bucketcore.producer import Entry, EntryBucketBatcher, EntryTable, bucket_entries

# ------------------------------------------------------------------------------------------------
# the reference


def ref_hash(key: str | bytes | None) -> int | None:
    if key is None:
        return None
    data = key.encode("utf-8") if isinstance(key, str) else key
    return mmh3.hash(data, 0, signed=False)


class RefBatcher:
    """Java-style batcher: {segment: {bucket: [messages]}} windows, limits per window or bucket."""

    def __init__(
        self,
        target: Any,
        *,
        max_messages: int = 1000,
        max_bytes: int = 131072,
        policy: str = "shared",
        encrypted: bool = False,
        round_robin: int = 0,
    ) -> None:
        if isinstance(target, Buckets):
            # a bare boundary list is one segment covering the ring, segment id 0
            self.segments = [(0, 0, 0xFFFF, list(target.splits))]
            self.legacy_order = None
        else:
            active = [s for s in target.segments if s.state == "active"]
            self.segments = [
                (s.segment_id, s.hash_start, s.hash_end, list(s.buckets.splits))
                for s in sorted(active, key=lambda s: s.hash_start)
            ]
            legacy = all(s.legacy_topic_name is not None for s in active)
            self.legacy_order = [s.segment_id for s in active] if legacy else None
        self.max_messages = 1 if encrypted else max_messages
        self.max_bytes = max_bytes
        self.policy = policy
        self.rr = round_robin
        self.windows: dict[int, dict[int, list[tuple[int, int, int]]]] = {}  # seg -> bucket -> msgs
        self.window_count: dict[int, int] = {}
        self.window_bytes: dict[int, int] = {}
        self.position = 0

    def route(self, raw: int | None) -> int:
        ids = [s[0] for s in self.segments]
        if raw is None:
            order = self.legacy_order if self.legacy_order is not None else ids
            seg = order[self.rr % len(order)]
            self.rr += 1
            return seg
        if self.legacy_order is not None:
            return self.legacy_order[(raw & 0x7FFFFFFF) % len(self.legacy_order)]
        for seg_id, start, end, _ in self.segments:
            if start <= raw >> 16 <= end:
                return seg_id
        raise AssertionError("layout does not tile")

    def splits_of(self, seg: int) -> list[int]:
        return next(s[3] for s in self.segments if s[0] == seg)

    def _entry(self, seg: int, bucket: int, msgs: list[tuple[int, int, int]]) -> tuple:
        hashes = [m[1] for m in msgs]
        return (seg, bucket, min(hashes), max(hashes), tuple(m[0] for m in msgs), sum(m[2] for m in msgs))

    def _send(self, seg: int, buckets: list[int]) -> list[tuple]:
        window = self.windows[seg]
        out = [self._entry(seg, b, window.pop(b)) for b in buckets]
        return sorted(out, key=lambda e: e[4][0])

    def _bucket_size(self, seg: int, bucket: int) -> tuple[int, int]:
        msgs = self.windows.get(seg, {}).get(bucket, [])
        return len(msgs), sum(m[2] for m in msgs)

    def _full(self, count: int, nbytes: int) -> bool:
        return count >= self.max_messages or nbytes >= self.max_bytes

    def add(self, key: str | bytes | None, size: int) -> list[tuple]:
        return self.add_hash(ref_hash(key), size)

    def add_hash(self, raw: int | None, size: int) -> list[tuple]:
        seg = self.route(raw)
        bucket_hash = 0 if raw is None else raw & 0xFFFF
        bucket = bisect.bisect_right(self.splits_of(seg), bucket_hash)
        window = self.windows.setdefault(seg, {})
        out: list[tuple] = []
        if self.policy == "shared":
            count, nbytes = self.window_count.get(seg, 0), self.window_bytes.get(seg, 0)
            if count and nbytes + size > self.max_bytes:
                out += self._send(seg, list(window))
                count = nbytes = 0
            window.setdefault(bucket, []).append((self.position, bucket_hash, size))
            count, nbytes = count + 1, nbytes + size
            if self._full(count, nbytes):
                out += self._send(seg, list(window))
                count = nbytes = 0
            self.window_count[seg], self.window_bytes[seg] = count, nbytes
        else:
            count, nbytes = self._bucket_size(seg, bucket)
            if count and nbytes + size > self.max_bytes:
                out += self._send(seg, [bucket])
            window.setdefault(bucket, []).append((self.position, bucket_hash, size))
            if self._full(*self._bucket_size(seg, bucket)):
                out += self._send(seg, [bucket])
        self.position += 1
        return out

    def flush(self) -> list[tuple]:
        out = []
        for seg, window in self.windows.items():
            out += [self._entry(seg, b, msgs) for b, msgs in window.items()]
        self.windows.clear()
        self.window_count.clear()
        self.window_bytes.clear()
        return sorted(out, key=lambda e: e[4][0])


def reference_entries(keys: list, target: Any, sizes: list[int] | None = None, **kw: Any) -> tuple[list, int]:
    ref = RefBatcher(target, **kw)
    out = []
    for i, key in enumerate(keys):
        out += ref.add(key, 0 if sizes is None else sizes[i])
    out += ref.flush()
    n_seg = len(ref.legacy_order) if ref.legacy_order is not None else len(ref.segments)
    return out, ref.rr % n_seg


def as_tuples(entries: Any) -> list[tuple]:
    return [
        (e.segment_id, e.bucket, e.hash_min, e.hash_max, tuple(int(i) for i in e.message_indices), e.nbytes)
        for e in entries
    ]


# ------------------------------------------------------------------------------------------------
# strategies


keys_st = st.lists(
    st.one_of(
        st.none(),
        st.sampled_from(["a", "b", "key-1", "ключ", "键🔑", b"\x00\xff"]),
        st.text(max_size=5),
        st.binary(max_size=4),
    ),
    max_size=70,
)


@st.composite
def buckets_st(draw: Any) -> Buckets:
    if draw(st.booleans()):
        return Buckets.equal_width(draw(st.integers(1, 9)))
    return Buckets(sorted(draw(st.sets(st.integers(1, 0xFFFF), max_size=6))))


@st.composite
def target_st(draw: Any) -> Any:
    if draw(st.integers(0, 3)) == 0:
        return draw(buckets_st())
    cuts = sorted(draw(st.sets(st.integers(1, 0xFFFF), max_size=3)))
    starts = [0] + cuts
    ends = [c - 1 for c in cuts] + [0xFFFF]
    ids = draw(st.lists(st.integers(0, 50), min_size=len(starts), max_size=len(starts), unique=True))
    legacy = draw(st.integers(0, 3)) == 0
    segs = [
        Segment(
            ids[i],
            starts[i],
            ends[i],
            draw(buckets_st()),
            legacy_topic_name=f"persistent://t/ns/topic-partition-{i}" if legacy else None,
        )
        for i in range(len(starts))
    ]
    segs = draw(st.permutations(segs))
    return TopicLayout(1, segs)


@st.composite
def stream_st(draw: Any) -> dict[str, Any]:
    keys = draw(keys_st)
    sizes = draw(st.one_of(st.none(), st.lists(st.integers(0, 300), min_size=len(keys), max_size=len(keys))))
    return dict(
        keys=keys,
        sizes=sizes,
        target=draw(target_st()),
        max_messages=draw(st.integers(1, 8)),
        max_bytes=draw(st.integers(1, 700)),
        policy=draw(st.sampled_from(["shared", "per_bucket"])),
        encrypted=draw(st.integers(0, 5)) == 0,
        round_robin=draw(st.integers(0, 7)),
    )


def _kw(s: dict[str, Any]) -> dict[str, Any]:
    return {k: s[k] for k in ("max_messages", "max_bytes", "policy", "encrypted", "round_robin")}


# ------------------------------------------------------------------------------------------------
# conformance with the reference


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream_st())
def test_bucket_entries_matches_reference(s: dict[str, Any]) -> None:
    table = bucket_entries(s["keys"], s["target"], sizes=s["sizes"], **_kw(s))
    expected, next_rr = reference_entries(s["keys"], s["target"], s["sizes"], **_kw(s))
    assert as_tuples(table) == expected
    assert table.next_round_robin == next_rr


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream_st(), st.data())
def test_streaming_matches_one_shot(s: dict[str, Any], data: Any) -> None:
    """add, add_many in random chunks and bucket_entries yield the same entries."""
    keys = s["keys"]
    sizes = s["sizes"] if s["sizes"] is not None else [0] * len(keys)
    payloads = [bytes([i % 251]) * sz for i, sz in enumerate(sizes)]
    kw = _kw(s)
    table = bucket_entries(keys, s["target"], sizes=sizes, **kw)
    expected = as_tuples(table)

    one = EntryBucketBatcher(s["target"], **kw)
    by_one = [e for k, p in zip(keys, payloads) for e in one.add(k, p)] + one.flush()
    assert as_tuples(by_one) == expected

    many = EntryBucketBatcher(s["target"], **kw)
    by_many: list[Entry] = []
    # an explicit flush mid-stream ends a stream: what follows is a new bucket_entries call that
    # continues the round-robin
    expected_many: list[tuple] = []
    last, rr = 0, s["round_robin"]
    i = 0
    # chunk sizes (0 allowed) and where to flush, drawn up front; the last chunk takes the rest
    plan = data.draw(st.lists(st.tuples(st.integers(0, 12), st.integers(0, 9)), max_size=12))
    plan.append((len(keys), 1))
    for step, flush_roll in plan:
        if step == 1 and i < len(keys):
            by_many += many.add(keys[i], payloads[i])  # the per-send path mixed into the batch one
        else:
            by_many += many.add_many(keys[i : i + step], payloads[i : i + step])
        i = min(i + step, len(keys))
        if flush_roll == 0:
            by_many += many.flush()
            part = bucket_entries(keys[last:i], s["target"], sizes=sizes[last:i], **{**kw, "round_robin": rr})
            expected_many += [(e[0], e[1], e[2], e[3], tuple(j + last for j in e[4]), e[5]) for e in as_tuples(part)]
            assert as_tuples(by_many) == expected_many
            assert many.round_robin == part.next_round_robin
            last, rr = i, part.next_round_robin
    by_many += many.flush()
    part = bucket_entries(keys[last:], s["target"], sizes=sizes[last:], **{**kw, "round_robin": rr})
    expected_many += [(e[0], e[1], e[2], e[3], tuple(j + last for j in e[4]), e[5]) for e in as_tuples(part)]
    assert as_tuples(by_many) == expected_many
    if last == 0:
        assert expected_many == expected
    for entries in (by_one, by_many):
        for e in entries:
            assert e.payloads == [payloads[j] for j in e.message_indices]
            assert e.count == len(e.payloads)
            assert e.nbytes == sum(len(p) for p in e.payloads)
    assert many.pending == 0 and one.pending == 0
    assert many.position == len(keys)


# ------------------------------------------------------------------------------------------------
# invariants, checked directly on the output


def _route_each(keys: list, target: Any, round_robin: int) -> list[tuple[int, int, int]]:
    """(segment id, bucket, bucket hash) of every message, from the reference routing."""
    ref = RefBatcher(target, round_robin=round_robin)
    out = []
    for key in keys:
        raw = ref_hash(key)
        seg = ref.route(raw)
        h = 0 if raw is None else raw & 0xFFFF
        out.append((seg, bisect.bisect_right(ref.splits_of(seg), h), h))
    return out


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream_st())
def test_invariants(s: dict[str, Any]) -> None:
    keys, sizes = s["keys"], s["sizes"]
    table = bucket_entries(keys, s["target"], sizes=sizes, **_kw(s))
    routed = _route_each(keys, s["target"], s["round_robin"])
    n = len(keys)
    # every message in exactly one entry
    assert sorted(table.order.tolist()) == list(range(n))
    assert int(table.count.sum()) == n
    assert table.start.tolist() == [int(x) for x in np.cumsum(table.count) - table.count]
    max_messages = 1 if s["encrypted"] else s["max_messages"]
    for e in table:
        idx = e.message_indices.tolist()
        assert idx == sorted(idx), "send order inside an entry"
        assert len({routed[i][:2] for i in idx}) == 1, "single (segment, bucket)"
        assert (e.segment_id, e.bucket) == routed[idx[0]][:2]
        hashes = [routed[i][2] for i in idx]
        assert (e.hash_min, e.hash_max) == (min(hashes), max(hashes)), "tightest stamp"
        assert 1 <= e.count <= max_messages
        nbytes = sum(sizes[i] for i in idx) if sizes is not None else 0
        assert e.nbytes == nbytes
        assert e.count == 1 or nbytes <= s["max_bytes"]
    # per key, send order across entries: a key's messages appear in increasing position
    seen: dict[Any, int] = {}
    for i in table.order.tolist():
        if keys[i] is None:
            continue
        assert seen.get(keys[i], -1) < i
        seen[keys[i]] = i
    if s["encrypted"]:
        assert len(table) == n


def test_option_table_codes_are_the_kernels_codes() -> None:
    """validation's option table (options.h, the fast paths' too) gives each value the code the
    kernels take: a policy's grouping code, errors' replace flag."""
    from bucketcore.validation import check_option

    assert check_option("shared", "policy") == _grouping.Policy.POLICY_SHARED
    assert check_option("per_bucket", "policy") == _grouping.Policy.POLICY_PER_BUCKET
    assert (check_option("strict", "errors"), check_option("replace", "errors")) == (0, 1)
    with pytest.raises(ValueError, match="policy must be 'shared' or 'per_bucket', not 'Shared'"):
        check_option("Shared", "policy")


def test_policies_entry_sizes_uniform_keys() -> None:
    """shared: entries average about max_messages / N; per_bucket: entries are (nearly) full."""
    keys = [str(uuid.UUID(int=random.Random(7).getrandbits(128) ^ i)) for i in range(64000)]
    n_buckets, max_messages = 16, 1000
    shared = bucket_entries(keys, Buckets.equal_width(n_buckets), max_messages=max_messages)
    per_bucket = bucket_entries(keys, Buckets.equal_width(n_buckets), max_messages=max_messages, policy="per_bucket")
    mean_shared = len(keys) / len(shared)
    assert abs(mean_shared - max_messages / n_buckets) / (max_messages / n_buckets) < 0.1
    assert np.all(per_bucket.count[:-n_buckets] == max_messages)
    # one segment: every window holds exactly max_messages messages over all buckets and is
    # emitted whole, so the running message count passes through every multiple of it
    ends = set(np.cumsum(shared.count).tolist())
    assert all(k * max_messages in ends for k in range(1, len(keys) // max_messages + 1))
    assert np.all(shared.count <= max_messages)


@pytest.mark.parametrize("policy", ["shared", "per_bucket"])
def test_long_stream_matches_reference(policy: str) -> None:
    """Past a few thousand messages the bucket lookup switches to the boundary lists' tables."""
    rng = random.Random(11)
    keys = [None if rng.random() < 0.05 else f"order-{rng.randrange(3000)}" for _ in range(12000)]
    sizes = [rng.randrange(0, 900) for _ in keys]
    layout = TopicLayout(
        4,
        [
            Segment(9, 0, 0x2FFF, Buckets([5, 0x1000, 0x1001, 0xFFFF])),
            Segment(3, 0x3000, 0xA000, Buckets.equal_width(7)),
            Segment(4, 0xA001, 0xFFFF, Buckets()),
        ],
    )
    kw: dict[str, Any] = dict(max_messages=40, max_bytes=6000, policy=policy, round_robin=1)
    table = bucket_entries(keys, layout, sizes=sizes, **kw)
    expected, next_rr = reference_entries(keys, layout, sizes, **kw)
    assert as_tuples(table) == expected
    assert table.next_round_robin == next_rr
    batcher = EntryBucketBatcher(layout, **kw)
    payloads = [b"p" * sz for sz in sizes]
    got = list(batcher.add_many(keys[:7000], payloads[:7000]))
    got += [e for k, p in zip(keys[7000:7100], payloads[7000:7100]) for e in batcher.add(k, p)]
    got += batcher.add_many(keys[7100:], payloads[7100:]) + batcher.flush()
    assert as_tuples(got) == expected


def test_shared_window_spans_buckets() -> None:
    """Hand-checked: the window of a segment counts every bucket; a full window emits them all."""
    b = Buckets([0x8000])
    # "a": bucket hash 0x69b2 (bucket 0); "key-1": 0x15a0 (bucket 0);
    # "some-routing-key": 0xd1d5 (bucket 1); "orders/customer-42": 0xf16a (bucket 1)
    keys = ["some-routing-key", "a", "orders/customer-42", "key-1", "a"]
    t = bucket_entries(keys, b, max_messages=4)
    assert as_tuples(t) == [
        (0, 1, 0xD1D5, 0xF16A, (0, 2), 0),
        (0, 0, 0x15A0, 0x69B2, (1, 3), 0),
        (0, 0, 0x69B2, 0x69B2, (4,), 0),
    ]
    t = bucket_entries(keys, b, max_messages=4, policy="per_bucket")
    assert as_tuples(t) == [
        (0, 1, 0xD1D5, 0xF16A, (0, 2), 0),
        (0, 0, 0x15A0, 0x69B2, (1, 3, 4), 0),
    ]


def test_bytes_limit_overflow_goes_to_next_window() -> None:
    b = Buckets()
    keys = ["a"] * 6
    sizes = [40, 50, 20, 10, 500, 5]
    t = bucket_entries(keys, b, sizes=sizes, max_bytes=100)
    # 40+50=90; +20 > 100 -> emit [0,1]; 20+10=30; 500 -> emit [2,3], 500 alone (over the limit,
    # emitted at once); 5 at the end.
    assert [tuple(e.message_indices.tolist()) for e in t] == [(0, 1), (2, 3), (4,), (5,)]
    assert t.nbytes.tolist() == [90, 30, 500, 5]
    # reaching max_bytes exactly emits at once (Java: the batch is full)
    t = bucket_entries(keys[:3], b, sizes=[60, 40, 1], max_bytes=100)
    assert [tuple(e.message_indices.tolist()) for e in t] == [(0, 1), (2,)]


def test_stamp_single_bucket_and_keyless() -> None:
    t = bucket_entries(["a", None, "a"], Buckets(), max_messages=10)
    assert as_tuples(t) == [(0, 0, 0, 0x69B2, (0, 1, 2), 0)]
    t = bucket_entries(["a"], Buckets(), encrypted=True)
    assert (t.hash_min[0], t.hash_max[0]) == (0x69B2, 0x69B2)


def test_round_robin_continues_across_calls() -> None:
    layout = TopicLayout(3, [Segment(5, 0, 0x3FFF), Segment(6, 0x4000, 0xBFFF), Segment(7, 0xC000, 0xFFFF)])
    keys = [None, "a", None, None, "b", None]
    whole = bucket_entries(keys, layout, max_messages=1, round_robin=2)
    first = bucket_entries(keys[:3], layout, max_messages=1, round_robin=2)
    second = bucket_entries(keys[3:], layout, max_messages=1, round_robin=first.next_round_robin)
    assert first.next_round_robin == (2 + 2) % 3
    assert whole.next_round_robin == (2 + 4) % 3
    keyless_segments = [e.segment_id for e in whole if keys[int(e.message_indices[0])] is None]
    assert keyless_segments == [7, 5, 6, 7]
    assert [e.segment_id for e in first] + [e.segment_id for e in second] == [e.segment_id for e in whole]


def test_empty_input() -> None:
    t = bucket_entries([], Buckets.equal_width(4))
    assert len(t) == 0 and list(t) == [] and t.order.shape == (0,)
    b = EntryBucketBatcher(Buckets.equal_width(4))
    assert b.add_many([], []) == [] and b.flush() == []


# ------------------------------------------------------------------------------------------------
# inputs: every key form, KeyHashes, Arrow


def test_key_inputs_agree(pa: ModuleType) -> None:
    rng = random.Random(3)
    keys = [rng.choice([None, "x", "ключ", f"user-{rng.randrange(50)}"]) for _ in range(500)]
    layout = TopicLayout(
        2, [Segment(0, 0, 0x7FFF, Buckets.equal_width(4)), Segment(1, 0x8000, 0xFFFF, Buckets.equal_width(3))]
    )
    expected = as_tuples(bucket_entries(keys, layout, max_messages=7))
    assert expected == reference_entries(keys, layout, max_messages=7)[0]
    assert as_tuples(bucket_entries(tuple(keys), layout, max_messages=7)) == expected
    assert as_tuples(bucket_entries(np.array(keys, dtype=object), layout, max_messages=7)) == expected
    assert as_tuples(bucket_entries(bc.hash_keys(keys), layout, max_messages=7)) == expected
    for typ in (pa.string(), pa.large_string()):
        arr = pa.array(keys, type=typ)
        assert as_tuples(bucket_entries(arr, layout, max_messages=7)) == expected
        chunked = pa.chunked_array([arr[:123], arr[123:]])
        assert as_tuples(bucket_entries(chunked, layout, max_messages=7)) == expected
    assert as_tuples(bucket_entries("a", Buckets())) == [(0, 0, 0x69B2, 0x69B2, (0,), 0)]


def test_entry_table_api() -> None:
    keys = [f"user-{i % 9}" for i in range(40)]
    t = bucket_entries(keys, Buckets.equal_width(4), sizes=np.arange(40, dtype=np.int32), max_messages=5)
    assert isinstance(t, EntryTable)
    d = t.as_dict()
    assert set(d) == {"segment_id", "bucket", "hash_min", "hash_max", "start", "count", "nbytes", "order"}
    assert d["segment_id"].dtype == np.int64 and d["bucket"].dtype == np.int32
    assert d["hash_min"].dtype == np.uint16 and d["order"].dtype == np.int64
    for name, col in d.items():
        assert not col.flags.writeable, name
    entries = list(t)
    assert len(entries) == len(t)
    assert t[-1] == entries[-1] and t[0] == entries[0]
    assert t[1:3] == entries[1:3]
    with pytest.raises(IndexError):
        t[len(t)]
    with pytest.raises(TypeError):
        t["0"]  # type: ignore[call-overload]
    e = t[0]
    assert np.array_equal(e.message_indices, t.order[t.start[0] : t.start[0] + t.count[0]])
    assert e.nbytes == int(np.arange(40)[e.message_indices].sum())
    assert e.payloads is None


def test_batcher_shared_between_threads() -> None:
    """Concurrent senders: every message lands in exactly one well-formed entry, per-key order holds."""
    import threading

    layout = TopicLayout(
        1, [Segment(0, 0, 0x7FFF, Buckets.equal_width(4)), Segment(1, 0x8000, 0xFFFF, Buckets.equal_width(3))]
    )
    batcher = EntryBucketBatcher(layout, max_messages=7)
    out: list[Entry] = []
    out_lock = threading.Lock()
    key_of: dict[bytes, str] = {}

    def send(t: int) -> None:
        rng = random.Random(t)
        sent = 0
        while sent < 3000:
            n = rng.randrange(1, 40)
            keys = [f"k{rng.randrange(60)}" for _ in range(n)]
            payloads = [f"{t}:{sent + i}".encode() for i in range(n)]
            with out_lock:
                key_of.update(zip(payloads, keys))
            got = batcher.add_many(keys, payloads) if n > 1 else batcher.add(keys[0], payloads[0])
            with out_lock:
                out.extend(got)
            sent += n

    threads = [threading.Thread(target=send, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    out.extend(batcher.flush())
    seen = [p for e in out for p in (e.payloads or [])]
    assert sorted(seen) == sorted(key_of) and len(seen) == len(set(seen))
    assert sorted(int(i) for e in out for i in e.message_indices) == list(range(len(key_of)))
    last: dict[tuple[str, str], int] = {}
    # threads collect their entries in any order; a bucket's entries follow its stream positions
    for e in sorted(out, key=lambda e: int(e.message_indices[0])):
        for p in e.payloads or []:
            raw = ref_hash(key_of[p])
            assert raw is not None
            seg = 0 if raw >> 16 < 0x8000 else 1
            assert (e.segment_id, e.bucket) == (
                seg,
                bisect.bisect_right(layout.segment(seg).buckets.splits, raw & 0xFFFF),
            )
            thread, counter = p.decode().split(":")
            assert last.get((thread, key_of[p]), -1) < int(counter)
            last[(thread, key_of[p])] = int(counter)


def test_batcher_takes_every_key_form_and_every_missing_value_as_keyless() -> None:
    """add accepts what hash_keys accepts: bytes-like keys hash as their bytes, and a missing
    value (None, NaN) is keyless like None; anything else is a TypeError naming its type."""
    b = EntryBucketBatcher(Buckets.equal_width(4))
    for key in (bytearray(b"k"), memoryview(b"k"), b"k", "k"):
        b.add(key, b"p")
    for missing in (None, float("nan")):
        b.add(missing, b"p")
    with pytest.raises(TypeError, match="not float"):
        b.add(1.5, b"p")
    keyed, keyless = b.flush()
    assert (keyed.hash_min, keyed.count) == (mmh3.hash(b"k", 0, False) & 0xFFFF, 4)
    assert (keyless.hash_min, keyless.count) == (0, 2)
    assert b.pending == 0


# ------------------------------------------------------------------------------------------------
# the streaming batcher against the reference, message by message


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream_st(), st.sampled_from([1, 10, None]), st.data())
def test_batcher_matches_reference_batcher_with_flushes(s: dict[str, Any], limit: int | None, data: Any) -> None:
    """add and add_many, with flushes anywhere, emit what the reference batcher emits at the
    same point, payloads included (max_messages 1 and 10 as well as small drawn limits)."""
    kw = _kw(s)
    if limit is not None:
        kw["max_messages"] = limit
    keys = s["keys"]
    sizes = s["sizes"] if s["sizes"] is not None else [0] * len(keys)
    payloads = [bytes([i % 251]) * sz for i, sz in enumerate(sizes)]
    batcher = EntryBucketBatcher(s["target"], **kw)
    ref = RefBatcher(s["target"], **kw)
    i = 0
    while i < len(keys):
        step = data.draw(st.integers(1, 6))
        got = (
            batcher.add(keys[i], payloads[i])
            if step == 1
            else batcher.add_many(keys[i : i + step], payloads[i : i + step])
        )
        expected = [e for j in range(i, min(i + step, len(keys))) for e in ref.add(keys[j], sizes[j])]
        assert as_tuples(got) == expected
        for e in got:
            assert e.payloads == [payloads[j] for j in e.message_indices]
        i += step
        if data.draw(st.integers(0, 4)) == 0:
            assert as_tuples(batcher.flush()) == ref.flush()
    assert as_tuples(batcher.flush()) == ref.flush()
    assert batcher.pending == 0 and batcher.position == len(keys)


def test_an_add_that_emits_nothing_returns_one_shared_empty_result_that_cannot_change() -> None:
    a = EntryBucketBatcher(Buckets.equal_width(4), max_messages=3)
    b = EntryBucketBatcher(TopicLayout(1, [Segment(0, 0, 0x7FFF), Segment(1, 0x8000, 0xFFFF)]))
    empty = a.add("k", b"1")
    assert empty == [] and isinstance(empty, list) and len(empty) == 0
    assert a.add("k", b"2") is empty and b.add("k", b"1") is empty
    assert b.add_many(["x", "y"], [b"1", b"2"]) is empty and b.add_many([], []) is empty
    assert EntryBucketBatcher(Buckets()).flush() is empty
    for change in (
        lambda r: r.append(1),
        lambda r: r.extend([1]),
        lambda r: r.insert(0, 1),
        lambda r: r.__setitem__(slice(None), [1]),
        lambda r: r.__iadd__([1]),
    ):
        with pytest.raises(TypeError, match="shared"):
            change(empty)
    with pytest.raises(TypeError, match="shared"):
        empty += [1]
    assert empty == [] and a.add("k", b"3") != [] and empty == []
    mine = list(empty)
    mine.append(1)
    assert mine == [1] and empty + [2] == [2] and empty == []


def _entries_from_table(table: EntryTable, payloads: list[bytes], base: int = 0) -> list[Entry]:
    """Entries as the batcher used to build them in Python: from the table's columns, the
    message indices a view of ``order``, the payloads picked by index."""
    out = []
    for seg, bkt, lo, hi, start, count, nbytes in zip(
        table.segment_id.tolist(),
        table.bucket.tolist(),
        table.hash_min.tolist(),
        table.hash_max.tolist(),
        table.start.tolist(),
        table.count.tolist(),
        table.nbytes.tolist(),
    ):
        index = table.order[start : start + count] + base
        out.append(Entry(seg, bkt, lo, hi, index, nbytes, [payloads[int(j)] for j in index]))
    return out


@pytest.mark.parametrize("max_messages", [1, 10, 1000])
def test_entries_built_in_the_kernel_equal_entries_built_from_columns(max_messages: int) -> None:
    layout = TopicLayout(
        1, [Segment(0, 0, 0x7FFF, Buckets.equal_width(4)), Segment(5, 0x8000, 0xFFFF, Buckets.equal_width(3))]
    )
    keys: list[str | None] = [str(uuid.UUID(int=random.Random(i).getrandbits(128))) for i in range(700)]
    keys[3] = keys[50] = None
    payloads = [f"payload-{i}".encode() for i in range(700)]
    batcher = EntryBucketBatcher(layout, max_messages=max_messages, max_bytes=500)
    got = [e for k, p in zip(keys, payloads) for e in batcher.add(k, p)] + batcher.flush()
    table = bucket_entries(keys, layout, sizes=[len(p) for p in payloads], max_messages=max_messages, max_bytes=500)
    expected = _entries_from_table(table, payloads)
    assert got == expected and len(got) == len(expected)
    for e, x in zip(got, expected):
        for field in ("segment_id", "bucket", "hash_min", "hash_max", "nbytes", "count"):
            assert getattr(e, field) == getattr(x, field) and type(getattr(e, field)) is int
        assert e.message_indices.dtype == np.int64 and e.message_indices.tolist() == x.message_indices.tolist()
        assert e.message_indices is e.message_indices  # made once, on first read
        assert all(p is payloads[j] for p, j in zip(e.payloads, e.message_indices))  # bytes kept as given
        assert len(e) == e.count == len(e.payloads) and repr(e) == repr(x)
        assert pickle.loads(pickle.dumps(e)) == e
    with pytest.raises(TypeError, match="unhashable"):
        hash(got[0])
    got[0].message_indices = np.array([7], dtype=np.int64)
    assert got[0].count == 1 and got[0] != expected[0]


def test_large_layouts_give_the_reference_entries_call_after_call() -> None:
    """At 256 segments x 1024 buckets the kept batch state (reset where the last call used it)
    gives what the reference gives, for bucket_entries and the batcher, call after call."""
    from bucketcore.harness.workloads import tiled_layout, uuid_keys

    layout = tiled_layout(256, 1024)
    keys = uuid_keys(3000)
    for policy in ("shared", "per_bucket"):
        for start in range(0, 3000, 600):
            chunk = keys[start : start + 600]
            kw: dict[str, Any] = dict(max_messages=2, policy=policy)
            table = bucket_entries(chunk, layout, **kw)
            assert as_tuples(table) == reference_entries(chunk, layout, **kw)[0]
        batcher = EntryBucketBatcher(layout, max_messages=2, policy=policy)
        ref = RefBatcher(layout, max_messages=2, policy=policy)
        for start in range(0, 3000, 100):
            got = batcher.add_many(keys[start : start + 100], [b""] * 100)
            assert as_tuples(got) == [e for k in keys[start : start + 100] for e in ref.add(k, 0)]
        assert as_tuples(batcher.flush()) == ref.flush()


def test_bad_input_to_the_kernel_paths_names_what_was_wrong_and_changes_nothing() -> None:
    batcher = EntryBucketBatcher(Buckets.equal_width(4), max_messages=2)
    batcher.add("a", b"1")
    with pytest.raises(TypeError, match="payload must be bytes, bytearray or memoryview, not str"):
        batcher.add("a", "text")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="key must be str, bytes, bytearray, memoryview or a missing value"):
        batcher.add(3, b"1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"payloads\[2\] must be bytes, bytearray or memoryview, not int"):
        batcher.add_many(["a", "b", "c"], [b"1", bytearray(b"2"), 3])
    with pytest.raises(ValueError, match="payloads has 1 items for 2 keys"):
        batcher.add_many(["a", "b"], [b"1"])
    with pytest.raises(bc.KeyEncodingError, match="index 1"):
        batcher.add_many(["a", "\ud800"], [b"1", b"2"])
    with pytest.raises(TypeError, match="payloads must be a list or tuple, not dict"):
        batcher.add_many(["a"], {})  # type: ignore[arg-type]
    assert (batcher.pending, batcher.position) == (1, 1)
    (entry,) = batcher.flush()
    assert entry.payloads == [b"1"] and entry.message_indices.tolist() == [0]


def test_add_many_takes_key_hashes() -> None:
    layout = TopicLayout(
        1,
        [
            Segment(0, 0, 0x7FFF, Buckets.equal_width(4), legacy_topic_name="t-0"),
            Segment(1, 0x8000, 0xFFFF, legacy_topic_name="t-1"),
        ],
    )
    keys = ["a", None, "b", "c", None, "d"] * 5
    for target in (layout, Buckets.equal_width(3)):
        by_keys = EntryBucketBatcher(target, max_messages=4)
        by_hashes = EntryBucketBatcher(target, max_messages=4)
        got = by_keys.add_many(keys, [b"x"] * len(keys)) + by_keys.flush()
        from_hashes = by_hashes.add_many(bc.hash_keys(keys), [b"x"] * len(keys)) + by_hashes.flush()
        assert (
            as_tuples(got)
            == as_tuples(from_hashes)
            == reference_entries(keys, target, [1] * len(keys), max_messages=4)[0]
        )
