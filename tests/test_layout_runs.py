"""The block-wise readers of each key layout hash as mmh3 hashes the same bytes: runs of one length
read without descriptors (int32 and int64 offsets, string views back to back in one data buffer),
runs that break that pattern anywhere in a chunk, numpy StringDType unpacked a block at a time
(short, arena, heap and missing items), and the in-line describing of exact ASCII str items of a
list next to every other key type. Lengths cross the 16-lane windows (16 to 80 bytes), and arrays
are sliced, chunked, empty, all-null and with nulls."""

from __future__ import annotations

from types import ModuleType

import mmh3
import numpy as np
import pytest

import bucketcore as bc
from _bucketcore import _hashing, _keycolumns
from bucketcore.status import Status

CHUNK = 1024  # keys per kernel step (_keycolumns.pxd); runs are checked per step


def oracle(keys: list[object]) -> list[int]:
    return [
        0 if k is None else mmh3.hash(k.encode() if isinstance(k, str) else bytes(k), 0, signed=False) for k in keys
    ]


def check(kh: bc.KeyHashes, keys: list[object]) -> None:
    assert kh.raw.tolist() == oracle(keys)
    assert kh.has_key.tolist() == [k is not None for k in keys]
    assert kh.segment_hash.tolist() == [h >> 16 for h in oracle(keys)]
    assert kh.bucket_hash.tolist() == [h & 0xFFFF for h in oracle(keys)]


