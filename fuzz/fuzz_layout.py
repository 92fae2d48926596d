"""Buckets, Segment.from_dict and TopicLayout.from_dict on fuzzed JSON and fuzzed dicts.

An input is either JSON text (whatever it parses to is handed to ``TopicLayout.from_dict``, to
``Segment.from_dict`` and, for a list, to ``Buckets``), or a valid layout's ``to_dict()`` with
fuzzed edits (a field set to a value of any type, removed, or an unknown one added). Refusals must
be the library's own errors (InvalidLayoutError, InvalidBoundaryError: never a TypeError, KeyError
or AttributeError leaking from inside). What is accepted must satisfy the rules of docs/design.md
("Boundary lists", "Segment layout and routing"), checked here independently, and round-trip:
``from_dict(to_dict())`` gives the same dict, also through JSON. Accepted layouts then take a
fuzzed split, merge or rebucket, under the same rules.
"""

from __future__ import annotations

import copy
import json
import math
import sys
from typing import Any

from support import Divergence, expect, instrumented, main

with instrumented():
    import bucketcore as bc

MAX = 0xFFFF

VALUES: list[Any] = [
    0, 1, 2, -1, 7, 0x7FFF, 0x8000, 0xFFFF, 0x10000, 2**63, -(2**63), 2**200, True, False, 1.0, 0.5,
    math.nan, math.inf, "", "active", "sealed", "ACTIVE", "3", "persistent://t/ns/topic", None, [], [0], [1],
    [0x8000], [2, 1], [1, 1], [True], ["1"], [None], {}, {"segment_id": 1}, (), b"x", [[1]], [1.0],
]  # fmt: skip
SEGMENT_FIELDS = ["segment_id", "hash_start", "hash_end", "splits", "state", "parent_ids", "child_ids"]
SEGMENT_FIELDS += ["legacy_topic_name"]


def _bases() -> list[bc.TopicLayout]:
    one = bc.TopicLayout(1, [bc.Segment(0, 0, MAX, bc.Buckets.equal_width(4))])
    split = one.split(0)
    merged = split.merge(1, 2)
    legacy = bc.TopicLayout(
        7,
        [
            bc.Segment(3, 0, 0x7FFF, legacy_topic_name="persistent://t/ns/topic-partition-0"),
            bc.Segment(4, 0x8000, MAX, bc.Buckets([0x9000]), legacy_topic_name="persistent://t/ns/topic-partition-1"),
        ],
        topic="persistent://t/ns/other",
    )
    return [one, split, merged, legacy, merged.rebucket(3, bc.Buckets.equal_width(3))]


BASES = [b.to_dict() for b in _bases()]


def _value(fdp: Any) -> Any:
    if fdp.ConsumeIntInRange(0, 3) == 0:
        return fdp.ConsumeIntInRange(-5, 0x10005)
    if fdp.ConsumeIntInRange(0, 3) == 0:
        return [fdp.ConsumeIntInRange(-2, 0x10002) for _ in range(fdp.ConsumeIntInRange(0, 5))]
    return copy.deepcopy(fdp.PickValueInList(VALUES))


def _edit(fdp: Any, layout: dict[str, Any]) -> None:
    """One fuzzed edit of a layout dict, in place."""
    segments = layout.get("segments")
    where = fdp.ConsumeIntInRange(0, 4)
    if where == 0 or not isinstance(segments, list) or not segments:
        key = fdp.PickValueInList(["epoch", "topic", "segments", "unknown"])
        if fdp.ConsumeBool():
            layout.pop(key, None)
        else:
            layout[key] = _value(fdp)
        return
    i = fdp.ConsumeIntInRange(0, len(segments) - 1)
    action = fdp.ConsumeIntInRange(0, 5)
    if action == 0:
        segments.pop(i)
    elif action == 1:
        segments.append(copy.deepcopy(segments[i]))
    elif not isinstance(segments[i], dict):
        segments[i] = _value(fdp)
    elif action == 2:
        segments[i].pop(fdp.PickValueInList(SEGMENT_FIELDS), None)
    elif action == 3:
        segments[i][fdp.PickValueInList([*SEGMENT_FIELDS, "bucket_count", 0])] = _value(fdp)
    else:
        segments[i][fdp.PickValueInList(SEGMENT_FIELDS)] = _value(fdp)


def _check_splits(splits: tuple[int, ...], what: str) -> None:
    expect(
        all(type(s) is int and 1 <= s <= MAX for s in splits) and all(a < b for a, b in zip(splits, splits[1:])),
        f"{what}: accepted an invalid boundary list {splits!r}",
    )


