"""Every hash path gives mmh3's hashes, and the fast paths give exactly what the general path gives.

- One str or bytes key per call is hashed by the kernel's C function directly: the same hashes as
  mmh3 and as the column path, the same errors.
- A list or 1-D numpy array too short for a second thread takes the short-list path: exactly the
  general path's hashes, the same refusals with the same errors.
- Every Murmur3 path (scalar, interleaved, simd) and every thread count gives identical hashes.

The one-key and short-list tests come first: the path tests force a Murmur3 path and leave it set
until the module ends (restore_path is module-scoped)."""

from __future__ import annotations

import inspect
import os
import random
import subprocess
import sys
import uuid
from types import ModuleType
from typing import Any

import mmh3
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mixed_keys import mixed_keys

import bucketcore as bc
from bucketcore import hashing
from bucketcore.errors import KeyEncodingError
from bucketcore.harness.workloads import uuid_keys
from bucketcore.status import Status

PATHS = ["scalar", "interleaved"] + (["simd"] if hashing._hashing.cpu_has_simd() else [])


@pytest.fixture(scope="module", autouse=True)
def restore_path():
    yield
    hashing.set_kernel_path("auto")


def oracle(key: str | bytes | None) -> int:
    if key is None:
        return 0
    return mmh3.hash(key.encode("utf-8") if isinstance(key, str) else key, 0, signed=False)


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
    expected = oracle(key.encode("utf-8"))
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
    assert bc.murmur3_32(key) == oracle(key)
    assert int(bc.hash_keys(key).raw) == oracle(key)


def test_scalar_subclasses_of_str_and_bytes_are_keys():
    class Name(str):
        pass

    class Raw(bytes):
        pass

    assert bc.murmur3_32(Name("key-1")) == oracle(b"key-1")
    assert bc.murmur3_32(Raw(b"key-1")) == oracle(b"key-1")
    assert int(bc.hash_keys(Name("ключ")).raw) == oracle("ключ".encode())


def test_scalar_surrogates_strict_and_replace():
    with pytest.raises(KeyEncodingError, match="index 0"):
        bc.murmur3_32("\ud800x")
    with pytest.raises(KeyEncodingError, match="index 0"):
        bc.hash_keys("a\udfffb")
    # replace: Java's String.getBytes(UTF_8): an unpaired surrogate becomes '?', a pair one character
    assert bc.murmur3_32("\ud800x", errors="replace") == 0x11508252
    assert bc.murmur3_32("a\ud83d\udd11b", errors="replace") == oracle("a🔑b".encode())
    assert int(bc.hash_keys("\udc00" * 100, errors="replace").raw) == oracle(b"?" * 100)
    assert bc.murmur3_32("plain", errors="replace") == oracle(b"plain")


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
    assert bc.murmur3_32(keys="a") == oracle(b"a")
    assert int(bc.hash_keys(keys=b"a", errors="strict", threads=None).raw) == oracle(b"a")
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
    assert bc.murmur3_32(key) == oracle(data)
    assert int(bc.hash_keys(key).raw) == oracle(data)


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


# --------------------------------------------------------------------------------------------
# every Murmur3 path and every thread count


def all_paths(keys, **kwargs):
    results = {}
    for path in PATHS:
        hashing.set_kernel_path(path)
        assert hashing.kernel_path() == path
        for threads in (1, 2, 3):
            kh = bc.hash_keys(keys, threads=threads, **kwargs)
            results[(path, threads)] = (kh.raw.tolist(), kh.has_key.tolist())
    return results


key_strategy = st.one_of(
    st.none(),
    st.binary(max_size=300),
    st.text(st.characters(exclude_categories=["Cs"]), max_size=100),
    st.text(st.characters(max_codepoint=0x7F), min_size=0, max_size=300),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(key_strategy, max_size=70))
def test_paths_and_threads_agree_with_mmh3(keys):
    expected = ([oracle(k) for k in keys], [k is not None for k in keys])
    for which, got in all_paths(keys).items():
        assert got == expected, which


