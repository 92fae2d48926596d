"""Conformance of the hashing API against mmh3, the docs/design.md vectors and a Java-encoding oracle."""

from __future__ import annotations

import random
import sys
from types import ModuleType

import mmh3
import numpy as np
import pytest
from design_vectors import MURMUR3_VECTORS as DESIGN_VECTORS  # docs/design.md ("Hashing")
from hypothesis import given, settings
from hypothesis import strategies as st

import bucketcore as bc

try:
    import pyarrow as pa
except ImportError:  # pragma: no cover - the test extra installs it; wheels on some platforms lack it
    pa = None


def oracle(key: str | bytes) -> int:
    data = key.encode("utf-8") if isinstance(key, str) else key
    return mmh3.hash(data, 0, signed=False)


def java_utf8(s: str) -> bytes:
    """String.getBytes(UTF_8) of the Java string with the same UTF-16 code units as s."""
    units = []
    for ch in s:
        cp = ord(ch)
        if cp > 0xFFFF:
            cp -= 0x10000
            units += [0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF)]
        else:
            units.append(cp)
    out = bytearray()
    i = 0
    while i < len(units):
        u = units[i]
        if 0xD800 <= u <= 0xDBFF and i + 1 < len(units) and 0xDC00 <= units[i + 1] <= 0xDFFF:
            out += chr(0x10000 + ((u - 0xD800) << 10) + (units[i + 1] - 0xDC00)).encode("utf-8")
            i += 2
            continue
        out += b"?" if 0xD800 <= u <= 0xDFFF else chr(u).encode("utf-8")
        i += 1
    return bytes(out)


def generated_keys(n: int, seed: int = 7) -> list[str | bytes]:
    rng = random.Random(seed)
    alphabets = [
        [chr(c) for c in range(0x20, 0x7F)],
        [chr(c) for c in range(0xA0, 0x100)],
        [chr(c) for c in range(0x400, 0x4FF)] + [chr(c) for c in range(0x4E00, 0x4F00)] + ["\uffff", "\u0800"],
        [chr(c) for c in range(0x1F300, 0x1F400)] + ["\U0010ffff", "\U00010000"],
    ]
    keys: list[str | bytes] = []
    for i in range(n):
        kind = i % 6
        if kind == 4:
            length = rng.choice([0, 1, 2, 3, 4, 5, 7, 8, 9, 16, 31, 32, 33, 100, 1000])
            keys.append(bytes(rng.getrandbits(8) if rng.random() < 0.8 else 0 for _ in range(length)))
        elif kind == 5:
            keys.append("" if i % 12 == 5 else "x" * rng.randrange(200, 2000))
        else:
            pool = alphabets[kind] + (alphabets[0] if rng.random() < 0.5 else [])
            keys.append("".join(rng.choice(pool) for _ in range(rng.randrange(0, 40))))
    return keys


@pytest.mark.parametrize("key,expected", sorted(DESIGN_VECTORS.items()))
def test_design_vectors_scalar(key, expected):
    assert bc.murmur3_32(key) == expected
    assert bc.murmur3_32(key.encode("utf-8")) == expected
    assert isinstance(bc.murmur3_32(key), int)


def test_design_vectors_column_and_replace_vector():
    keys = list(DESIGN_VECTORS)
    assert bc.murmur3_32(keys).tolist() == list(DESIGN_VECTORS.values())
    assert bc.murmur3_32("\ud800x", errors="replace") == 0x11508252
    assert bc.murmur3_32(["\ud800x"], errors="replace").tolist() == [0x11508252]


def test_100k_generated_keys_match_mmh3():
    keys = generated_keys(102_000)
    expected = np.array([oracle(k) for k in keys], dtype=np.uint32)
    got = bc.murmur3_32(keys)
    assert got.dtype == np.uint32
    mismatches = np.flatnonzero(got != expected)
    assert mismatches.size == 0, [keys[i] for i in mismatches[:5]]


