"""Arrow arrays handed over raw through the C data interface (PyCapsules, no pyarrow validation).

The structs come from the test suite's ctypes producer (tests/arrow_producer.py), over exactly
sized numpy buffers (under the instrumented build, AddressSanitizer's redzones sit right after
them): string/binary with int32 and int64 offsets, their view layouts with fuzzed inline values,
buffer indexes and offsets, dictionary-encoded rows with every index width, the null type, and
fuzzed formats and buffer counts. Offsets, views and indexes are sometimes consistent and
sometimes not. The oracle (written here from the Arrow format specification) decides per row:

- every row consistent: hash_keys must equal mmh3 over each row's bytes (nulls keyless);
- a non-null row inconsistent (offsets out of order or past the data, a view outside its buffer,
  a dictionary index outside the dictionary): a ValueError, never a read outside the buffers;
- only null rows inconsistent: either of the above (a null slot's contents are unspecified).

Whatever happens, the producer's release callbacks run exactly once per struct.
"""

from __future__ import annotations

import sys
from collections import Counter
from typing import Any

import mmh3
import numpy as np
from support import Divergence, expect, instrumented, main

with instrumented():
    import bucketcore as bc

from arrow_producer import Producer  # the suite's ctypes producer of Arrow C structs

OFFSET_FORMATS = {"u": np.int32, "z": np.int32, "U": np.int64, "Z": np.int64}
INDEX_FORMATS = {
    "c": np.int8,
    "C": np.uint8,
    "s": np.int16,
    "S": np.uint16,
    "i": np.int32,
    "I": np.uint32,
    "l": np.int64,
    "L": np.uint64,
}

KEY_FORMATS = {*OFFSET_FORMATS, "vu", "vz", "n"}

OK, BAD, UNKNOWN = "ok", "bad", "unknown"


class Case:
    """One array: the structs to hand over and, per row, what hashing it must give."""

    def __init__(self) -> None:
        self.producer = Producer()
        self.rows: list[tuple[str, bytes | None]] = []  # (OK | BAD | UNKNOWN, bytes or None=keyless)
        self.must_fail = False  # the struct itself is malformed (a missing buffer, a wrong count)
        self.may_fail = False  # the format is not a key format: a TypeError or ValueError is fine


def _buffer(raw: bytes) -> np.ndarray:
    return np.frombuffer(raw, dtype=np.uint8).copy()


