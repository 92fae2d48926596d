"""The threaded and fused producer paths give the one-pass result: KeyHashes columns read as given,
the fused hash-and-route kernel against the staged path (wide tables, a bad key in a later chunk),
routing split over threads, and the two-thread pipeline whichever thread takes each step (the first
bad key named whichever thread found it, a legacy str handed to one thread)."""

from __future__ import annotations

import random
import sys
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from test_entries_match_the_reference_batcher import RefBatcher, as_tuples

import bucketcore as bc
from bucketcore.hashing import KeyHashes
from bucketcore.layout import Buckets, Segment, TopicLayout
from bucketcore.producer import bucket_entries


@pytest.mark.parametrize("policy", ["shared", "per_bucket"])
def test_key_hashes_columns_read_as_given(policy: str) -> None:
    # hand-made KeyHashes whose columns disagree with raw: segment_hash routes, bucket_hash is
    # looked up and stamped (raw is read only by a legacy layout), over several chunks
    rng = np.random.default_rng(11)
    n = 3500
    has = rng.random(n) > 0.04
    seg = np.where(has, rng.integers(0, 1 << 16, n), 0).astype(np.uint16)
    bkt = np.where(has, rng.integers(0, 1 << 16, n), 0).astype(np.uint16)
    raw = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)  # unrelated to both
    sizes = rng.integers(0, 400, n)
    layout = TopicLayout(
        4,
        [
            Segment(3, 0, 0x51FF, Buckets([0x10, 0x8000, 0x8001])),
            Segment(9, 0x5200, 0xC0FF, Buckets.equal_width(7)),
            Segment(4, 0xC100, 0xFFFF, Buckets()),
        ],
    )
    kw: dict[str, Any] = dict(max_messages=40, max_bytes=5000, policy=policy, round_robin=2)
    got = bucket_entries(KeyHashes(raw, seg, bkt, has), layout, sizes=sizes, **kw)
    ref = RefBatcher(layout, **kw)
    expected = []
    for i in range(n):
        expected += ref.add_hash(int(seg[i]) << 16 | int(bkt[i]) if has[i] else None, int(sizes[i]))
    expected += ref.flush()
    assert as_tuples(got) == expected
    assert got.next_round_robin == ref.rr % 3


@pytest.mark.parametrize("legacy", [False, True])
def test_fused_kernel_matches_hashes_path(pa: ModuleType, legacy: bool) -> None:
    """Keys go through the fused hash+route+group kernel, KeyHashes through the routing one (and the
    staged one for a legacy layout): all must give the same table, across chunk boundaries, Arrow
    chunks, keyless keys and both routings."""
    rng = random.Random(5)
    keys = [
        None if rng.random() < 0.03 else f"k{rng.randrange(10**6)}-ключ"[: rng.randrange(1, 12)] for _ in range(5000)
    ]
    names = [f"persistent://t/ns/topic-partition-{i}" if legacy else None for i in range(3)]
    layout = TopicLayout(
        2,
        [
            Segment(7, 0x9000, 0xFFFF, Buckets.equal_width(5), legacy_topic_name=names[0]),
            Segment(2, 0, 0x3FFF, Buckets([1, 0x8000]), legacy_topic_name=names[1]),
            Segment(5, 0x4000, 0x8FFF, Buckets(), legacy_topic_name=names[2]),
        ],
    )
    kw: dict[str, Any] = dict(max_messages=30, policy="shared", round_robin=2)
    staged = bucket_entries(bc.hash_keys(keys), layout, **kw)
    arrow = pa.chunked_array([keys[:1500], keys[1500:1501], keys[1501:]], type=pa.string())
    for column in (keys, arrow, np.array(keys, dtype=object)):
        fused = bucket_entries(column, layout, **kw)
        assert as_tuples(fused) == as_tuples(staged)
        assert fused.next_round_robin == staged.next_round_robin


def test_fused_kernel_names_bad_key_in_later_chunk() -> None:
    keys = ["a"] * 3000 + ["\udcff"] + ["b"] * 10
    with pytest.raises(bc.KeyEncodingError, match="index 3000"):
        bucket_entries(keys, Buckets.equal_width(4))
    with pytest.raises(TypeError, match="index 2500 has type int"):
        bucket_entries(keys[:2500] + [7], Buckets.equal_width(4))