def fixed(n: int, length: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    alphabet = np.array(list("0123456789abcdef-"))
    return ["".join(rng.choice(alphabet, length)) for _ in range(n)]


def with_breaks(keys: list[str]) -> list[str | None]:
    """The keys with the pattern of one length broken: a longer, a shorter, a null and a non-ASCII
    key, inside and at the edges of kernel steps."""
    out: list[str | None] = list(keys)
    for at, value in ((0, None), (5, "short"), (CHUNK - 1, "x" * 80), (CHUNK, "ключ-" * 9), (len(out) - 1, "")):
        if at < len(out):
            out[at] = value
    return out


LENGTHS = [16, 17, 23, 36, 40, 47, 64, 80]
ARROW_LAYOUTS = ["string", "large_string", "binary", "large_binary", "string_view", "binary_view"]


def arrow_array(pa: ModuleType, keys: list[str | None], layout: str):  # type: ignore[no-untyped-def]
    t = getattr(pa, layout)()
    values = [k if k is None or "string" in layout else k.encode() for k in keys]
    return pa.array(values, type=pa.string() if "string" in layout else pa.binary()).cast(t)


@pytest.mark.parametrize("layout", ARROW_LAYOUTS)
@pytest.mark.parametrize("length", LENGTHS)
def test_arrow_run_of_one_length(pa: ModuleType, layout: str, length: int) -> None:
    keys = fixed(3 * CHUNK + 7, length)
    arr = arrow_array(pa, keys, layout)
    check(bc.hash_keys(arr, threads=1), keys)
    for lo, hi in ((1, 2 * CHUNK + 3), (CHUNK - 3, CHUNK + 5), (len(keys) - 17, len(keys))):
        check(bc.hash_keys(arr.slice(lo, hi - lo), threads=1), keys[lo:hi])
    chunked = pa.chunked_array([arr.slice(0, 100), arr.slice(100, 0), arr.slice(100)])
    check(bc.hash_keys(chunked, threads=1), keys)
    assert bc.murmur3_32(arr, threads=1).tolist() == oracle(keys)


@pytest.mark.parametrize("layout", ARROW_LAYOUTS)
def test_arrow_run_broken_anywhere(pa: ModuleType, layout: str) -> None:
    keys = with_breaks(fixed(2 * CHUNK + 9, 36))
    arr = arrow_array(pa, keys, layout)
    check(bc.hash_keys(arr, threads=1), keys)
    check(bc.hash_keys(arr.slice(3, CHUNK + 40), threads=1), keys[3 : CHUNK + 43])
    # a step with one null only in the middle, and one whose values are all null
    one_null = list(fixed(CHUNK, 36, seed=1))
    one_null[CHUNK // 2] = None
    check(bc.hash_keys(arrow_array(pa, one_null, layout), threads=1), one_null)
    check(bc.hash_keys(arrow_array(pa, [None] * 40, layout), threads=1), [None] * 40)
    check(bc.hash_keys(arrow_array(pa, [], layout), threads=1), [])


@pytest.mark.parametrize("layout", ["string_view", "binary_view"])
def test_views_of_one_length_across_data_buffers(pa: ModuleType, layout: str) -> None:
    # values back to back in each of several data buffers (polars' layout), short inline values between
    keys = fixed(3 * CHUNK, 36, seed=2)
    parts = [arrow_array(pa, keys[i : i + 700], layout) for i in range(0, len(keys), 700)]
    inline = arrow_array(pa, ["tiny", "twelve-bytes"], layout)
    arr = pa.concat_arrays([parts[0], inline, *parts[1:]])
    expected = keys[:700] + ["tiny", "twelve-bytes"] + keys[700:]
    assert arr.buffers()[1] is not None and len(arr.buffers()) > 3  # several data buffers
    check(bc.hash_keys(arr, threads=1), expected)


def test_int64_offsets_that_step_but_lie_outside_the_values_are_refused() -> None:
    data = np.frombuffer(b"k" * 64, dtype=np.uint8)
    # offsets stepping by 16 from far past the end of the values: the run check must not read them
    big = np.array([2**62 + 16 * i for i in range(5)], dtype=np.int64)
    col = _keycolumns.arrow_column(big, data, None, 0, 4)
    out = np.empty(4, dtype=np.uint32)
    status, index = _hashing.hash_column(col, out, None, None, None, False, True)
    assert (status, index) == (Status.BC_ERR_ARROW_OFFSETS, 0)
    # a progression from a negative offset
    negative = np.array([-16 + 16 * i for i in range(5)], dtype=np.int64)
    col = _keycolumns.arrow_column(negative, data, None, 0, 4)
    status, index = _hashing.hash_column(col, out, None, None, None, False, True)
    assert (status, index) == (Status.BC_ERR_ARROW_OFFSETS, 0)
    # int32 offsets stepping past the values' end
    past = np.array([0, 32, 64, 96], dtype=np.int32)
    col = _keycolumns.arrow_column(past, data, None, 0, 3)
    status, index = _hashing.hash_column(col, out[:3], None, None, None, False, True)
    assert (status, index) == (Status.BC_ERR_ARROW_OFFSETS, 2)


@pytest.fixture(scope="module")
def string_dtype() -> type:
    if not hasattr(np.dtypes, "StringDType"):
        pytest.skip("numpy < 2 has no StringDType")
    return np.dtypes.StringDType


def test_string_dtype_every_item_form(string_dtype: type) -> None:
    keys: list[str | None] = ["", "a", "x" * 15, "y" * 16, "z" * 255, "w" * 256, "é" * 300, "键🔑", None, "q" * 1000]
    keys = keys * 130  # more than a kernel step
    arr = np.array(keys, dtype=string_dtype(na_object=None))
    # items replaced after creation live on the heap, outside the arena
    for at, value in ((3, "replaced-with-a-longer-string-than-before-" * 3), (1, "b" * 40), (CHUNK + 2, "c" * 5)):
        arr[at] = value
        keys[at] = value
    check(bc.hash_keys(arr, threads=1), keys)
    check(bc.hash_keys(arr[::3], threads=1), keys[::3])
    check(bc.hash_keys(arr[7 : CHUNK + 100], threads=1), keys[7 : CHUNK + 100])
    check(bc.hash_keys(arr[::-1], threads=1), keys[::-1])
    check(bc.hash_keys(arr.reshape(-1, 10)[:, 4], threads=1), keys[4::10])


@pytest.mark.parametrize("length", LENGTHS)
def test_string_dtype_arena_run_of_one_length(string_dtype: type, length: int) -> None:
    keys = fixed(2 * CHUNK + 5, length, seed=length)
    arr = np.array(keys, dtype=string_dtype())
    check(bc.hash_keys(arr, threads=1), keys)
    assert bc.murmur3_32(arr, threads=1).tolist() == oracle(keys)


def test_string_dtype_missing_empty_and_all_missing(string_dtype: type) -> None:
    nan_dtype = string_dtype(na_object=np.nan)
    keys = [None, "", None, "k" * 20]
    check(bc.hash_keys(np.array([np.nan, "", np.nan, "k" * 20], dtype=nan_dtype), threads=1), keys)
    check(bc.hash_keys(np.array([None] * 50, dtype=string_dtype(na_object=None)), threads=1), [None] * 50)
    check(bc.hash_keys(np.array([], dtype=string_dtype()), threads=1), [])
    with pytest.raises(TypeError, match="index 0"):
        bc.murmur3_32(np.array([None, "a"], dtype=string_dtype(na_object=None)))


def test_list_of_ascii_str_next_to_every_other_key_type() -> None:
    class Name(str):
        pass

    base = fixed(CHUNK + 30, 36, seed=9)
    keys: list[object] = list(base)
    others = {
        0: b"raw-bytes",
        7: bytearray(b"a bytearray key"),
        8: memoryview(b"a memoryview key"),
        100: "ключ",
        101: Name("a str subclass"),
        CHUNK - 1: None,
        CHUNK: float("nan"),
        CHUNK + 1: "x" * 300,
        CHUNK + 2: "",
        CHUNK + 3: "é",
    }
    for at, value in others.items():
        keys[at] = value
    expect = [None if (k is None or isinstance(k, float)) else k for k in keys]
    check(bc.hash_keys(keys, threads=1), expect)
    check(bc.hash_keys(tuple(keys), threads=1), expect)
    check(bc.hash_keys(np.array(keys, dtype=object), threads=1), expect)
    plain = [k for k in keys if isinstance(k, (str, bytes))]
    assert bc.murmur3_32(plain, threads=1).tolist() == oracle(plain)


def test_list_bad_item_after_ascii_items_names_its_index() -> None:
    keys: list[object] = fixed(CHUNK + 10, 36)
    keys[CHUNK + 4] = 12
    with pytest.raises(TypeError, match=f"index {CHUNK + 4}"):
        bc.hash_keys(keys, threads=1)
    keys[CHUNK + 4] = "bad \ud800 surrogate"
    with pytest.raises(bc.KeyEncodingError, match=f"index {CHUNK + 4}"):
        bc.murmur3_32(keys, threads=1)
    released = memoryview(b"gone")
    released.release()
    keys[3] = released
    with pytest.raises(ValueError, match="index 3"):
        bc.hash_keys(keys, threads=1)


def test_list_items_are_released_after_hashing() -> None:
    import sys

    keys = [f"key-{i:032d}" for i in range(3 * CHUNK)]
    before = [sys.getrefcount(k) for k in keys[:: CHUNK // 2]]
    bc.hash_keys(keys, threads=1)
    bc.murmur3_32(keys, threads=1)
    assert [sys.getrefcount(k) for k in keys[:: CHUNK // 2]] == before