def _check_buckets(b: bc.Buckets, fdp: Any) -> None:
    splits = b.splits
    _check_splits(splits, "Buckets")
    expect(b.count == len(splits) + 1, f"count {b.count} for {len(splits)} splits")
    starts = (0, *splits)
    ends = (*(s - 1 for s in splits), MAX)
    expect(list(b.ranges) == list(zip(starts, ends)), f"ranges {b.ranges!r} for {splits!r}")
    for _ in range(3):
        h = fdp.ConsumeIntInRange(0, MAX)
        want = sum(1 for s in splits if s <= h)
        expect(b.bucket_of(h) == want, f"bucket_of({h}) = {b.bucket_of(h)}, expected {want} for {splits!r}")
    i = fdp.ConsumeIntInRange(0, b.count - 1)
    expect(b.canonical_hash(i) == (1 if i == 0 else splits[i - 1]), f"canonical_hash({i}) for {splits!r}")


def _check_layout(layout: bc.TopicLayout) -> None:
    """What an accepted layout must satisfy, and its round trips."""
    d = layout.to_dict()
    expect(type(d["epoch"]) is int and d["epoch"] >= 0, f"epoch {d['epoch']!r}")
    ids = [s["segment_id"] for s in d["segments"]]
    expect(len(set(ids)) == len(ids), f"repeated segment ids {ids!r}")
    active = sorted((s["hash_start"], s["hash_end"]) for s in d["segments"] if s["state"] == "active")
    expect(active and active[0][0] == 0 and active[-1][1] == MAX, f"active ranges {active!r} do not span the ring")
    for (_, end), (start, _) in zip(active, active[1:]):
        expect(start == end + 1, f"active ranges {active!r} do not tile")
    for s in d["segments"]:
        expect(s["state"] in ("active", "sealed"), f"state {s['state']!r}")
        expect(0 <= s["hash_start"] <= s["hash_end"] <= MAX, f"range {s['hash_start']}..{s['hash_end']}")
        _check_splits(tuple(s["splits"]), f"segment {s['segment_id']}")
    again = bc.TopicLayout.from_dict(d).to_dict()
    expect(again == d, f"from_dict(to_dict()) changed the layout: {d!r} -> {again!r}")
    through_json = bc.TopicLayout.from_dict(json.loads(json.dumps(d))).to_dict()
    expect(through_json == d, "the JSON round trip changed the layout")


def _library_error(call: Any, *args: Any, documented: tuple[type[Exception], ...] = ()) -> Any:
    """Call; a refusal must be a BucketcoreError or one of the ``documented`` ones (None then)."""
    try:
        return call(*args)
    except (bc.BucketcoreError, *documented):
        return None
    except RecursionError:
        return None  # JSON nested deeper than the interpreter's stack: not bucketcore's to solve
    except Exception as err:
        raise Divergence(f"{getattr(call, '__qualname__', call)} leaked {type(err).__name__}: {err}") from err


def _evolve(fdp: Any, layout: bc.TopicLayout) -> None:
    present = {s.segment_id for s in layout.segments}
    ids = sorted(present) + [fdp.ConsumeIntInRange(-1, 40)]
    op = fdp.ConsumeIntInRange(0, 2)
    a, b = fdp.PickValueInList(ids), fdp.PickValueInList(ids)
    # an id the layout does not have is a documented KeyError
    unknown = (KeyError,) if a not in present or (op == 1 and b not in present) else ()
    if op == 0:
        new = _library_error(layout.split, a, documented=unknown)
    elif op == 1:
        new = _library_error(layout.merge, a, b, documented=unknown)
    else:
        buckets = _library_error(bc.Buckets, _value(fdp))
        new = None if buckets is None else _library_error(layout.rebucket, a, buckets, documented=unknown)
    if new is not None:
        expect(new.epoch == layout.epoch + 1, f"epoch {new.epoch} after {layout.epoch}")
        _check_layout(new)


def test_one_input(data: bytes) -> None:
    """Build a layout, segment or boundary list from ``data`` and check what is accepted."""
    import atheris

    fdp = atheris.FuzzedDataProvider(data)
    if fdp.ConsumeIntInRange(0, 3) == 0:
        try:
            obj = json.loads(fdp.ConsumeUnicodeNoSurrogates(fdp.remaining_bytes()))
        except (ValueError, RecursionError):
            return
        segment = _library_error(bc.Segment.from_dict, obj)
        if segment is not None:
            expect(bc.Segment.from_dict(segment.to_dict()) == segment, "Segment.from_dict(to_dict()) differs")
        if isinstance(obj, list):
            buckets = _library_error(bc.Buckets, obj)
            if buckets is not None:
                _check_buckets(buckets, fdp)
    else:
        obj = copy.deepcopy(fdp.PickValueInList(BASES))
        for _ in range(fdp.ConsumeIntInRange(1, 4)):
            _edit(fdp, obj)
        if fdp.ConsumeBool():
            try:
                obj = json.loads(json.dumps(obj))  # as read back from a file: tuples are lists, NaN stays
            except (TypeError, ValueError):  # bytes have no JSON form
                return
    layout = _library_error(bc.TopicLayout.from_dict, obj)
    if layout is not None:
        _check_layout(layout)
        _evolve(fdp, layout)


if __name__ == "__main__":
    main(test_one_input)
    sys.exit(0)
