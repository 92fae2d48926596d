"""The fast paths of murmur3_32 and hash_keys give what the general path gives.

One str or bytes key per call is hashed by the kernel's C function directly: the same hashes as
mmh3 and as the column path, the same errors. A list or 1-D numpy array too short for a second
thread takes the short-list path: exactly the general path's hashes, the same refusals with the
same errors."""

from __future__ import annotations

import inspect
from typing import Any

import mmh3
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mixed_keys import mixed_keys

import bucketcore as bc
from bucketcore.errors import KeyEncodingError
from bucketcore.harness.workloads import uuid_keys


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
        assert "Parameters\n----------" in fn.__doc__ and "Raises\n------" in fn.__doc__


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


# --------------------------------------------------------------------------------------------
# short lists and 1-D arrays: the short-list path against the general one (threads= takes the general path)


def _hash_list_keys(n: int, seed: int) -> list[Any]:
    """mixed_keys plus every other key kind a list may hold: bytearray, memoryview, NaN, non-ASCII."""
    keys = mixed_keys(n, seed)
    for i in range(3, n, 11):
        keys[i] = (bytearray(b"ba-%d" % i), memoryview(b"mv-%d" % i), float("nan"), f"ключ-{i}")[i % 4]
    return keys


def _mmh3(key: Any) -> int:
    data = key.encode() if isinstance(key, str) else bytes(key)
    return mmh3.hash(data, 0, signed=False)


@pytest.mark.parametrize("n", [0, 1, 15, 16, 17, 1000, 5000])
def test_hash_keys_of_a_short_list_gives_the_general_paths_hashes(n: int) -> None:
    keys = _hash_list_keys(n, n + 11)
    short = bc.hash_keys(keys)
    general = bc.hash_keys(keys, threads=1)  # threads= takes the general path
    assert type(short) is type(general)
    for name in ("raw", "segment_hash", "bucket_hash", "has_key"):
        x, y = getattr(short, name), getattr(general, name)
        assert (x.dtype, x.shape, x.flags.writeable) == (y.dtype, y.shape, y.flags.writeable), name
        np.testing.assert_array_equal(x, y, err_msg=name)
    keyed = [k is not None and k == k for k in keys]  # None and NaN are keyless
    assert short.has_key.tolist() == keyed
    assert short.raw.tolist() == [_mmh3(k) if ok else 0 for k, ok in zip(keys, keyed)]
    np.testing.assert_array_equal(short.segment_hash, short.raw >> 16)
    np.testing.assert_array_equal(short.bucket_hash, short.raw & 0xFFFF)
    plain = [k for k, ok in zip(keys, keyed) if ok]
    raw = bc.murmur3_32(plain)
    assert (raw.dtype, raw.tolist()) == (np.dtype(np.uint32), [_mmh3(k) for k in plain])
    np.testing.assert_array_equal(raw, bc.murmur3_32(plain, threads=1))


def test_a_short_list_with_errors_replace_hashes_a_surrogate_as_the_general_path() -> None:
    keys = ["a", "b\ud800c", None, b"d"]
    short, general = bc.hash_keys(keys, errors="replace"), bc.hash_keys(keys, errors="replace", threads=1)
    np.testing.assert_array_equal(short.raw, general.raw)
    assert short.raw[1] == _mmh3("b?c")
    np.testing.assert_array_equal(bc.murmur3_32(["b\ud800c"], errors="replace"), [_mmh3("b?c")])


@pytest.mark.parametrize(
    ("call", "keys", "options", "error", "message"),
    [
        (bc.hash_keys, ["a", 3.5, "b"], {}, TypeError, "index 1"),
        (bc.hash_keys, ["a", "b", "x\ud800"], {}, bc.KeyEncodingError, "index 2 contains a surrogate"),
        (bc.hash_keys, ["a"], {"errors": "ignore"}, ValueError, "errors must be"),
        (bc.murmur3_32, ["a", None], {}, TypeError, "index 1"),
        (bc.murmur3_32, ["a", 7], {}, TypeError, "index 1"),
        (bc.murmur3_32, [], {"errors": 1}, ValueError, "errors must be"),
    ],
)
def test_a_short_list_refused_raises_the_general_paths_error(
    call: Any, keys: list[Any], options: dict[str, Any], error: type, message: str
) -> None:
    with pytest.raises(error, match=message) as short:
        call(keys, **options)
    with pytest.raises(error) as general:
        call(keys, threads=1, **options)
    assert str(short.value) == str(general.value)


def _arrays(keys: list[str]) -> dict[str, np.ndarray]:
    """The keys (some missing where the dtype can say so) in every 1-D numpy layout."""
    with_missing: list[Any] = [None if i % 7 == 3 else k for i, k in enumerate(keys)]
    arrays = {
        "S": np.array([k.encode() for k in keys], dtype="S36"),
        "U": np.array(keys, dtype="U36"),
        "U swapped": np.array(keys, dtype=">U36"),
        "U strided": np.array([k for k in keys for _ in range(2)], dtype="U36")[::2],
        "object": np.array(with_missing, dtype=object),
    }
    if hasattr(np.dtypes, "StringDType"):
        arrays["StringDType"] = np.array(with_missing, dtype=np.dtypes.StringDType(na_object=None))
    return arrays


@pytest.mark.parametrize("n", [0, 1, 16, 1000])
def test_hash_keys_of_a_short_array_gives_the_general_paths_hashes(n: int) -> None:
    keys = list(uuid_keys(n, seed=n + 3)) if n else []
    expected = np.array([_mmh3(k) for k in keys], dtype=np.uint32)
    for name, arr in _arrays(keys).items():
        short, general = bc.hash_keys(arr), bc.hash_keys(arr, threads=1)
        for field in ("raw", "segment_hash", "bucket_hash", "has_key"):
            x, y = getattr(short, field), getattr(general, field)
            assert (x.dtype, x.shape) == (y.dtype, y.shape), (name, field)
            np.testing.assert_array_equal(x, y, err_msg=f"{name} {field}")
        keyed = short.has_key
        np.testing.assert_array_equal(short.raw, np.where(keyed, expected, 0), err_msg=name)
        if keyed.all():
            np.testing.assert_array_equal(bc.murmur3_32(arr), expected, err_msg=name)
    if not hasattr(np.dtypes, "StringDType"):
        pytest.fail("numpy has no StringDType: the StringDType row of this test did not run")


def test_a_short_array_refused_raises_the_general_paths_error() -> None:
    for call, arr, message in (
        (bc.murmur3_32, np.array(["a", None], dtype=object), "index 1"),
        (bc.hash_keys, np.array(["a", 3.5], dtype=object), "index 1"),
        (bc.hash_keys, np.array([1, 2]), "dtype int64"),
    ):
        with pytest.raises((TypeError, ValueError), match=message) as short:
            call(arr)
        with pytest.raises(type(short.value)) as general:
            call(arr, threads=1)
        assert str(short.value) == str(general.value)
