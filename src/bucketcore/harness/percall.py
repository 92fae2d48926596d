"""The per-call rows: one call of a streaming object an SDK or broker holds, at a time, beside
its Python baseline (``benches/compare.py sdk`` times them, by wall clock or instructions; the
dispatcher's rows are also ``bucketcore bench``'s per-call dispatch rows).

Rows (one call = one message or one entry):

- ``consumer``: ``StreamConsumerState.delivered`` + ``.acked`` of one message (baseline: two
  calls of a Python method doing a set add and a set discard, the least such bookkeeping costs);
- ``dispatch256`` / ``dispatch65535``: ``Dispatcher`` offer one stamped entry, ``poll()``, ack
  what was delivered, with N=256 and 16 consumers / N=65535 and 1000 consumers (baseline: the
  harness's per-entry ``PyDispatcher`` driven the same way);
- ``membership65535``: a join and a leave at N=65535 with 1000 consumers and 20,000 entries in
  flight (per operation; baseline: the same on the per-entry ``PyDispatcher``);
- ``add`` / ``add10``: ``EntryBucketBatcher.add(key, payload)`` over UUID keys on 4 segments x
  N=16, ``max_messages`` 1000 / 10 (baseline: the harness's per-message Python batcher
  ``reference_batches``, per message; the ``mmh3`` row is a bare ``mmh3.hash`` call);
- ``many100`` / ``many100big``: ``add_many`` of 100 messages per call at 4 x 16 and 256 x 1024
  buckets (per call);
- ``entries100`` / ``entries100big`` / ``entries10``: ``bucket_entries`` of 100 keys per call at
  4 x 16 and 256 x 1024 buckets, and of 10 keys at 4 x 16 (per call);
- ``many100eq`` / ``many100bigeq`` / ``entries100eq`` / ``entries100bigeq``: the same calls given
  the same work at both layouts: the keys are drawn from a pool of 64 keys, one in each of 16
  buckets of 4 segments (``same_work_keys``), in one sequence, so both layouts hold the same
  messages pending and emit the same entries per call, and only the layout's size differs (the
  rows above give the big layout more: most keys an entry of their own, and ``add_many`` a
  window of 1000 messages in each of 256 segments);
- ``manyK@SxN`` / ``entriesK@SxN``: ``add_many`` / ``bucket_entries`` of K messages per call at
  S segments x N buckets (e.g. ``many100@16x256``, ``entries100@64x1024``): the per-call cost
  should not depend on the layout's size. ``entries65536@SxN`` / ``many65536@SxN`` give the
  per-message cost (below).

Each maker returns ``(operation, baseline or None)``: ``operation(i0, n)`` performs calls
``i0 .. i0 + n - 1`` (the call number picks the key or the entry id, so ids keep increasing from
round to round); :func:`make` returns a row's by its name, :func:`timed_calls` wraps one for the
timers.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable

import bucketcore as bc

from .baselines import PyDispatcher, reference_batches
from .workloads import spread_stamps, tiled_layout, uuid_keys

__all__ = ["PAIRS", "ROWS", "Op", "calls_for", "dispatch_agrees", "make", "messages_per_call", "timed_calls"]

ROWS = (
    "consumer",
    "dispatch256",
    "dispatch65535",
    "membership65535",
    "add",
    "add10",
    "mmh3",
    "many100",
    "many100big",
    "entries100",
    "entries100big",
    "entries10",
    "many100eq",
    "many100bigeq",
    "entries100eq",
    "entries100bigeq",
)
TOPIC = "segment://t/ns/topic/0000-ffff-7"


def _boundaries(n: int) -> bc.Buckets:
    # N=65535: bucket 0 is [0, 1] so it can hold its canonical hash 1, every other bucket one hash
    return bc.Buckets(range(2, 65536)) if n == 65535 else bc.Buckets.equal_width(n)


#: operation(i0, n): calls i0 .. i0 + n - 1 of a row
Op = Callable[[int, int], object]


def consumer_row() -> tuple[Op, Op | None]:
    state = bc.StreamConsumerState()
    ranges = ((0, 0x7FFF), (0x8000, 0xFFFF))
    state.apply(bc.Assignment(1, (bc.AssignedSegment(7, 0, 0xFFFF, TOPIC, ranges),)))
    delivered, acked = state.delivered, state.acked

    def run(i0: int, n: int) -> None:
        for i in range(i0, i0 + n):
            delivered(7, i)
            acked(7, i)

    class Bookkeeping:
        def __init__(self) -> None:
            self.live: set[int] = set()

        def delivered(self, segment_id: int, message_id: int) -> bool:
            live = self.live
            if message_id in live:
                return False
            live.add(message_id)
            return True

        def acked(self, segment_id: int, message_id: int) -> list[tuple[int, tuple[int, ...]]]:
            self.live.remove(message_id)
            return [(segment_id, (message_id,))]

    book = Bookkeeping()
    b_delivered, b_acked = book.delivered, book.acked

    def base(i0: int, n: int) -> None:
        for i in range(i0, i0 + n):
            b_delivered(7, i)
            b_acked(7, i)

    return run, base


def _members(count: int) -> list[tuple[str, int]]:
    return [(f"consumer-{c:04d}", c) for c in range(count)]


def dispatch_row(n_buckets: int, n_consumers: int) -> tuple[Op, Op | None]:
    buckets = _boundaries(n_buckets)
    d = bc.Dispatcher(buckets)
    py = PyDispatcher(list(buckets.splits))
    for c in _members(n_consumers):
        d.add_consumer(*c)
    py.set_members(_members(n_consumers))
    stamps = spread_stamps(4096)
    offer, poll, ack = d.offer, d.poll, d.ack

    def run(i0: int, n: int) -> None:
        for i in range(i0, i0 + n):
            offer(i, stamps[i & 4095])
            for (name, cid), batch in poll().items():
                ack(name, cid, batch.entry_ids)

    def base(i0: int, n: int) -> None:
        for i in range(i0, i0 + n):
            py.offer([i], [stamps[i & 4095]])
            for consumer, ids in py.poll().items():
                py.ack(consumer, ids)

    return run, base


def dispatch_agrees(n_buckets: int, n_consumers: int, calls: int) -> bool:
    """Whether :func:`dispatch_row`'s Dispatcher and its baseline, driven the same way for
    ``calls`` calls, deliver the same entries to the same consumers (the check before timing)."""
    buckets = _boundaries(n_buckets)
    d = bc.Dispatcher(buckets)
    for c in _members(n_consumers):
        d.add_consumer(*c)
    py = PyDispatcher(list(buckets.splits))
    py.set_members(_members(n_consumers))
    stamps = spread_stamps(4096)
    got: dict[tuple[str, int], list[int]] = {}
    want: dict[tuple[str, int], list[int]] = {}
    for i in range(calls):
        d.offer(i, stamps[i & 4095])
        for (name, cid), batch in d.poll().items():
            d.ack(name, cid, batch.entry_ids)
            got.setdefault((name, cid), []).extend(batch.entry_ids.tolist())
        py.offer([i], [stamps[i & 4095]])
        for consumer, ids in py.poll().items():
            py.ack(consumer, ids)
            want.setdefault(consumer, []).extend(ids)
    return got == want


def membership_row() -> tuple[Op, Op | None]:
    """A join (even call numbers) or a leave (odd) at N=65535 with 1000 consumers and 20,000
    entries in flight, so that moved buckets pause; an even number of calls leaves the sharers
    as they were."""
    buckets = _boundaries(65535)
    d = bc.Dispatcher(buckets)
    for c in _members(1000):
        d.add_consumer(*c)
    py = PyDispatcher(list(buckets.splits))
    py.set_members(_members(1000))
    stamps = spread_stamps(4096)
    for i in range(20000):  # entries in flight, so moved buckets pause
        d.offer(i, stamps[i & 4095])
    py.offer(list(range(20000)), [stamps[i & 4095] for i in range(20000)])

    def run(i0: int, n: int) -> None:
        for i in range(i0, i0 + n):
            if i % 2 == 0:
                d.add_consumer("joiner", 10_000 + i)
            else:
                d.remove_consumer("joiner", 10_000 + i - 1)

    def base(i0: int, n: int) -> None:
        for i in range(i0, i0 + n):
            if i % 2 == 0:
                py.add_consumer("joiner", 10_000 + i)
            else:
                py.remove_consumer("joiner", 10_000 + i - 1)

    return run, base


def batcher_row(max_messages: int) -> tuple[Op, Op | None]:
    keys = uuid_keys(65536)
    layout = tiled_layout(4, 16)
    payload = b"x" * 100
    batcher = bc.EntryBucketBatcher(layout, max_messages=max_messages)
    add = batcher.add

    def run(i0: int, n: int) -> None:
        for i in range(i0, i0 + n):
            add(keys[i & 65535], payload)

    def base(i0: int, n: int) -> None:
        reference_batches([keys[i & 65535] for i in range(i0, i0 + n)], layout, max_messages)

    return run, base


def mmh3_row() -> tuple[Op, Op | None]:
    import mmh3

    keys = uuid_keys(65536)
    h = mmh3.hash

    def run(i0: int, n: int) -> None:
        for i in range(i0, i0 + n):
            h(keys[i & 65535], 0, False)

    return run, None


def same_work_keys(segments: int, buckets: int, count: int = 100, calls: int = 64) -> list[list[str]]:
    """``calls`` lists of ``count`` keys for ``tiled_layout(segments, buckets)`` whose messages go
    to the same number of segments and buckets at every layout: a pool of 64 UUID keys, one in
    each of the first 16 buckets (holding any of the UUID keys) of the first 4 segments, drawn in
    one fixed sequence of pool positions. Pool position p is the same (segment, bucket) rank at
    every layout, so the grouping (pending messages, entries, their sizes) is the same too."""
    keys = uuid_keys(65536)
    table = bc.bucket_entries(keys, tiled_layout(segments, buckets), policy="per_bucket", max_messages=65536)
    first: dict[int, list[tuple[int, int]]] = {}
    for seg, bucket, start in zip(table.segment_id.tolist(), table.bucket.tolist(), table.start.tolist()):
        first.setdefault(seg, []).append((bucket, int(table.order[start])))
    pool = []
    for seg in sorted(first)[:4]:
        pool += [keys[i] for _, i in sorted(first[seg])[:16]]
    if len(pool) != 64:
        raise ValueError(f"{segments}x{buckets}: the UUID keys do not cover 16 buckets of 4 segments")
    draw = random.Random(7).randrange  # a fixed, layout-independent sequence of pool positions
    return [[pool[draw(64)] for _ in range(count)] for _ in range(calls)]


def call_keys(segments: int, buckets: int, count: int, same_work: bool) -> list[list[str]]:
    """The key lists of a row's calls of ``count`` keys: consecutive runs of UUID keys, or the same
    work at every layout (same_work_keys)."""
    if same_work:
        return same_work_keys(segments, buckets, count)
    keys = uuid_keys(max(65536, 2 * count))
    return [keys[j : j + count] for j in range(0, len(keys) - count + 1, count)]


def many_row(segments: int, buckets: int, count: int = 100, same_work: bool = False) -> tuple[Op, Op | None]:
    payloads = [b"x" * 100] * count
    batcher = bc.EntryBucketBatcher(tiled_layout(segments, buckets), max_messages=1000)
    add_many = batcher.add_many
    chunks = call_keys(segments, buckets, count, same_work)

    def run(i0: int, n: int) -> None:
        for i in range(i0, i0 + n):
            add_many(chunks[i % len(chunks)], payloads)

    return run, None


def entries_row(count: int, segments: int, buckets: int, same_work: bool = False) -> tuple[Op, Op | None]:
    layout = tiled_layout(segments, buckets)
    chunks = call_keys(segments, buckets, count, same_work)
    entries = bc.bucket_entries

    def run(i0: int, n: int) -> None:
        for i in range(i0, i0 + n):
            entries(chunks[i % len(chunks)], layout, max_messages=1000)

    return run, None


_SIZED = re.compile(r"(many|entries)(\d+)@(\d+)x(\d+)$")


def messages_per_call(row: str) -> int:
    """Messages (keys) one call of a row takes: K of ``manyK@..`` / ``entriesK@..``, else the
    named rows' own (1 for the per-message rows)."""
    sized = _SIZED.match(row)
    if sized:
        return int(sized.group(2))
    if row.startswith(("many100", "entries100")):
        return 100
    return {"entries10": 10}.get(row, 1)


