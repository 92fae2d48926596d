"""bucketcore.wire: every encoded entry is parsed by the protobuf library against tests/proto's
Pulsar schema (and reserialized byte for byte), decoded back, and read by the stamp fast path;
malformed bytes give WireFormatError naming the offset."""

from __future__ import annotations

import os
import struct
import tempfile

import google_crc32c
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bucketcore as bc
from _bucketcore import _wire
from bucketcore import wire
from bucketcore.wire import WireFormatError

PROTO = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "proto", "pulsar_wire.proto")


@pytest.fixture(scope="module")
def pb():
    """The MessageMetadata / SingleMessageMetadata classes compiled from tests/proto at test time."""
    pytest.importorskip("google.protobuf", reason="protobuf (the test extra) parses the encoded entries")
    protoc = pytest.importorskip("grpc_tools.protoc", reason="grpcio-tools (the test extra) compiles tests/proto")
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "set.pb")
        rc = protoc.main(["protoc", f"-I{os.path.dirname(PROTO)}", f"--descriptor_set_out={out}", PROTO])
        assert rc == 0, "protoc could not compile tests/proto/pulsar_wire.proto"
        fds = descriptor_pb2.FileDescriptorSet.FromString(open(out, "rb").read())
    pool = descriptor_pool.DescriptorPool()
    for f in fds.file:
        pool.Add(f)
    get = message_factory.GetMessageClass
    classes = {
        name: get(pool.FindMessageTypeByName(f"bucketcore.test.pulsar.{name}"))
        for name in ("MessageMetadata", "SingleMessageMetadata")
    }
    mm = pool.FindMessageTypeByName("bucketcore.test.pulsar.MessageMetadata")
    assert (mm.fields_by_name["entry_hash_min"].number, mm.fields_by_name["entry_hash_max"].number) == wire.STAMP_FIELDS
    return classes


def parse(pb, data: bytes):
    """Parse one encoded entry with protobuf: header, CRC32C, metadata, every message record.
    Every part must reserialize to exactly the bytes written (no unknown or misplaced field)."""
    assert data[:2] == b"\x0e\x01"
    (crc,) = struct.unpack(">I", data[2:6])
    assert crc == google_crc32c.value(bytes(data[6:]))
    (msize,) = struct.unpack(">I", data[6:10])
    raw = bytes(data[10 : 10 + msize])
    md = pb["MessageMetadata"].FromString(raw)
    assert md.SerializeToString() == raw
    p = 10 + msize
    singles = []
    for _ in range(md.num_messages_in_batch):
        (ssize,) = struct.unpack(">I", data[p : p + 4])
        sraw = bytes(data[p + 4 : p + 4 + ssize])
        sm = pb["SingleMessageMetadata"].FromString(sraw)
        assert sm.SerializeToString() == sraw
        p += 4 + ssize
        singles.append((sm, bytes(data[p : p + sm.payload_size])))
        p += sm.payload_size
    assert p == len(data)
    assert md.uncompressed_size == len(data) - 10 - msize
    return md, singles


def batch(keys, payloads, n_buckets=4, max_messages=5):
    b = bc.EntryBucketBatcher(bc.Buckets.equal_width(n_buckets), max_messages=max_messages)
    entries = []
    for k, p in zip(keys, payloads):
        entries += b.add(k, p)
    entries += b.flush()
    return entries


def per_entry(entries, column):
    return [[column[i] for i in e.message_indices.tolist()] for e in entries]


