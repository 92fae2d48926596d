"""Segments, layouts and routing (docs/design.md: "Segments, layouts and routing"): what a segment
and a layout accept, keys routed to their segment and bucket like the pure-Python reference (and
legacy layouts like Java's ``signSafeMod``), split / merge / rebucket, and the dict form.

Oracles: the Java reference's facts as vectors, a pure-Python reference for segment lookup,
``mmh3`` for the hashes, Java's ``signSafeMod`` written out."""

from __future__ import annotations

import bisect
import json
import pickle

import mmh3
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bucketcore as bc
from bucketcore import InvalidBoundaryError, InvalidLayoutError
from bucketcore.layout import Buckets, Segment, TopicLayout

# --------------------------------------------------------------------------------------------------
# Pure-Python references


def java_rem(a, b):
    """Java's int remainder: truncated toward zero, sign of the dividend."""
    r = abs(a) % abs(b)
    return -r if a < 0 else r


def sign_safe_mod(dividend, divisor):
    mod = java_rem(dividend, divisor)
    if mod < 0:
        mod += divisor
    return mod


def ref_route(layout, keys, round_robin=0):
    """segment_id per key: keyed by mmh3 high 16 bits over the sorted active ranges (or
    signSafeMod over the legacy order), keyless round-robin. Returns (ids, next_round_robin)."""
    active = sorted((s for s in layout.segments if s.state == "active"), key=lambda s: s.hash_start)
    legacy = all(s.legacy_topic_name is not None for s in active)
    order = [s for s in layout.segments if s.state == "active"] if legacy else active
    starts = [s.hash_start for s in active]
    ids = []
    rr = round_robin % len(order)
    for key in keys:
        if key is None:
            ids.append(order[rr].segment_id)
            rr = (rr + 1) % len(order)
            continue
        data = key.encode("utf-8") if isinstance(key, str) else key
        raw = mmh3.hash(data, 0, signed=False)
        if legacy:
            ids.append(order[sign_safe_mod(raw & 0x7FFFFFFF, len(order))].segment_id)
        else:
            ids.append(active[bisect.bisect_right(starts, raw >> 16) - 1].segment_id)
    return ids, rr


# --------------------------------------------------------------------------------------------------
# Segments and layouts


def seg(sid, start, end, n=1, **kw):
    return Segment(sid, start, end, Buckets.equal_width(n), **kw)


def two_segment_layout():
    return TopicLayout(3, [seg(0, 0, 0x7FFF, 4), seg(1, 0x8000, 0xFFFF, 2)])


def test_segment_fields_and_defaults():
    s = Segment(5, 0, 0xFFFF)
    assert (s.segment_id, s.hash_start, s.hash_end, s.buckets, s.state) == (5, 0, 0xFFFF, Buckets(), "active")
    assert s.parent_ids == () and s.child_ids == () and s.legacy_topic_name is None
    assert s.is_active and not s.is_legacy
    assert Segment(1, 0, 5, parent_ids=[3, 4]).parent_ids == (3, 4)
    with pytest.raises(AttributeError):
        s.hash_start = 4  # frozen
    assert s == Segment(5, 0, 0xFFFF) and hash(s) == hash(Segment(5, 0, 0xFFFF))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(segment_id=-1), r"segment_id must be an int >= 0, not int -1"),
        (dict(segment_id=True), r"segment_id must be an int >= 0, not bool True"),
        (dict(segment_id=1.0), r"segment_id must be an int >= 0, not float 1.0"),
        (dict(hash_start=-1), r"segment 1: hash_start -1 is outside 0..0xFFFF"),
        (dict(hash_end=0x10000), r"segment 1: hash_end 65536 is outside 0..0xFFFF"),
        (dict(hash_start=2.0), r"segment 1: hash_start must be an int in 0..0xFFFF, not float 2.0"),
        (dict(hash_start=9, hash_end=8), r"segment 1: hash_start 0x0009 is after hash_end 0x0008"),
        (dict(buckets=(1, 2)), r"segment 1: buckets must be a Buckets, not tuple"),
        (dict(state="ACTIVE"), r"segment 1: state must be 'active' or 'sealed', not 'ACTIVE'"),
        (dict(parent_ids=(1,)), r"segment 1: parent_ids \(1,\) includes the segment itself"),
        (dict(parent_ids=(2, 2)), r"segment 1: parent_ids \(2, 2\) lists a segment twice"),
        (dict(parent_ids=(2, -1)), r"segment 1: parent_ids\[1\] is int -1"),
        (dict(parent_ids=5), r"segment 1: parent_ids must be a tuple of segment ids, not int 5"),
        (dict(child_ids=(4,)), r"segment 1: an active segment has no children"),
        (dict(state="sealed", child_ids=("4",)), r"segment 1: child_ids\[0\] is str '4'"),
        (dict(legacy_topic_name=""), r"segment 1: legacy_topic_name must be a non-empty str or None"),
        (dict(legacy_topic_name=5), r"segment 1: legacy_topic_name must be a non-empty str or None, not int 5"),
    ],
)
def test_segment_validation(kwargs, message):
    args = dict(segment_id=1, hash_start=0, hash_end=0xFFFF)
    args.update(kwargs)
    with pytest.raises(InvalidLayoutError, match=message):
        Segment(**args)


