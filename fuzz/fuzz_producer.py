"""bucket_entries and EntryBucketBatcher with fuzzed keys, sizes, limits, policies and layouts,
against the test suite's slow pure-Python reference batcher (RefBatcher in
tests/producer/test_entries_match_the_reference_batcher.py).

The target is a bare boundary list or a layout of fuzzed cuts, segment ids, boundary lists and
legacy names; keys are str, bytes, bytearray, memoryview, None or NaN (also handed over as their
KeyHashes); sizes and limits are in range or not. Valid calls must give exactly the reference's
entries (segment, bucket, stamp, message indices, bytes) and round-robin position, and the
streaming batcher (add / add_many in fuzzed chunks, then flush) the same entries; invalid ones a
TypeError or ValueError (KeyEncodingError for a str with a surrogate, naming its index).
"""

from __future__ import annotations

import math
import sys
from typing import Any

from support import Divergence, consume_key, expect, instrumented, main, named_index

with instrumented():
    import bucketcore as bc

from test_entries_match_the_reference_batcher import as_tuples, reference_entries  # the suite's reference batcher

BAD_LIMITS: list[Any] = [0, -1, True, 1.5, None, "8", 2**80]


def _buckets(fdp: Any) -> bc.Buckets:
    if fdp.ConsumeBool():
        return bc.Buckets.equal_width(fdp.ConsumeIntInRange(1, 9))
    return bc.Buckets(sorted({fdp.ConsumeIntInRange(1, 0xFFFF) for _ in range(fdp.ConsumeIntInRange(0, 6))}))


def _target(fdp: Any) -> Any:
    if fdp.ConsumeIntInRange(0, 3) == 0:
        return _buckets(fdp)
    cuts = sorted({fdp.ConsumeIntInRange(1, 0xFFFF) for _ in range(fdp.ConsumeIntInRange(0, 3))})
    starts, ends = [0, *cuts], [*(c - 1 for c in cuts), 0xFFFF]
    ids = sorted({fdp.ConsumeIntInRange(0, 50) for _ in range(8)})
    while len(ids) < len(starts):
        ids.append(ids[-1] + 1 if ids else 0)
    legacy = fdp.ConsumeIntInRange(0, 3) == 0
    segments = [
        bc.Segment(
            ids[i],
            starts[i],
            ends[i],
            _buckets(fdp),
            legacy_topic_name=f"persistent://t/ns/topic-partition-{i}" if legacy else None,
        )
        for i in range(len(starts))
    ]
    if fdp.ConsumeBool():
        segments.reverse()  # layout order is not hash order
    return bc.TopicLayout(1, segments)


def _limit(fdp: Any, lo: int, hi: int) -> tuple[Any, bool]:
    if fdp.ConsumeIntInRange(0, 15) == 0:
        return fdp.PickValueInList(BAD_LIMITS), False
    return fdp.ConsumeIntInRange(lo, hi), True


def _reference_key(key: Any) -> Any:
    """The key as the reference takes it (str, bytes or None)."""
    if key is None or (isinstance(key, float) and math.isnan(key)):
        return None
    if isinstance(key, (bytearray, memoryview)):
        return bytes(key)
    return key


def _encodable(key: Any) -> bool:
    """Whether the key has UTF-8 bytes (a str with an unpaired surrogate has none)."""
    if not isinstance(key, str):
        return True
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _streamed(target: Any, keys: list[Any], sizes: list[int], kw: dict[str, Any], fdp: Any) -> list[tuple]:
    kw = {k: v for k, v in kw.items() if k != "round_robin"}
    batcher = bc.EntryBucketBatcher(target, **kw)
    payloads = [bytes([i % 251]) * s for i, s in enumerate(sizes)]
    out: list[Any] = []
    i = 0
    while i < len(keys):
        if fdp.ConsumeBool():
            out += batcher.add(keys[i], payloads[i])
            i += 1
        else:
            j = min(len(keys), i + fdp.ConsumeIntInRange(1, 20))
            out += batcher.add_many(keys[i:j], payloads[i:j])
            i = j
    return as_tuples(out + batcher.flush())


def test_one_input(data: bytes) -> None:
    """One bucket_entries call (and its streaming twin) built from ``data``, against the reference."""
    import atheris

    fdp = atheris.FuzzedDataProvider(data)
    target = _target(fdp)
    keys = [consume_key(fdp, max_len=12, odd_kinds=False) for _ in range(fdp.ConsumeIntInRange(0, 60))]
    sizes: list[Any] | None = None
    sizes_ok = True
    if fdp.ConsumeBool():
        sizes = [fdp.ConsumeIntInRange(0, 300) for _ in keys]
        if sizes and fdp.ConsumeIntInRange(0, 15) == 0:
            sizes[fdp.ConsumeIntInRange(0, len(sizes) - 1)] = fdp.PickValueInList([-1, 1.5, None, True, 2**64])
            sizes_ok = False
    max_messages, ok_messages = _limit(fdp, 1, 12)
    max_bytes, ok_bytes = _limit(fdp, 1, 800)
    policy = fdp.PickValueInList(["shared", "shared", "per_bucket", "per_bucket", "bucket"])
    kw: dict[str, Any] = dict(
        max_messages=max_messages,
        max_bytes=max_bytes,
        policy=policy,
        encrypted=fdp.ConsumeIntInRange(0, 5) == 0,
        round_robin=fdp.ConsumeIntInRange(0, 7),
    )
    encodable = [_encodable(k) for k in keys]
    valid = sizes_ok and ok_messages and ok_bytes and policy != "bucket" and all(encodable)
    as_hashes = fdp.ConsumeBool() and all(encodable)
    given = bc.hash_keys(keys) if as_hashes else keys
    try:
        table = bc.bucket_entries(given, target, sizes=sizes, **kw)
    except (TypeError, ValueError) as err:
        expect(not valid, f"bucket_entries refused a valid call: {err!r}")
        if isinstance(err, bc.KeyEncodingError):
            expect(not encodable[err.index], f"KeyEncodingError for the encodable key {err.index}: {err}")
        elif not (sizes_ok and ok_messages and ok_bytes) or policy == "bucket":
            pass  # a bad argument: any TypeError/ValueError saying so
        else:
            index = named_index(err)
            expect(index is not None and not encodable[index], f"error names no offending key: {err!r}")
        return
    expect(valid, f"bucket_entries accepted an invalid call ({kw!r}, sizes ok: {sizes_ok})")
    ref_keys = [_reference_key(k) for k in keys]
    expected, next_rr = reference_entries(ref_keys, target, sizes, **kw)
    got = as_tuples(table)
    if got != expected:
        raise Divergence(f"entries differ from the reference:\n got {got!r}\nwant {expected!r}")
    expect(table.next_round_robin == next_rr, f"next_round_robin {table.next_round_robin}, reference {next_rr}")
    if kw["round_robin"] == 0:  # the batcher starts its round robin at 0
        streamed = _streamed(target, keys, sizes or [0] * len(keys), kw, fdp)
        if streamed != expected:
            raise Divergence(f"the streaming batcher differs:\n got {streamed!r}\nwant {expected!r}")


if __name__ == "__main__":
    main(test_one_input)
    sys.exit(0)
