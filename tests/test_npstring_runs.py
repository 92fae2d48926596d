"""numpy StringDType strided runs: arena strings of one length lying a constant distance apart (numpy
puts each string's length prefix between them) are hashed straight from the arena, like an Arrow run
of one length, and hash as mmh3 hashes the same bytes. Covered: runs of every window length, the
long-string prefix, sliced and strided arrays, and every way a run breaks (another length, a short
string kept inside its item, a string moved to the heap, a missing item, reversed order), at and
between kernel steps, on every Murmur3 path and thread count."""

from __future__ import annotations

import mmh3
import numpy as np
import pytest

import bucketcore as bc
from _bucketcore import _hashing, _keycolumns
from bucketcore import hashing

CHUNK = 1024  # keys per kernel step (_keycolumns.pxd); a run is found per step
PATHS = ["scalar", "interleaved"] + (["simd"] if _hashing.cpu_has_simd() else [])

pytestmark = pytest.mark.skipif(
    not hasattr(np, "dtypes") or not hasattr(np.dtypes, "StringDType"), reason="numpy < 2 has no StringDType"
)


@pytest.fixture(autouse=True)
def restore_path():
    yield
    hashing.set_kernel_path("auto")


def oracle(keys: list[str | None]) -> list[int]:
    return [0 if k is None else mmh3.hash(k.encode(), 0, signed=False) for k in keys]


def check(arr: np.ndarray, keys: list[str | None]) -> None:
    expect = oracle(keys)
    for threads in (1, 2):
        kh = bc.hash_keys(arr, threads=threads)
        assert kh.raw.tolist() == expect
        assert kh.has_key.tolist() == [k is not None for k in keys]
        assert kh.segment_hash.tolist() == [h >> 16 for h in expect]
        assert kh.bucket_hash.tolist() == [h & 0xFFFF for h in expect]
    if None not in keys:
        assert bc.murmur3_32(arr, threads=1).tolist() == expect


def keys_of(n: int, length: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    alphabet = np.array(list("0123456789abcdef-"))
    return ["".join(rng.choice(alphabet, length)) for _ in range(n)]


def run_of(arr: np.ndarray, pos: int, m: int) -> tuple[int, int] | None:
    [column] = hashing.key_columns(arr)
    return _keycolumns.described_keys(column, pos, m)[3]


def string_array(keys: list[str | None]) -> np.ndarray:
    return np.array(keys, dtype=np.dtypes.StringDType(na_object=None))


@pytest.mark.parametrize("length", [16, 17, 23, 36, 40, 47, 64, 80, 255, 256, 300])
def test_equal_length_keys_are_one_strided_run(length: int) -> None:
    keys = keys_of(2 * CHUNK + 7, length, seed=length)
    arr = string_array(keys)
    found = run_of(arr, 0, CHUNK)
    assert found is not None and found[0] == length
    assert found[1] > length  # a length prefix lies between two strings
    assert run_of(arr, 2 * CHUNK, 7) == found
    check(arr, keys)


@pytest.mark.parametrize("path", PATHS)
def test_every_hash_path_reads_a_strided_run(path: str) -> None:
    hashing.set_kernel_path(path)
    keys = keys_of(3 * CHUNK // 2 + 3, 36, seed=1) + keys_of(CHUNK + 5, 40, seed=2)
    arr = string_array(keys)
    assert run_of(arr, 0, CHUNK) is not None
    check(arr, keys)


def test_keys_shorter_than_a_window_are_described_one_by_one() -> None:
    # 15 bytes: kept inside the item; 16 bytes: the shortest run
    short = keys_of(CHUNK + 3, 15, seed=3)
    arr = string_array(short)
    assert run_of(arr, 0, CHUNK) is None
    check(arr, short)
    mixed = [k if i % 2 else k + "x" for i, k in enumerate(short)]  # 15 and 16 bytes in turn
    arr = string_array(mixed)
    assert run_of(arr, 0, CHUNK) is None
    check(arr, mixed)


def test_mixed_lengths_are_no_run() -> None:
    keys = [k[: 16 + i % 30] for i, k in enumerate(keys_of(2 * CHUNK, 50, seed=4))]
    arr = string_array(keys)
    assert run_of(arr, 0, CHUNK) is None
    check(arr, keys)


@pytest.mark.parametrize("at", [0, 1, 2, 3, 4, 5, 500, CHUNK - 2, CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK - 1])
@pytest.mark.parametrize("breaker", ["longer", "shorter", "inline", "missing", "empty"])
def test_a_run_broken_anywhere_hashes_every_key(at: int, breaker: str) -> None:
    keys: list[str | None] = list(keys_of(2 * CHUNK, 36, seed=at))
    other = {"longer": "L" * 37, "shorter": "S" * 35, "inline": "tiny", "missing": None, "empty": ""}[breaker]
    keys[at] = other
    arr = string_array(keys)
    step = at // CHUNK * CHUNK
    assert run_of(arr, step, CHUNK) is None  # the step holding the break is described key by key
    other_step = CHUNK - step
    assert run_of(arr, other_step, CHUNK) == (36, run_of(string_array(keys_of(4, 36)), 0, 4)[1])
    check(arr, keys)
    # the run ending just before the break, and starting just after it
    if at > 0:
        assert run_of(arr, max(0, at - 40), min(40, at)) is not None
    if at + 1 < len(keys):
        assert run_of(arr, at + 1, min(40, len(keys) - at - 1)) is not None


def test_a_string_moved_to_the_heap_breaks_the_run() -> None:
    keys: list[str | None] = list(keys_of(CHUNK + 10, 36, seed=5))
    arr = string_array(keys)
    # the same length again: numpy rewrites it in its arena slot, the run stays
    arr[7] = keys[7] = "r" * 36
    assert run_of(arr, 0, CHUNK) is not None
    check(arr, keys)
    # a longer string does not fit its slot: numpy puts it on the heap
    arr[9] = keys[9] = "h" * 60
    assert run_of(arr, 0, CHUNK) is None
    assert run_of(arr, 10, CHUNK) is not None
    check(arr, keys)


def test_sliced_and_strided_arrays() -> None:
    keys = keys_of(3 * CHUNK + 11, 36, seed=6)
    arr = string_array(keys)
    for lo, hi, step in ((5, None, 1), (3, CHUNK + 7, 1), (0, None, 2), (1, None, 3), (7, 2 * CHUNK, 5)):
        part = arr[lo:hi:step]
        assert run_of(part, 0, min(CHUNK, len(part))) == (36, run_of(arr, 0, 2)[1] * step)
        check(part, keys[lo:hi:step])
    # reversed: the offsets step backwards, described one by one
    assert run_of(arr[::-1], 0, CHUNK) is None
    check(arr[::-1], keys[::-1])
    # a column of a 2-D array: items a row apart
    grid = arr[: 3 * CHUNK].reshape(-1, 3)
    check(grid[:, 1], keys[1 : 3 * CHUNK : 3])
    check(arr[:0], [])
    check(arr[:1], keys[:1])


def test_na_object_nan_and_missing_items_around_runs() -> None:
    keys: list[str | None] = list(keys_of(2 * CHUNK, 40, seed=7))
    for at in (0, CHUNK - 1, CHUNK + 17):
        keys[at] = None
    arr = np.array([np.nan if k is None else k for k in keys], dtype=np.dtypes.StringDType(na_object=np.nan))
    check(arr, keys)
    with pytest.raises(TypeError, match="index 0"):
        bc.murmur3_32(arr, threads=1)