@settings(max_examples=40, deadline=None)
@given(st.lists(st.binary(max_size=300), min_size=1, max_size=40))
def test_paths_agree_on_arrow_buffers(pa: ModuleType, keys):
    arr = pa.array(keys, type=pa.binary())
    expected = ([oracle(k) for k in keys], [True] * len(keys))
    for which, got in all_paths(arr).items():
        assert got == expected, which


def test_mixed_lengths_in_one_lane_group():
    # one far longer key among short ones (it finishes on its own), every length 0..300,
    # and keyless lanes between them
    keys = [b"x" * 5000] + [bytes(range(256))[: n % 256] * (1 + n // 256) for n in range(301)]
    keys[10:10] = [None] * 9
    expected = ([oracle(k) for k in keys], [k is not None for k in keys])
    for which, got in all_paths(keys).items():
        assert got == expected, which


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 300), st.integers(1, 50), st.randoms(use_true_random=False))
def test_paths_agree_on_groups_of_one_length(pa: ModuleType, length, count, rnd):
    # groups of 16 keys of one length take the windowed path from 16 bytes on; a stray
    # key of another length sends its group back to the masked path
    keys = [rnd.randbytes(length) for _ in range(count)]
    if count > 20 and rnd.random() < 0.3:
        keys[rnd.randrange(count)] = rnd.randbytes(rnd.randrange(301))
    expected = ([oracle(k) for k in keys], [True] * len(keys))
    for which, got in all_paths(keys).items():
        assert got == expected, which
    for which, got in all_paths(pa.array(keys, type=pa.binary())).items():
        assert got == expected, which


def test_arrow_chunks_of_one_length_among_others(pa: ModuleType):
    # a chunk (1024 keys) whose values all have one length is hashed straight from the values
    # buffer; its neighbours are not, and a slice starts the chunks elsewhere in the buffer
    rnd = random.Random(5)
    keys = (
        [rnd.randbytes(20) for _ in range(1024)]
        + [rnd.randbytes(rnd.randrange(60)) for _ in range(1024)]
        + [rnd.randbytes(40) for _ in range(1500)]
        + [rnd.randbytes(3) for _ in range(1024)]
    )
    arr = pa.array(keys, type=pa.binary())
    for offset, length in ((0, len(keys)), (7, 3000), (2048, 1024), (2050, 1100)):
        part = keys[offset : offset + length]
        expected = ([oracle(k) for k in part], [True] * len(part))
        for which, got in all_paths(arr.slice(offset, length)).items():
            assert got == expected, (which, offset)


def test_every_length_in_full_groups_of_one_length(pa: ModuleType):
    # 3 full groups and a ragged 5; an Arrow column of one length is hashed from its values
    # buffer, with its own copy of the kernel for the common id lengths (16, 24, 32, 36, 40, 64)
    for length in range(0, 130):
        keys = [bytes((i * 31 + j * 7 + length) % 256 for j in range(length)) for i in range(53)]
        expected = ([oracle(k) for k in keys], [True] * len(keys))
        for which, got in all_paths(keys).items():
            assert got == expected, (which, length)
        for which, got in all_paths(pa.array(keys, type=pa.binary())).items():
            assert got == expected, (which, length, "arrow")


def test_groups_of_other_lengths_after_a_known_length():
    # the first key's length (36, a canonical UUID) picks the constant-length copy for the
    # list; groups of other lengths, of mixed lengths, of 36 with one stray key, and of None
    # keys around it take the general path
    rnd = random.Random(11)
    groups = [
        [36] * 16,
        [40] * 16,
        [rnd.randrange(60) for _ in range(16)],
        [36] * 15 + [35],
        [36] * 16,
        [16] * 16,
        [0] * 16,
        [36] * 8 + [37] * 8,
        [36] * 16,
        [36] * 7,
    ]
    keys = [rnd.randbytes(n) for group in groups for n in group]
    keys[4 * 16 + 3] = None
    expected = ([oracle(k) for k in keys], [k is not None for k in keys])
    for which, got in all_paths(keys).items():
        assert got == expected, which
    uuids = [str(uuid.UUID(int=rnd.getrandbits(128))) for _ in range(40)] + ["short", "x" * 36]
    expected = ([oracle(k) for k in uuids], [True] * len(uuids))
    for which, got in all_paths(uuids).items():
        assert got == expected, which


