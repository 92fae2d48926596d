"""bucket_histogram: per-segment bucket-hash histograms that add, serialise, and plan like raw hashes."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bucketcore as bc
from bucketcore.histogram import BucketHistogram, HashHistogram, bucket_histogram


def two_segments() -> bc.TopicLayout:
    return bc.TopicLayout(3, [bc.Segment(0, 0, 0x3FFF), bc.Segment(1, 0x4000, 0xFFFF, bc.Buckets.equal_width(4))])


def keys_of(n: int, prefix: str = "k") -> list[str]:
    return [f"{prefix}{i}" for i in range(n)]


def routed_bucket_hashes(keys, layout, segment_id):
    kh = bc.hash_keys(keys)
    seg = np.asarray(layout.route(kh))
    keep = (seg == segment_id) & np.asarray(kh.has_key)
    return np.asarray(kh.bucket_hash)[keep], keep


# --- what it counts ---------------------------------------------------------------------------------


def test_each_segment_counts_exactly_the_bucket_hashes_routed_to_it() -> None:
    layout = two_segments()
    keys = keys_of(5000)
    hist = bucket_histogram(keys, layout)
    for sid in (0, 1):
        hashes, _ = routed_bucket_hashes(keys, layout, sid)
        assert np.array_equal(hist[sid].bins, np.bincount(hashes, minlength=65536))
        assert hist[sid].total == hashes.size
    assert hist.total == 5000 and hist.keyless == 0


def test_keyless_messages_are_counted_apart_and_never_binned() -> None:
    layout = two_segments()
    hist = bucket_histogram(["a", None, "b", None, None], layout)
    assert hist.keyless == 3
    assert hist.total == 2


def test_key_hashes_give_the_same_histogram_as_their_keys() -> None:
    layout = two_segments()
    keys = keys_of(3000)
    assert bucket_histogram(bc.hash_keys(keys), layout) == bucket_histogram(keys, layout)


def test_a_segment_no_key_reached_reads_as_empty_and_an_unknown_one_is_a_key_error() -> None:
    layout = bc.TopicLayout(1, [bc.Segment(7, 0, 0xFFFE), bc.Segment(9, 0xFFFF, 0xFFFF)])
    hist = bucket_histogram(["x"], layout)
    assert hist.reached() == (7,)
    assert hist[9].total == 0 and not hist[9].bins.any()
    assert list(hist) == [7, 9] and len(hist) == 2
    with pytest.raises(KeyError, match="segment 8 is not an active segment"):
        hist[8]


def test_sealed_segments_are_not_part_of_the_histogram() -> None:
    layout = two_segments().split(1)
    hist = bucket_histogram(keys_of(100), layout)
    assert hist.segment_ids == tuple(s.segment_id for s in layout.active_segments)
    assert 1 not in hist.segment_ids


def test_weights_sum_per_bin_integers_exactly() -> None:
    layout = two_segments()
    keys = keys_of(2000)
    sizes = np.arange(2000, dtype=np.int64) * 1_000_000_007
    hist = bucket_histogram(keys, layout, weights=sizes)
    assert hist.measure == "weight" and hist.dtype == np.int64
    for sid in (0, 1):
        hashes, keep = routed_bucket_hashes(keys, layout, sid)
        expected = np.zeros(65536, dtype=np.int64)
        np.add.at(expected, hashes, sizes[keep])
        assert np.array_equal(hist[sid].bins, expected)


def test_bins_are_read_only() -> None:
    hist = bucket_histogram(keys_of(10), two_segments())
    with pytest.raises(ValueError):
        hist[0].bins[0] = 5


# --- adding ---------------------------------------------------------------------------------------


def test_histograms_of_parts_add_up_to_the_histogram_of_the_whole() -> None:
    layout = two_segments()
    keys = keys_of(4000) + [None] * 3
    whole = bucket_histogram(keys, layout)
    parts = [bucket_histogram(keys[i : i + 700], layout) for i in range(0, len(keys), 700)]
    assert sum(parts) == whole
    assert parts[0] + (parts[1] + parts[2]) == (parts[0] + parts[1]) + parts[2]


def test_histograms_of_different_layouts_do_not_add() -> None:
    a = bucket_histogram(["x"], two_segments())
    b = bucket_histogram(["x"], bc.TopicLayout(1, [bc.Segment(0, 0, 0xFFFF)]))
    with pytest.raises(bc.InvalidLayoutError, match="different layouts"):
        a + b


def test_counts_and_weights_do_not_add() -> None:
    layout = two_segments()
    a = bucket_histogram(["x"], layout)
    b = bucket_histogram(["x"], layout, weights=[3])
    c = bucket_histogram(["x"], layout, weights=[3.5])
    with pytest.raises(TypeError, match="different measures"):
        a + b
    with pytest.raises(TypeError, match="different measures"):
        b + c


def test_adding_past_int64_is_refused() -> None:
    layout = bc.TopicLayout(1, [bc.Segment(0, 0, 0xFFFF)])
    big = bucket_histogram(["x"], layout, weights=[2**62])
    with pytest.raises(ValueError, match="overflows int64"):
        big + big


# --- serialisation --------------------------------------------------------------------------------


@pytest.mark.parametrize("weights", [None, "int", "float"])
def test_to_bytes_and_pickle_round_trip(weights) -> None:
    layout = two_segments()
    keys = keys_of(500) + [None]
    w = None if weights is None else (np.arange(501) if weights == "int" else np.linspace(0, 1, 501))
    hist = bucket_histogram(keys, layout, weights=w)
    assert BucketHistogram.from_bytes(hist.to_bytes()) == hist
    assert pickle.loads(pickle.dumps(hist)) == hist
    assert pickle.loads(pickle.dumps(hist[1])) == hist[1]


def test_damaged_bytes_are_refused_with_what_is_wrong() -> None:
    data = bucket_histogram(keys_of(50), two_segments()).to_bytes()
    with pytest.raises(ValueError, match="bad magic"):
        BucketHistogram.from_bytes(b"nope" + data)
    with pytest.raises(ValueError, match="bytes of bins"):
        BucketHistogram.from_bytes(data[:-8])
    negative = bytearray(data)
    negative[-8:] = (-1).to_bytes(8, "little", signed=True)
    with pytest.raises(ValueError, match=r"segment 1: bin of hash 0xffff holds -1"):
        BucketHistogram.from_bytes(bytes(negative))
    with pytest.raises(TypeError):
        BucketHistogram.from_bytes("text")  # type: ignore[arg-type]


def test_hash_histogram_checks_its_bins() -> None:
    with pytest.raises(ValueError, match="65536 bins"):
        HashHistogram(np.zeros(10))
    with pytest.raises(ValueError, match=r"hash 0x0003 holds nan"):
        HashHistogram(np.where(np.arange(65536) == 3, np.nan, 0.0))
    with pytest.raises(TypeError, match="integers or floats"):
        HashHistogram(np.zeros(65536, dtype=bool))
    with pytest.raises(ValueError, match="measure"):
        HashHistogram(np.zeros(65536, dtype=np.int64), "bytes")


# --- bad input ------------------------------------------------------------------------------------


def test_bad_weights_are_named_by_index() -> None:
    layout = two_segments()
    with pytest.raises(ValueError, match="weight -2 at index 1 is negative"):
        bucket_histogram(["a", "b"], layout, weights=[1, -2])
    with pytest.raises(ValueError, match="weight inf at index 0"):
        bucket_histogram(["a", "b"], layout, weights=[float("inf"), 1.0])
    with pytest.raises(ValueError, match="one weight per hash"):
        bucket_histogram(["a", "b"], layout, weights=[1])
    with pytest.raises(TypeError, match="weight at index 1 is"):
        bucket_histogram(["a", "b"], layout, weights=[1, True])


def test_overflowing_integer_weights_name_the_segment_and_index() -> None:
    layout = bc.TopicLayout(1, [bc.Segment(0, 0, 0xFFFF)])
    with pytest.raises(ValueError, match="segment 0 overflows int64 at index 1"):
        bucket_histogram(["a", "b"], layout, weights=[2**62, 2**62 + 2**62 - 1])


def test_layout_must_be_a_topic_layout() -> None:
    with pytest.raises(TypeError, match="TopicLayout"):
        bucket_histogram(["a"], bc.Buckets())


# --- planning from a histogram ---------------------------------------------------------------------


def test_balanced_refuses_weights_with_a_histogram_and_a_multi_segment_histogram() -> None:
    hist = bucket_histogram(keys_of(100), two_segments())
    with pytest.raises(TypeError, match="weights must be None"):
        bc.Buckets.balanced(hist[0], 4, weights=np.ones(65536))
    with pytest.raises(TypeError, match=r"hist\[segment_id\]"):
        bc.Buckets.balanced(hist, 4)


def test_load_of_a_histogram_equals_load_of_its_hashes() -> None:
    layout = two_segments()
    keys = keys_of(3000)
    hist = bucket_histogram(keys, layout)
    hashes, _ = routed_bucket_hashes(keys, layout, 1)
    buckets = bc.Buckets.equal_width(5)
    assert np.array_equal(buckets.load(hist[1]).per_bucket, buckets.load(hashes).per_bucket)


def test_balanced_layout_plans_every_active_segment_from_its_histogram() -> None:
    layout = two_segments()
    keys = keys_of(3000)
    planned = bucket_histogram(keys, layout).balanced_layout(layout, 6)
    assert planned.epoch == layout.epoch
    for sid in (0, 1):
        hashes, _ = routed_bucket_hashes(keys, layout, sid)
        assert planned.segment(sid).buckets == bc.Buckets.balanced(hashes, 6)
    with pytest.raises(bc.InvalidLayoutError):
        bucket_histogram(keys, layout).balanced_layout(bc.TopicLayout(1, [bc.Segment(0, 0, 0xFFFF)]), 6)


layouts = st.sampled_from(
    [
        bc.TopicLayout(1, [bc.Segment(0, 0, 0xFFFF)]),
        bc.TopicLayout(1, [bc.Segment(0, 0, 0x7FFF), bc.Segment(1, 0x8000, 0xFFFF)]),
        bc.TopicLayout(2, [bc.Segment(0, 0, 0x0FFF), bc.Segment(1, 0x1000, 0x9FFF), bc.Segment(2, 0xA000, 0xFFFF)]),
    ]
)


@settings(max_examples=60, deadline=None)
@given(
    layout=layouts,
    keys=st.lists(st.one_of(st.none(), st.text(max_size=6), st.binary(max_size=6)), max_size=300),
    n=st.integers(1, 300),
    cuts=st.lists(st.integers(0, 300), max_size=4),
    weighted=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_planning_from_merged_histograms_equals_planning_from_raw_hashes(layout, keys, n, cuts, weighted, seed) -> None:
    keys = [k.encode("utf-8", "replace").decode("utf-8") if isinstance(k, str) else k for k in keys]
    weights = np.random.default_rng(seed).integers(0, 10_000, size=len(keys)) if weighted else None
    bounds = sorted({0, len(keys), *[min(c, len(keys)) for c in cuts]})
    parts = [
        bucket_histogram(keys[a:b], layout, weights=None if weights is None else weights[a:b])
        for a, b in zip(bounds, bounds[1:])
    ] or [bucket_histogram(keys, layout, weights=weights)]
    merged = sum(parts[1:], parts[0])
    kh = bc.hash_keys(keys)
    seg = np.asarray(layout.route(kh)).reshape(-1)
    has_key = np.asarray(kh.has_key).reshape(-1)
    bucket_hash = np.asarray(kh.bucket_hash).reshape(-1)
    for s in layout.active_segments:
        keep = (seg == s.segment_id) & has_key
        raw = bc.Buckets.balanced(bucket_hash[keep], n, weights=None if weights is None else weights[keep])
        assert bc.Buckets.balanced(merged[s.segment_id], n) == raw


# --- the plan command takes a histogram file ------------------------------------------------------


def test_plan_command_plans_a_histogram_file_like_its_keys(tmp_path) -> None:
    import json
    import subprocess
    import sys

    from bucketcore.harness import tiled_layout

    keys = [f"order-{i % 700}" for i in range(6000)] + [None] * 5
    (tmp_path / "keys.txt").write_text("".join(f"{k}\n" for k in keys if k is not None), encoding="utf-8")
    hist = bucket_histogram(keys[:2500], tiled_layout(2, 1)) + bucket_histogram(keys[2500:], tiled_layout(2, 1))
    (tmp_path / "week.bchist").write_bytes(hist.to_bytes())

    def plan(sample: str, *extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "bucketcore", "plan", sample, "--buckets", "8", "--json", *extra],
            capture_output=True,
            text=True,
        )

    from_hist = plan(str(tmp_path / "week.bchist"), "--segments", "2")
    from_keys = plan(str(tmp_path / "keys.txt"), "--segments", "2")
    assert from_hist.returncode == 0, from_hist.stderr
    hist_out, keys_out = json.loads(from_hist.stdout), json.loads(from_keys.stdout)
    assert hist_out["layout"] == keys_out["layout"]
    assert hist_out["segments"] == keys_out["segments"]
    assert hist_out["sample_keys"] == 6000 and hist_out["keyless_lines"] == 5
    other = plan(str(tmp_path / "week.bchist"), "--segments", "3")
    assert other.returncode == 2 and "counts active segments [0, 1]" in other.stderr
    weighted = bucket_histogram(keys, tiled_layout(2, 1), weights=np.ones(len(keys), dtype=np.int64))
    (tmp_path / "bytes.bchist").write_bytes(weighted.to_bytes())
    refused = plan(str(tmp_path / "bytes.bchist"), "--segments", "2")
    assert refused.returncode == 2 and "holds weights" in refused.stderr