def test_layout_properties():
    lay = TopicLayout(7, [seg(1, 0x8000, 0xFFFF), seg(0, 0, 0x7FFF)], topic="persistent://acme/orders/events")
    assert lay.epoch == 7 and lay.topic == "persistent://acme/orders/events"
    assert [s.segment_id for s in lay.segments] == [1, 0]  # as given
    assert [s.segment_id for s in lay.active_segments] == [0, 1]  # by hash_start
    assert lay.active_segment_ids.tolist() == [0, 1]
    assert lay.segment(1).hash_start == 0x8000
    assert lay.segment_topic(1) == "segment://acme/orders/events/8000-ffff-1"
    assert lay.segment_topic(0) == "segment://acme/orders/events/0000-7fff-0"
    assert TopicLayout(1, [seg(0, 0, 0xFFFF)]).segment_topic(0) == "segment://t/ns/topic/0000-ffff-0"
    assert not lay.is_legacy
    with pytest.raises(KeyError, match="no segment 9 in layout epoch 7"):
        lay.segment(9)
    with pytest.raises(KeyError):
        lay.segment_topic(9)
    with pytest.raises(TypeError, match="segment_id must be an int"):
        lay.segment("1")
    assert "epoch=7" in repr(lay)


def test_layout_epoch_order_and_equality():
    a = TopicLayout(3, [seg(0, 0, 0xFFFF)])
    b = TopicLayout(4, [seg(0, 0, 0xFFFF)])
    assert b.is_newer_than(a) and not a.is_newer_than(b) and not a.is_newer_than(a)
    assert a == TopicLayout(3, (seg(0, 0, 0xFFFF),)) and hash(a) == hash(TopicLayout(3, [seg(0, 0, 0xFFFF)]))
    assert a != b
    with pytest.raises(TypeError):
        a.is_newer_than(3)
    assert pickle.loads(pickle.dumps(a)) == a
    with pytest.raises(AttributeError):
        a.epoch = 5