key_st = st.one_of(st.none(), st.text(max_size=12), st.binary(max_size=12))
props_st = st.one_of(st.none(), st.dictionaries(st.text(max_size=6), st.text(max_size=6), max_size=3))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    messages=st.lists(st.tuples(key_st, st.binary(max_size=40), props_st), min_size=1, max_size=40),
    n_buckets=st.integers(1, 8),
    max_messages=st.integers(1, 9),
    producer=st.text(max_size=10),
    publish_time=st.integers(0, 2**64 - 1),
    base=st.integers(0, 2**40),
)
def test_every_encoded_entry_parses_with_protobuf_and_decodes_back(
    pb, messages, n_buckets, max_messages, producer, publish_time, base
):
    keys = [m[0] for m in messages]
    payloads = [m[1] for m in messages]
    props = [m[2] for m in messages]
    entries = batch(keys, payloads, n_buckets, max_messages)
    enc = wire.encode_entries(
        entries,
        producer_name=producer,
        publish_time=publish_time,
        keys=per_entry(entries, keys),
        properties=per_entry(entries, props),
        sequence_base=base,
    )
    assert len(enc) == len(entries) and enc.offsets[0] == 0 and enc.offsets[-1] == len(enc.buffer)
    decoded = wire.decode_entries(enc)
    stamps = wire.read_stamps(enc)
    for i, (e, d) in enumerate(zip(entries, decoded)):
        md, singles = parse(pb, enc[i])
        idx = e.message_indices.tolist()
        assert md.producer_name == producer and md.publish_time == publish_time
        assert md.HasField("compression") and md.compression == 0
        assert md.num_messages_in_batch == e.count
        assert (md.entry_hash_min, md.entry_hash_max) == (e.hash_min, e.hash_max)
        assert md.sequence_id == base + max(idx)
        assert not md.HasField("partition_key") and not md.HasField("highest_sequence_id")
        for j, (sm, payload) in enumerate(singles):
            k = keys[idx[j]]
            assert payload == payloads[idx[j]]
            assert sm.sequence_id == base + idx[j]
            assert sm.HasField("partition_key") == isinstance(k, str)
            assert sm.HasField("ordering_key") == isinstance(k, bytes)
            if isinstance(k, str):
                assert sm.partition_key == k
            if isinstance(k, bytes):
                assert sm.ordering_key == k
            assert {kv.key: kv.value for kv in sm.properties} == (props[idx[j]] or {})
        assert d.hash_min == e.hash_min and d.hash_max == e.hash_max and d.checksummed
        assert [m.payload for m in d.messages] == e.payloads
        assert [m.key for m in d.messages] == [keys[x] for x in idx]
        assert [m.properties for m in d.messages] == [props[x] or {} for x in idx]
        assert wire.read_stamp(wire.metadata_of(enc[i])) == (e.hash_min, e.hash_max)
        assert (stamps.hash_min[i], stamps.hash_max[i], stamps.stamped[i]) == (e.hash_min, e.hash_max, True)


@settings(max_examples=40, deadline=None)
@given(
    messages=st.lists(st.tuples(key_st, st.binary(max_size=30), props_st), min_size=1, max_size=30),
    seqs=st.lists(st.integers(0, 2**64 - 1), min_size=30, max_size=30),
)
def test_random_entries_round_trip_with_given_sequence_ids(messages, seqs):
    keys, payloads, props = (list(c) for c in zip(*messages))
    entries = batch(keys, payloads, n_buckets=3, max_messages=4)
    enc = wire.encode_entries(
        entries,
        producer_name="p",
        publish_time=0,
        keys=per_entry(entries, keys),
        properties=per_entry(entries, props),
        sequence_ids=per_entry(entries, seqs),
    )
    for e, d in zip(entries, wire.decode_entries(enc)):
        idx = e.message_indices.tolist()
        assert d.sequence_id == max(seqs[i] for i in idx)
        assert [(m.payload, m.key, m.properties, m.sequence_id) for m in d.messages] == [
            (payloads[i], keys[i], props[i] or {}, seqs[i]) for i in idx
        ]


def test_given_sequence_ids_are_written_and_the_entry_takes_the_highest(pb):
    entries = batch(["a", "a", "a"], [b"1", b"2", b"3"], max_messages=3)
    assert len(entries) == 1
    data = wire.encode_entry(entries[0], producer_name="p", publish_time=1, sequence_ids=[7, 2**64 - 1, 9])
    md, singles = parse(pb, data)
    assert md.sequence_id == 2**64 - 1
    assert [sm.sequence_id for sm, _ in singles] == [7, 2**64 - 1, 9]
    assert [m.sequence_id for m in wire.decode_entry(data).messages] == [7, 2**64 - 1, 9]


