"""The wire baseline: Pulsar batches built with the protobuf library and joined in Python.

The message classes are made at run time from a descriptor declared here (no ``.proto`` file, no
protoc): the fields of Pulsar's ``MessageMetadata`` and ``SingleMessageMetadata`` that
:func:`bucketcore.wire.encode_entries` writes, with the numbers of
``pulsar-common/src/main/proto/PulsarApi.proto`` in apache/pulsar, and the entry stamp under the
numbers :data:`bucketcore.wire.STAMP_FIELDS` holds. protobuf writes set fields in field-number
order whatever else a schema declares, so the bytes equal those of the full schema (the benchmarks
check them against bucketcore's byte for byte). Needs ``protobuf`` and ``google-crc32c``.
"""

from __future__ import annotations

import functools
import struct
from typing import Any

import numpy as np

import bucketcore as bc
from bucketcore import wire

__all__ = ["message_classes", "protobuf_encode", "protobuf_stamps"]

# (name, number, type, required) per message; types by their descriptor_pb2 names
_STRING, _UINT64, _UINT32, _INT32 = "TYPE_STRING", "TYPE_UINT64", "TYPE_UINT32", "TYPE_INT32"
_FIELDS = {
    "MessageMetadata": (
        ("producer_name", 1, _STRING, True),
        ("sequence_id", 2, _UINT64, True),
        ("publish_time", 3, _UINT64, True),
        ("compression", 8, _INT32, False),  # CompressionType, an enum: a varint on the wire (NONE = 0)
        ("uncompressed_size", 9, _UINT32, False),
        ("num_messages_in_batch", 11, _INT32, False),
        ("entry_hash_min", wire.STAMP_FIELDS[0], _UINT32, False),
        ("entry_hash_max", wire.STAMP_FIELDS[1], _UINT32, False),
    ),
    "SingleMessageMetadata": (
        ("partition_key", 2, _STRING, False),
        ("payload_size", 3, _INT32, True),
        ("sequence_id", 8, _UINT64, False),
    ),
}


@functools.cache
def message_classes() -> tuple[Any, Any]:
    """The protobuf classes of ``MessageMetadata`` and ``SingleMessageMetadata`` (made once).

    Returns
    -------
    tuple
        (MessageMetadata class, SingleMessageMetadata class).
    """
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    field = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(
        name="bucketcore_bench_pulsar.proto", package="bucketcore.bench.pulsar", syntax="proto2"
    )
    for message, fields in _FIELDS.items():
        described = file.message_type.add(name=message)
        for name, number, kind, required in fields:
            label = field.LABEL_REQUIRED if required else field.LABEL_OPTIONAL
            described.field.add(name=name, number=number, type=getattr(field, kind), label=label)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    get = message_factory.GetMessageClass
    return tuple(get(pool.FindMessageTypeByName(f"bucketcore.bench.pulsar.{m}")) for m in _FIELDS)  # type: ignore[return-value]


def protobuf_encode(entries: list[bc.Entry], keys: list[list[str]], producer: str, publish_time: int) -> bytes:
    """The entries as Pulsar batches, each message's metadata built and serialized by protobuf,
    framed with ``struct`` and joined in Python, CRC32C by ``google_crc32c.value``.

    Parameters
    ----------
    entries : list of Entry
    keys : list of list of str
        Per entry, its messages' keys.
    producer : str
        Producer name.
    publish_time : int
        Milliseconds since the epoch.

    Returns
    -------
    bytes
        The batches back to back (as :func:`bucketcore.wire.encode_entries`' buffer).
    """
    import google_crc32c

    mm, sm = message_classes()
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


def protobuf_stamps(buffer: bytes, offsets: np.ndarray) -> tuple[list[int], list[int]]:
    """Each entry's stamp by parsing its ``MessageMetadata`` with protobuf (the broker's baseline).

    Parameters
    ----------
    buffer : bytes
        Encoded entries back to back.
    offsets : numpy.ndarray
        Where each entry starts, and the end.

    Returns
    -------
    tuple
        (hash_min per entry, hash_max per entry).
    """
    mm = message_classes()[0]
    lo, hi = [], []
    view = memoryview(buffer)
    for a in offsets[:-1].tolist():
        (size,) = struct.unpack_from(">I", buffer, a + 6)
        md = mm.FromString(view[a + 10 : a + 10 + size])
        lo.append(md.entry_hash_min)
        hi.append(md.entry_hash_max)
    return lo, hi
