"""Side by side in one run: bucketcore.wire vs the protobuf library for Pulsar batches.

    python benches/compare.py wire [--messages 1000000] [--payload 100] [--per-entry 64] [--repeat 3]

(``python benches/compare_wire.py ...`` is the same group.)

Workload: ``--messages`` messages of ``--payload`` random bytes with str keys (``key-<i mod
10000>``), batched by an EntryBucketBatcher (one segment of 16 buckets, ``per_bucket`` policy,
``max_messages=--per-entry``: entries of that many messages). Both sides encode the same entries
with the same per-message keys and sequence ids:

- bucketcore: ``wire.encode_entries`` (one C pass into one buffer, CRC32C included), into a new
  ``bytes`` and into a reused ``bytearray`` (``into=``, as a producer reusing its send buffer);
- protobuf: a ``MessageMetadata`` and one ``SingleMessageMetadata`` per message built with the
  protobuf library's message classes (made at run time from the descriptor in
  :mod:`bucketcore.harness.pulsar_protobuf`), serialized, framed with ``struct`` and joined in
  Python, CRC32C by ``google_crc32c.value``.

The two outputs are checked byte for byte. Rows: encode (ms, MB/s of output, speedup) and the
broker's stamp read (``wire.read_stamps`` vs parsing each MessageMetadata with protobuf).
One core: neither side uses threads.
"""

from __future__ import annotations

import argparse
import sys

from bucketcore import wire
from bucketcore.harness.pulsar_protobuf import message_classes, protobuf_encode, protobuf_stamps
from bucketcore.harness.timing import best_of_result
from bucketcore.harness.workloads import wire_batches


def main(argv: list[str] | None = None) -> None:
    """The wire group (``benches/compare.py wire``); ``argv`` as the command line's."""
    ap = argparse.ArgumentParser(
        prog="compare.py wire", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--payload", type=int, default=100)
    ap.add_argument("--per-entry", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)

    message_classes()  # made once, before any timing
    entries, keys = wire_batches(args.messages, args.payload, args.per_entry)
    per_entry = args.messages / len(entries)
    print(
        f"{args.messages:,} messages of {args.payload} bytes in {len(entries):,} entries "
        f"({per_entry:.1f} messages each); CRC32C through "
        f"{'google-crc32c C function' if wire._wire.crc_is_native() else 'google_crc32c.value'}"
    )

    producer, when = "producer-1", 1_700_000_000_000
    t_ours, enc = best_of_result(
        lambda: wire.encode_entries(entries, producer_name=producer, publish_time=when, keys=keys), args.repeat
    )
    reused = bytearray()
    t_into, _ = best_of_result(
        lambda: wire.encode_entries(entries, producer_name=producer, publish_time=when, keys=keys, into=reused),
        args.repeat,
    )
    t_pb, ref = best_of_result(lambda: protobuf_encode(entries, keys, producer, when), args.repeat)
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
    t_rs, stamps = best_of_result(lambda: wire.read_stamps(enc), args.repeat)
    t_rp, (lo, _) = best_of_result(lambda: protobuf_stamps(enc.buffer, enc.offsets), args.repeat)
    if stamps.hash_min.tolist() != lo:
        sys.exit("the stamps differ")
    n = len(entries)
    print(f"{'read stamps, ns per entry':<40}{t_rs / n * 1e9:>12.1f}{t_rp / n * 1e9:>12.1f}{t_rp / t_rs:>9.1f}x")


if __name__ == "__main__":
    main()