def test_an_unstamped_batch_has_no_stamp_fields(pb):
    entries = batch(["k1", "k2"], [b"x", b"y"], n_buckets=1)
    enc = wire.encode_entries(entries, producer_name="p", publish_time=5, stamp=False)
    md, _ = parse(pb, enc[0])
    assert not md.HasField("entry_hash_min") and not md.HasField("entry_hash_max")
    assert wire.read_stamp(wire.metadata_of(enc[0])) is None
    s = wire.read_stamps(enc)
    assert not s.stamped.any() and not s.hash_min.any()
    assert wire.decode_entry(enc[0]).hash_min is None


def test_payloads_may_be_bytearray_and_memoryview():
    e = bc.Entry(0, 0, 5, 9, np.array([0, 1, 2], dtype=np.int64), 9, [bytearray(b"abc"), memoryview(b"defg"), b"hi"])
    d = wire.decode_entry(wire.encode_entry(e, producer_name="p", publish_time=0))
    assert [m.payload for m in d.messages] == [b"abc", b"defg", b"hi"]


def test_publish_time_defaults_to_now_in_milliseconds():
    import time

    before = time.time_ns() // 1_000_000
    d = wire.decode_entry(wire.encode_entries(batch(["k"], [b"v"]), producer_name="p").buffer)
    assert before <= d.publish_time <= time.time_ns() // 1_000_000


def test_the_python_crc_path_writes_the_same_bytes():
    entries = batch([f"k{i}" for i in range(50)], [bytes([i]) * i for i in range(50)])
    native = wire.encode_entries(entries, producer_name="p", publish_time=3)
    assert _wire.crc_is_native()
    _wire.set_crc(0, google_crc32c.value)
    try:
        fallback = wire.encode_entries(entries, producer_name="p", publish_time=3)
        assert wire.decode_entries(fallback)  # checksum verified through the Python path too
    finally:
        wire._install_crc()
    assert fallback.buffer == native.buffer


def test_encoding_refuses_bad_input_naming_it():
    entries = batch(["a", "b"], [b"1", b"2"], n_buckets=1)
    table_row = bc.bucket_entries(["a"], bc.Buckets())[0]
    with pytest.raises(TypeError, match=r"entries\[0\] has no payloads"):
        wire.encode_entries([table_row], producer_name="p")
    with pytest.raises(ValueError, match=r"keys\[0\] has 1 items for the 2 messages"):
        wire.encode_entries(entries, producer_name="p", keys=[["a"]])
    with pytest.raises(ValueError, match="keys has 2 items for 1 entries"):
        wire.encode_entries(entries, producer_name="p", keys=[["a", "b"], None])
    with pytest.raises(bc.KeyEncodingError, match=r"keys\[0\]\[1\]"):
        wire.encode_entries(entries, producer_name="p", keys=[["a", "\ud800"]])
    with pytest.raises(TypeError, match=r"keys\[0\]\[0\] must be str, bytes or None, not int"):
        wire.encode_entries(entries, producer_name="p", keys=[[1, "b"]])
    with pytest.raises(TypeError, match=r"properties\[0\]\[1\] must map str to str"):
        wire.encode_entries(entries, producer_name="p", properties=[[None, {"a": 1}]])
    with pytest.raises(ValueError, match=r"sequence_ids\[0\]\[0\] = -1"):
        wire.encode_entries(entries, producer_name="p", sequence_ids=[[-1, 2]])
    with pytest.raises(TypeError, match=r"sequence_ids\[0\]\[1\] must be an int"):
        wire.encode_entries(entries, producer_name="p", sequence_ids=[[1, 2.0]])
    bad = bc.Entry(0, 0, 9, 5, np.array([0], dtype=np.int64), 1, [b"x"])
    with pytest.raises(ValueError, match=r"entries\[0\] has the stamp \(9, 5\)"):
        wire.encode_entries([bad], producer_name="p")
    with pytest.raises(TypeError, match=r"entries\[1\] must be an Entry"):
        wire.encode_entries([entries[0], "x"], producer_name="p")
    with pytest.raises(TypeError, match="producer_name must be a str"):
        wire.encode_entries(entries, producer_name=b"p")