@pytest.mark.parametrize("block", [1, 7, 1000, 1 << 14])
def test_buffer_blocks_cover_every_key_once(pa: ModuleType, monkeypatch, block):
    # blocks across the chunks of an Arrow column (a chunk of one key among them) and a numpy
    # column, on 2 and 3 threads: the same hashes as one thread
    monkeypatch.setattr(hashing, "HASH_BLOCK", block)
    keys = [f"key-{i}" * (1 + i % 3) for i in range(5_000)]
    arrow = pa.chunked_array([keys[:1234], keys[1234:1235], keys[1235:]], type=pa.string())
    want = np.array([oracle(k) for k in keys], dtype=np.uint32)
    nulls = [None if i % 97 == 5 else k for i, k in enumerate(keys)]  # keyless: has_key False, hash 0
    with_nulls = pa.chunked_array([nulls[:3000], nulls[3000:]], type=pa.string())
    for threads in (2, 3):
        assert np.array_equal(bc.murmur3_32(arrow, threads=threads), want)
        assert np.array_equal(bc.murmur3_32(np.array(keys), threads=threads), want)
        kh = bc.hash_keys(with_nulls, threads=threads)
        keyed = np.array([k is not None for k in nulls])
        assert np.array_equal(kh.has_key, keyed)
        assert np.array_equal(kh.raw, np.where(keyed, want, 0))
        assert np.array_equal(kh.segment_hash, kh.raw >> 16) and np.array_equal(kh.bucket_hash, kh.raw & 0xFFFF)


def test_large_column_threads_identical():
    keys = [f"user-{i}" for i in range(300_000)]
    one = bc.murmur3_32(keys, threads=1)
    assert np.array_equal(one, bc.murmur3_32(keys, threads=2))
    assert np.array_equal(one, bc.murmur3_32(np.array(keys), threads=4))
    assert one[:5].tolist() == [oracle(k) for k in keys[:5]]


def test_object_pipeline_across_many_chunks():
    # threads=2 over Python objects: the calling thread hashes the first half holding the GIL
    # while a worker describes and hashes the second from the pinned view, many chunks each
    keys = [None if i % 97 == 0 else (f"k{i}" if i % 3 else f"ünï-{i}".encode()) for i in range(60_000)]
    one = bc.hash_keys(keys, threads=1)
    two = bc.hash_keys(keys, threads=2)
    assert np.array_equal(one.raw, two.raw) and np.array_equal(one.has_key, two.has_key)
    assert two.raw[:4].tolist() == [oracle(k) for k in keys[:4]]
    plain = [k for k in keys if k is not None]
    assert np.array_equal(bc.murmur3_32(plain, threads=2), bc.murmur3_32(plain, threads=1))


@pytest.mark.parametrize("block", [997, 1 << 14])
@pytest.mark.parametrize(
    "bad",
    [
        # (what goes where, the error and index expected): the first bad key by index wins, whichever
        # of the two threads taking blocks in turn finds it
        ({40_000: "\udcff", 50_000: 1.5}, bc.KeyEncodingError, "index 40000"),
        ({20_000: 1.5, 45_000: "\udcff"}, TypeError, "index 20000 has type float"),
        ({33_333: None, 50_000: 2}, TypeError, "index 33333"),
        ({59_999: b"ok", 17_000: object()}, TypeError, "index 17000 has type object"),
    ],
)
def test_object_pipeline_names_first_bad_key(monkeypatch, bad, block):
    monkeypatch.setattr(hashing, "HASH_BLOCK", block)
    where, exc, match = bad
    keys = [f"key-{i}" for i in range(60_000)]
    for i, value in where.items():
        keys[i] = value
    with pytest.raises(exc, match=match):
        bc.murmur3_32(keys, threads=2)
    # the pipeline leaves nothing held or waiting: the same call works again
    keys = [f"key-{i}" for i in range(60_000)]
    assert bc.murmur3_32(keys, threads=2)[59_999] == oracle("key-59999")