@pytest.mark.parametrize("legacy", [False, True])
def test_threaded_routing_matches_one_pass(pa: ModuleType, legacy: bool) -> None:
    """threads > 1: parts hashed and routed apart, keyless rotation placed afterwards in send
    order, then one grouping pass; the table must equal the one-pass kernel's."""
    rng = random.Random(9)
    keys = [None if rng.random() < 0.05 else f"user-{rng.randrange(5000)}" for _ in range(9000)]
    names = [f"persistent://t/ns/topic-partition-{i}" if legacy else None for i in range(2)]
    layout = TopicLayout(
        3,
        [
            Segment(4, 0, 0x6FFF, Buckets.equal_width(3), legacy_topic_name=names[0]),
            Segment(8, 0x7000, 0xFFFF, Buckets([9, 0x9000]), legacy_topic_name=names[1]),
        ],
    )
    kw: dict[str, Any] = dict(max_messages=25, policy="per_bucket", round_robin=5)
    one = bucket_entries(keys, layout, threads=1, **kw)
    for column in (keys, pa.chunked_array([keys[:4000], keys[4000:4500], keys[4500:]])):
        for threads in (2, 3, 7):
            many = bucket_entries(column, layout, threads=threads, **kw)
            assert as_tuples(many) == as_tuples(one)
            assert many.next_round_robin == one.next_round_robin
    single = bucket_entries(keys, Buckets.equal_width(4), threads=3, max_messages=25)
    assert as_tuples(single) == as_tuples(bucket_entries(keys, Buckets.equal_width(4), threads=1, max_messages=25))


# How far the calling thread takes each pipeline step: the balancing rule (None), or forced in turn.
PIPELINE_LEVELS = [None, ("left",), ("hashed",), ("routed",), ("left", "routed", "hashed", "routed")]


@pytest.mark.parametrize("levels", PIPELINE_LEVELS)
@pytest.mark.parametrize("policy", ["shared", "per_bucket"])
def test_pipeline_over_many_steps_matches_one_pass(
    pa: ModuleType, monkeypatch: pytest.MonkeyPatch, policy: str, levels: tuple[str, ...] | None
) -> None:
    """threads=2: the calling thread reads step k+1 while a worker groups step k, after doing
    what the calling thread left of it (everything, routing, or placing the keyless); with short
    steps (not a multiple of the kernel's chunk) the hand-offs, the keyless rotation and the
    byte limits must carry across steps exactly as in the one-pass kernel."""
    from bucketcore import producer

    monkeypatch.setattr(producer, "_PIPELINE_STEP", 777)
    monkeypatch.setattr(producer, "_PIPELINE_LEVELS", levels)
    rng = random.Random(17)
    keys = [None if rng.random() < 0.1 else f"user-{rng.randrange(3000)}" for _ in range(12000)]
    sizes = [rng.randrange(0, 900) for _ in keys]
    layout = TopicLayout(
        2,
        [
            Segment(1, 0, 0x3FFF, Buckets.equal_width(5)),
            Segment(2, 0x4000, 0xBFFF, Buckets([7, 0x7000])),
            Segment(3, 0xC000, 0xFFFF, Buckets.equal_width(2)),
        ],
    )
    for target in (layout, Buckets.equal_width(6)):
        kw: dict[str, Any] = dict(max_messages=40, max_bytes=5000, policy=policy, round_robin=2, sizes=sizes)
        one = bucket_entries(keys, target, threads=1, **kw)  # no pipeline: the levels do not apply
        for column in (keys, tuple(keys), pa.chunked_array([keys[:5000], keys[5000:5001], keys[5001:]])):
            two = bucket_entries(column, target, threads=2, **kw)
            assert as_tuples(two) == as_tuples(one)
            assert two.next_round_robin == one.next_round_robin
    with pytest.raises(bc.KeyEncodingError, match="index 9000"):
        bucket_entries(keys[:9000] + ["\ud800"] + keys[9000:], layout, threads=2)
    with pytest.raises(TypeError, match="index 5432 has type float"):
        bucket_entries(keys[:5432] + [1.5] + keys[5432:], layout, threads=2)