def test_key_hashes_split_halves_and_keyless():
    keys = ["key-1", None, b"a", "ключ", None]
    kh = bc.hash_keys(keys)
    raw = [oracle(k) if k is not None else 0 for k in keys]
    assert kh.raw.tolist() == raw
    assert kh.segment_hash.tolist() == [h >> 16 for h in raw]
    assert kh.bucket_hash.tolist() == [h & 0xFFFF for h in raw]
    assert kh.has_key.tolist() == [True, False, True, True, False]
    assert (kh.raw.dtype, kh.segment_hash.dtype, kh.bucket_hash.dtype, kh.has_key.dtype) == (
        np.uint32,
        np.uint16,
        np.uint16,
        np.bool_,
    )
    assert len(kh) == 5
    assert kh[1:3].raw.tolist() == raw[1:3]


def test_hash_keys_scalar():
    kh = bc.hash_keys("key-1")
    assert int(kh.raw) == 0x98B115A0
    assert int(kh.segment_hash) == 0x98B1 and int(kh.bucket_hash) == 0x15A0 and bool(kh.has_key)


def _str_keys() -> list[str]:
    # no trailing NULs: numpy's fixed-width dtypes cannot hold them
    return [k for k in generated_keys(3000, seed=11) if isinstance(k, str)] + list(DESIGN_VECTORS)


def test_every_str_input_type_agrees(pa: ModuleType):
    keys = _str_keys()
    expected = [oracle(k) for k in keys]
    doubled = [k for k in keys for _ in range(2)]
    inputs = {
        "list": keys,
        "tuple": tuple(keys),
        "U": np.array(keys),
        "object": np.array(keys, dtype=object),
        "U strided": np.array(doubled)[::2],
        "object strided": np.array(doubled, dtype=object)[::2],
        "bytes list": [k.encode() for k in keys],
        "S": np.array([k.encode() for k in keys], dtype=object).astype("S"),
    }
    for t in (pa.string(), pa.large_string()):
        inputs[str(t)] = pa.array(keys, type=t)
        inputs[f"chunked {t}"] = pa.chunked_array([keys[:100], keys[100:1700], [], keys[1700:]], type=t)
    for t in (pa.binary(), pa.large_binary()):
        inputs[str(t)] = pa.array([k.encode() for k in keys], type=t)
    for name, column in inputs.items():
        assert bc.murmur3_32(column).tolist() == expected, name


def test_numpy_shapes_are_kept():
    keys = np.array([["a", "key-1"], ["ключ", ""]])
    got = bc.murmur3_32(keys)
    assert got.shape == (2, 2)
    assert got.tolist() == [[oracle("a"), oracle("key-1")], [oracle("ключ"), oracle("")]]
    assert bc.hash_keys(keys).bucket_hash.shape == (2, 2)


def test_bytes_with_nuls_in_lists_and_object_arrays():
    keys = [b"\x00", b"a\x00", b"\x00\x00b\x00\x00", b""]
    expected = [oracle(k) for k in keys]
    assert bc.murmur3_32(keys).tolist() == expected
    assert bc.murmur3_32(np.array(keys, dtype=object)).tolist() == expected


def test_fixed_width_s_strips_trailing_nuls_like_numpy():
    arr = np.array([b"ab", b"abcd", b""], dtype="S6")
    assert bc.murmur3_32(arr).tolist() == [oracle(bytes(x)) for x in arr]


def test_arrow_nulls_slices_and_binary_nuls(pa: ModuleType):
    keys = ["a", None, "key-1", "", None, "键🔑"]
    arr = pa.array(keys, type=pa.string())
    kh = bc.hash_keys(arr)
    assert kh.has_key.tolist() == [k is not None for k in keys]
    assert kh.raw.tolist() == [oracle(k) if k is not None else 0 for k in keys]
    sliced = arr.slice(2, 3)
    assert bc.hash_keys(sliced).raw.tolist() == [oracle("key-1"), oracle(""), 0]
    chunked = pa.chunked_array([arr.slice(0, 2), arr.slice(2)])
    assert bc.hash_keys(chunked).raw.tolist() == kh.raw.tolist()
    binary = pa.array([b"\x00a\x00", b"", b"\x00"], type=pa.large_binary())
    assert bc.murmur3_32(binary).tolist() == [oracle(b"\x00a\x00"), oracle(b""), oracle(b"\x00")]
    assert bc.murmur3_32(pa.array([], type=pa.string())).tolist() == []