@pytest.mark.parametrize(
    "segments, message",
    [
        ([seg(0, 1, 0xFFFF)], r"gap 0x0000-0x0000 before segment 0"),
        ([seg(0, 0, 0x7FFF)], r"gap 0x8000-0xffff after segment 0"),
        ([seg(0, 0, 0x7FFF), seg(1, 0x8002, 0xFFFF)], r"gap 0x8000-0x8001 after segment 0 before segment 1"),
        (
            [seg(0, 0, 0x8000), seg(1, 0x7FFF, 0xFFFF)],
            r"overlap 0x7fff-0x8000 between active segments 0 \(0x0000-0x8000\) and 1 \(0x7fff-0xffff\)",
        ),
        ([seg(0, 0, 0xFFFF), seg(1, 0x10, 0x20)], r"overlap 0x0010-0x0020 between active segments 0"),
        ([seg(0, 0, 0xFFFF, state="sealed")], r"no active segment"),
        ([], r"no active segment"),
        ([seg(0, 0, 0x7FFF), seg(0, 0x8000, 0xFFFF)], r"duplicate segment id 0 at segments\[0\] and segments\[1\]"),
        (
            [seg(0, 0, 0x7FFF), seg(1, 0x8000, 0xFFFF, parent_ids=(0,))],
            r"segment 1: parent 0 is active: a segment is sealed when its successors are created",
        ),
        (
            [seg(0, 0, 0xFFFF, state="sealed", child_ids=(5,)), seg(1, 0, 0xFFFF, parent_ids=(0,))],
            r"segment 1: parent 0 lists child_ids \(5,\), which do not include 1",
        ),
        (
            [seg(0, 0, 0xFFFF, state="sealed", child_ids=(1,)), seg(1, 0, 0xFFFF)],
            r"segment 0: child 1 lists parent_ids \(\), which do not include 0",
        ),
        ([seg(0, 0, 0xFFFF), (1, 2, 3)], r"segments\[1\] is tuple \(1, 2, 3\), not a Segment"),
    ],
)
def test_layout_validation(segments, message):
    with pytest.raises(InvalidLayoutError, match=message):
        TopicLayout(1, segments)


def test_layout_argument_validation():
    one = [seg(0, 0, 0xFFFF)]
    for epoch, what in ((-1, "int -1"), (True, "bool True"), (1.0, "float 1.0")):
        with pytest.raises(InvalidLayoutError, match=f"epoch must be an int >= 0, not {what}"):
            TopicLayout(epoch, one)
    for topic in ("t/ns/topic", "persistent://t/ns", "persistent://t//x", "://t/ns/x", "persistent://a/b/c/d"):
        with pytest.raises(InvalidLayoutError, match="is not of the form"):
            TopicLayout(1, one, topic=topic)
    with pytest.raises(InvalidLayoutError, match="topic must be a str"):
        TopicLayout(1, one, topic=None)
    with pytest.raises(InvalidLayoutError, match="segments must be an iterable of Segment"):
        TopicLayout(1, seg(0, 0, 0xFFFF))


def test_ids_of_garbage_collected_segments_are_allowed():
    # a drained, sealed parent is gone from the layout; its children still name it
    lay = TopicLayout(
        9,
        [
            seg(5, 0, 0x7FFF, parent_ids=(1,)),
            seg(6, 0x8000, 0xFFFF, parent_ids=(1, 2)),
            seg(7, 0, 0xFFFF, state="sealed", child_ids=(11, 12)),
        ],
    )
    assert [s.parent_ids for s in lay.active_segments] == [(1,), (1, 2)]
    assert TopicLayout.from_dict(lay.to_dict()) == lay


def test_sealed_segments_may_overlap_active_ones():
    lay = TopicLayout(
        2,
        [
            seg(0, 0, 0xFFFF, 4, state="sealed", child_ids=(1, 2)),
            seg(1, 0, 0x7FFF, parent_ids=(0,)),
            seg(2, 0x8000, 0xFFFF, parent_ids=(0,)),
        ],
    )
    assert [s.segment_id for s in lay.active_segments] == [1, 2]


# --------------------------------------------------------------------------------------------------
# Routing


def key_lists(max_size=60):
    key = st.one_of(st.none(), st.text(max_size=8), st.binary(max_size=8))
    return st.lists(key, max_size=max_size)


@st.composite
def tilings(draw, max_segments=12):
    cuts = draw(st.lists(st.integers(1, 0xFFFF), max_size=max_segments - 1, unique=True).map(sorted))
    bounds = [0] + cuts + [0x10000]
    ids = draw(st.permutations(list(range(len(bounds) - 1))))
    segs = [Segment(ids[i] * 3 + 1, a, b - 1) for i, (a, b) in enumerate(zip(bounds, bounds[1:], strict=False))]
    order = draw(st.permutations(segs))
    return TopicLayout(draw(st.integers(0, 100)), order)


