"""pytest-benchmark suite for bucketcore.wire: python -m pytest benches/bench_wire.py --benchmark-only

BUCKETCORE_BENCH_N messages (default 1M) of 100 bytes with str keys in entries of 64 (one segment
of 16 buckets, per_bucket policy), encoded by ``wire.encode_entries`` into a new bytes and into a
reused bytearray, and the same batches built with the protobuf library and joined in Python
(group "wire encode"); the broker's ``read_stamps`` against parsing each MessageMetadata with
protobuf (group "wire stamps"). ``benches/compare_wire.py`` prints the same rows side by side.
"""

from __future__ import annotations

import os

import pytest

from bucketcore import wire
from bucketcore.harness.workloads import wire_batches

N = int(os.environ.get("BUCKETCORE_BENCH_N", 1_000_000))
ENTRIES, KEYS = wire_batches(N)  # compare_wire.py's entries
WHEN = 1_700_000_000_000


@pytest.fixture(scope="module")
def pb():
    """The protobuf baseline's encoder and stamp reader (skips without protobuf or google-crc32c)."""
    pytest.importorskip("google.protobuf", reason="protobuf builds the baseline")
    pytest.importorskip("google_crc32c", reason="google-crc32c checksums the baseline's batches")
    from bucketcore.harness import pulsar_protobuf

    pulsar_protobuf.message_classes()
    return pulsar_protobuf


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
    out = benchmark(pb.protobuf_encode, ENTRIES, KEYS, "p", WHEN)
    assert out == wire.encode_entries(ENTRIES, producer_name="p", publish_time=WHEN, keys=KEYS).buffer


def test_read_stamps(benchmark):
    benchmark.group = "wire stamps"
    enc = wire.encode_entries(ENTRIES, producer_name="p", publish_time=WHEN, keys=KEYS)
    stamps = benchmark(wire.read_stamps, enc)
    assert bool(stamps.stamped.all())


def test_read_stamps_protobuf(benchmark, pb):
    benchmark.group = "wire stamps"
    enc = wire.encode_entries(ENTRIES, producer_name="p", publish_time=WHEN, keys=KEYS)
    benchmark(pb.protobuf_stamps, enc.buffer, enc.offsets)