def _validity(fdp: Any, rows: int) -> tuple[np.ndarray | None, list[bool]]:
    if rows == 0 or fdp.ConsumeBool():
        return None, [True] * rows
    raw = fdp.ConsumeBytes((rows + 7) // 8).ljust((rows + 7) // 8, b"\xff")
    bits = _buffer(raw)
    return bits, [bool(bits[i // 8] >> (i % 8) & 1) for i in range(rows)]


def _null_count(fdp: Any, valid: list[bool], first: int) -> int:
    return -1 if fdp.ConsumeBool() else sum(not v for v in valid[first:])


def _offsets_case(fdp: Any, case: Case, fmt: str) -> tuple[Any, Any]:
    p = case.producer
    offset, length = fdp.ConsumeIntInRange(0, 4), fdp.ConsumeIntInRange(0, 12)
    bits, valid = _validity(fdp, offset + length)
    n = offset + length + 1
    if fdp.ConsumeBool():  # consistent, from value lengths, possibly starting past 0
        offs = [fdp.ConsumeIntInRange(0, 5)]
        for _ in range(n - 1):
            offs.append(offs[-1] + fdp.ConsumeIntInRange(0, 24))
        if fdp.ConsumeProbability() > 0.7:  # one offset moved
            offs[fdp.ConsumeIntInRange(0, n - 1)] += fdp.ConsumeIntInRange(-30, 30)
    else:
        offs = [fdp.ConsumeIntInRange(-3, 60) for _ in range(n)]
    size = max(0, offs[-1])
    data = _buffer(fdp.ConsumeBytes(size).ljust(size, b"\x00"))
    offsets = np.array(offs, dtype=OFFSET_FORMATS[fmt])
    buffers: list[np.ndarray | None] = [bits, offsets, data if size or fdp.ConsumeBool() else None]
    if length and fdp.ConsumeProbability() > 0.95:
        buffers[1] = None  # no offsets buffer
        case.must_fail = True
    for i in range(offset, offset + length):
        a, b = offs[i], offs[i + 1]
        if not valid[i]:
            consistent = 0 <= a <= b <= size
            case.rows.append((OK if consistent else UNKNOWN, None))
        elif 0 <= a <= b <= size:
            case.rows.append((OK, bytes(data[a:b])))
        else:
            case.rows.append((BAD, None))
    if any(o < 0 for o in offs[offset:]) or any(x > y for x, y in zip(offs[offset:], offs[offset + 1 :])):
        # inconsistent offsets in null rows only: refusing the array is allowed too
        case.rows = [(UNKNOWN if s == OK else s, v) for s, v in case.rows]
    array = p.array(length, buffers, offset=offset, null_count=_null_count(fdp, valid, offset))
    return p.schema(fmt), array


def _views_case(fdp: Any, case: Case, fmt: str) -> tuple[Any, Any]:
    p = case.producer
    offset, length = fdp.ConsumeIntInRange(0, 4), fdp.ConsumeIntInRange(0, 12)
    bits, valid = _validity(fdp, offset + length)
    variadic = [_buffer(fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 64))) for _ in range(fdp.ConsumeIntInRange(0, 3))]
    sizes = np.array([v.size for v in variadic], dtype=np.int64)
    views = np.zeros(16 * (offset + length), dtype=np.uint8)
    for i in range(offset + length):
        kind = fdp.ConsumeIntInRange(0, 3)
        if kind == 0:  # sixteen fuzzed bytes
            raw = fdp.ConsumeBytes(16).ljust(16, b"\x00")
        elif kind == 1 or not variadic:  # inline
            value = fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 12))
            raw = len(value).to_bytes(4, "little") + value.ljust(12, b"\x00")
        else:  # in a variadic buffer, in range or near it
            index = fdp.ConsumeIntInRange(-1, len(variadic))
            size = int(sizes[index]) if 0 <= index < len(variadic) else 0
            start = fdp.ConsumeIntInRange(-2, size + 2)
            vlen = fdp.ConsumeIntInRange(13, max(13, size - max(start, 0) + 3))
            prefix = bytes(variadic[index][start : start + 4]) if 0 <= index < len(variadic) and start >= 0 else b""
            raw = b"".join(
                (
                    vlen.to_bytes(4, "little", signed=True),
                    prefix.ljust(4, b"\x00"),
                    index.to_bytes(4, "little", signed=True),
                    start.to_bytes(4, "little", signed=True),
                )
            )
        views[16 * i : 16 * i + 16] = np.frombuffer(raw, dtype=np.uint8)
    for i in range(offset, offset + length):
        v = bytes(views[16 * i : 16 * i + 16])
        vlen, index, start = (int.from_bytes(v[k : k + 4], "little", signed=True) for k in (0, 8, 12))
        if vlen < 0:
            value = None
        elif vlen <= 12:
            value = v[4 : 4 + vlen]
        elif 0 <= index < len(variadic) and start >= 0 and start + vlen <= sizes[index]:
            value = bytes(variadic[index][start : start + vlen])
            if value[:4] != v[4:8]:
                value = b"?"  # a prefix that disagrees with the value: the format says neither wins
        else:
            value = None
        if not valid[i]:
            case.rows.append((OK if value is not None else UNKNOWN, None))
        elif value is None:
            case.rows.append((BAD, None))
        else:
            case.rows.append((UNKNOWN, None) if value == b"?" and vlen > 12 else (OK, value))
    buffers: list[np.ndarray | None] = [bits, views, *variadic, sizes]
    array = p.array(length, buffers, offset=offset, null_count=_null_count(fdp, valid, offset))
    return p.schema(fmt), array


def _dictionary_case(fdp: Any, case: Case) -> tuple[Any, Any]:
    p = case.producer
    index_format = fdp.PickValueInList(list(INDEX_FORMATS))
    words = [
        None if fdp.ConsumeProbability() > 0.85 else fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 20))
        for _ in range(fdp.ConsumeIntInRange(0, 5))
    ]
    lengths = [0 if w is None else len(w) for w in words]
    offsets = np.array([0, *np.cumsum(lengths, dtype=np.int64).tolist()], dtype=np.int32)
    data = _buffer(b"".join(w for w in words if w is not None) or b"\x00")
    dict_bits = None
    if any(w is None for w in words):
        dict_bits = np.packbits([w is not None for w in words], bitorder="little")
    dictionary = p.array(len(words), [dict_bits, offsets, data], null_count=sum(w is None for w in words))
    offset, length = fdp.ConsumeIntInRange(0, 3), fdp.ConsumeIntInRange(0, 12)
    bits, valid = _validity(fdp, offset + length)
    dtype = INDEX_FORMATS[index_format]
    lo, hi = max(np.iinfo(dtype).min, -2), min(np.iinfo(dtype).max, len(words) + 2)
    indices = np.array([fdp.ConsumeIntInRange(lo, hi) for _ in range(offset + length)], dtype=dtype)
    for i in range(offset, offset + length):
        k = int(indices[i])
        if not valid[i]:
            case.rows.append((OK if 0 <= k < len(words) else UNKNOWN, None))
        elif 0 <= k < len(words):
            case.rows.append((OK, words[k]))
        else:
            case.rows.append((BAD, None))
    array = p.array(
        length, [bits, indices], offset=offset, null_count=_null_count(fdp, valid, offset), dictionary=dictionary
    )
    return p.schema(index_format, dictionary=p.schema("u")), array


