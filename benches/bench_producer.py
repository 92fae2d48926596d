"""pytest-benchmark suite for the producer: python -m pytest benches/bench_producer.py --benchmark-only

1M UUID keys (BUCKETCORE_BENCH_N), a 4-segment layout with N = 16 buckets per segment, both
policies, list[str] and Arrow input, and the pure-Python reference batcher on the same keys in
the same run (group "producer"). The streaming batcher is measured per send on a smaller stream
(group "batcher").
"""

from __future__ import annotations

import os

import pytest

import bucketcore as bc
from bucketcore.harness import tiled_layout, uuid_keys
from bucketcore.harness.baselines import reference_batches

N = int(os.environ.get("BUCKETCORE_BENCH_N", 1_000_000))
N_STREAM = min(N, 100_000)
KEYS = uuid_keys(N)
LAYOUT = tiled_layout(4, 16)
POLICIES = ("shared", "per_bucket")


@pytest.fixture(params=["list", "arrow"])
def keys(request):
    if request.param == "arrow":
        pa = pytest.importorskip("pyarrow")
        return pa.array(KEYS, type=pa.string())
    return KEYS


@pytest.mark.parametrize("policy", POLICIES)
def test_bucket_entries(benchmark, keys, policy):
    benchmark.group = "producer"
    table = benchmark(bc.bucket_entries, keys, LAYOUT, policy=policy)
    assert int(table.count.sum()) == N


@pytest.mark.parametrize("policy", POLICIES)
def test_bucket_entries_from_hashes(benchmark, policy):
    benchmark.group = "producer"
    kh = bc.hash_keys(KEYS)
    benchmark(bc.bucket_entries, kh, LAYOUT, policy=policy)


@pytest.mark.parametrize("policy", POLICIES)
def test_reference_batcher(benchmark, policy):
    benchmark.group = "producer"
    entries = benchmark.pedantic(reference_batches, args=(KEYS, LAYOUT, 1000, policy), rounds=2, iterations=1)
    assert sum(len(e[4]) for e in entries) == N


def test_batcher_add_many_chunks_of_1000(benchmark):
    benchmark.group = "batcher"
    keys = KEYS[:N_STREAM]
    payloads = [b"x" * 16] * N_STREAM

    def run():
        batcher = bc.EntryBucketBatcher(LAYOUT)
        out = []
        for i in range(0, N_STREAM, 1000):
            out += batcher.add_many(keys[i : i + 1000], payloads[i : i + 1000])
        return out + batcher.flush()

    entries = benchmark(run)
    assert sum(e.count for e in entries) == N_STREAM


def test_batcher_add_one_by_one(benchmark):
    benchmark.group = "batcher"
    keys = KEYS[: N_STREAM // 10]
    payload = b"x" * 16

    def run():
        batcher = bc.EntryBucketBatcher(LAYOUT)
        out = []
        for key in keys:
            out += batcher.add(key, payload)
        return out + batcher.flush()

    entries = benchmark.pedantic(run, rounds=3, iterations=1)
    assert sum(e.count for e in entries) == len(keys)
