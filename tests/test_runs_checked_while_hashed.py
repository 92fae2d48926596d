"""Runs hashed while their string views or StringDType items are checked: the SIMD path reads a
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
from typing import Any

import numpy as np
import pytest

import bucketcore as bc
from _bucketcore import _hashing, _keycolumns
from bucketcore import hashing
from bucketcore.hashing import classify_keys, key_columns

mmh3 = pytest.importorskip("mmh3", reason="mmh3 is the reference hash of these tests")

from test_arrow_capsule import Producer, _views_in_buffers  # noqa: E402

CHUNK = 1024  # keys per kernel step (_keycolumns.pxd); a run is found and checked per step
N = 2 * CHUNK + 21  # not a multiple of 16: a tail of 5 keys after the last whole group
PATHS = ["scalar", "interleaved"] + (["simd"] if _hashing.cpu_has_simd() else [])
AT = [0, 1, 15, 16, 17, CHUNK - 1, CHUNK, CHUNK + 1, N - 5, N - 3, N - 1]


@pytest.fixture(autouse=True)
def restore_path() -> Any:
    yield
    hashing.set_kernel_path("auto")


def oracle(values: list[bytes]) -> list[int]:
    return [mmh3.hash(v, 0, signed=False) for v in values]


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


# ----------------------------------------------------------------------------------------------
# numpy StringDType

needs_stringdtype = pytest.mark.skipif(
    not hasattr(np, "dtypes") or not hasattr(np.dtypes, "StringDType"), reason="numpy < 2 has no StringDType"
)


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
