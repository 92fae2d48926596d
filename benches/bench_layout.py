"""pytest-benchmark suite for boundary lists and routing: python -m pytest benches/bench_layout.py --benchmark-only

Groups: bucket_of over 1M hashes for N in {1, 4, 16, 256, 4096, 65536} (warm: table kept; cold: a
fresh boundary list per call, table build included; baseline: bisect in a Python loop), route over
1M pre-hashed keys with 1, 16 and 256 active segments and a legacy layout, Buckets.balanced over 10M
hashes. BUCKETCORE_BENCH_N / BUCKETCORE_BENCH_BALANCED_N shrink the columns for a quick run.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import bucketcore as bc
from bucketcore.harness import tiled_layout
from bucketcore.harness.baselines import bisect_all, python_route
from bucketcore.harness.workloads import prehashed_keys, uniform_hashes

N = int(os.environ.get("BUCKETCORE_BENCH_N", 1_000_000))
BALANCED_N = int(os.environ.get("BUCKETCORE_BENCH_BALANCED_N", 10_000_000))
COUNTS = (1, 4, 16, 256, 4096, 65536)

HASHES = uniform_hashes(N)  # compare_layout.py's hashes
HASH_LIST = HASHES.tolist()


@pytest.fixture(params=COUNTS, ids=[f"N={n}" for n in COUNTS])
def buckets(request):
    return bc.Buckets.equal_width(request.param)


def test_bucket_of_bisect_loop(benchmark, buckets):
    benchmark.group = f"bucket_of N={buckets.count}"
    splits = list(buckets.splits)
    out = benchmark.pedantic(bisect_all, args=(splits, HASH_LIST), rounds=3)
    assert len(out) == N


def test_bucket_of_warm(benchmark, buckets):
    benchmark.group = f"bucket_of N={buckets.count}"
    expected = np.searchsorted(buckets.splits_array, HASHES, side="right")
    out = benchmark(buckets.bucket_of, HASHES)
    assert np.array_equal(out, expected)


def test_bucket_of_cold(benchmark, buckets):
    benchmark.group = f"bucket_of N={buckets.count}"
    splits = buckets.splits
    # a fresh (already validated) list per round: the lookup-table build is inside the timing
    out = benchmark.pedantic(
        lambda b: b.bucket_of(HASHES), setup=lambda: ((bc.Buckets._trusted(splits),), {}), rounds=20
    )
    assert out.size == N


def test_bucket_of_int64_input(benchmark, buckets):
    benchmark.group = f"bucket_of N={buckets.count}"
    wide = HASHES.astype(np.int64)
    benchmark(buckets.bucket_of, wide)


KEY_HASHES = prehashed_keys(N)  # compare_layout.py's pre-hashed keys, 1% keyless
LAYOUTS = {
    "1 active": tiled_layout(1),
    "16 active": tiled_layout(16),
    "256 active": tiled_layout(256),
    "16 legacy": tiled_layout(16, legacy=True),
}


@pytest.fixture(params=sorted(LAYOUTS))
def layout(request):
    return LAYOUTS[request.param]


def test_route_python_loop(benchmark, layout):
    benchmark.group = f"route {len(layout.active_segments)} segments{' legacy' if layout.is_legacy else ''}"
    seg_list, key_list = KEY_HASHES.segment_hash.tolist(), KEY_HASHES.has_key.tolist()
    raw_list = KEY_HASHES.raw.tolist()

    def loop():
        return python_route(layout, raw_list, seg_list, key_list)

    benchmark.pedantic(loop, rounds=3)


def test_route_index(benchmark, layout):
    benchmark.group = f"route {len(layout.active_segments)} segments{' legacy' if layout.is_legacy else ''}"
    index, _ = benchmark(layout.route_index, KEY_HASHES)
    assert index.size == N


def test_route(benchmark, layout):
    benchmark.group = f"route {len(layout.active_segments)} segments{' legacy' if layout.is_legacy else ''}"
    ids = benchmark(layout.route, KEY_HASHES)
    assert ids.dtype == np.int64


BALANCED_HASHES = uniform_hashes(BALANCED_N, seed=3)  # compare_layout.py's balanced input


@pytest.mark.parametrize("count", [16, 256, 4096, 65535])
@pytest.mark.parametrize("weighted", ["counts", "float weights"])
def test_balanced(benchmark, count, weighted):
    benchmark.group = "balanced 10M"
    weights = np.random.default_rng(4).random(BALANCED_N) if weighted == "float weights" else None
    result = benchmark.pedantic(
        bc.Buckets.balanced, args=(BALANCED_HASHES, count), kwargs={"weights": weights}, rounds=3
    )
    assert result.count == count
