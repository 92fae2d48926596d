"""Keys hash as mmh3 hashes the same bytes however they lie in memory.

The block-wise readers of each key layout: runs of one length read without descriptors (int32 and
int64 offsets, string views back to back in one data buffer), runs that break that pattern
anywhere in a chunk, numpy StringDType unpacked a block at a time (short, arena, heap and missing
items), and the in-line describing of exact ASCII str items of a list next to every other key
type. Lengths cross the 16-lane windows (16 to 80 bytes), and arrays are sliced, chunked, empty,
all-null and with nulls.

numpy StringDType strided runs: arena strings of one length lying a constant distance apart
(numpy puts each string's length prefix between them) are hashed straight from the arena, like an
Arrow run of one length. Covered: runs of every window length, the long-string prefix, sliced and
strided arrays, and every way a run breaks (another length, a short string kept inside its item, a
string moved to the heap, a missing item, reversed order), at and between kernel steps, on every
Murmur3 path and thread count.

Runs hashed while their string views or StringDType items are checked: the SIMD path reads a
run's key bytes and its views or items in one pass and keeps the hashes only when every view or
item is the one the run predicts; the other paths check first and hash after. A run broken by ONE
view or item anywhere (the first keys, either side of a 16-key group, the last key of a kernel step
and the first of the next, the tail after the last whole group, either side of a data buffer's end)
is hashed key by key, and every key hashes as mmh3 hashes its bytes, on every hash path. A view
whose 4-byte prefix alone differs does not break a run: the prefix is not compared, the value's
bytes are read from its buffer."""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from types import ModuleType
from typing import Any

import mmh3
import numpy as np
import pytest
from arrow_producer import Producer
from test_arrow_capsules_hash_like_mmh3_and_are_released_once import _views_in_buffers

import bucketcore as bc
from _bucketcore import _hashing, _keycolumns
from bucketcore import hashing
from bucketcore.hashing import classify_keys, key_columns
from bucketcore.status import Status

CHUNK = 1024  # keys per kernel step (_keycolumns.pxd); runs are found and checked per step
N = 2 * CHUNK + 21  # not a multiple of 16: a tail of 5 keys after the last whole group
PATHS = ["scalar", "interleaved"] + (["simd"] if _hashing.cpu_has_simd() else [])
AT = [0, 1, 15, 16, 17, CHUNK - 1, CHUNK, CHUNK + 1, N - 5, N - 3, N - 1]


@pytest.fixture(autouse=True)
def restore_path() -> Any:
    yield
    hashing.set_kernel_path("auto")


needs_stringdtype = pytest.mark.skipif(
    not hasattr(np, "dtypes") or not hasattr(np.dtypes, "StringDType"), reason="numpy < 2 has no StringDType"
)


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


# --------------------------------------------------------------------------------------------
# numpy StringDType strided runs: hashed straight from the arena


def check_column(arr: np.ndarray, keys: list[str | None]) -> None:
    expect = oracle(keys)
    for threads in (1, 2):
        kh = bc.hash_keys(arr, threads=threads)
        assert kh.raw.tolist() == expect
        assert kh.has_key.tolist() == [k is not None for k in keys]
        assert kh.segment_hash.tolist() == [h >> 16 for h in expect]
        assert kh.bucket_hash.tolist() == [h & 0xFFFF for h in expect]
    if None not in keys:
        assert bc.murmur3_32(arr, threads=1).tolist() == expect


def run_of(arr: np.ndarray, pos: int, m: int) -> tuple[int, int] | None:
    [column] = hashing.key_columns(arr)
    return _keycolumns.described_keys(column, pos, m)[3]


def string_array(keys: list[str | None]) -> np.ndarray:
    return np.array(keys, dtype=np.dtypes.StringDType(na_object=None))


@needs_stringdtype
@pytest.mark.parametrize("length", [16, 17, 23, 36, 40, 47, 64, 80, 255, 256, 300])
def test_equal_length_keys_are_one_strided_run(length: int) -> None:
    keys = fixed(2 * CHUNK + 7, length, seed=length)
    arr = string_array(keys)
    found = run_of(arr, 0, CHUNK)
    assert found is not None and found[0] == length
    assert found[1] > length  # a length prefix lies between two strings
    assert run_of(arr, 2 * CHUNK, 7) == found
    check_column(arr, keys)


