"""pytest-benchmark suite for hashing: python -m pytest benches/bench_hashing.py --benchmark-only"""

from __future__ import annotations

import os

import numpy as np
import pytest

import bucketcore as bc
from bucketcore.harness import short_keys, uuid_keys
from bucketcore.harness.baselines import mmh3_hashes

N = int(os.environ.get("BUCKETCORE_BENCH_N", 1_000_000))
KEYS = {"uuid": uuid_keys(N), "short": short_keys(N)}


@pytest.fixture(params=sorted(KEYS))
def keys(request):
    return KEYS[request.param]


def test_mmh3_comprehension(benchmark, keys):
    benchmark.group = "hashing"
    pytest.importorskip("mmh3", reason="the baseline needs mmh3 (the bench extra)")
    benchmark(mmh3_hashes, keys)


def test_murmur3_list(benchmark, keys):
    benchmark.group = "hashing"
    out = benchmark(bc.murmur3_32, keys)
    assert out.size == len(keys)


def test_murmur3_numpy_u(benchmark, keys):
    benchmark.group = "hashing"
    arr = np.array(keys)
    benchmark(bc.murmur3_32, arr)


def test_murmur3_arrow(benchmark, keys):
    pa = pytest.importorskip("pyarrow")
    benchmark.group = "hashing"
    arr = pa.array(keys, type=pa.string())
    benchmark(bc.murmur3_32, arr)


def test_hash_keys_list(benchmark, keys):
    benchmark.group = "hashing"
    benchmark(bc.hash_keys, keys)
