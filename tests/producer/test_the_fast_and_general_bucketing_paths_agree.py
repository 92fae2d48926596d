"""The fast bucketing paths make exactly the entries of the general paths and of the reference.

- Short lists: ``bucket_entries`` of a list of keys with plain options and
  ``EntryBucketBatcher.add_many`` of a list give exactly what the general paths give, refuse
  exactly what they refuse (with the same errors) and change nothing when they refuse.
- One message at a time: ``EntryBucketBatcher.add`` in the kernel makes the same entries as the
  checked path; errors change nothing; threads are serialised.
- Short streams on large layouts: ``bucket_entries`` groups them on a compact state sized to the
  stream (the buckets it touches, found through a small table) instead of the layout's per-bucket
  array. The entries must be exactly the reference batcher's, whichever state a stream is grouped
  on, and a kept state must move between the two without carrying anything over."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mixed_keys import mixed_keys
from test_entries_match_the_reference_batcher import as_tuples, reference_entries

import bucketcore as bc
from _bucketcore import _grouping
from bucketcore.harness.workloads import tiled_layout, uuid_keys
from bucketcore.status import Status

# --------------------------------------------------------------------------------------------
# short lists: bucket_entries and add_many against the general paths (threads= takes the general path)


COLUMNS = ("segment_id", "bucket", "hash_min", "hash_max", "start", "count", "nbytes", "order")


def _assert_same_table(a: bc.EntryTable, b: bc.EntryTable) -> None:
    for name in COLUMNS:
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype, name
        np.testing.assert_array_equal(x, y, err_msg=name)
        assert not x.flags.writeable, name
    assert a.next_round_robin == b.next_round_robin


TARGETS = {
    "one segment": bc.Buckets.equal_width(16),
    "4x16": tiled_layout(4, 16),
    "256x1024": tiled_layout(256, 1024),
    "legacy": tiled_layout(3, 4, legacy=True),
}


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize(
    "options",
    [
        {},
        {"max_messages": 3},
        {"max_messages": 2, "policy": "per_bucket"},
        {"encrypted": True},
        {"round_robin": 5, "max_bytes": 1},
        {"errors": "replace"},
        {"max_messages": np.int64(4)},  # plain in the general path only
        {"encrypted": np.bool_(False)},
    ],
)
def test_list_of_keys_gives_the_general_paths_table(target: str, options: dict[str, Any]) -> None:
    layout = TARGETS[target]
    for n, seed in ((0, 0), (1, 1), (10, 2), (100, 3), (3000, 4)):
        keys = mixed_keys(n, seed)
        for _ in range(2):  # the second call reuses the kept state
            short = bc.bucket_entries(keys, layout, **options)
            general = bc.bucket_entries(keys, layout, threads=1, **options)  # threads= takes the general path
            _assert_same_table(short, general)


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"max_messages": 0}, ValueError, "max_messages"),
        ({"max_messages": True}, TypeError, "max_messages must be an int"),
        ({"max_bytes": 2**63}, ValueError, "max_bytes"),
        ({"round_robin": -1}, ValueError, "round_robin"),
        ({"policy": "Shared"}, ValueError, "policy must be"),
        ({"encrypted": 1}, TypeError, "encrypted must be a bool"),
        ({"errors": "ignore"}, ValueError, "errors must be"),
    ],
)
def test_bad_options_raise_the_general_paths_errors(options: dict[str, Any], error: type, message: str) -> None:
    layout = tiled_layout(4, 16)
    keys = mixed_keys(20, 5)
    expected = bc.bucket_entries(keys, layout)
    with pytest.raises(error, match=message):
        bc.bucket_entries(keys, layout, **options)
    _assert_same_table(bc.bucket_entries(keys, layout), expected)


@pytest.mark.parametrize(
    ("bad", "error", "message"),
    [
        (3.5, TypeError, "index 7"),
        ("a\ud800b", bc.KeyEncodingError, "index 7 contains a surrogate"),
    ],
)
def test_a_refused_key_raises_with_its_index_and_changes_nothing(bad: object, error: type, message: str) -> None:
    layout = tiled_layout(4, 16)
    keys = mixed_keys(50, 6)
    expected = bc.bucket_entries(keys, layout, max_messages=4)
    broken = list(keys)
    broken[7] = bad
    with pytest.raises(error, match=message):
        bc.bucket_entries(broken, layout, max_messages=4)
    _assert_same_table(bc.bucket_entries(keys, layout, max_messages=4), expected)


def _entries(batcher: bc.EntryBucketBatcher, keys: Any, payloads: Any) -> list[tuple[Any, ...]]:
    out = list(batcher.add_many(keys, payloads)) + list(batcher.flush())
    return [
        (e.segment_id, e.bucket, e.hash_min, e.hash_max, e.nbytes, e.message_indices.tolist(), e.payloads) for e in out
    ]


@pytest.mark.parametrize("target", list(TARGETS))
def test_add_many_of_a_list_matches_add_many_of_a_tuple(target: str) -> None:
    layout = TARGETS[target]
    keys = mixed_keys(500, 7)
    payloads = [bytes([i % 251]) * (i % 7) for i in range(500)]
    a = bc.EntryBucketBatcher(layout, max_messages=5)
    b = bc.EntryBucketBatcher(layout, max_messages=5)
    assert _entries(a, keys, payloads) == _entries(b, tuple(keys), payloads)
    assert a.position == b.position == 500


def test_add_many_of_a_list_refuses_bad_payloads_and_keys_and_adds_nothing() -> None:
    batcher = bc.EntryBucketBatcher(tiled_layout(4, 16), max_messages=3)
    batcher.add_many(["a", "b"], [b"1", b"2"])
    with pytest.raises(TypeError, match="payloads must be a list or tuple, not set"):
        batcher.add_many(["c"], {b"3"})
    with pytest.raises(ValueError, match="payloads has 1 items for 2 keys"):
        batcher.add_many(["c", "d"], [b"3"])
    with pytest.raises(TypeError, match=r"payloads\[1\] must be bytes"):
        batcher.add_many(["c", "d"], [b"3", "text"])
    with pytest.raises(TypeError, match="index 1"):
        batcher.add_many(["c", 4], [b"3", b"4"])
    assert (batcher.position, batcher.pending) == (2, 2)
    assert batcher.add_many([], []) == []
    flushed = batcher.flush()
    assert sorted(p for e in flushed for p in e.payloads) == [b"1", b"2"]


# --------------------------------------------------------------------------------------------
# one message at a time: EntryBucketBatcher.add in the kernel


def entries_of(batcher: bc.EntryBucketBatcher, keys: list[str | None], payloads: list[object]) -> list[tuple]:
    out = []
    for key, payload in zip(keys, payloads):
        out.extend(batcher.add(key, payload))
    out.extend(batcher.flush())
    return [(e.segment_id, e.bucket, e.hash_min, e.hash_max, list(e.message_indices), e.payloads) for e in out]


@pytest.mark.parametrize("max_messages", [1, 3, 10, 1000])
def test_bytes_payloads_make_the_same_entries_as_copied_buffers_and_bucket_entries(max_messages: int) -> None:
    layout = tiled_layout(4, 16)
    keys: list[str | None] = list(uuid_keys(500))
    keys[7] = keys[100] = None
    payloads = [f"p{i}".encode() for i in range(500)]
    fast = entries_of(bc.EntryBucketBatcher(layout, max_messages=max_messages), keys, payloads)
    checked = entries_of(
        bc.EntryBucketBatcher(layout, max_messages=max_messages), keys, [bytearray(p) for p in payloads]
    )
    assert fast == checked
    table = bc.bucket_entries(keys, layout, max_messages=max_messages)
    order, start, count = table.order.tolist(), table.start.tolist(), table.count.tolist()
    expected = [tuple(order[s : s + c]) for s, c in zip(start, count)]
    assert sorted(tuple(e[4]) for e in fast) == sorted(expected)


def test_a_refused_key_raises_and_changes_nothing() -> None:
    batcher = bc.EntryBucketBatcher(tiled_layout(2, 4), max_messages=2)
    batcher.add("a", b"1")
    with pytest.raises(TypeError, match="key"):
        batcher.add(3.5j, b"2")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="payload"):
        batcher.add("b", 12)  # type: ignore[arg-type]
    assert batcher.position == 1 and batcher.pending == 1
    (entry,) = batcher.flush()
    assert entry.payloads == [b"1"]


def test_threads_sharing_a_batcher_lose_and_repeat_no_message() -> None:
    batcher = bc.EntryBucketBatcher(tiled_layout(4, 16), max_messages=7)
    keys = uuid_keys(4000)
    emitted: list[list[bc.Entry]] = [[] for _ in range(4)]

    def send(t: int) -> None:
        for i in range(t, 4000, 4):
            emitted[t].extend(batcher.add(keys[i], keys[i].encode()))

    threads = [threading.Thread(target=send, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    entries = [e for part in emitted for e in part] + batcher.flush()
    indices = sorted(int(i) for e in entries for i in e.message_indices)
    assert indices == list(range(4000))
    assert sorted(p for e in entries for p in e.payloads) == sorted(k.encode() for k in keys)


# --------------------------------------------------------------------------------------------
# short streams on large layouts: the compact grouping state


# 16,384 buckets: a stream of up to 4,096 messages is short for it
LARGE = tiled_layout(64, 256)


LARGE_LEGACY = tiled_layout(64, 256, legacy=True)


# as many buckets in every segment, but not a power of two (the segment is found by a division)
LARGE_ODD = tiled_layout(48, 300)


# few distinct keys, so batches hold several messages and the limits are reached
POOL = [*uuid_keys(24, seed=3), None, "ключ", b"\x00\xff"]


@st.composite
def short_stream(draw: Any) -> dict[str, Any]:
    n = draw(st.integers(1, 400))
    keys = [POOL[i] for i in draw(st.lists(st.integers(0, len(POOL) - 1), min_size=n, max_size=n))]
    sizes = draw(st.one_of(st.none(), st.lists(st.integers(0, 300), min_size=n, max_size=n)))
    return dict(
        keys=keys,
        sizes=sizes,
        target=draw(st.sampled_from([LARGE, LARGE, LARGE_LEGACY, LARGE_ODD])),
        max_messages=draw(st.integers(1, 12)),
        max_bytes=draw(st.integers(1, 2000)),
        policy=draw(st.sampled_from(["shared", "per_bucket"])),
        encrypted=draw(st.integers(0, 7)) == 0,
        round_robin=draw(st.integers(0, 100)),
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(short_stream())
def test_short_streams_on_a_large_layout_match_the_reference(s: dict[str, Any]) -> None:
    kw = {k: s[k] for k in ("max_messages", "max_bytes", "policy", "encrypted", "round_robin")}
    expected, next_rr = reference_entries(s["keys"], s["target"], s["sizes"], **kw)
    for threads in (None, 1):  # the short path, then the general one (same kept states)
        options = dict(kw) if threads is None else dict(kw, threads=threads)
        table = bc.bucket_entries(s["keys"], s["target"], sizes=s["sizes"], **options)
        assert as_tuples(table) == expected
        assert table.next_round_robin == next_rr


def test_a_kept_state_moves_between_compact_and_wide_streams() -> None:
    """Streams of alternating lengths on one layout (its plan keeps the states): short ones
    compact, long ones on the layout's array, each exactly the reference's."""
    keys = list(uuid_keys(5000, seed=9))
    for i in range(0, 5000, 7):
        keys[i] = keys[i // 7]  # repeated keys: batches of several messages
    for policy in ("shared", "per_bucket"):
        for n in (100, 4097, 1, 1024, 1025, 50, 4096, 4097, 7):
            kw: dict[str, Any] = dict(max_messages=3, policy=policy, round_robin=n)
            expected, next_rr = reference_entries(keys[:n], LARGE, **kw)
            table = bc.bucket_entries(keys[:n], LARGE, **kw)
            assert as_tuples(table) == expected, (policy, n)
            assert table.next_round_robin == next_rr


def test_a_refused_compact_stream_leaves_nothing_behind() -> None:
    """A short stream refused part-way (batches open in the compact state) and the streams after
    it, short or long, on the same kept state give what fresh states give."""
    offsets = np.array([0, 5000, 12000], dtype=np.int64)
    rng = np.random.default_rng(8)
    stream = _grouping.WholeStream(offsets, 0, 1, 1, 0)

    def columns(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        seg = rng.integers(0, 2, n).astype(np.int32)
        bucket = np.where(seg == 0, rng.integers(0, 40, n), rng.integers(6990, 7000, n)).astype(np.int32)
        bucket = np.where(seg == 0, bucket, bucket - 5000).astype(np.int32)
        sizes = rng.integers(0, 50, n).astype(np.int64)
        return seg, bucket, rng.integers(0, 1 << 16, n).astype(np.uint16), sizes

    for policy in (0, 1):
        seg, bucket, bh, sizes = columns(600)
        bad = bucket.copy()
        bad[450] = 7000  # past segment 1's 7000 buckets
        refused = _grouping.group_entries(seg, bad, bh, sizes, offsets, policy, 5, 120, False, stream)
        assert refused == (Status.BC_ERR_BUCKET_INDEX, 450, None)
        for n in (600, 3000, 300):
            seg, bucket, bh, sizes = columns(n)
            reused = _grouping.group_entries(seg, bucket, bh, sizes, offsets, policy, 5, 120, False, stream)
            fresh = _grouping.group_entries(seg, bucket, bh, sizes, offsets, policy, 5, 120)
            assert reused[:2] == fresh[:2] == (Status.BC_OK, -1)
            for a, b in zip(reused[2], fresh[2]):
                assert np.array_equal(a, b)


@pytest.mark.parametrize("policy", ["shared", "per_bucket"])
def test_key_hashes_of_a_short_stream_on_a_large_layout(policy: str) -> None:
    """Precomputed hashes take the same compact grouping: the table equals the one from keys."""
    keys = [POOL[i % len(POOL)] for i in range(0, 900, 7)] * 3
    hashes = bc.hash_keys(keys)
    kw: dict[str, Any] = dict(max_messages=4, policy=policy, round_robin=3)
    from_keys = bc.bucket_entries(keys, LARGE, **kw)
    from_hashes = bc.bucket_entries(hashes, LARGE, **kw)
    assert as_tuples(from_hashes) == as_tuples(from_keys) == reference_entries(keys, LARGE, **kw)[0]
