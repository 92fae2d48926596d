"""pytest-benchmark suite for bucketcore.wire: python -m pytest benches/bench_wire.py --benchmark-only

BUCKETCORE_BENCH_N messages (default 1M) of 100 bytes with str keys in entries of 64 (one segment
of 16 buckets, per_bucket policy), encoded by ``wire.encode_entries`` into a new bytes and into a
reused bytearray, and the same batches built with the protobuf library and joined in Python
(group "wire encode"); the broker's ``read_stamps`` against parsing each MessageMetadata with
protobuf (group "wire stamps"). ``benches/compare_wire.py`` prints the same rows side by side.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import bucketcore as bc
from bucketcore import wire

sys.path.insert(0, os.path.dirname(__file__))
from compare_wire import message_classes, protobuf_encode, protobuf_stamps  # noqa: E402

N = int(os.environ.get("BUCKETCORE_BENCH_N", 1_000_000))
_blob = np.random.default_rng(7).integers(0, 256, N * 100, dtype=np.uint8).tobytes()
PAYLOADS = [_blob[i * 100 : (i + 1) * 100] for i in range(N)]
ALL_KEYS = [f"key-{i % 10000}" for i in range(N)]
_batcher = bc.EntryBucketBatcher(bc.Buckets.equal_width(16), max_messages=64, policy="per_bucket")
ENTRIES = _batcher.add_many(ALL_KEYS, PAYLOADS) + _batcher.flush()
KEYS = [[ALL_KEYS[i] for i in e.message_indices.tolist()] for e in ENTRIES]
WHEN = 1_700_000_000_000


@pytest.fixture(scope="module")
def pb():
    pytest.importorskip("google.protobuf", reason="protobuf builds the baseline")
    pytest.importorskip("grpc_tools", reason="grpcio-tools compiles tests/proto for the baseline")
    return message_classes()


def test_encode_new_bytes(benchmark):
    benchmark.group = "wire encode"
    enc = benchmark(wire.encode_entries, ENTRIES, producer_name="p", publish_time=WHEN, keys=KEYS)
    assert len(enc) == len(ENTRIES)


def test_encode_reused_bytearray(benchmark):
    benchmark.group = "wire encode"
    into = bytearray()
    benchmark(wire.encode_entries, ENTRIES, producer_name="p", publish_time=WHEN, keys=KEYS, into=into)
    assert len(into) > N * 100


def test_encode_protobuf_joined_in_python(benchmark, pb):
    benchmark.group = "wire encode"
    out = benchmark(protobuf_encode, ENTRIES, KEYS, "p", WHEN, *pb)
    assert out == wire.encode_entries(ENTRIES, producer_name="p", publish_time=WHEN, keys=KEYS).buffer


def test_read_stamps(benchmark):
    benchmark.group = "wire stamps"
    enc = wire.encode_entries(ENTRIES, producer_name="p", publish_time=WHEN, keys=KEYS)
    stamps = benchmark(wire.read_stamps, enc)
    assert bool(stamps.stamped.all())


def test_read_stamps_protobuf(benchmark, pb):
    benchmark.group = "wire stamps"
    enc = wire.encode_entries(ENTRIES, producer_name="p", publish_time=WHEN, keys=KEYS)
    benchmark(protobuf_stamps, enc.buffer, enc.offsets, pb[0])
