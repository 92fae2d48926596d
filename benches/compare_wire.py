"""Side by side in one run: bucketcore.wire vs the protobuf library for Pulsar batches.

    python benches/compare_wire.py [--messages 1000000] [--payload 100] [--per-entry 64] [--repeat 3]

Workload: ``--messages`` messages of ``--payload`` random bytes with str keys (``key-<i mod
10000>``), batched by an EntryBucketBatcher (one segment of 16 buckets, ``per_bucket`` policy,
``max_messages=--per-entry``: entries of that many messages). Both sides encode the same entries
with the same per-message keys and sequence ids:

- bucketcore: ``wire.encode_entries`` (one C pass into one buffer, CRC32C included), into a new
  ``bytes`` and into a reused ``bytearray`` (``into=``, as a producer reusing its send buffer);
- protobuf: a ``MessageMetadata`` and one ``SingleMessageMetadata`` per message built with the
  protobuf library's message classes (compiled at run time from tests/proto with grpcio-tools),
  serialized, framed with ``struct`` and joined in Python, CRC32C by ``google_crc32c.value``.

The two outputs are checked byte for byte. Rows: encode (ms, MB/s of output, speedup) and the
broker's stamp read (``wire.read_stamps`` vs parsing each MessageMetadata with protobuf).
One core: neither side uses threads.
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import google_crc32c
import numpy as np

import bucketcore as bc
from bucketcore import wire

PROTO = os.path.join(os.path.dirname(__file__), os.pardir, "tests", "proto", "pulsar_wire.proto")


def message_classes() -> tuple[Any, Any]:
    """MessageMetadata and SingleMessageMetadata compiled from tests/proto/pulsar_wire.proto."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    from grpc_tools import protoc

    proto = os.path.abspath(PROTO)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "set.pb")
        if protoc.main(["protoc", f"-I{os.path.dirname(proto)}", f"--descriptor_set_out={out}", proto]) != 0:
            sys.exit("protoc could not compile tests/proto/pulsar_wire.proto")
        with open(out, "rb") as f:
            fds = descriptor_pb2.FileDescriptorSet.FromString(f.read())
    pool = descriptor_pool.DescriptorPool()
    for fd in fds.file:
        pool.Add(fd)
    get = message_factory.GetMessageClass
    return (
        get(pool.FindMessageTypeByName("bucketcore.test.pulsar.MessageMetadata")),
        get(pool.FindMessageTypeByName("bucketcore.test.pulsar.SingleMessageMetadata")),
    )


def protobuf_encode(
    entries: list[bc.Entry], keys: list[list[str]], producer: str, publish_time: int, mm: Any, sm: Any
) -> bytes:
    """The same batches, built with the protobuf library and joined in Python."""
    out = []
    pack = struct.pack
    crc = google_crc32c.value
    for e, ekeys in zip(entries, keys):
        seqs = e.message_indices.tolist()
        parts = []
        for payload, key, seq in zip(e.payloads, ekeys, seqs):
            single = sm(partition_key=key, payload_size=len(payload), sequence_id=seq).SerializeToString()
            parts.append(pack(">I", len(single)))
            parts.append(single)
            parts.append(payload)
        batch = b"".join(parts)
        meta = mm(
            producer_name=producer,
            sequence_id=max(seqs),
            publish_time=publish_time,
            compression=0,
            uncompressed_size=len(batch),
            num_messages_in_batch=len(seqs),
            entry_hash_min=e.hash_min,
            entry_hash_max=e.hash_max,
        ).SerializeToString()
        body = pack(">I", len(meta)) + meta + batch
        out.append(b"\x0e\x01" + pack(">I", crc(body)) + body)
    return b"".join(out)


def protobuf_stamps(buffer: bytes, offsets: np.ndarray, mm: Any) -> tuple[list[int], list[int]]:
    """Each entry's stamp by parsing its MessageMetadata with protobuf."""
    lo, hi = [], []
    view = memoryview(buffer)
    for a in offsets[:-1].tolist():
        (size,) = struct.unpack_from(">I", buffer, a + 6)
        md = mm.FromString(view[a + 10 : a + 10 + size])
        lo.append(md.entry_hash_min)
        hi.append(md.entry_hash_max)
    return lo, hi


def best(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """Best wall time of `repeat` runs, and the last result."""
    times, result = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
    return min(times), result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--payload", type=int, default=100)
    ap.add_argument("--per-entry", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    mm, sm = message_classes()
    rng = np.random.default_rng(7)
    blob = rng.integers(0, 256, args.messages * args.payload, dtype=np.uint8).tobytes()
    payloads = [blob[i * args.payload : (i + 1) * args.payload] for i in range(args.messages)]
    all_keys = [f"key-{i % 10000}" for i in range(args.messages)]
    batcher = bc.EntryBucketBatcher(bc.Buckets.equal_width(16), max_messages=args.per_entry, policy="per_bucket")
    entries = batcher.add_many(all_keys, payloads) + batcher.flush()
    keys = [[all_keys[i] for i in e.message_indices.tolist()] for e in entries]
    per_entry = args.messages / len(entries)
    print(
        f"{args.messages:,} messages of {args.payload} bytes in {len(entries):,} entries "
        f"({per_entry:.1f} messages each); CRC32C through "
        f"{'google-crc32c C function' if wire._wire.crc_is_native() else 'google_crc32c.value'}"
    )

    producer, when = "producer-1", 1_700_000_000_000
    t_ours, enc = best(
        lambda: wire.encode_entries(entries, producer_name=producer, publish_time=when, keys=keys), args.repeat
    )
    reused = bytearray()
    t_into, _ = best(
        lambda: wire.encode_entries(entries, producer_name=producer, publish_time=when, keys=keys, into=reused),
        args.repeat,
    )
    t_pb, ref = best(lambda: protobuf_encode(entries, keys, producer, when, mm, sm), args.repeat)
    if ref != enc.buffer or ref != reused:
        sys.exit("the two encodings differ")
    mb = len(enc.buffer) / 1e6
    m = args.messages
    print(f"\noutput {mb:.1f} MB, identical bytes from both sides; best of {args.repeat} (wall time)\n")
    print(f"{'row':<40}{'bucketcore':>12}{'protobuf':>12}{'speedup':>10}")
    for label, t in (("encode into a new bytes", t_ours), ("encode into a reused bytearray", t_into)):
        print(
            f"{label + ', ms':<40}{t * 1e3:>12.1f}{t_pb * 1e3:>12.1f}{t_pb / t:>9.1f}x\n"
            f"{'  MB/s of output':<40}{mb / t:>12.0f}{mb / t_pb:>12.0f}\n"
            f"{'  ns per message':<40}{t / m * 1e9:>12.1f}{t_pb / m * 1e9:>12.1f}"
        )
    t_rs, stamps = best(lambda: wire.read_stamps(enc), args.repeat)
    t_rp, (lo, _) = best(lambda: protobuf_stamps(enc.buffer, enc.offsets, mm), args.repeat)
    if stamps.hash_min.tolist() != lo:
        sys.exit("the stamps differ")
    n = len(entries)
    print(f"{'read stamps, ns per entry':<40}{t_rs / n * 1e9:>12.1f}{t_rp / n * 1e9:>12.1f}{t_rp / t_rs:>9.1f}x")


if __name__ == "__main__":
    main()
