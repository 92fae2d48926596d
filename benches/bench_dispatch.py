"""pytest-benchmark suite for broker dispatch: python -m pytest benches/bench_dispatch.py --benchmark-only

Groups:
- ``route_entries N=...``: 1M stamped entries over 64 consumers (the issue's target: <= 3 ns per
  entry), also with ``hash_max`` (stamp checks + straddle counting) and with 10% unstamped entries
  routed by key hash; baseline: a per-entry Python loop (bisect + owner list);
- ``fits_one_bucket``: 1M stamps against N=256;
- ``dispatcher``: Dispatcher throughput, 16 consumers, churn (join / clean leave / crash in turn)
  every 10,000 entries, consumers holding 10% in flight across each churn; baseline: the same rules
  per entry in Python. Entries per second = entries / mean time.

BUCKETCORE_BENCH_N / BUCKETCORE_BENCH_DISPATCH_N shrink the columns for a quick run.
"""

from __future__ import annotations

import os

import pytest

import bucketcore as bc
from bucketcore.harness.baselines import PyDispatcherAdapter, py_route, run_churn
from bucketcore.harness.workloads import stamped_entries

N = int(os.environ.get("BUCKETCORE_BENCH_N", 1_000_000))
DISPATCH_N = int(os.environ.get("BUCKETCORE_BENCH_DISPATCH_N", 200_000))
COUNTS = (64, 256, 4096)

_ENTRIES = stamped_entries(N)  # compare_dispatch.py's entries
HASH_MIN, HASH_MAX, STAMPED, KEY_HASH = _ENTRIES.hash_min, _ENTRIES.hash_max, _ENTRIES.stamped, _ENTRIES.key_hash


@pytest.fixture(params=COUNTS, ids=[f"N={n}" for n in COUNTS])
def selector(request):
    sel = bc.EntryBucketSelector(bc.Buckets.equal_width(request.param))
    for i in range(64):
        sel.add_consumer(f"consumer-{i:03d}", i)
    return sel


def test_route_py_loop(benchmark, selector):
    benchmark.group = f"route_entries N={selector.buckets.count}"
    splits, owner, hm = list(selector.buckets.splits), selector.owner_slots.tolist(), HASH_MIN.tolist()
    out = benchmark.pedantic(lambda: py_route(splits, owner, hm), rounds=2)
    assert out == bc.route_entries(selector, HASH_MIN).tolist()


def test_route_entries(benchmark, selector):
    benchmark.group = f"route_entries N={selector.buckets.count}"
    out = benchmark(bc.route_entries, selector, HASH_MIN)
    assert out.size == N and out.min() >= 0


def test_route_entries_hash_max(benchmark, selector):
    benchmark.group = f"route_entries N={selector.buckets.count}"
    out = benchmark(lambda: bc.route_entries(selector, HASH_MIN, hash_max=HASH_MAX))
    assert out.size == N


def test_route_entries_unstamped(benchmark, selector):
    benchmark.group = f"route_entries N={selector.buckets.count}"
    out = benchmark(lambda: bc.route_entries(selector, HASH_MIN, key_hash=KEY_HASH, stamped=STAMPED))
    assert out.size == N


def test_fits_one_bucket(benchmark):
    benchmark.group = "fits_one_bucket"
    buckets = bc.Buckets.equal_width(256)
    out = benchmark(bc.fits_one_bucket, buckets, HASH_MIN, HASH_MAX)
    assert out.size == N


def test_dispatcher_churn(benchmark):
    benchmark.group = "dispatcher"
    result = benchmark.pedantic(lambda: run_churn(bc.Dispatcher, DISPATCH_N), rounds=5)
    if benchmark.stats:  # None under --benchmark-disable
        benchmark.extra_info["entries_per_second"] = DISPATCH_N / benchmark.stats.stats.mean
    assert result["pending"] == 0 and result["delivered"] >= DISPATCH_N


def test_dispatcher_churn_py_loop(benchmark):
    benchmark.group = "dispatcher"
    result = benchmark.pedantic(lambda: run_churn(PyDispatcherAdapter, DISPATCH_N), rounds=2)
    if benchmark.stats:
        benchmark.extra_info["entries_per_second"] = DISPATCH_N / benchmark.stats.stats.mean
    assert result["pending"] == 0