@given(tilings(), key_lists(), st.integers(0, 50))
@settings(max_examples=120, deadline=None)
def test_route_matches_reference(layout, keys, rr):
    expected, next_rr = ref_route(layout, keys, rr)
    got = layout.route(keys, round_robin=rr)
    assert got.dtype == np.int64 and got.tolist() == expected
    index, got_rr = layout.route_index(bc.hash_keys(keys), round_robin=rr)
    assert index.dtype == np.int32
    assert got_rr == next_rr == (rr + sum(k is None for k in keys)) % len(layout.active_segments)
    assert [layout.active_segments[i].segment_id for i in index.tolist()] == expected


@given(tilings(max_segments=300), st.integers(0, 2**32 - 1))
@settings(max_examples=25, deadline=None)
def test_route_large_columns_matches_reference(layout, seed):
    # Large enough that many-segment layouts route through the 64 Ki table.
    rng = np.random.default_rng(seed)
    keys = [None if x < 30_000 else f"k{x}" for x in rng.integers(0, 10**6, 3000).tolist()]
    expected, next_rr = ref_route(layout, keys, 0)
    index, got_rr = layout.route_index(keys)
    assert layout.active_segment_ids[index].tolist() == expected and got_rr == next_rr
    assert layout.route(keys[:10]).tolist() == expected[:10]