@pytest.fixture(scope="module")
def sample() -> bytes:
    entries = batch(["alpha", b"beta", None], [b"one", b"two", b"three"], n_buckets=1)
    return wire.encode_entry(
        entries[0],
        producer_name="producer-1",
        publish_time=1700000000000,
        keys=["alpha", b"beta", None],
        properties=[{"a": "b"}, None, {"c": "d"}],
    )


def test_every_truncation_is_refused_with_an_offset_inside_the_bytes(sample):
    for cut in range(len(sample)):
        with pytest.raises(WireFormatError) as info:
            wire.decode_entry(sample[:cut], verify_checksum=False)
        assert 0 <= info.value.offset <= cut
        with pytest.raises(WireFormatError):
            wire.decode_entry(sample[:cut])


def test_every_single_byte_corruption_fails_the_checksum_or_decodes_safely(sample):
    for at in range(len(sample)):
        for flip in (0x01, 0x80, 0xFF):
            data = bytearray(sample)
            data[at] ^= flip
            try:
                wire.decode_entry(bytes(data))
            except WireFormatError:
                continue
            # only the magic can change without the checksum seeing it (then there is no checksum
            # header and the bytes parse as something else, or fail): never a crash
            assert at < 2


def test_malformed_metadata_names_what_and_where():
    def entry(meta: bytes, payload: bytes = b"") -> bytes:
        return struct.pack(">I", len(meta)) + meta + payload

    with pytest.raises(WireFormatError, match="varint runs past the end at byte 5") as info:
        wire.decode_entry(entry(b"\x10"))  # field 2 without its value
    assert info.value.offset == 5
    with pytest.raises(WireFormatError, match="length reaches past the end at byte 5"):
        wire.decode_entry(entry(b"\x0a\x09ab"))  # producer_name of 9 bytes, 2 present
    with pytest.raises(WireFormatError, match="field number 0"):
        wire.decode_entry(entry(b"\x00\x01"))
    with pytest.raises(WireFormatError, match="unsupported protobuf wire type"):
        wire.decode_entry(entry(b"\x0b"))  # a group start
    with pytest.raises(WireFormatError, match="longer than 10 bytes"):
        wire.decode_entry(entry(b"\x10" + b"\xff" * 10 + b"\x01"))
    with pytest.raises(WireFormatError, match="metadata size|length reaches past"):
        wire.decode_entry(b"\x00\x00\x00\x09abc")
    with pytest.raises(WireFormatError, match="lacks its required field producer_name"):
        wire.decode_entry(entry(b"\x10\x01\x18\x01"))
    good = b"\x0a\x01p\x10\x01\x18\x01"
    with pytest.raises(WireFormatError, match="compression 1"):
        wire.decode_entry(entry(good + b"\x40\x01"))
    with pytest.raises(WireFormatError, match="message 1: too few bytes for a 4-byte size at byte 19"):
        wire.decode_entry(entry(good + b"\x58\x02", struct.pack(">I", 2) + b"\x18\x00"))  # 2 said, 1 there
    with pytest.raises(WireFormatError, match="no payload_size"):
        wire.decode_entry(entry(good, struct.pack(">I", 2) + b"\x40\x01"))
    with pytest.raises(WireFormatError, match="bytes follow the last"):
        wire.decode_entry(entry(good, struct.pack(">I", 2) + b"\x18\x00" + b"extra"))


def test_a_checksum_mismatch_is_named(sample):
    data = bytearray(sample)
    data[-1] ^= 0x55
    with pytest.raises(WireFormatError, match="checksum mismatch") as info:
        wire.decode_entry(bytes(data))
    assert info.value.offset == 2
    assert wire.decode_entry(bytes(data), verify_checksum=False).messages[-1].payload != b"three"