def calls_for(row: str, calls: int) -> int:
    """Calls of a row to measure: ``calls`` for calls of up to 100 messages, fewer for larger."""
    return max(3, calls * 100 // max(100, messages_per_call(row)))


def make(row: str) -> tuple[Op, Op | None]:
    """The operation and baseline of a row."""
    sized = _SIZED.match(row)
    if sized:
        kind, count, segments, buckets = sized.group(1), *(int(g) for g in sized.groups()[1:])
        if kind == "many":
            return many_row(segments, buckets, count)
        return entries_row(count, segments, buckets)
    if row == "consumer":
        return consumer_row()
    if row == "dispatch256":
        return dispatch_row(256, 16)
    if row == "dispatch65535":
        return dispatch_row(65535, 1000)
    if row == "membership65535":
        return membership_row()
    if row in ("add", "add10"):
        return batcher_row(1000 if row == "add" else 10)
    if row == "mmh3":
        return mmh3_row()
    if row == "many100":
        return many_row(4, 16)
    if row == "many100big":
        return many_row(256, 1024)
    if row == "entries100":
        return entries_row(100, 4, 16)
    if row == "entries100big":
        return entries_row(100, 256, 1024)
    if row == "entries10":
        return entries_row(10, 4, 16)
    if row in ("many100eq", "many100bigeq"):
        return many_row(*((4, 16) if row == "many100eq" else (256, 1024)), same_work=True)
    if row in ("entries100eq", "entries100bigeq"):
        return entries_row(100, *((4, 16) if row == "entries100eq" else (256, 1024)), same_work=True)
    raise ValueError(f"unknown row {row!r}; rows: {', '.join(ROWS)}")


# The ratio targets: (row, row it is compared with, the largest ratio allowed)
PAIRS = (
    ("add10", "add", 1.5),
    ("entries100big", "entries100", 1.2),
    ("entries100bigeq", "entries100eq", 1.2),
    ("many100bigeq", "many100eq", 1.2),
)


def timed_calls(fn: Op, counter: list[int], n: int) -> Callable[[], None]:
    """``n`` calls of ``fn`` from ``counter[0]`` on (ids keep increasing across rounds)."""

    def go() -> None:
        fn(counter[0], n)
        counter[0] += n

    return go