@st.composite
def legacy_layouts(draw):
    n = draw(st.integers(1, 12))
    bounds = [i * 0x10000 // n for i in range(n + 1)]
    segs = [
        Segment(10 + i, a, b - 1, legacy_topic_name=f"persistent://t/ns/topic-partition-{i}")
        for i, (a, b) in enumerate(zip(bounds, bounds[1:], strict=False))
    ]
    return TopicLayout(1, draw(st.permutations(segs)))


@given(legacy_layouts(), key_lists(), st.integers(0, 30))
@settings(max_examples=80, deadline=None)
def test_legacy_route_sign_safe_mod(layout, keys, rr):
    assert layout.is_legacy
    expected, next_rr = ref_route(layout, keys, rr)
    assert layout.route(keys, round_robin=rr).tolist() == expected
    assert layout.route_index(keys, round_robin=rr)[1] == next_rr


def test_legacy_route_vectors():
    # partitions in layout order p0, p1, p2: key "a" has raw 0x3c2569b2 -> 0x3c2569b2 % 3 = 2
    names = [f"persistent://t/ns/topic-partition-{i}" for i in range(3)]
    parts = [
        Segment(7, 0x8000, 0xFFFF, legacy_topic_name=names[0]),
        Segment(3, 0, 0x3FFF, legacy_topic_name=names[1]),
        Segment(5, 0x4000, 0x7FFF, legacy_topic_name=names[2]),
    ]
    lay = TopicLayout(1, parts)
    assert lay.is_legacy
    assert 0x3C2569B2 % 3 == 2
    assert lay.route("a") == 5
    # bit 31 set: "key-1" raw 0x98b115a0, masked 0x18b115a0 % 3
    assert lay.route("key-1") == [7, 3, 5][0x18B115A0 % 3]
    # keyless in layout order, not hash order
    assert lay.route([None, None, None, None]).tolist() == [7, 3, 5, 7]
    # one non-legacy active segment makes the whole layout keyed
    mixed = TopicLayout(1, [Segment(7, 0x8000, 0xFFFF, legacy_topic_name=names[0]), Segment(3, 0, 0x7FFF)])
    assert not mixed.is_legacy
    assert mixed.route("a") == 3  # segment hash 0x3c25 < 0x8000


def test_route_vectors_and_round_robin_continuation():
    lay = TopicLayout(1, [seg(0, 0, 0x3FFF), seg(1, 0x4000, 0x97FF), seg(2, 0x9800, 0xFFFF)])
    # "a" -> 0x3c25 (segment 0); "key-1" -> 0x98b1 (segment 2); "some-routing-key" -> 0x73df (segment 1)
    assert lay.route(["a", "key-1", "some-routing-key"]).tolist() == [0, 2, 1]
    assert lay.route("key-1") == 2
    assert lay.route_index("a") == (0, 0)
    keys = ["a", None, None, "key-1", None, None, None]
    whole, rr = lay.route_index(keys, round_robin=1)
    first, rr1 = lay.route_index(keys[:3], round_robin=1)
    second, rr2 = lay.route_index(keys[3:], round_robin=rr1)
    assert np.concatenate([first, second]).tolist() == whole.tolist() and rr2 == rr
    assert whole.tolist() == [0, 1, 2, 2, 0, 1, 2] and rr == 0
    assert lay.route(keys, round_robin=7).tolist() == [0, 1, 2, 2, 0, 1, 2]  # 7 % 3 == 1
    assert lay.route([]).shape == (0,)
    assert lay.route(np.array([["a", "key-1"]])).shape == (1, 2)
    with pytest.raises(ValueError, match="round_robin must be >= 0, not -1"):
        lay.route(keys, round_robin=-1)
    with pytest.raises(TypeError, match="round_robin must be an int"):
        lay.route(keys, round_robin=1.0)
    with pytest.raises(TypeError, match=r"key at index 1"):
        lay.route(["a", 5])


def test_route_single_segment_and_keyhashes_input():
    lay = TopicLayout(1, [seg(42, 0, 0xFFFF)])
    kh = bc.hash_keys(["x", None, "y"])
    assert lay.route(kh).tolist() == [42, 42, 42]
    idx, rr = lay.route_index(kh, round_robin=5)
    assert idx.tolist() == [0, 0, 0] and rr == 0
    with pytest.raises(TypeError, match="KeyHashes columns must be"):
        lay.route(bc.KeyHashes(kh.raw.astype(np.int64), kh.segment_hash, kh.bucket_hash, kh.has_key))


# --------------------------------------------------------------------------------------------------
# Transitions


def test_split_vectors():
    lay = TopicLayout(5, [seg(0, 0, 0xFFFF, 4)])
    nxt = lay.split(0)
    assert nxt.epoch == 6 and nxt.topic == lay.topic
    parent = nxt.segment(0)
    assert parent.state == "sealed" and parent.child_ids == (1, 2) and parent.buckets.count == 4
    low, high = nxt.segment(1), nxt.segment(2)
    assert (low.hash_start, low.hash_end, high.hash_start, high.hash_end) == (0, 0x7FFF, 0x8000, 0xFFFF)
    assert low.buckets.count == high.buckets.count == 2  # 4 -> 2 and 2
    assert low.buckets == Buckets.equal_width(2)
    assert low.parent_ids == high.parent_ids == (0,) and low.state == high.state == "active"
    again = nxt.split(1)  # N = 2 -> 1 and 1; new ids are max + 1, max + 2
    assert [s.buckets.count for s in again.segments if s.segment_id in (3, 4)] == [1, 1]
    assert (again.segment(3).hash_start, again.segment(3).hash_end) == (0, 0x3FFF)
    assert (again.segment(4).hash_start, again.segment(4).hash_end) == (0x4000, 0x7FFF)
    ones = TopicLayout(1, [seg(0, 0, 0xFFFF, 1)]).split(0)
    assert [s.buckets.count for s in ones.active_segments] == [1, 1]  # 1 -> 1 and 1
    odd = TopicLayout(1, [seg(0, 0, 4), seg(1, 5, 0xFFFF)]).split(0)
    assert [(s.hash_start, s.hash_end) for s in odd.active_segments][:2] == [(0, 2), (3, 4)]
    assert lay.segment(0).state == "active"  # the old layout is unchanged


def test_merge_vectors():
    lay = TopicLayout(2, [seg(4, 0x8000, 0xFFFF, 1), seg(9, 0, 0x7FFF, 1)])
    nxt = lay.merge(4, 9)
    assert nxt.epoch == 3
    child = nxt.segment(10)
    assert (child.hash_start, child.hash_end, child.buckets.count) == (0, 0xFFFF, 2)  # 1 + 1 -> 2
    assert child.buckets == Buckets.equal_width(2) and child.parent_ids == (9, 4)
    assert nxt.segment(4).state == nxt.segment(9).state == "sealed"
    assert nxt.segment(4).child_ids == nxt.segment(9).child_ids == (10,)
    assert [s.segment_id for s in nxt.active_segments] == [10]
    assert two_segment_layout().merge(0, 1).segment(2).buckets.count == 6


def test_rebucket():
    lay = two_segment_layout()
    new = Buckets((100, 200, 300))
    nxt = lay.rebucket(1, new)
    assert nxt.epoch == 4
    assert nxt.segment(2).buckets == new and nxt.segment(2).parent_ids == (1,)
    assert (nxt.segment(2).hash_start, nxt.segment(2).hash_end) == (0x8000, 0xFFFF)
    assert nxt.segment(1).state == "sealed" and nxt.segment(1).child_ids == (2,)
    assert nxt.segment(1).buckets.count == 2  # the sealed segment keeps its list


def test_transition_errors():
    lay = two_segment_layout().split(0)  # 0 sealed; active 2 [0, 3fff], 3 [4000, 7fff], 1 [8000, ffff]
    with pytest.raises(InvalidLayoutError, match="cannot split segment 0: it is sealed"):
        lay.split(0)
    with pytest.raises(KeyError, match="no segment 99"):
        lay.split(99)
    with pytest.raises(
        InvalidLayoutError,
        match=r"cannot merge segments 2 \(0x0000-0x3fff\) and 1 \(0x8000-0xffff\): they are not adjacent",
    ):
        lay.merge(1, 2)
    with pytest.raises(InvalidLayoutError, match="cannot merge segment 2 with itself"):
        lay.merge(2, 2)
    with pytest.raises(InvalidLayoutError, match="cannot merge segment 0: it is sealed"):
        lay.merge(0, 1)
    with pytest.raises(InvalidLayoutError, match="cannot rebucket segment 0: it is sealed"):
        lay.rebucket(0, Buckets())
    with pytest.raises(TypeError, match="buckets must be a Buckets"):
        lay.rebucket(1, (1, 2))
    tiny = TopicLayout(1, [seg(0, 0, 0), seg(1, 1, 0xFFFF)])
    with pytest.raises(InvalidLayoutError, match="cannot split segment 0: its range 0x0000 is a single hash"):
        tiny.split(0)
    full = TopicLayout(1, [seg(0, 0, 0x7FFF, 65536), seg(1, 0x8000, 0xFFFF, 2)])
    # the child of a merge is clamped to the ceiling (the reference's merge clamp)
    (child,) = full.merge(0, 1, max_buckets=65536).active_segments
    assert child.buckets == Buckets.equal_width(65536)
    with pytest.raises(ValueError, match="max_buckets must be <= 65536, not 65537"):
        full.merge(0, 1, max_buckets=65537)
    with pytest.raises(ValueError, match="max_buckets must be >= 1, not 0"):
        full.split(1, max_buckets=0)
    with pytest.raises(TypeError, match="max_buckets must be an int"):
        full.rebucket(1, Buckets(), max_buckets=2.0)


@given(
    tilings(max_segments=6),
    st.lists(st.tuples(st.sampled_from(["split", "merge", "rebucket"]), st.integers(0, 10**6)), max_size=6),
)
@settings(max_examples=40, deadline=None)
def test_transitions_keep_layout_valid_and_routing_consistent(layout, steps):
    keys = [f"k{i}" for i in range(200)]
    for action, pick in steps:
        active = layout.active_segments
        target = active[pick % len(active)]
        if action == "split":
            if target.hash_start == target.hash_end:
                continue
            nxt = layout.split(target.segment_id)
        elif action == "merge":
            if len(active) < 2:
                continue
            i = pick % (len(active) - 1)
            nxt = layout.merge(active[i].segment_id, active[i + 1].segment_id)
        else:
            count = 1 + pick % 5
            if count == target.buckets.count:  # an unchanged bucketing is an error, tested on its own
                continue
            nxt = layout.rebucket(target.segment_id, Buckets.equal_width(count))
        assert nxt.epoch == layout.epoch + 1 and nxt.is_newer_than(layout)
        assert TopicLayout.from_dict(nxt.to_dict()) == nxt
        # a key's new segment lies inside (split, rebucket) or contains (merge) its old segment's range
        old = layout.route(keys)
        new = nxt.route(keys)
        for o, n in zip(old.tolist(), new.tolist(), strict=False):
            a, b = nxt.segment(o), nxt.segment(n)
            assert (a.hash_start <= b.hash_start and b.hash_end <= a.hash_end) or (
                b.hash_start <= a.hash_start and a.hash_end <= b.hash_end
            )
        layout = nxt


# --------------------------------------------------------------------------------------------------
# Dict conversion


def test_dict_round_trip_through_json():
    lay = two_segment_layout().split(0).merge(2, 3).rebucket(1, Buckets.balanced([1, 2, 3, 4000], 3))
    text = json.dumps(lay.to_dict())
    back = TopicLayout.from_dict(json.loads(text))
    assert back == lay and back.to_dict() == lay.to_dict()
    assert lay.to_dict()["segments"][0] == {
        "segment_id": 0,
        "hash_start": 0,
        "hash_end": 0x7FFF,
        "splits": [0x4000, 0x8000, 0xC000],
        "state": "sealed",
        "parent_ids": [],
        "child_ids": [2, 3],
        "legacy_topic_name": None,
    }


def test_from_dict_minimal_and_legacy():
    lay = TopicLayout.from_dict(
        {
            "epoch": 1,
            "segments": [
                {
                    "segment_id": 0,
                    "hash_start": 0,
                    "hash_end": 0x7FFF,
                    "legacy_topic_name": "persistent://t/ns/x-partition-0",
                },
                {
                    "segment_id": 1,
                    "hash_start": 0x8000,
                    "hash_end": 0xFFFF,
                    "legacy_topic_name": "persistent://t/ns/x-partition-1",
                },
            ],
        }
    )
    assert lay.is_legacy and lay.topic == "persistent://t/ns/topic" and lay.segment(0).buckets == Buckets()


@pytest.mark.parametrize(
    "data, error, message",
    [
        ([], InvalidLayoutError, "a layout must be a mapping"),
        ({"segments": []}, InvalidLayoutError, r"layout: missing field\(s\) epoch"),
        ({"epoch": 1, "segments": [], "extra": 1}, InvalidLayoutError, r"layout: unknown field\(s\) extra"),
        ({"epoch": 1, "segments": "x"}, InvalidLayoutError, "segments must be a list of segment mappings"),
        ({"epoch": 1, "segments": [5]}, InvalidLayoutError, "a segment must be a mapping, not int 5"),
        (
            {"epoch": 1, "segments": [{"segment_id": 3, "hash_start": 0}]},
            InvalidLayoutError,
            r"segment 3: missing field\(s\) hash_end",
        ),
        (
            {"epoch": 1, "segments": [{"segment_id": 3, "hash_start": 0, "hash_end": 0xFFFF, "color": 1}]},
            InvalidLayoutError,
            r"segment 3: unknown field\(s\) color",
        ),
        (
            {"epoch": 1, "segments": [{"segment_id": 3, "hash_start": 0, "hash_end": 0xFFFF, "splits": [9, 4]}]},
            InvalidBoundaryError,
            r"segment 3: splits are not strictly ascending: 4 at position 1 follows 9",
        ),
        (
            {"epoch": 1, "segments": [{"segment_id": 3, "hash_start": 0, "hash_end": 0xFFFE}]},
            InvalidLayoutError,
            r"gap 0xffff-0xffff after segment 3",
        ),
    ],
)
def test_from_dict_errors(data, error, message):
    with pytest.raises(error, match=message):
        TopicLayout.from_dict(data)