def test_the_stamp_reader_skips_every_other_field_and_refuses_malformed_ones():
    tag33, tag34 = b"\x88\x02", b"\x90\x02"
    other = b"\x0a\x03abc" + b"\x11" + b"\x00" * 8 + b"\x1d" + b"\x00" * 4 + b"\xd0\x02\x05"  # len, i64, i32, field 42
    assert wire.read_stamp(other + tag33 + b"\x05" + tag34 + b"\x09") == (5, 9)
    assert wire.read_stamp(other) is None
    assert wire.read_stamp(b"") is None
    with pytest.raises(WireFormatError, match="half a stamp"):
        wire.read_stamp(tag33 + b"\x05")
    with pytest.raises(WireFormatError, match="not a hash range"):
        wire.read_stamp(tag33 + b"\x09" + tag34 + b"\x05")
    with pytest.raises(WireFormatError, match="varint runs past the end at byte 2"):
        wire.read_stamp(tag33)
    with pytest.raises(WireFormatError, match="length reaches past the end at byte 1"):
        wire.read_stamp(b"\x0a\x7f")
    with pytest.raises(WireFormatError, match="fixed-width field reaches past the end"):
        wire.read_stamp(b"\x11\x00")
    with pytest.raises(WireFormatError, match="wire type or value"):
        wire.read_stamp(b"\x8a\x02\x01\x00")  # field 33 as a length-delimited field


def test_read_stamps_names_the_malformed_entry(sample):
    buf = sample + sample[:20]
    with pytest.raises(WireFormatError, match="entry 1:") as info:
        wire.read_stamps((buf, np.array([0, len(sample), len(buf)])))
    assert info.value.index == 1
    with pytest.raises(WireFormatError, match="not an ascending range"):
        wire.read_stamps((sample, np.array([0, len(sample) + 1])))
    with pytest.raises(WireFormatError, match="not an ascending range"):
        wire.read_stamps((sample, np.array([5, 2])))
    assert len(wire.read_stamps((b"", np.array([0])))) == 3


def test_a_broker_entry_metadata_prefix_is_skipped(sample):
    prefixed = b"\x0e\x02" + struct.pack(">I", 3) + b"\x08\x01\x10" + sample
    assert wire.decode_entry(prefixed) == wire.decode_entry(sample)
    assert wire.read_stamp(wire.metadata_of(prefixed)) == wire.read_stamp(wire.metadata_of(sample))


def test_stamps_from_the_wire_route_like_the_entries():
    keys = [f"user-{i}" for i in range(300)]
    entries = batch(keys, [b"x"] * 300, n_buckets=8, max_messages=7)
    enc = wire.encode_entries(entries, producer_name="p", publish_time=0)
    stamps = wire.read_stamps(enc)
    sel = bc.EntryBucketSelector(bc.Buckets.equal_width(8))
    for name in ("c1", "c2", "c3"):
        sel.add_consumer(name, 0)
    from_wire = bc.route_entries(sel, stamps.hash_min)
    direct = bc.route_entries(sel, np.array([e.hash_min for e in entries], dtype=np.uint16))
    assert np.array_equal(from_wire, direct)


def test_checksum_is_crc32c():
    assert wire.checksum(b"123456789") == 0xE3069283


def test_encoding_into_a_reused_bytearray_gives_the_same_bytes():
    entries = batch([f"k{i}" for i in range(300)], [bytes([i % 256]) * (i % 50) for i in range(300)])
    fresh = wire.encode_entries(entries, producer_name="p", publish_time=9)
    into = bytearray(b"old contents that must go" * 1000)
    reused = wire.encode_entries(entries, producer_name="p", publish_time=9, into=into)
    assert reused.buffer is into and bytes(into) == fresh.buffer
    assert np.array_equal(reused.offsets, fresh.offsets)
    small = wire.encode_entries(entries[:1], producer_name="p", publish_time=9, into=into)
    assert bytes(into) == fresh.buffer[: fresh.offsets[1]] and len(small) == 1
    with pytest.raises(TypeError, match="into must be a bytearray"):
        wire.encode_entries(entries, producer_name="p", into=b"")


def test_a_buffer_that_outgrows_its_estimate_is_grown():
    # long keys and properties: far more than the size estimate from the payload bytes
    keys = ["k" * 3000 + str(i) for i in range(40)]
    props = [{"p" * 500: "v" * 500} for _ in range(40)]
    entries = batch(keys, [b""] * 40, n_buckets=2, max_messages=8)
    enc = wire.encode_entries(
        entries, producer_name="p", keys=per_entry(entries, keys), properties=per_entry(entries, props)
    )
    decoded = wire.decode_entries(enc)
    assert [m.key for d in decoded for m in d.messages] == [keys[i] for e in entries for i in e.message_indices]
    assert all(m.properties == props[0] for d in decoded for m in d.messages)