def test_thread_errors_report_first_index():
    keys = ["a"] * 1000 + [1] + ["b"] * 1000 + [2.0]
    with pytest.raises(TypeError, match="index 1000 has type int"):
        bc.murmur3_32(keys, threads=3)


@pytest.mark.parametrize("threads", [2, 3, 5])
@pytest.mark.parametrize("block", [997, 1 << 14])
def test_buffer_threads_report_first_bad_key(monkeypatch, threads, block):
    # the threads take blocks of a buffer column in turn: bad keys in several blocks, and in
    # the last block, where a thread may have failed first; the lowest index is reported
    monkeypatch.setattr(hashing, "HASH_BLOCK", block)
    keys = np.array([f"k{i}" for i in range(50_000)], dtype="U8")
    for i in (49_999, 47_000, 30_000, 12_345):
        keys[i] = "a\udcff"
    with pytest.raises(bc.KeyEncodingError, match="index 12345"):
        bc.murmur3_32(keys, threads=threads)
    assert bc.murmur3_32(keys, threads=threads, errors="replace")[12_345] == oracle("a?")
    keys[12_345] = keys[30_000] = keys[47_000] = "k"
    with pytest.raises(bc.KeyEncodingError, match="index 49999"):
        bc.hash_keys(keys, threads=threads)


def test_run_parts_reports_the_first_failure_by_index_not_by_time():
    # every block fails, the first one last: the report is still the first block's, and no block
    # is taken after a failure except by threads that had taken it already
    import threading
    import time

    second_block_failed = threading.Event()
    taken: list[tuple[int, int]] = []

    def run(lo: int, hi: int) -> tuple[int, int]:
        taken.append((lo, hi))
        if lo == 0:  # whichever thread took it fails once the other one has failed block 1
            second_block_failed.wait()
            time.sleep(0.05)
        else:
            second_block_failed.set()
        return Status.BC_ERR_KEY_TYPE, lo + 1

    assert hashing.run_parts(run, 800, 2) == (Status.BC_ERR_KEY_TYPE, 1)
    assert len(taken) == 2 and sorted(taken)[0] == (0, 100)
    ok: list[tuple[int, int]] = []
    assert hashing.run_parts(lambda lo, hi: ok.append((lo, hi)) or (Status.BC_OK, -1), 10, 3) == (Status.BC_OK, -1)
    assert sorted(ok) == [(i, i + 1) for i in range(10)]  # every key once, 10 blocks for 3 threads


@pytest.mark.parametrize("bad,exc", [(0, ValueError), (-2, ValueError), (1.5, TypeError), (True, TypeError)])
def test_bad_thread_counts(bad, exc):
    with pytest.raises(exc, match="threads"):
        bc.murmur3_32(["a"], threads=bad)


def test_unknown_path_rejected():
    with pytest.raises(ValueError, match="unknown hashing path 'fast'"):
        hashing.set_kernel_path("fast")


def test_environment_variable_forces_path():
    code = "from bucketcore import hashing; print(hashing.kernel_path())"
    env = dict(os.environ, BUCKETCORE_HASH_PATH="scalar")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "scalar"
    env["BUCKETCORE_HASH_PATH"] = "warp"
    bad = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert bad.returncode != 0 and "BUCKETCORE_HASH_PATH" in bad.stderr


