"""EntryBucketBatcher.add in the kernel: same entries as the checked path, errors change nothing, threads serialised."""

from __future__ import annotations

import threading

import pytest

import bucketcore as bc
from bucketcore.harness.workloads import tiled_layout, uuid_keys


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
