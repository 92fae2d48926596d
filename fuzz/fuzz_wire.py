"""The wire decoder (bucketcore.wire) on fuzzed bytes: clear errors, never a crash or a hang.

An input is either raw bytes, or entries encoded from fuzzed keys, payloads and properties and
then damaged (bytes flipped, inserted, cut), with the CRC32C recomputed half of the time so the
damage reaches the parsers behind it. Each is handed to ``decode_entry`` (checksum verified or
not), ``metadata_of`` + ``read_stamp`` and ``read_stamps`` (with fuzzed offsets too), as exactly
sized buffers (under the instrumented build a read past the end is an AddressSanitizer report).

Oracle: an undamaged entry decodes back to what was encoded; a refusal is a WireFormatError whose
offset lies inside the bytes; whatever ``decode_entry`` accepts, the stamp fast path reads the same
stamp; ``read_stamps`` agrees with ``read_stamp`` entry by entry.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
from support import Divergence, consume_text, expect, instrumented, main

with instrumented():
    import bucketcore as bc
    from bucketcore import wire


def _exact(data: bytes) -> memoryview:
    """The bytes in a buffer of exactly their size (a bytes object has a terminating NUL after)."""
    return memoryview(np.frombuffer(data, dtype=np.uint8).copy())


def _encoded(fdp: Any) -> tuple[bytes, list[Any], list[Any]]:
    """One entry encoded from fuzzed messages: (bytes, keys, payloads)."""
    n = fdp.ConsumeIntInRange(1, 6)
    keys: list[Any] = []
    for _ in range(n):
        kind = fdp.ConsumeIntInRange(0, 2)
        if kind == 0:
            keys.append(None)
        elif kind == 1:
            keys.append(fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 10)))
        else:
            keys.append(fdp.ConsumeUnicodeNoSurrogates(fdp.ConsumeIntInRange(0, 10)))
    payloads = [fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 40)) for _ in range(n)]
    batcher = bc.EntryBucketBatcher(bc.Buckets(), max_messages=n)  # one bucket: one entry
    entries = [e for k, p in zip(keys, payloads) for e in batcher.add(k, p)] + batcher.flush()
    props = [
        {consume_text(fdp, 4): consume_text(fdp, 4)} if fdp.ConsumeIntInRange(0, 3) == 0 else None for _ in range(n)
    ]
    try:
        data = wire.encode_entry(
            entries[0],
            producer_name=fdp.ConsumeUnicodeNoSurrogates(8),
            publish_time=fdp.ConsumeIntInRange(0, 2**41),
            keys=keys,
            properties=props,
            stamp=fdp.ConsumeIntInRange(0, 3) != 0,
        )
    except bc.KeyEncodingError:
        return b"", [], []  # a property with a surrogate: refused on encoding, nothing to decode
    return data, keys, payloads


def _damage(fdp: Any, data: bytes) -> bytes:
    buf = bytearray(data)
    for _ in range(fdp.ConsumeIntInRange(1, 4)):
        if not buf:
            break
        op, at = fdp.ConsumeIntInRange(0, 3), fdp.ConsumeIntInRange(0, len(buf) - 1)
        if op == 0:
            buf[at] ^= 1 << fdp.ConsumeIntInRange(0, 7)
        elif op == 1:
            buf[at] = fdp.ConsumeIntInRange(0, 255)
        elif op == 2:
            buf[at:at] = fdp.ConsumeBytes(fdp.ConsumeIntInRange(1, 8))
        else:
            del buf[at:]
    if fdp.ConsumeBool() and len(buf) >= 6 and buf[:2] == b"\x0e\x01":
        buf[2:6] = wire.checksum(bytes(buf[6:])).to_bytes(4, "big")  # let the damage past the CRC
    return bytes(buf)


def _offset_inside(err: wire.WireFormatError, size: int) -> None:
    offset = getattr(err, "offset", None)
    expect(
        isinstance(offset, int) and 0 <= offset <= size, f"WireFormatError offset {offset!r} for {size} bytes: {err}"
    )


def _stamp(data: bytes) -> tuple[int, int] | None | wire.WireFormatError:
    try:
        return wire.read_stamp(wire.metadata_of(_exact(data)))
    except wire.WireFormatError as err:
        _offset_inside(err, len(data))
        return err


def _decode(data: bytes, verify: bool) -> Any:
    try:
        return wire.decode_entry(_exact(data), verify_checksum=verify)
    except wire.WireFormatError as err:
        _offset_inside(err, len(data))
        return None


def _check_entry(data: bytes) -> tuple[int, int] | None | wire.WireFormatError:
    stamp = _stamp(data)
    for verify in (False, True):
        decoded = _decode(data, verify)
        if decoded is not None:
            expect(
                not isinstance(stamp, wire.WireFormatError), f"decode_entry accepted what read_stamp refused: {stamp}"
            )
            want = None if decoded.hash_min is None else (decoded.hash_min, decoded.hash_max)
            expect(stamp == want, f"read_stamp {stamp!r}, decode_entry {want!r}")
    return stamp


def _check_stamps(fdp: Any, parts: list[bytes]) -> None:
    """read_stamps over the entries back to back: like read_stamp per entry (or fuzzed offsets)."""
    buffer = b"".join(parts)
    bounds = np.cumsum([0, *(len(p) for p in parts)], dtype=np.int64)
    fuzzed = fdp.ConsumeIntInRange(0, 4) == 0
    if fuzzed:
        bounds = np.array([fdp.ConsumeIntInRange(-2, len(buffer) + 2) for _ in parts] + [len(buffer)], dtype=np.int64)
    try:
        got = wire.read_stamps((_exact(buffer), bounds))
    except wire.WireFormatError as err:
        index = getattr(err, "index", None)
        expect(isinstance(index, int) and 0 <= index < len(parts), f"read_stamps error names entry {index!r}: {err}")
        if not fuzzed:
            expect(isinstance(_stamp(parts[index]), wire.WireFormatError), f"read_stamps refused entry {index}: {err}")
        return
    if fuzzed:
        return
    for i, part in enumerate(parts):
        one = _stamp(part)
        expect(not isinstance(one, wire.WireFormatError), f"read_stamps accepted entry {i}, read_stamp refused it")
        row = (int(got.hash_min[i]), int(got.hash_max[i])) if got.stamped[i] else None
        expect(row == one, f"read_stamps entry {i}: {row!r}, read_stamp {one!r}")


def test_one_input(data: bytes) -> None:
    """Decode bytes built from ``data`` every way the wire module reads them."""
    import atheris

    fdp = atheris.FuzzedDataProvider(data)
    parts = []
    for _ in range(fdp.ConsumeIntInRange(1, 3)):
        if fdp.ConsumeIntInRange(0, 3) == 0:
            parts.append(fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 200)))
            continue
        encoded, keys, payloads = _encoded(fdp)
        if not encoded:
            continue
        if fdp.ConsumeBool():
            decoded = wire.decode_entry(encoded)
            got = ([m.key for m in decoded.messages], [m.payload for m in decoded.messages])
            if got != (keys, payloads):
                raise Divergence(f"round trip: {got!r} != {(keys, payloads)!r}")
        else:
            encoded = _damage(fdp, encoded)
        parts.append(encoded)
    for part in parts:
        _check_entry(part)
    if parts:
        _check_stamps(fdp, parts)


if __name__ == "__main__":
    main(test_one_input)
    sys.exit(0)