def test_arrow_null_in_murmur3_names_index(pa: ModuleType):
    with pytest.raises(TypeError, match="index 1 is None"):
        bc.murmur3_32(pa.array(["a", None]))
    with pytest.raises(TypeError, match="index 3 is None"):
        bc.murmur3_32(pa.chunked_array([["a", "b"], ["c", None]]))


def test_arrow_wrong_type_rejected(pa: ModuleType):
    with pytest.raises(TypeError, match="int64"):
        bc.murmur3_32(pa.array([1, 2]))


def test_one_mib_key():
    key = "k" * (1 << 20)
    assert bc.murmur3_32(key) == oracle(key)
    wide = "ключ" * (1 << 18)
    assert bc.murmur3_32([wide, key]).tolist() == [oracle(wide), oracle(key)]


def test_empty_inputs():
    for empty in ([], (), np.array([], dtype="U1"), np.array([], dtype=object)):
        got = bc.murmur3_32(empty)
        assert got.dtype == np.uint32 and got.size == 0
        assert len(bc.hash_keys(empty)) == 0


# -- surrogates -----------------------------------------------------------------------------

SURROGATE_CASES = [
    "\ud800x",
    "a\udfff",
    "\udc00\ud800",
    "\ud83d\udd11",
    "x\ud83d",
    "\ud83d\ud83d\udd11",
    "\udd11\ud83d",
]


@pytest.mark.parametrize("key", SURROGATE_CASES)
def test_replace_matches_java_string_getbytes(key):
    assert bc.murmur3_32(key, errors="replace") == oracle(java_utf8(key))
    assert bc.murmur3_32([key], errors="replace").tolist() == [oracle(java_utf8(key))]
    assert bc.murmur3_32(np.array([key]), errors="replace").tolist() == [oracle(java_utf8(key))]


def test_replace_leaves_valid_keys_alone():
    keys = list(DESIGN_VECTORS)
    assert bc.murmur3_32(keys, errors="replace").tolist() == list(DESIGN_VECTORS.values())


def test_strict_surrogate_names_index():
    with pytest.raises(bc.KeyEncodingError, match="index 2") as info:
        bc.murmur3_32(["a", "b", "\ud800x", "\udc00"])
    assert info.value.index == 2
    assert isinstance(info.value, ValueError) and isinstance(info.value, bc.BucketcoreError)
    with pytest.raises(bc.KeyEncodingError, match="index 1"):
        bc.hash_keys(np.array(["ok", "\udfff"]))
    with pytest.raises(bc.KeyEncodingError, match="index 0"):
        bc.murmur3_32("\ud800")


# -- invalid inputs -------------------------------------------------------------------------


@pytest.mark.parametrize("bad,name", [(1, "int"), (1.5, "float"), ({}, "dict"), (["x"], "list")])
def test_bad_element_type_names_type_and_index(bad, name):
    with pytest.raises(TypeError, match=rf"index 2 has type {name}; expected str, bytes or None"):
        bc.hash_keys(["a", "b", bad])
    with pytest.raises(TypeError, match=rf"index 1 has type {name}"):
        bc.murmur3_32(np.array(["a", bad, "c"], dtype=object))


def test_bad_element_in_later_chunk():
    keys = ["k"] * 5000 + [3]
    with pytest.raises(TypeError, match="index 5000 has type int"):
        bc.murmur3_32(keys)


def test_none_in_murmur3_names_index():
    with pytest.raises(TypeError, match="index 1 is None"):
        bc.murmur3_32(["a", None])
    with pytest.raises(TypeError):
        bc.murmur3_32(None)


@pytest.mark.parametrize("bad", [3, 2.5, (x for x in ["a"]), {"a": 1}, None])
def test_bad_container_rejected(bad):
    with pytest.raises(TypeError, match="keys must be"):
        bc.hash_keys(bad)


def test_numeric_array_rejected():
    with pytest.raises(TypeError, match="dtype int64"):
        bc.murmur3_32(np.arange(3, dtype=np.int64))


def test_unknown_errors_mode():
    with pytest.raises(ValueError, match="errors must be"):
        bc.murmur3_32("a", errors="ignore")
    with pytest.raises(ValueError, match="errors must be"):
        bc.hash_keys(["a"], errors="surrogatepass")


# -- split_hash ------------------------------------------------------------------------------


