"""The public API of the README's API section, called exactly as an external user would: ``import bucketcore as bc``.

Every name, keyword and return shape below is the one the README's API section spells. Expected values come from
independent oracles only: ``mmh3``, the hand vectors of docs/design.md, and slow pure-Python
references of the rules written in this file. ``bc.stream`` (the storage core) is not tested here.
"""

from __future__ import annotations

import bisect
from types import ModuleType

import mmh3
import numpy as np
import pytest
from design_vectors import MURMUR3_VECTORS as VECTORS  # docs/design.md ("Hashing")
from hypothesis import given, settings
from hypothesis import strategies as st

import bucketcore as bc

# --- oracles -------------------------------------------------------------------------------------

SURROGATE_REPLACED = 0x11508252  # "\ud800x" with errors="replace" (Java getBytes(UTF_8): '?')


def ref_raw(key: str | bytes | None) -> int:
    if key is None:
        return 0
    return mmh3.hash(key.encode("utf-8") if isinstance(key, str) else key, 0, signed=False)


def ref_bucket_of(splits: tuple[int, ...] | list[int], h: int) -> int:
    return sum(1 for s in splits if s <= h)


def ref_equal_width(n: int) -> list[int]:
    return [i * 65536 // n for i in range(1, n)] if n > 1 else []


def ref_ranges(splits: list[int] | tuple[int, ...]) -> list[tuple[int, int]]:
    starts = [0, *splits]
    ends = [s - 1 for s in splits] + [0xFFFF]
    return list(zip(starts, ends, strict=False))


def sign_safe_mod(value: int, n: int) -> int:
    r = value % n  # Python's % is already sign-safe; value is non-negative here anyway
    return r + n if r < 0 else r


def ref_route(layout_segments: list[tuple[int, int, int, bool]], keys: list[str | None]) -> list[int]:
    """layout_segments: (segment_id, hash_start, hash_end, legacy) of the ACTIVE segments in layout order."""
    by_start = sorted(layout_segments, key=lambda s: s[1])
    legacy = all(s[3] for s in layout_segments)
    order = layout_segments if legacy else by_start
    out, rr = [], 0
    for key in keys:
        if key is None:
            out.append(order[rr % len(order)][0])
            rr += 1
            continue
        raw = ref_raw(key)
        if legacy:
            out.append(order[sign_safe_mod(raw & 0x7FFFFFFF, len(order))][0])
        else:
            sh = raw >> 16
            out.append(next(s[0] for s in by_start if s[1] <= sh <= s[2]))
    return out


def ref_entries(
    targets: list[tuple[int, int]],
    buckets: dict[int, list[int]],
    bucket_hashes: list[int],
    sizes: list[int],
    max_messages: int,
    max_bytes: int,
    policy: str,
) -> list[tuple[int, int, int, int, list[int], int]]:
    """Pure-Python batcher of docs/design.md, "Producer bucketing and stamping" (Java-reference
    style: dict of per-bucket batches).

    targets[i] = (segment_id, bucket) of message i. Returns entries as
    (segment_id, bucket, hash_min, hash_max, message indices, nbytes), in emission order.
    """
    pending: dict[tuple[int, int], list[int]] = {}
    emitted: list[tuple[int, int, int, int, list[int], int]] = []

    def group(key: tuple[int, int]) -> list[tuple[int, int]]:
        if policy == "shared":
            return [k for k in pending if k[0] == key[0]]
        return [key] if key in pending else []

    def load(keys: list[tuple[int, int]]) -> tuple[int, int]:
        msgs = [i for k in keys for i in pending[k]]
        return len(msgs), sum(sizes[i] for i in msgs)

    def emit(keys: list[tuple[int, int]]) -> None:
        for k in sorted(keys, key=lambda k: pending[k][0]):
            msgs = pending.pop(k)
            hs = [bucket_hashes[i] for i in msgs]
            emitted.append((k[0], k[1], min(hs), max(hs), msgs, sum(sizes[i] for i in msgs)))

    for i, key in enumerate(targets):
        current = group(key)
        if current:
            _, nbytes = load(current)
            if nbytes + sizes[i] > max_bytes:
                emit(current)
        pending.setdefault(key, []).append(i)
        current = group(key)
        count, nbytes = load(current)
        if count >= max_messages or nbytes >= max_bytes:
            emit(current)
    emit(list(pending))
    return emitted


def table_rows(table: object) -> list[tuple[int, int, int, int, list[int], int]]:
    rows = []
    for i in range(len(table)):  # type: ignore[arg-type]
        s, c = int(table.start[i]), int(table.count[i])  # type: ignore[attr-defined]
        rows.append(
            (
                int(table.segment_id[i]),
                int(table.bucket[i]),
                int(table.hash_min[i]),  # type: ignore[attr-defined]
                int(table.hash_max[i]),
                table.order[s : s + c].tolist(),
                int(table.nbytes[i]),
            )
        )  # type: ignore[attr-defined]
    return rows


def entry_rows(entries: list[object]) -> list[tuple[int, int, int, int, list[int], int]]:
    return [
        (e.segment_id, e.bucket, e.hash_min, e.hash_max, [int(i) for i in e.message_indices], e.nbytes)  # type: ignore[attr-defined]
        for e in entries
    ]


# --- package --------------------------------------------------------------------------------------


def test_version_and_max_hash() -> None:
    assert isinstance(bc.__version__, str) and bc.__version__
    assert bc.MAX_HASH == 0xFFFF


def test_every_error_class_subclasses_bucketcore_error_and_value_error() -> None:
    for cls in (bc.InvalidBoundaryError, bc.InvalidLayoutError, bc.KeyEncodingError, bc.StaleLayoutError):
        assert issubclass(cls, bc.BucketcoreError), cls
        assert issubclass(cls, ValueError), cls
    assert issubclass(bc.BucketcoreError, Exception)


# --- hashing --------------------------------------------------------------------------------------


@pytest.mark.parametrize("key, expected", sorted(VECTORS.items()))
def test_murmur3_32_scalar_vectors(key: str, expected: int) -> None:
    assert ref_raw(key) == expected  # the oracle agrees with the design's vectors
    got = bc.murmur3_32(key)
    assert type(got) is int and got == expected
    got_bytes = bc.murmur3_32(key.encode("utf-8"))
    assert type(got_bytes) is int and got_bytes == expected


def test_murmur3_32_a() -> None:
    assert bc.murmur3_32("a") == 0x3C2569B2


def test_murmur3_32_surrogates() -> None:
    with pytest.raises(bc.KeyEncodingError) as info:
        bc.murmur3_32(["a", "b", "\ud800x"])
    assert "2" in str(info.value)
    assert isinstance(info.value, ValueError)
    assert bc.murmur3_32("\ud800x", errors="replace") == SURROGATE_REPLACED
    assert bc.murmur3_32(["\ud800x"], errors="replace").tolist() == [SURROGATE_REPLACED]
    assert bc.murmur3_32("\ud800x", errors="replace") == ref_raw(b"?x")


KEYS = list(VECTORS)


def _columns() -> list[tuple[str, object]]:
    encoded = [k.encode("utf-8") for k in KEYS]
    return [
        ("list", list(KEYS)),
        ("tuple", tuple(KEYS)),
        ("bytes list", encoded),
        ("U", np.array(KEYS)),
        ("S", np.array(encoded, dtype=object).astype("S")),
        ("object", np.array(KEYS, dtype=object)),
    ]


def _arrow_columns(pa: ModuleType) -> dict[str, object]:
    encoded = [k.encode("utf-8") for k in KEYS]
    return {
        "arrow string": pa.array(KEYS, type=pa.string()),
        "arrow large_string": pa.array(KEYS, type=pa.large_string()),
        "arrow binary": pa.array(encoded, type=pa.binary()),
        "arrow large_binary": pa.array(encoded, type=pa.large_binary()),
        "arrow chunked": pa.chunked_array([KEYS[:3], [], KEYS[3:]], type=pa.string()),
    }


@pytest.mark.parametrize("name, column", _columns(), ids=[n for n, _ in _columns()])
def test_murmur3_32_every_accepted_column(name: str, column: object) -> None:
    out = bc.murmur3_32(column)
    assert isinstance(out, np.ndarray) and out.dtype == np.uint32 and out.shape == (len(KEYS),)
    assert out.tolist() == [VECTORS[k] for k in KEYS]


@pytest.mark.parametrize(
    "name", ["arrow string", "arrow large_string", "arrow binary", "arrow large_binary", "arrow chunked"]
)
def test_murmur3_32_every_accepted_arrow_column(name: str, pa: ModuleType) -> None:
    out = bc.murmur3_32(_arrow_columns(pa)[name])
    assert isinstance(out, np.ndarray) and out.dtype == np.uint32 and out.shape == (len(KEYS),)
    assert out.tolist() == [VECTORS[k] for k in KEYS]


def test_murmur3_32_keeps_the_shape_of_an_ndarray() -> None:
    keys = np.array(KEYS[:6]).reshape(2, 3)
    out = bc.murmur3_32(keys)
    assert out.shape == (2, 3) and out.dtype == np.uint32
    assert out.tolist() == [[VECTORS[k] for k in row] for row in keys.tolist()]


def test_murmur3_32_bad_element_is_a_type_error_naming_its_index() -> None:
    with pytest.raises(TypeError, match="index 2"):
        bc.murmur3_32(["a", "b", 3])
    with pytest.raises(TypeError, match="index 1"):
        bc.murmur3_32(["a", None])  # murmur3_32 has no hash for a keyless message
    with pytest.raises(TypeError):
        bc.murmur3_32(np.array([1, 2]))
    with pytest.raises(TypeError):
        bc.murmur3_32(12)


def test_hash_keys_fields() -> None:
    keys = ["a", None, "key-1", b"orders/customer-42"]
    kh = bc.hash_keys(keys)
    assert isinstance(kh, bc.KeyHashes)
    raws = [ref_raw(k) for k in keys]
    assert kh.raw.dtype == np.uint32 and kh.raw.tolist() == raws
    assert kh.segment_hash.dtype == np.uint16 and kh.segment_hash.tolist() == [r >> 16 for r in raws]
    assert kh.bucket_hash.dtype == np.uint16 and kh.bucket_hash.tolist() == [r & 0xFFFF for r in raws]
    assert kh.has_key.dtype == np.bool_ and kh.has_key.tolist() == [True, False, True, True]
    assert (kh.raw[1], kh.segment_hash[1], kh.bucket_hash[1]) == (0, 0, 0)


def test_hash_keys_arrow_nulls_with_an_offset_are_keyless(pa: ModuleType) -> None:
    arr = pa.array(["x", "a", None, "key-1", None], type=pa.large_string()).slice(1, 3)
    kh = bc.hash_keys(arr, errors="strict")
    assert kh.raw.tolist() == [VECTORS["a"], 0, VECTORS["key-1"]]
    assert kh.has_key.tolist() == [True, False, True]


def test_split_hash_vectorised() -> None:
    raws = np.array([VECTORS[k] for k in KEYS], dtype=np.uint32)
    segment_hash, bucket_hash = bc.split_hash(raws)
    assert segment_hash.tolist() == [int(r) >> 16 for r in raws]
    assert bucket_hash.tolist() == [int(r) & 0xFFFF for r in raws]
    assert bc.split_hash(0x3C2569B2) == (0x3C25, 0x69B2)


# --- layout: boundary lists -----------------------------------------------------------------------


def test_buckets_default_and_fields() -> None:
    one = bc.Buckets()
    assert one.splits == () and one.count == 1 and one.ranges == [(0, 0xFFFF)]
    b = bc.Buckets(splits=[100, 0x8000])
    assert b.splits == (100, 0x8000) and isinstance(b.splits, tuple)
    assert b.count == 3
    assert b.ranges == [(0, 99), (100, 0x7FFF), (0x8000, 0xFFFF)] == ref_ranges([100, 0x8000])


def test_equal_width_examples() -> None:
    assert bc.Buckets.equal_width(2).splits == (0x8000,)
    assert bc.Buckets.equal_width(3).splits == (21845, 43690)
    assert bc.Buckets.equal_width(4).splits == (0x4000, 0x8000, 0xC000)
    assert bc.Buckets.equal_width(1).splits == ()
    for n in (5, 7, 64, 1000, 4096, 65535, 65536):
        assert list(bc.Buckets.equal_width(n).splits) == ref_equal_width(n), n


@pytest.mark.parametrize("splits", [[0], [5, 5], [7, 3], [65536], [-1], [1.5], [True], "12"])
def test_invalid_splits_raise_invalid_boundary_error(splits: object) -> None:
    with pytest.raises(bc.InvalidBoundaryError) as info:
        bc.Buckets(splits)  # type: ignore[arg-type]
    assert isinstance(info.value, ValueError) and isinstance(info.value, bc.BucketcoreError)


def test_bucket_of_scalar_in_int_out() -> None:
    b = bc.Buckets.equal_width(3)
    for h in (0, 21844, 21845, 43689, 43690, 0xFFFF):
        got = b.bucket_of(h)
        assert type(got) is int and got == ref_bucket_of(b.splits, h)
    assert type(b.bucket_of(np.uint16(21845))) is int


@settings(max_examples=60, deadline=None)
@given(
    splits=st.lists(st.integers(1, 0xFFFF), max_size=40, unique=True).map(sorted),
    hashes=st.lists(st.integers(0, 0xFFFF), max_size=300),
)
def test_bucket_of_column_matches_the_definition(splits: list[int], hashes: list[int]) -> None:
    b = bc.Buckets(splits)
    out = b.bucket_of(np.array(hashes, dtype=np.uint16))
    assert isinstance(out, np.ndarray) and out.shape == (len(hashes),)
    assert out.tolist() == [bisect.bisect_right(splits, h) for h in hashes]
    assert b.bucket_of(hashes).tolist() == out.tolist()


def test_bucket_of_out_of_range_names_the_index() -> None:
    with pytest.raises(ValueError, match="index 2"):
        bc.Buckets.equal_width(4).bucket_of(np.array([0, 1, 0x10000]))


def test_canonical_hash() -> None:
    b = bc.Buckets([100, 0x8000])
    assert b.canonical_hash(0) == 1  # 0 means "not set"
    assert b.canonical_hash(1) == 100 and b.canonical_hash(2) == 0x8000
    assert bc.Buckets().canonical_hash(0) == 1


def test_balanced() -> None:
    # all the traffic sits in two tight clusters: the best 2-bucket list separates them
    hashes = [10] * 50 + [40000] * 50
    b = bc.Buckets.balanced(hashes, 2)
    assert isinstance(b, bc.Buckets) and b.count == 2
    assert 10 < b.splits[0] <= 40000
    weighted = bc.Buckets.balanced([1, 2, 3], 2, weights=[100, 1, 1])
    assert weighted.count == 2 and 1 < weighted.splits[0] <= 2  # bucket 0 holds hash 1 alone
    assert bc.Buckets.balanced([], 4) == bc.Buckets.equal_width(4)


def test_buckets_for_budget() -> None:
    assert bc.buckets_for_budget(64, 4) == 16
    assert bc.buckets_for_budget(10, 3) == 3
    assert bc.buckets_for_budget(2, 3) == 1
    assert bc.buckets_for_budget(budget=0, segment_count=5) == 1
    assert type(bc.buckets_for_budget(64, 4)) is int


# --- layout: segments and routing -----------------------------------------------------------------


def _two_segment_layout() -> bc.TopicLayout:
    return bc.TopicLayout(
        3,
        [bc.Segment(1, 0x8000, 0xFFFF, bc.Buckets.equal_width(2)), bc.Segment(0, 0, 0x7FFF, bc.Buckets.equal_width(4))],
        topic="persistent://acme/prod/orders",
    )


def test_segment_and_layout_fields() -> None:
    layout = _two_segment_layout()
    assert layout.epoch == 3
    assert [s.segment_id for s in layout.segments] == [1, 0]  # as given
    assert isinstance(layout.segments, tuple) and isinstance(layout.active_segments, tuple)
    assert [s.segment_id for s in layout.active_segments] == [0, 1]  # by hash_start
    seg = layout.segment(0)
    assert (seg.segment_id, seg.hash_start, seg.hash_end) == (0, 0, 0x7FFF)
    assert seg.buckets == bc.Buckets.equal_width(4)
    assert seg.state == "active" and seg.parent_ids == () and seg.child_ids == ()
    assert seg.legacy_topic_name is None
    assert layout.segment_topic(1) == "segment://acme/prod/orders/8000-ffff-1"
    assert layout.segment_topic(0) == "segment://acme/prod/orders/0000-7fff-0"
    default = bc.TopicLayout(0, [bc.Segment(9, 0, 0xFFFF)])
    assert default.segment_topic(9) == "segment://t/ns/topic/0000-ffff-9"
    sealed = bc.Segment(
        4,
        0,
        0xFFFF,
        buckets=bc.Buckets(),
        state="sealed",
        parent_ids=(2,),
        legacy_topic_name="persistent://t/ns/topic-partition-0",
    )
    assert sealed.state == "sealed" and sealed.parent_ids == (2,)


def test_layout_must_tile_the_ring() -> None:
    with pytest.raises(bc.InvalidLayoutError) as info:
        bc.TopicLayout(0, [bc.Segment(0, 0, 0x7FFF), bc.Segment(1, 0x8001, 0xFFFF)])
    assert isinstance(info.value, ValueError)
    with pytest.raises(bc.InvalidLayoutError):
        bc.TopicLayout(0, [bc.Segment(0, 0, 0x8000), bc.Segment(1, 0x8000, 0xFFFF)])


ROUTE_KEYS = KEYS + [None, "user-1", None, "user-2", "user-3", None, "x" * 100]


def test_route_keyed_and_keyless_round_robin() -> None:
    layout = _two_segment_layout()
    out = layout.route(ROUTE_KEYS)
    assert isinstance(out, np.ndarray) and out.shape == (len(ROUTE_KEYS),)
    assert out.tolist() == ref_route([(1, 0x8000, 0xFFFF, False), (0, 0, 0x7FFF, False)], ROUTE_KEYS)
    assert int(layout.route(["a"])[0]) == (0 if VECTORS["a"] >> 16 < 0x8000 else 1)
    # precomputed hashes route the same
    assert layout.route(bc.hash_keys(ROUTE_KEYS)).tolist() == out.tolist()


def test_route_one_segment() -> None:
    layout = bc.TopicLayout(0, [bc.Segment(42, 0, 0xFFFF)])
    assert layout.route(ROUTE_KEYS).tolist() == [42] * len(ROUTE_KEYS)


def test_route_all_legacy_layout_is_sign_safe_mod_in_layout_order() -> None:
    order = [2, 0, 3, 1]
    segments = [
        bc.Segment(i, i * 0x4000, i * 0x4000 + 0x3FFF, legacy_topic_name=f"persistent://t/ns/topic-partition-{i}")
        for i in order
    ]
    layout = bc.TopicLayout(0, segments)
    expected = ref_route([(i, i * 0x4000, i * 0x4000 + 0x3FFF, True) for i in order], ROUTE_KEYS)
    assert layout.route(ROUTE_KEYS).tolist() == expected


def test_split_merge_rebucket() -> None:
    base = bc.TopicLayout(7, [bc.Segment(0, 0, 0xFFFF, bc.Buckets.equal_width(8))])
    split = base.split(0)
    assert isinstance(split, bc.TopicLayout) and split.epoch == 8 and base.epoch == 7
    parent = split.segment(0)
    assert parent.state == "sealed"
    kids = split.active_segments
    assert len(kids) == 2
    assert {k.parent_ids for k in kids} == {(0,)}
    assert set(parent.child_ids) == {k.segment_id for k in kids}
    assert 0 not in parent.child_ids
    assert kids[0].hash_start == 0 and kids[1].hash_end == 0xFFFF and kids[0].hash_end + 1 == kids[1].hash_start
    assert [k.buckets.count for k in kids] == [4, 4]  # max(1, N // 2)

    merged = split.merge(kids[1].segment_id, kids[0].segment_id)
    assert merged.epoch == 9
    (child,) = merged.active_segments
    assert set(child.parent_ids) == {k.segment_id for k in kids}
    assert child.buckets.count == 8  # N_a + N_b
    assert (child.hash_start, child.hash_end) == (0, 0xFFFF)
    for k in kids:
        assert merged.segment(k.segment_id).state == "sealed"
        assert merged.segment(k.segment_id).child_ids == (child.segment_id,)

    new_buckets = bc.Buckets.equal_width(3)
    rebucketed = merged.rebucket(child.segment_id, new_buckets)
    assert rebucketed.epoch == 10
    (successor,) = rebucketed.active_segments
    assert successor.buckets == new_buckets and successor.parent_ids == (child.segment_id,)
    assert (successor.hash_start, successor.hash_end) == (child.hash_start, child.hash_end)
    assert rebucketed.segment(child.segment_id).state == "sealed"
    assert rebucketed.segment(child.segment_id).child_ids == (successor.segment_id,)
    # routing follows the new active set
    assert rebucketed.route(["a", None]).tolist() == [successor.segment_id] * 2


# --- producer -------------------------------------------------------------------------------------


def _targets(
    layout_or_buckets: object, keys: list[str | None]
) -> tuple[list[tuple[int, int]], dict[int, list[int]], list[int]]:
    hashes = [ref_raw(k) & 0xFFFF for k in keys]
    if isinstance(layout_or_buckets, bc.Buckets):
        splits = {0: list(layout_or_buckets.splits)}
        seg_ids = [0] * len(keys)
    else:
        active = [
            (s.segment_id, s.hash_start, s.hash_end, s.legacy_topic_name is not None)
            for s in layout_or_buckets.segments
            if s.state == "active"
        ]  # type: ignore[attr-defined]
        splits = {s.segment_id: list(s.buckets.splits) for s in layout_or_buckets.segments}  # type: ignore[attr-defined]
        seg_ids = ref_route(active, keys)
    return [(s, ref_bucket_of(splits[s], h)) for s, h in zip(seg_ids, hashes, strict=False)], splits, hashes


def test_bucket_entries_table_columns_and_order() -> None:
    b = bc.Buckets.equal_width(4)
    keys = ["a", "key-1", "a", None, "some-routing-key", "key-1"]
    sizes = [10, 20, 30, 40, 50, 60]
    table = bc.bucket_entries(keys, b, sizes=sizes)
    assert len(table) == table.start.shape[0]
    for name, kind in (
        ("segment_id", "i"),
        ("bucket", "i"),
        ("hash_min", "u"),
        ("hash_max", "u"),
        ("start", "i"),
        ("count", "i"),
        ("nbytes", "i"),
        ("order", "i"),
    ):
        col = getattr(table, name)
        assert isinstance(col, np.ndarray) and col.dtype.kind == kind, name
    assert sorted(table.order.tolist()) == list(range(len(keys)))
    targets, _, hashes = _targets(b, keys)
    expected = ref_entries(targets, {}, hashes, sizes, 1000, 131072, "shared")
    assert table_rows(table) == expected
    # iteration gives Entry views of the same rows
    entries = list(table)
    assert all(isinstance(e, bc.Entry) for e in entries)
    assert entry_rows(entries) == expected
    for i, e in enumerate(table):
        s, c = int(table.start[i]), int(table.count[i])
        assert e.message_indices.tolist() == table.order[s : s + c].tolist()


def test_bucket_entries_one_message_entry_is_stamped_min_eq_max() -> None:
    table = bc.bucket_entries(["a"], bc.Buckets())  # N = 1: stamped anyway
    assert len(table) == 1
    assert int(table.hash_min[0]) == int(table.hash_max[0]) == VECTORS["a"] & 0xFFFF


def test_bucket_entries_encrypted_is_one_message_per_entry() -> None:
    keys = ["a", "a", "a", "key-1"]
    table = bc.bucket_entries(keys, bc.Buckets.equal_width(2), encrypted=True)
    assert table.count.tolist() == [1, 1, 1, 1]
    assert table.order.tolist() == [0, 1, 2, 3]
    assert table.hash_min.tolist() == table.hash_max.tolist() == [ref_raw(k) & 0xFFFF for k in keys]


_key_strategy = st.one_of(st.none(), st.sampled_from(["a", "key-1", "ключ", "键🔑", ""]), st.text(max_size=6))


@settings(max_examples=60, deadline=None)
@given(
    keys=st.lists(_key_strategy, max_size=80),
    n=st.integers(1, 9),
    max_messages=st.integers(1, 7),
    max_bytes=st.integers(1, 120),
    policy=st.sampled_from(["shared", "per_bucket"]),
    with_sizes=st.booleans(),
    data=st.data(),
)
def test_bucket_entries_against_the_reference_batcher(
    keys, n, max_messages, max_bytes, policy, with_sizes, data
) -> None:  # type: ignore[no-untyped-def]
    keys = [k if k is None else k.encode("utf-16", "surrogatepass").decode("utf-16", "replace") for k in keys]
    sizes = data.draw(st.lists(st.integers(0, 40), min_size=len(keys), max_size=len(keys))) if with_sizes else None
    base = bc.TopicLayout(1, [bc.Segment(0, 0, 0xFFFF, bc.Buckets.equal_width(n))])
    target = data.draw(st.sampled_from([bc.Buckets.equal_width(n), base, base.split(0)]))
    targets, _, hashes = _targets(target, keys)
    kwargs = dict(max_messages=max_messages, policy=policy)
    if sizes is not None:
        kwargs["max_bytes"] = max_bytes
    expected = ref_entries(
        targets, {}, hashes, sizes or [0] * len(keys), max_messages, max_bytes if sizes is not None else 131072, policy
    )
    table = bc.bucket_entries(keys, target, sizes=sizes, **kwargs)
    assert table_rows(table) == expected
    # the streaming batcher over the same sends gives the same entries, with payloads in send order
    batcher = bc.EntryBucketBatcher(target, **kwargs)
    payloads = [bytes(s) for s in (sizes or [0] * len(keys))]
    got: list[object] = []
    half = len(keys) // 2
    for k, p in zip(keys[:half], payloads[:half], strict=False):
        got += batcher.add(k, p)
    got += batcher.add_many(keys[half:], payloads[half:])
    got += batcher.flush()
    assert entry_rows(got) == expected  # without sizes the payloads are empty: nbytes 0 both ways
    for e in got:
        assert e.payloads == [payloads[int(i)] for i in e.message_indices]  # type: ignore[attr-defined]


def test_batcher_keyword_and_defaults() -> None:
    batcher = bc.EntryBucketBatcher(
        buckets=bc.Buckets.equal_width(2), max_messages=2, max_bytes=131072, policy="per_bucket"
    )
    assert batcher.add("a", b"1") == []
    (entry,) = batcher.add("a", b"22")
    assert isinstance(entry, bc.Entry)
    assert entry.message_indices.tolist() == [0, 1] and entry.nbytes == 3
    assert batcher.add_many(["key-1"], [b"x"]) == []
    (last,) = batcher.flush()
    assert last.message_indices.tolist() == [2]
    assert batcher.flush() == []


# --- dispatch -------------------------------------------------------------------------------------


def ref_owner_index(n: int, k: int, bucket: int) -> int:
    for j in range(k):
        if j * n // k <= bucket < (j + 1) * n // k:
            return j
    return -1


def test_selector_spread_and_owner_of() -> None:
    b = bc.Buckets.equal_width(5)
    sel = bc.EntryBucketSelector(b)
    assert sel.consumers == () and sel.owners() == [None] * 5
    assert sel.owner_of(0) is None
    for name, cid in (("c", 2), ("a", 9), ("b", 1), ("a", 3)):
        sel.add_consumer(name, cid)
    assert sel.consumers == (("a", 3), ("a", 9), ("b", 1), ("c", 2))
    owners = sel.owners()
    assert owners == [sel.consumers[ref_owner_index(5, 4, i)] for i in range(5)]
    for h in (0, 13106, 13107, 39321, 0xFFFF):
        assert sel.owner_of(h) == sel.consumers[ref_owner_index(5, 4, ref_bucket_of(b.splits, h))]
    sel.remove_consumer("a", 9)
    assert sel.consumers == (("a", 3), ("b", 1), ("c", 2))
    assert sel.owners() == [sel.consumers[ref_owner_index(5, 3, i)] for i in range(5)]


def test_selector_validate() -> None:
    sel = bc.EntryBucketSelector(bc.Buckets.equal_width(4))
    sel.validate([0x4000, 0x8000, 0xC000])
    with pytest.raises(bc.StaleLayoutError) as info:
        sel.validate([0x4000, 0x8000])
    assert isinstance(info.value, bc.BucketcoreError) and isinstance(info.value, ValueError)
    with pytest.raises(bc.StaleLayoutError):
        sel.validate([0x4000, 0x8001, 0xC000])


def test_route_entries_indexes_into_consumers() -> None:
    b = bc.Buckets.equal_width(4)
    sel = bc.EntryBucketSelector(b)
    hash_min = np.array([0, 0x4000, 0x8000, 0xFFFF, 0x3FFF], dtype=np.uint16)
    assert bc.route_entries(sel, hash_min).tolist() == [-1] * 5  # no consumer
    sel.add_consumer("b", 1)
    sel.add_consumer("a", 1)
    out = bc.route_entries(sel, hash_min)
    assert isinstance(out, np.ndarray)
    expected = [ref_owner_index(4, 2, ref_bucket_of(b.splits, int(h))) for h in hash_min]
    assert out.tolist() == expected
    assert [sel.consumers[i] for i in out] == [sel.owner_of(int(h)) for h in hash_min]
    # unstamped entries route by the bucket of the key's low 16 bits
    key_hash = np.array([VECTORS[k] for k in ("a", "key-1", "ключ", "some-routing-key", "")], dtype=np.uint32)
    stamped = np.array([True, False, True, False, False])
    out = bc.route_entries(sel, hash_min, key_hash=key_hash, stamped=stamped)
    routed_by = [int(h) if s else int(k) & 0xFFFF for h, k, s in zip(hash_min, key_hash, stamped, strict=False)]
    assert out.tolist() == [ref_owner_index(4, 2, ref_bucket_of(b.splits, h)) for h in routed_by]


def test_fits_one_bucket() -> None:
    b = bc.Buckets.equal_width(4)
    lo = np.array([0, 0x3FFF, 0x4000, 0x1000, 0xC000], dtype=np.uint16)
    hi = np.array([0x3FFF, 0x4000, 0x7FFF, 0x1000, 0xFFFF], dtype=np.uint16)
    out = bc.fits_one_bucket(b, lo, hi)
    assert isinstance(out, np.ndarray) and out.dtype == np.bool_
    assert out.tolist() == [
        ref_bucket_of(b.splits, int(x)) == ref_bucket_of(b.splits, int(y)) for x, y in zip(lo, hi, strict=False)
    ]


def test_dispatcher_delivers_an_offered_entry_to_its_bucket_owner() -> None:
    d = bc.Dispatcher(bc.Buckets.equal_width(2))
    d.add_consumer("a", 1)
    d.add_consumer("b", 2)  # sorted (name, id): "a" owns bucket 0, "b" bucket 1
    assert d.offer([10, 11], hash_min=[0x0005, 0x8001]) == 2
    batches = d.poll()
    assert sorted(batches) == [("a", 1), ("b", 2)]
    assert batches[("a", 1)].entry_ids.tolist() == [10]
    assert batches[("b", 2)].entry_ids.tolist() == [11]


# --- controller -----------------------------------------------------------------------------------


def test_compute_assignment_exclusive_round_robin() -> None:
    layout = bc.TopicLayout(
        5, [bc.Segment(i, i * 0x4000, i * 0x4000 + 0x3FFF, bc.Buckets.equal_width(4)) for i in range(4)]
    )
    result = bc.compute_assignment(layout, ["c2", "c1"])
    assert isinstance(result, dict) and set(result) == {"c1", "c2"}
    for a in result.values():
        assert isinstance(a, bc.Assignment) and a.layout_epoch == 5
        assert isinstance(a.segments, tuple)
        for s in a.segments:
            assert isinstance(s, bc.AssignedSegment)
            assert s.bucket_ranges == () or list(s.bucket_ranges) == []
            assert s.segment_topic == layout.segment_topic(s.segment_id)
            assert (s.hash_start, s.hash_end) == (
                layout.segment(s.segment_id).hash_start,
                layout.segment(s.segment_id).hash_end,
            )
    # segments sorted by hash_start, consumers by name, whole segments round-robin
    assert [s.segment_id for s in result["c1"].segments] == [0, 2]
    assert [s.segment_id for s in result["c2"].segments] == [1, 3]


def test_compute_assignment_surplus_shares_segments_with_full_boundary_lists() -> None:
    layout = bc.TopicLayout(
        2,
        [bc.Segment(0, 0, 0x7FFF, bc.Buckets.equal_width(2)), bc.Segment(1, 0x8000, 0xFFFF, bc.Buckets.equal_width(3))],
    )
    result = bc.compute_assignment(layout, ["e", "d", "c", "b", "a", "f"], drained=frozenset())
    # a→0, b→1; surplus c→0, d→1, e→(0 full at 2)→1, f: all at capacity → idle
    assert [s.segment_id for s in result["a"].segments] == [0]
    assert [s.segment_id for s in result["b"].segments] == [1]
    assert [s.segment_id for s in result["c"].segments] == [0]
    assert [s.segment_id for s in result["d"].segments] == [1]
    assert [s.segment_id for s in result["e"].segments] == [1]
    assert result["f"].segments == ()
    for name in "ac":
        (s,) = result[name].segments
        assert list(map(tuple, s.bucket_ranges)) == ref_ranges(list(bc.Buckets.equal_width(2).splits))
    for name in "bde":
        (s,) = result[name].segments
        assert list(map(tuple, s.bucket_ranges)) == ref_ranges(ref_equal_width(3))
        assert s == result["b"].segments[0]  # identical for every sharer


def test_compute_assignment_waits_for_parents_to_drain() -> None:
    layout = bc.TopicLayout(0, [bc.Segment(0, 0, 0xFFFF, bc.Buckets.equal_width(4))]).split(0)
    kids = [s.segment_id for s in layout.active_segments]
    before = bc.compute_assignment(layout, ["a"])
    assert [s.segment_id for s in before["a"].segments] == [0]  # only the sealed parent
    after = bc.compute_assignment(layout, ["a"], drained=frozenset({0}))
    assert sorted(s.segment_id for s in after["a"].segments) == sorted(kids)  # the drained parent retires


# --- consumer -------------------------------------------------------------------------------------


def _assigned(segment_id: int, ranges: tuple[tuple[int, int], ...] = ()) -> bc.AssignedSegment:
    return bc.AssignedSegment(segment_id, 0, 0xFFFF, f"segment://t/ns/topic/0000-ffff-{segment_id}", ranges)


def test_stream_consumer_state_apply_delivered_ack_cumulative() -> None:
    state = bc.StreamConsumerState()
    shared = bc.Assignment(3, (_assigned(1, tuple(ref_ranges([0x8000]))),))
    actions = state.apply(shared)
    assert len(actions) == 1
    (subscribe,) = actions
    assert subscribe.segment_id == 1  # type: ignore[attr-defined]
    assert state.apply(shared) == []  # re-applying an unchanged assignment changes nothing
    assert state.apply(bc.Assignment(2, ())) == []  # an older epoch is ignored
    for message_id in (5, 7, 9):
        state.delivered(1, message_id)
    acks = state.ack_cumulative({1: 8})
    # shared segment: the cumulative ack becomes individual acks of the delivered, unacked ids <= 8
    assert len(acks) == 1
    (ack,) = acks
    assert ack.segment_id == 1 and tuple(ack.message_ids) == (5, 7)  # type: ignore[attr-defined]
    assert state.ack_cumulative({1: 8}) == []


def test_stream_consumer_state_exclusive_is_cumulative() -> None:
    state = bc.StreamConsumerState()
    state.apply(bc.Assignment(1, (_assigned(4),)))
    for message_id in (10, 20, 30):
        state.delivered(4, message_id)
    (ack,) = state.ack_cumulative({4: 25})
    assert ack.segment_id == 4 and ack.message_id == 20  # type: ignore[attr-defined]


# --- every API argument by the keyword the README gives it -------------------------------------------------


def test_every_argument_by_its_section_4_keyword() -> None:
    b = bc.Buckets.equal_width(n=4)
    assert bc.murmur3_32(keys=["a"], errors="strict").tolist() == [VECTORS["a"]]
    assert bc.hash_keys(keys=["a"], errors="replace").raw.tolist() == [VECTORS["a"]]
    assert bc.split_hash(raw=0x3C2569B2) == (0x3C25, 0x69B2)
    assert bc.Buckets(splits=(1,)).splits == (1,)
    assert bc.Buckets.balanced(bucket_hashes=[1], n=2, weights=None).count == 2
    assert b.bucket_of(bucket_hashes=[0x4000]).tolist() == [1]
    assert b.canonical_hash(bucket_index=1) == 0x4000
    assert bc.buckets_for_budget(budget=8, segment_count=2) == 4
    seg = bc.Segment(
        segment_id=0, hash_start=0, hash_end=0xFFFF, buckets=b, state="active", parent_ids=(), legacy_topic_name=None
    )
    layout = bc.TopicLayout(epoch=1, segments=[seg], topic="persistent://t/ns/topic")
    assert layout.segment(segment_id=0) == seg
    assert layout.route(key_hashes=["a"]).tolist() == [0]
    split = layout.split(segment_id=0)
    ids = [s.segment_id for s in split.active_segments]
    assert split.merge(id_a=ids[0], id_b=ids[1]).epoch == 3
    assert layout.rebucket(segment_id=0, buckets=bc.Buckets()).epoch == 2
    assert layout.segment_topic(segment_id=0) == "segment://t/ns/topic/0000-ffff-0"
    table = bc.bucket_entries(
        keys_or_hashes=["a"],
        layout_or_buckets=layout,
        sizes=None,
        max_messages=1000,
        max_bytes=131072,
        policy="shared",
        encrypted=False,
    )
    assert len(table) == 1
    batcher = bc.EntryBucketBatcher(buckets=b, max_messages=1000, max_bytes=131072, policy="shared")
    assert batcher.add(key="a", payload=b"") == [] and batcher.add_many(keys=["a"], payloads=[b""]) == []
    assert len(batcher.flush()) == 1
    sel = bc.EntryBucketSelector(buckets=b)
    sel.add_consumer(name="a", consumer_id=1)
    assert sel.owner_of(hash=5) == ("a", 1)
    sel.validate(declared_splits=b.splits)
    assert bc.route_entries(selector=sel, hash_min=[1], key_hash=None, stamped=None).tolist() == [0]
    sel.remove_consumer(name="a", consumer_id=1)
    assert bc.fits_one_bucket(buckets=b, hash_min=[1], hash_max=[2]).tolist() == [True]
    dispatcher = bc.Dispatcher(buckets=b)
    dispatcher.add_consumer(name="a", consumer_id=1, declared=b.splits)
    assert dispatcher.offer(entry_ids=[0], hash_min=[1]) == 1
    assert dispatcher.poll(name="a", consumer_id=1).entry_ids.tolist() == [0]
    result = bc.compute_assignment(layout=layout, consumer_names=["a"], drained=frozenset())
    a = bc.Assignment(layout_epoch=1, segments=result["a"].segments)
    assert a == result["a"]
    assert (
        bc.AssignedSegment(
            segment_id=0, hash_start=0, hash_end=0xFFFF, segment_topic=layout.segment_topic(0), bucket_ranges=()
        )
        == a.segments[0]
    )
    assert len(bc.StreamConsumerState().apply(assignment=a)) == 1