GUARD_PAGE_SCRIPT = r"""
import ctypes, mmap, sys
import mmh3, numpy as np, pyarrow as pa
from bucketcore import hashing
import bucketcore as bc

page = mmap.PAGESIZE
region = mmap.mmap(-1, 2 * page, prot=mmap.PROT_READ | mmap.PROT_WRITE)
libc = ctypes.CDLL(None, use_errno=True)
addr = ctypes.addressof(ctypes.c_char.from_buffer(region))
assert libc.mprotect(ctypes.c_void_p(addr + page), page, 0) == 0  # PROT_NONE: any access faults
# Columns whose last key ends exactly at the guard page, for key counts that fill the 16-key
# groups and that leave a remainder, and for every last-key length up to 40.
for count in (16, 32, 37, 128):
    for last in range(41):
        lengths = [(i * 7) % 41 for i in range(count - 1)] + [last]
        total = sum(lengths)
        start = page - total
        data = bytes((i * 37 + 11) % 251 for i in range(total))
        region[start:page] = data
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
        buf = pa.py_buffer(memoryview(region)[start:page])
        arr = pa.Array.from_buffers(pa.binary(), count, [None, pa.py_buffer(offsets), buf])
        keys = [data[o:o + n] for o, n in zip(offsets[:-1].tolist(), lengths)]
        expected = [mmh3.hash(k, 0, signed=False) for k in keys]
        for path in sys.argv[1:]:
            hashing.set_kernel_path(path)
            assert bc.murmur3_32(arr, threads=1).tolist() == expected, (path, count, last)
# Groups of one length, the first key starting right after an unmapped page and the last
# ending right before one (the windowed path must read only inside its keys).
low = mmap.mmap(-1, 3 * page, prot=mmap.PROT_READ | mmap.PROT_WRITE)
base = ctypes.addressof(ctypes.c_char.from_buffer(low))
assert libc.mprotect(ctypes.c_void_p(base), page, 0) == 0
assert libc.mprotect(ctypes.c_void_p(base + 2 * page), page, 0) == 0
for length in range(16, 90):
    for count in (16, 32, 48):
        if length * count > page:
            continue
        for start in (page, 2 * page - length * count):
            data = bytes((i * 13 + length) % 256 for i in range(length * count))
            low[start:start + len(data)] = data
            offsets = np.arange(count + 1, dtype=np.int32) * length
            buf = pa.py_buffer(memoryview(low)[start:start + len(data)])
            arr = pa.Array.from_buffers(pa.binary(), count, [None, pa.py_buffer(offsets), buf])
            expected = [mmh3.hash(data[i * length:(i + 1) * length], 0, signed=False) for i in range(count)]
            for path in sys.argv[1:]:
                hashing.set_kernel_path(path)
                assert bc.murmur3_32(arr, threads=1).tolist() == expected, (path, length, count, start)
print("ok")
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mprotect guard page via libc")
def test_no_read_past_a_key_into_an_unmapped_page(pa: ModuleType):
    done = subprocess.run([sys.executable, "-c", GUARD_PAGE_SCRIPT, *PATHS], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_two_thread_pipelines_finish_under_tracemalloc() -> None:
    """tracemalloc's hook on PyMem_Raw* takes the GIL, which the calling thread of a pipeline
    holds while its worker reads Python keys: the worker must not allocate through it (it did,
    and the call hung). A child process, so a hang fails the test instead of the suite."""
    code = (
        "import tracemalloc, bucketcore as bc\n"
        "keys = [f'user-{i}' for i in range(300_000)]\n"
        "tracemalloc.start()\n"
        "for policy in ('shared', 'per_bucket'):\n"
        "    two = bc.bucket_entries(keys, bc.Buckets.equal_width(16), threads=2, policy=policy)\n"
        "    one = bc.bucket_entries(keys, bc.Buckets.equal_width(16), threads=1, policy=policy)\n"
        "    assert (two.order == one.order).all() and (two.count == one.count).all()\n"
        "assert (bc.murmur3_32(keys, threads=2) == bc.murmur3_32(keys, threads=1)).all()\n"
        "print('done', tracemalloc.get_traced_memory()[1] > 0)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "done True"


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="legacy (not ready) str exist only before 3.12")
def test_bad_key_after_a_legacy_str_beats_a_later_one_found_first(monkeypatch) -> None:
    # block 0 ends in a legacy str and then a float: its thread stops at the str (~1 ms in),
    # while the other thread has long found the float at the start of block 1. The calling
    # thread, alone, then hashes the rest of block 0 and finds the earlier float.
    from legacy_str import legacy_str

    monkeypatch.setattr(hashing, "HASH_BLOCK", 150_000)
    keys: list[Any] = [f"k{i}" for i in range(300_000)]
    keys[149_990] = legacy_str()
    keys[149_995] = 1.5
    keys[150_001] = 2.5
    with pytest.raises(TypeError, match="index 149995 has type float"):
        bc.murmur3_32(keys, threads=2)


@pytest.mark.parametrize("where", [(2222,), (7777,), (100, 1500, 7777)])
@pytest.mark.parametrize("block", [997, 1 << 14])
def test_two_thread_hashing_leaves_a_legacy_str_to_the_gil_holder(monkeypatch, where, block) -> None:
    """Neither thread may ready a legacy str while the other reads keys (the same object may be
    in two blocks): the block stops there, and the calling thread readies and hashes the rest, and
    the blocks nobody took, once the worker is done; a bad key after them is still found."""
    from legacy_str import TEXT, legacy_str

    monkeypatch.setattr(hashing, "HASH_BLOCK", block)
    keys: list[Any] = [f"k{i}" for i in range(10_000)]
    for i in where:
        keys[i] = legacy_str()
    keys[9000] = "\udcff"
    with pytest.raises(bc.KeyEncodingError, match="index 9000"):
        bc.murmur3_32(keys, threads=2)
    for i in where:
        keys[i] = legacy_str()
    keys[1200] = "\udcff"  # now before one of them
    with pytest.raises(bc.KeyEncodingError, match="index 1200"):
        bc.murmur3_32(keys, threads=2)
    keys[1200] = "k"
    for i in where:
        keys[i] = legacy_str()
    two = bc.murmur3_32(keys, threads=2, errors="replace")
    for i in where:
        keys[i] = TEXT
    assert np.array_equal(two, bc.murmur3_32(keys, threads=1, errors="replace"))


def test_concurrent_two_thread_calls_share_the_pool(pa: ModuleType) -> None:
    """Six Python threads at once run two-thread pipelines and halves on the shared pool (two
    workers): busy workers only delay a call, and every result equals one thread's. A child
    process, so a hang fails the test instead of the suite."""
    code = (
        "import threading, numpy as np, pyarrow as pa, bucketcore as bc\n"
        "keys = [f'user-{i}' for i in range(300_000)]\n"
        "arrow = pa.array(keys)\n"
        "buckets = bc.Buckets.equal_width(8)\n"
        "one = bc.bucket_entries(keys, buckets, threads=1)\n"
        "raw = bc.murmur3_32(keys, threads=1)\n"
        "bad = []\n"
        "def entries(src):\n"
        "    for _ in range(3):\n"
        "        t = bc.bucket_entries(src, buckets, threads=2)\n"
        "        if not (np.array_equal(t.order, one.order) and np.array_equal(t.count, one.count)):\n"
        "            bad.append('entries')\n"
        "def hashes():\n"
        "    for _ in range(3):\n"
        "        if not np.array_equal(bc.murmur3_32(keys, threads=2), raw):\n"
        "            bad.append('hashes')\n"
        "ts = [threading.Thread(target=f, args=a) for f, a in\n"
        "      [(entries, (keys,)), (entries, (arrow,)), (hashes, ())] * 2]\n"
        "[t.start() for t in ts]; [t.join() for t in ts]\n"
        "print('done', bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "done []"


def test_simd_path_is_built_where_gcc_or_clang_compiles_for_x86_64() -> None:
    """The AVX2 path exists in x86-64 builds by GCC or Clang; elsewhere forcing it says the build
    has none (never that the CPU lacks AVX2)."""
    import platform
    import sysconfig

    from _bucketcore import _hashing

    compiler = (sysconfig.get_config_var("CC") or "").split()[:1]
    gnu = bool(compiler) and any(name in compiler[0] for name in ("gcc", "clang", "cc"))
    if platform.machine().lower() in ("x86_64", "amd64") and gnu:
        assert _hashing.build_has_simd()
    if not _hashing.build_has_simd():
        with pytest.raises(ValueError, match="this build of bucketcore has no simd"):
            hashing.set_kernel_path("simd")
    elif not _hashing.cpu_has_simd():
        with pytest.raises(ValueError, match="needs a CPU with AVX2"):
            hashing.set_kernel_path("simd")
    else:
        hashing.set_kernel_path("simd")
        try:
            assert hashing.kernel_path() == "simd"
        finally:
            hashing.set_kernel_path("auto")