def _stamp_fields(lo: int | None, hi: int | None) -> bytes:
    """The stamp fields of a MessageMetadata, each only when given (tags of fields 33 and 34)."""

    def varint(v: int) -> bytes:
        out = bytearray()
        while v >= 0x80:
            out.append(v & 0x7F | 0x80)
            v >>= 7
        return bytes(out) + bytes([v])

    return (b"" if lo is None else b"\x88\x02" + varint(lo)) + (b"" if hi is None else b"\x90\x02" + varint(hi))


def _entry_with_stamp(lo: int | None, hi: int | None) -> bytes:
    """A checksummed entry of one keyless message b"p" whose metadata ends with the given stamp fields."""
    # producer_name "p", sequence_id 0, publish_time 1, uncompressed_size 9, num_messages_in_batch 1
    metadata = b"\x0a\x01p\x10\x00\x18\x01\x48\x09\x58\x01" + _stamp_fields(lo, hi)
    payload = b"\x00\x00\x00\x04\x18\x01\x40\x00p"  # SingleMessageMetadata(payload_size 1, sequence_id 0), b"p"
    body = struct.pack(">I", len(metadata)) + metadata + payload
    return b"\x0e\x01" + struct.pack(">I", wire.checksum(body)) + body


BAD_STAMPS = [
    (1, 0, r"entry_hash_min \(field 33\) = 1 is above entry_hash_max \(field 34\) = 0: .*not a hash range"),
    (0, 0x10000, r"entry_hash_max \(field 34\) = 65536 is above 0xFFFF: .*not a hash range"),
    (0x10000, 0x10001, r"entry_hash_min \(field 33\) = 65536 is above 0xFFFF"),
    (7, None, r"entry_hash_min \(field 33\) = 7 without entry_hash_max \(field 34\): half a stamp"),
    (None, 7, r"entry_hash_max \(field 34\) = 7 without entry_hash_min \(field 33\): half a stamp"),
]


def test_a_well_formed_stamp_decodes_the_same_on_every_reader():
    data = _entry_with_stamp(5, 0xFFFF)
    decoded = wire.decode_entry(data)
    assert (decoded.hash_min, decoded.hash_max) == (5, 0xFFFF)
    assert [m.payload for m in decoded.messages] == [b"p"]
    assert wire.read_stamp(wire.metadata_of(data)) == (5, 0xFFFF)
    stamps = wire.read_stamps((data, np.array([0, len(data)])))
    assert (stamps.hash_min.tolist(), stamps.hash_max.tolist(), stamps.stamped.tolist()) == ([5], [0xFFFF], [True])
    unstamped = _entry_with_stamp(None, None)
    assert wire.decode_entry(unstamped).hash_min is None
    assert wire.read_stamp(wire.metadata_of(unstamped)) is None


@pytest.mark.parametrize("lo,hi,match", BAD_STAMPS)
def test_every_reader_refuses_a_stamp_that_breaks_the_stamp_rule_naming_the_field(lo, hi, match):
    data = _entry_with_stamp(lo, hi)
    metadata_at = 10  # magic, checksum, metadata size
    with pytest.raises(WireFormatError, match=match) as info:
        wire.read_stamp(wire.metadata_of(data))
    assert info.value.offset == 0
    with pytest.raises(WireFormatError, match=match) as info:
        wire.decode_entry(data)
    assert info.value.offset == metadata_at
    with pytest.raises(WireFormatError, match="entry 1: " + match) as info:
        good = _entry_with_stamp(1, 2)
        wire.read_stamps((good + data, np.array([0, len(good), len(good) + len(data)])))
    assert (info.value.index, info.value.offset) == (1, metadata_at)
    with pytest.raises(WireFormatError, match="entry 0: MessageMetadata: " + match):
        wire.decode_entries(wire.EncodedEntries(data, np.array([0, len(data)], dtype=np.int64)))
