"""The direct scalar path of murmur3_32 and hash_keys (one str or bytes key per call, hashed by
the kernel's C function): the same hashes as mmh3 and as the column path, the same errors."""

from __future__ import annotations

import inspect

import mmh3
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bucketcore as bc
from bucketcore.errors import KeyEncodingError


def reference(data: bytes) -> int:
    return mmh3.hash(data, 0, signed=False)


SCALARS = [
    "",
    "a",
    "key-1",
    "550e8400-e29b-41d4-a716-446655440000",
    "ключ",
    "键🔑",
    "é",  # latin-1, not ASCII: a one-byte-kind str that is encoded
    "x" * 300,  # longer than the stack buffer of non-ASCII encoding would be; ASCII anyway
    "é" * 200,  # non-ASCII, encoded in a heap buffer (more than 256 bytes)
    "🔑" * 70,
]


@pytest.mark.parametrize("key", SCALARS)
def test_scalar_str_matches_mmh3_and_column_path(key):
    expected = reference(key.encode("utf-8"))
    assert bc.murmur3_32(key) == expected
    assert type(bc.murmur3_32(key)) is int
    assert bc.murmur3_32([key])[0] == expected
    h = bc.hash_keys(key)
    assert (int(h.raw), int(h.segment_hash), int(h.bucket_hash), bool(h.has_key)) == (
        expected,
        expected >> 16,
        expected & 0xFFFF,
        True,
    )
    assert (type(h.raw), type(h.segment_hash), type(h.bucket_hash)) == (np.uint32, np.uint16, np.uint16)
    assert type(h.has_key) is np.bool_


@pytest.mark.parametrize("key", [b"", b"a", b"\x00\xff\x00", b"550e8400-e29b-41d4-a716-446655440000", b"z" * 1000])
def test_scalar_bytes_matches_mmh3(key):
    assert bc.murmur3_32(key) == reference(key)
    assert int(bc.hash_keys(key).raw) == reference(key)


def test_scalar_subclasses_of_str_and_bytes_are_keys():
    class Name(str):
        pass

    class Raw(bytes):
        pass

    assert bc.murmur3_32(Name("key-1")) == reference(b"key-1")
    assert bc.murmur3_32(Raw(b"key-1")) == reference(b"key-1")
    assert int(bc.hash_keys(Name("ключ")).raw) == reference("ключ".encode())


def test_scalar_surrogates_strict_and_replace():
    with pytest.raises(KeyEncodingError, match="index 0"):
        bc.murmur3_32("\ud800x")
    with pytest.raises(KeyEncodingError, match="index 0"):
        bc.hash_keys("a\udfffb")
    # replace: Java's String.getBytes(UTF_8): an unpaired surrogate becomes '?', a pair one character
    assert bc.murmur3_32("\ud800x", errors="replace") == 0x11508252
    assert bc.murmur3_32("a\ud83d\udd11b", errors="replace") == reference("a🔑b".encode())
    assert int(bc.hash_keys("\udc00" * 100, errors="replace").raw) == reference(b"?" * 100)
    assert bc.murmur3_32("plain", errors="replace") == reference(b"plain")


@pytest.mark.parametrize("fn", [bc.murmur3_32, bc.hash_keys])
def test_scalar_bad_errors_argument(fn):
    with pytest.raises(ValueError, match="errors must be 'strict' or 'replace', not 'ignore'"):
        fn("abc", errors="ignore")
    with pytest.raises(ValueError, match="not None"):
        fn(b"abc", errors=None)


@pytest.mark.parametrize("bad", [3, 1.5, object()])
def test_scalar_wrong_types_name_the_type(bad):
    with pytest.raises(TypeError, match=type(bad).__name__):
        bc.murmur3_32(bad)
    with pytest.raises(TypeError, match=type(bad).__name__):
        bc.hash_keys(bad)


def test_scalar_missing_key_is_refused_alone():
    # a lone None (or NaN) is no key column; keyless keys are items of a column
    with pytest.raises(TypeError, match="NoneType"):
        bc.murmur3_32(None)
    with pytest.raises(TypeError, match="NoneType"):
        bc.hash_keys(None)


def test_scalar_with_column_goes_through_the_table_path():
    with pytest.raises(ValueError, match="picks a column of a table"):
        bc.murmur3_32("abc", column="k")
    with pytest.raises(ValueError, match="picks a column of a table"):
        bc.hash_keys(b"abc", column=0)


def test_keyword_and_positional_forms():
    assert bc.murmur3_32(keys="a") == reference(b"a")
    assert int(bc.hash_keys(keys=b"a", errors="strict", threads=None).raw) == reference(b"a")
    with pytest.raises(TypeError):
        bc.murmur3_32("a", "strict")  # errors is keyword-only
    with pytest.raises(TypeError):
        bc.murmur3_32()


def test_public_signatures_and_docstrings():
    for fn in (bc.murmur3_32, bc.hash_keys):
        params = inspect.signature(fn).parameters
        assert list(params) == ["keys", "errors", "threads", "column"]
        assert params["errors"].default == "strict" and params["errors"].kind is inspect.Parameter.KEYWORD_ONLY
        assert params["threads"].default is None and params["column"].default is None
        doc = inspect.getdoc(fn)
        assert "Parameters\n----------" in doc and "Raises\n------" in doc


def test_scalar_key_hashes_behave_like_column_ones():
    h = bc.hash_keys("key-1")
    assert repr(h) == "KeyHashes(n=1, keyless=0)"
    with pytest.raises(AttributeError):
        h.raw = 0  # frozen, as KeyHashes always is
    column = bc.hash_keys(["key-1"])
    assert np.array_equal(np.atleast_1d(h.raw), column.raw)
    assert len(bc.KeyHashes(*(np.atleast_1d(x) for x in (h.raw, h.segment_hash, h.bucket_hash, h.has_key)))) == 1


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(), st.binary()))
def test_property_scalar_matches_mmh3(key):
    data = key if isinstance(key, bytes) else key.encode("utf-8", "surrogatepass")
    if isinstance(key, str) and any(0xD800 <= ord(c) <= 0xDFFF for c in key):
        with pytest.raises(KeyEncodingError):
            bc.murmur3_32(key)
        return
    assert bc.murmur3_32(key) == reference(data)
    assert int(bc.hash_keys(key).raw) == reference(data)