@needs_stringdtype
@pytest.mark.parametrize("path", PATHS)
def test_every_hash_path_reads_a_strided_run(path: str) -> None:
    hashing.set_kernel_path(path)
    keys = fixed(3 * CHUNK // 2 + 3, 36, seed=1) + fixed(CHUNK + 5, 40, seed=2)
    arr = string_array(keys)
    assert run_of(arr, 0, CHUNK) is not None
    check_column(arr, keys)


@needs_stringdtype
def test_keys_shorter_than_a_window_are_described_one_by_one() -> None:
    # 15 bytes: kept inside the item; 16 bytes: the shortest run
    short = fixed(CHUNK + 3, 15, seed=3)
    arr = string_array(short)
    assert run_of(arr, 0, CHUNK) is None
    check_column(arr, short)
    mixed = [k if i % 2 else k + "x" for i, k in enumerate(short)]  # 15 and 16 bytes in turn
    arr = string_array(mixed)
    assert run_of(arr, 0, CHUNK) is None
    check_column(arr, mixed)


@needs_stringdtype
def test_mixed_lengths_are_no_run() -> None:
    keys = [k[: 16 + i % 30] for i, k in enumerate(fixed(2 * CHUNK, 50, seed=4))]
    arr = string_array(keys)
    assert run_of(arr, 0, CHUNK) is None
    check_column(arr, keys)


@needs_stringdtype
@pytest.mark.parametrize("at", [0, 1, 2, 3, 4, 5, 500, CHUNK - 2, CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK - 1])
@pytest.mark.parametrize("breaker", ["longer", "shorter", "inline", "missing", "empty"])
def test_a_run_broken_anywhere_hashes_every_key(at: int, breaker: str) -> None:
    keys: list[str | None] = list(fixed(2 * CHUNK, 36, seed=at))
    other = {"longer": "L" * 37, "shorter": "S" * 35, "inline": "tiny", "missing": None, "empty": ""}[breaker]
    keys[at] = other
    arr = string_array(keys)
    step = at // CHUNK * CHUNK
    assert run_of(arr, step, CHUNK) is None  # the step holding the break is described key by key
    other_step = CHUNK - step
    assert run_of(arr, other_step, CHUNK) == (36, run_of(string_array(fixed(4, 36)), 0, 4)[1])
    check_column(arr, keys)
    # the run ending just before the break, and starting just after it
    if at > 0:
        assert run_of(arr, max(0, at - 40), min(40, at)) is not None
    if at + 1 < len(keys):
        assert run_of(arr, at + 1, min(40, len(keys) - at - 1)) is not None


@needs_stringdtype
def test_a_string_moved_to_the_heap_breaks_the_run() -> None:
    keys: list[str | None] = list(fixed(CHUNK + 10, 36, seed=5))
    arr = string_array(keys)
    # the same length again: numpy rewrites it in its arena slot, the run stays
    arr[7] = keys[7] = "r" * 36
    assert run_of(arr, 0, CHUNK) is not None
    check_column(arr, keys)
    # a longer string does not fit its slot: numpy puts it on the heap
    arr[9] = keys[9] = "h" * 60
    assert run_of(arr, 0, CHUNK) is None
    assert run_of(arr, 10, CHUNK) is not None
    check_column(arr, keys)


@needs_stringdtype
def test_sliced_and_strided_arrays() -> None:
    keys = fixed(3 * CHUNK + 11, 36, seed=6)
    arr = string_array(keys)
    for lo, hi, step in ((5, None, 1), (3, CHUNK + 7, 1), (0, None, 2), (1, None, 3), (7, 2 * CHUNK, 5)):
        part = arr[lo:hi:step]
        assert run_of(part, 0, min(CHUNK, len(part))) == (36, run_of(arr, 0, 2)[1] * step)
        check_column(part, keys[lo:hi:step])
    # reversed: the offsets step backwards, described one by one
    assert run_of(arr[::-1], 0, CHUNK) is None
    check_column(arr[::-1], keys[::-1])
    # a column of a 2-D array: items a row apart
    grid = arr[: 3 * CHUNK].reshape(-1, 3)
    check_column(grid[:, 1], keys[1 : 3 * CHUNK : 3])
    check_column(arr[:0], [])
    check_column(arr[:1], keys[:1])


@needs_stringdtype
def test_na_object_nan_and_missing_items_around_runs() -> None:
    keys: list[str | None] = list(fixed(2 * CHUNK, 40, seed=7))
    for at in (0, CHUNK - 1, CHUNK + 17):
        keys[at] = None
    arr = np.array([np.nan if k is None else k for k in keys], dtype=np.dtypes.StringDType(na_object=np.nan))
    check_column(arr, keys)
    with pytest.raises(TypeError, match="index 0"):
        bc.murmur3_32(arr, threads=1)


# --------------------------------------------------------------------------------------------
# runs hashed while their views or items are checked


def check_hashes(keys: Callable[[], Any], values: list[bytes]) -> None:
    """Every output of hash_keys and murmur3_32 over keys() (a fresh column each call: a capsule
    pair is consumed once), on one thread and on two, is mmh3's."""
    expect = oracle(values)
    for threads in (1, 2):
        kh = bc.hash_keys(keys(), threads=threads)
        assert kh.raw.tolist() == expect
        assert kh.segment_hash.tolist() == [h >> 16 for h in expect]
        assert kh.bucket_hash.tolist() == [h & 0xFFFF for h in expect]
        assert kh.has_key.all()
        assert bc.murmur3_32(keys(), threads=threads).tolist() == expect


def run_in(keys: Any, pos: int, m: int) -> tuple[int, int] | None:
    """The run the describer finds in keys [pos, pos+m), or None."""
    _, source = classify_keys(keys)
    [column] = key_columns(source)
    return _keycolumns.described_keys(column, pos, m)[3]


# ----------------------------------------------------------------------------------------------
# string views


def uuid_like(n: int) -> list[bytes]:
    return [f"{i:06d}-{i * 104729:029d}".encode() for i in range(n)]


def view_column(counts: list[int], at: int, word: str) -> tuple[Callable[[], Any], list[bytes]]:
    """A string_view column of N values of 36 bytes in data buffers of counts[i] values each (as
    polars fills its buffers), view ``at`` changed in one word while still naming a valid value;
    returns what makes a fresh capsule pair of it (keeping its buffers alive) and the values it
    names."""
    values = uuid_like(N)
    views, buffers = _views_in_buffers(values, counts)
    v = views.reshape(-1, 16)
    if word == "length":  # the value's first 35 bytes, at its own place
        values[at] = values[at][:35]
        v[at, 0:4] = np.frombuffer(np.int32(35).tobytes(), np.uint8)
    elif word == "index":  # the same bytes, kept in a buffer of their own
        buffers.append(np.frombuffer(values[at], np.uint8).copy())
        v[at, 8:12] = np.frombuffer(np.int32(len(buffers) - 1).tobytes(), np.uint8)
        v[at, 12:16] = np.frombuffer(np.int32(0).tobytes(), np.uint8)
    elif word == "offset":  # another value of the same buffer: its first, or the next one after it
        index = int(np.frombuffer(v[at, 8:12].tobytes(), np.int32)[0])
        first = sum(counts[:index])
        other = first if first != at else at + 1
        values[at] = values[other]
        v[at, 12:16] = v[other, 12:16]
    else:  # the prefix: not compared, the view still names its own value
        assert word == "prefix"
        v[at, 4:8] = np.frombuffer(b"\xff\xfe\xfd\xfc", np.uint8)
    p = Producer()
    sizes = np.array([b.size for b in buffers], np.int64)
    return lambda: p.pair(p.schema("vz"), p.array(N, [None, views, *buffers, sizes])), values


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("word", ["length", "offset", "index", "prefix"])
@pytest.mark.parametrize("at", AT)
def test_a_view_run_broken_by_one_view_hashes_every_value_like_mmh3(path: str, word: str, at: int) -> None:
    hashing.set_kernel_path(path)
    pair, values = view_column([N], at, word)
    step = at // CHUNK * CHUNK
    assert run_in(pair(), step, min(CHUNK, N - step)) == ((36, 36) if word == "prefix" else None)
    check_hashes(pair, values)


def test_a_view_run_broken_at_any_place_of_its_groups_hashes_like_mmh3() -> None:
    # the view names another value than the run's, so a hash kept from the run would differ from
    # mmh3's: each place of the first two groups of 16, and of the last group and the tail
    for at in [*range(32), *range(N - 21, N)]:
        pair, values = view_column([N], at, "offset")
        check_hashes(pair, values)


BUFFER_ENDS = [700, 1300, N - 2000]  # buffer 0 ends inside step 0, buffer 1 inside step 1


AT_BUFFER_ENDS = [0, 1, 15, 16, 17, 699, 700, 701, 715, 716, CHUNK - 1, CHUNK, 1999, 2000, 2001, N - 3, N - 1]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("word", ["length", "offset", "index", "prefix"])
@pytest.mark.parametrize("at", AT_BUFFER_ENDS)
def test_view_runs_ending_at_buffer_ends_broken_by_one_view_hash_like_mmh3(path: str, word: str, at: int) -> None:
    hashing.set_kernel_path(path)
    pair, values = view_column(BUFFER_ENDS, at, word)
    check_hashes(pair, values)


@pytest.mark.parametrize("path", PATHS)
def test_view_runs_ending_at_buffer_ends_unbroken_hash_like_mmh3(path: str) -> None:
    hashing.set_kernel_path(path)
    pair, values = view_column(BUFFER_ENDS, 5, "prefix")
    check_hashes(pair, values)


@pytest.mark.parametrize("path", PATHS)
def test_a_null_inside_a_view_run_is_keyless_and_the_rest_hash_like_mmh3(path: str) -> None:
    hashing.set_kernel_path(path)
    values = uuid_like(N)
    for at in (0, 17, CHUNK, N - 1):
        views, buffers = _views_in_buffers(values, BUFFER_ENDS)
        bits = np.packbits([i != at for i in range(N)], bitorder="little")
        p = Producer()
        sizes = np.array([b.size for b in buffers], np.int64)
        kh = bc.hash_keys(p.pair(p.schema("vz"), p.array(N, [bits, views, *buffers, sizes], null_count=1)))
        expect = oracle(values)
        expect[at] = 0
        assert kh.raw.tolist() == expect
        assert kh.has_key.tolist() == [i != at for i in range(N)]


def string_items(arr: np.ndarray) -> Any:
    """The 16-byte items of a contiguous StringDType array, writable in place."""
    assert arr.strides == (16,)
    return (ctypes.c_uint64 * (2 * arr.size)).from_address(arr.ctypes.data)


@needs_stringdtype
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("item", ["offset", "size", "heap"])
@pytest.mark.parametrize("at", AT)
def test_a_stringdtype_run_broken_by_one_item_hashes_every_key_like_mmh3(path: str, item: str, at: int) -> None:
    hashing.set_kernel_path(path)
    keys = [v.decode() for v in uuid_like(N)]
    arr = np.array(keys, dtype=np.dtypes.StringDType())
    words = string_items(arr)
    other = at + 1 if at + 1 < N else at - 1
    if item == "offset":  # an arena string of the run's length, but another key's
        words[2 * at] = words[2 * other]
        keys[at] = keys[other]
    elif item == "size":  # the key's own place, one byte shorter
        assert words[2 * at + 1] & 0xFF == 36
        words[2 * at + 1] -= 1
        keys[at] = keys[at][:35]
    else:  # the same key, moved out of the arena to the heap
        arr[at] = "h" * 60
        arr[at] = keys[at]
        assert words[2 * at + 1] >> 56 != words[2 * other + 1] >> 56  # no longer an arena string
    assert arr.tolist() == keys  # numpy reads the broken item as the key it names
    step = at // CHUNK * CHUNK
    assert run_in(arr, step, min(CHUNK, N - step)) is None
    other_step = CHUNK if step == 0 else 0
    assert run_in(arr, other_step, CHUNK) is not None
    check_hashes(lambda: arr, [k.encode() for k in keys])