def test_split_hash_scalar_and_vector():
    assert bc.split_hash(0x98B115A0) == (0x98B1, 0x15A0)
    raw = np.array([0, 0xFFFFFFFF, 0x12345678], dtype=np.uint32)
    seg, bucket = bc.split_hash(raw)
    assert seg.dtype == np.uint16 and bucket.dtype == np.uint16
    assert seg.tolist() == [0, 0xFFFF, 0x1234] and bucket.tolist() == [0, 0xFFFF, 0x5678]
    seg, bucket = bc.split_hash(np.array([[1 << 16, 5]], dtype=np.int64))
    assert seg.tolist() == [[1, 0]] and bucket.tolist() == [[0, 5]]


def test_split_hash_rejects_bad_values():
    with pytest.raises(ValueError, match="outside"):
        bc.split_hash(-1)
    with pytest.raises(ValueError, match="index 1 is outside"):
        bc.split_hash(np.array([1, 1 << 32]))
    with pytest.raises(TypeError, match="float"):
        bc.split_hash(np.array([1.0]))
    with pytest.raises(TypeError, match="bool"):
        bc.split_hash(True)


# -- properties -------------------------------------------------------------------------------

valid_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=300)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(valid_text, st.binary(max_size=300)), max_size=40))
def test_property_matches_mmh3(keys):
    assert bc.murmur3_32(keys).tolist() == [oracle(k) for k in keys]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=50), max_size=20))
def test_property_replace_matches_java(keys):
    assert bc.murmur3_32(keys, errors="replace").tolist() == [oracle(java_utf8(k)) for k in keys]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(st.none(), valid_text), max_size=30))
def test_property_input_types_agree(pa: ModuleType, keys):
    expected = bc.hash_keys(keys)
    assert bc.hash_keys(np.array(keys, dtype=object)).raw.tolist() == expected.raw.tolist()
    got = bc.hash_keys(pa.array(keys, type=pa.string()))
    assert got.raw.tolist() == expected.raw.tolist()
    assert got.has_key.tolist() == expected.has_key.tolist()


@pytest.mark.skipif(sys.platform == "win32", reason="Windows commits anonymous mappings up front")
def test_key_over_2_gib_rejected_before_reading(pa: ModuleType):
    import mmap

    size = (1 << 31) + 1
    region = mmap.mmap(-1, size)  # untouched anonymous pages: no memory is committed
    offsets = np.array([0, 1, 1 + size - 1, size], dtype=np.int64)
    arr = pa.Array.from_buffers(pa.large_binary(), 3, [None, pa.py_buffer(offsets), pa.py_buffer(region)])
    with pytest.raises(ValueError, match="index 1 is longer than 2 GiB"):
        bc.murmur3_32(arr)


def test_ascii_runs_around_wide_chars():
    # the encoder copies ASCII 16 units at a time: put wide chars and surrogates at every offset
    # around those steps, in latin-1, BMP and astral strings, as list items and numpy U items
    rng = random.Random(3)
    keys = []
    for length in range(0, 70):
        for wide in ("é", "ж", "键", "🔑", "\udc01", "\ud83d\udd11"):
            s = [chr(rng.randrange(0x20, 0x7F)) for _ in range(length)]
            if length:
                s[rng.randrange(length)] = wide
            keys.append("".join(s))
    expected = [oracle(java_utf8(k)) for k in keys]
    assert bc.murmur3_32(keys, errors="replace").tolist() == expected
    assert bc.murmur3_32(np.array(keys), errors="replace").tolist() == expected
    valid = [k for k in keys if not any(0xD800 <= ord(c) <= 0xDFFF for c in k)]
    assert bc.murmur3_32(np.array(valid)).tolist() == [oracle(k) for k in valid]


def test_object_columns_with_odd_strides():
    # a structured array's object field has a 9-byte stride (unaligned pointers); reversed views
    # have a negative one
    keys = ["x", "key-1", b"zz", "ключ"]
    rec = np.empty(4, dtype=[("pad", "i1"), ("key", "O")])
    rec["key"] = keys
    assert rec["key"].strides == (9,)
    assert bc.murmur3_32(rec["key"]).tolist() == [oracle(k) for k in keys]
    assert bc.murmur3_32(np.array(keys, dtype=object)[::-1]).tolist() == [oracle(k) for k in keys[::-1]]