def _build(fdp: Any, case: Case) -> tuple[Any, Any]:
    kind = fdp.ConsumeIntInRange(0, 9)
    if kind <= 3:
        schema, array = _offsets_case(fdp, case, "uzUZ"[kind])
    elif kind <= 5:
        schema, array = _views_case(fdp, case, ("vu", "vz")[kind - 4])
    elif kind <= 7:
        schema, array = _dictionary_case(fdp, case)
    elif kind == 8:
        length = fdp.ConsumeIntInRange(0, 10)
        schema, array = case.producer.schema("n"), case.producer.array(length, [], null_count=length)
        case.rows = [(OK, None)] * length
    else:  # a format that is not a key column, with the buffers of a string array
        fmt = fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 4)).decode("latin-1").replace("\x00", "")
        if fmt in KEY_FORMATS:
            fmt = "+s"  # a key format over the wrong buffers is a producer's lie no consumer can see
        case.may_fail = True
        inner = Case()
        schema, array = _offsets_case(fdp, inner, "u")
        case.producer, case.rows, case.must_fail = inner.producer, inner.rows, inner.must_fail
        schema.format = fmt.encode("latin-1")
    fixed_count = schema.format in (b"u", b"z", b"U", b"Z") or schema.dictionary
    if fixed_count and array.n_buffers > 0 and fdp.ConsumeProbability() > 0.95:
        # a buffer short of the format's count (a view array's count is its own: not checkable)
        array.n_buffers -= 1
        if array.length:
            case.must_fail = True
        else:
            case.may_fail = True  # nothing is read from an empty array
    return schema, array


def test_one_input(data: bytes) -> None:
    """Hash one Arrow array built from ``data`` and check it against the oracle."""
    import atheris

    fdp = atheris.FuzzedDataProvider(data)
    case = Case()
    chunks = fdp.ConsumeIntInRange(0, 3)
    if chunks == 0:
        schema, array = _build(fdp, case)
        capsules: Any = case.producer.pair(schema, array)
    else:
        capsules = _stream(fdp, case, chunks)
    statuses = [s for s, _ in case.rows]
    try:
        kh = bc.hash_keys(capsules)
    except (TypeError, ValueError) as err:
        expect(
            case.must_fail or case.may_fail or BAD in statuses or UNKNOWN in statuses,
            f"refused a consistent array: {err!r}; rows {case.rows!r}",
        )
        expect(case.may_fail or isinstance(err, ValueError), f"a malformed key array gave {err!r}")
    else:
        expect(not case.must_fail and BAD not in statuses, lambda: f"accepted a malformed array: rows {case.rows!r}")
        if not case.may_fail:
            expect(len(kh) == len(case.rows), f"{len(kh)} hashes for {len(case.rows)} rows")
            raw, has = kh.raw.tolist(), kh.has_key.tolist()
            for i, (status, value) in enumerate(case.rows):
                if status != OK:
                    continue
                want = 0 if value is None else mmh3.hash(value, 0, signed=False)
                if (raw[i], has[i]) != (want, value is not None):
                    raise Divergence(f"row {i}: {raw[i]:#x}/{has[i]}, expected {want:#x} for {value!r}")
    released = case.producer.released
    if chunks == 0:
        expected = Counter(schema=1, array=1)
        expect(released == expected, lambda: f"release callbacks ran {dict(released)}, expected once each")
    else:
        # the stream once; each chunk it pulled once (a refused chunk stops the pulling)
        expect(released["stream"] == 1, f"the stream was released {released['stream']} times")
        expect(released["array"] <= chunks, f"{released['array']} array releases for {chunks} chunks")


def _stream(fdp: Any, case: Case, chunks: int) -> object:
    """An arrow_array_stream capsule of ``chunks`` string/binary arrays of one format; the rows of
    all of them, in order, in ``case``."""
    fmt = fdp.PickValueInList(["u", "z", "U", "Z", "vu", "vz"])
    arrays = []
    for _ in range(chunks):
        part = Case()
        part.producer = case.producer  # one producer: its release counts cover the whole stream
        if fmt in OFFSET_FORMATS:
            _, array = _offsets_case(fdp, part, fmt)
        else:
            _, array = _views_case(fdp, part, fmt)
        case.rows += part.rows
        case.must_fail |= part.must_fail
        arrays.append(array)
    return case.producer.stream(lambda: case.producer.schema(fmt), arrays)


if __name__ == "__main__":
    main(test_one_input)
    sys.exit(0)