def test_pipeline_names_first_bad_key_whichever_thread_found_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Steps alternate between the worker (left to it whole) and the calling thread: a bad key
    in an earlier step wins over one in a later step, whoever reads which."""
    from bucketcore import producer

    monkeypatch.setattr(producer, "_PIPELINE_STEP", 777)
    monkeypatch.setattr(producer, "_PIPELINE_LEVELS", ("left", "hashed"))  # steps alternate
    keys: list[Any] = [f"k{i}" for i in range(6000)]
    worker_first = list(keys)
    worker_first[2 * 777 + 5] = 1.5  # step 2: the worker describes it
    worker_first[3 * 777 + 5] = "\ud800"  # step 3: the calling thread hashes it
    with pytest.raises(TypeError, match=f"index {2 * 777 + 5} has type float"):
        bucket_entries(worker_first, Buckets.equal_width(4), threads=2)
    caller_first = list(keys)
    caller_first[1 * 777 + 5] = "\ud800"
    caller_first[2 * 777 + 6] = 1.5
    with pytest.raises(bc.KeyEncodingError, match=f"index {777 + 5}"):
        bucket_entries(caller_first, Buckets.equal_width(4), threads=2)
    surrogate_in_worker = list(keys)
    surrogate_in_worker[4 * 777 + 1] = "\udfff"
    with pytest.raises(bc.KeyEncodingError, match=f"index {4 * 777 + 1}"):
        bucket_entries(surrogate_in_worker, Buckets.equal_width(4), threads=2)
    replaced = bucket_entries(surrogate_in_worker, Buckets.equal_width(4), threads=2, errors="replace")
    assert as_tuples(replaced) == as_tuples(
        bucket_entries(surrogate_in_worker, Buckets.equal_width(4), threads=1, errors="replace")
    )


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="legacy (not ready) str exist only before 3.12")
@pytest.mark.parametrize("level", ["left", "hashed", "routed"])
def test_pipeline_hands_a_legacy_str_to_one_thread(monkeypatch: pytest.MonkeyPatch, level: str) -> None:
    """A legacy str is not ready until the GIL holder readies it: the worker, which reads keys
    without the GIL, must not, nor the calling thread while the worker may read the same object;
    the call then runs on one thread, with the same entries."""
    from legacy_str import TEXT, legacy_str

    from bucketcore import producer

    monkeypatch.setattr(producer, "_PIPELINE_STEP", 777)
    keys: list[Any] = [f"k{i}" for i in range(3000)]
    keys[2000] = legacy_str()
    monkeypatch.setattr(producer, "_PIPELINE_LEVELS", (level,))
    two = bucket_entries(keys, Buckets.equal_width(4), threads=2, max_messages=30)
    keys[2000] = TEXT
    assert as_tuples(two) == as_tuples(bucket_entries(keys, Buckets.equal_width(4), threads=1, max_messages=30))


def test_threaded_routing_names_first_bad_key() -> None:
    keys = ["a"] * 5000 + [3.5] + ["b"] * 5000 + [b"\xff", None, 7]
    with pytest.raises(TypeError, match="index 5000 has type float"):
        bucket_entries(keys, Buckets.equal_width(4), threads=3)
    with pytest.raises(ValueError, match="threads must be at least 1"):
        bucket_entries(["a"], Buckets(), threads=0)


def test_fused_kernel_wide_tables_match_staged_path() -> None:
    """Over 256 buckets the router keeps 16-bit tables (8-bit ones otherwise): both widths must
    route exactly like the staged path."""
    rng = random.Random(21)
    keys = [None if rng.random() < 0.02 else f"k-{rng.randrange(10**6)}" for _ in range(6000)]
    for n_buckets in (256, 257, 4096):
        layout = TopicLayout(
            1,
            [Segment(0, 0, 0x7FFF, Buckets.equal_width(n_buckets)), Segment(1, 0x8000, 0xFFFF, Buckets.equal_width(3))],
        )
        fused = bucket_entries(keys, layout, max_messages=50, round_robin=1)
        staged = bucket_entries(bc.hash_keys(keys), layout, max_messages=50, round_robin=1)
        assert as_tuples(fused) == as_tuples(staged)
        assert fused.next_round_robin == staged.next_round_robin
