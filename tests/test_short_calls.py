"""The short-call paths: ``bucket_entries`` of a list of keys with plain options,
``EntryBucketBatcher.add_many`` of a list, and ``hash_keys`` / ``murmur3_32`` of a list or 1-D
numpy array too short for a second thread, give exactly what the general paths give, refuse
exactly what they refuse (with the same errors) and change nothing when they refuse."""

from __future__ import annotations

from typing import Any

import mmh3
import numpy as np
import pytest

import bucketcore as bc
from bucketcore.harness.workloads import tiled_layout, uuid_keys

COLUMNS = ("segment_id", "bucket", "hash_min", "hash_max", "start", "count", "nbytes", "order")


def _assert_same_table(a: bc.EntryTable, b: bc.EntryTable) -> None:
    for name in COLUMNS:
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype, name
        np.testing.assert_array_equal(x, y, err_msg=name)
        assert not x.flags.writeable, name
    assert a.next_round_robin == b.next_round_robin


def _keys(n: int, seed: int) -> list[Any]:
    """UUID strings with some bytes and keyless (None) keys mixed in."""
    rng = np.random.default_rng(seed)
    keys: list[Any] = list(uuid_keys(n, seed=seed)) if n else []
    for i in rng.choice(n, size=n // 5, replace=False) if n else []:
        keys[i] = None if i % 2 else keys[i].encode()
    return keys


TARGETS = {
    "one segment": bc.Buckets.equal_width(16),
    "4x16": tiled_layout(4, 16),
    "256x1024": tiled_layout(256, 1024),
    "legacy": tiled_layout(3, 4, legacy=True),
}


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize(
    "options",
    [
        {},
        {"max_messages": 3},
        {"max_messages": 2, "policy": "per_bucket"},
        {"encrypted": True},
        {"round_robin": 5, "max_bytes": 1},
        {"errors": "replace"},
        {"max_messages": np.int64(4)},  # plain in the general path only
        {"encrypted": np.bool_(False)},
    ],
)
def test_list_of_keys_gives_the_general_paths_table(target: str, options: dict[str, Any]) -> None:
    layout = TARGETS[target]
    for n, seed in ((0, 0), (1, 1), (10, 2), (100, 3), (3000, 4)):
        keys = _keys(n, seed)
        for _ in range(2):  # the second call reuses the kept state
            short = bc.bucket_entries(keys, layout, **options)
            general = bc.bucket_entries(keys, layout, threads=1, **options)  # threads= takes the general path
            _assert_same_table(short, general)


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"max_messages": 0}, ValueError, "max_messages"),
        ({"max_messages": True}, TypeError, "max_messages must be an int"),
        ({"max_bytes": 2**63}, ValueError, "max_bytes"),
        ({"round_robin": -1}, ValueError, "round_robin"),
        ({"policy": "Shared"}, ValueError, "policy must be"),
        ({"encrypted": 1}, TypeError, "encrypted must be a bool"),
        ({"errors": "ignore"}, ValueError, "errors must be"),
    ],
)
def test_bad_options_raise_the_general_paths_errors(options: dict[str, Any], error: type, message: str) -> None:
    layout = tiled_layout(4, 16)
    keys = _keys(20, 5)
    expected = bc.bucket_entries(keys, layout)
    with pytest.raises(error, match=message):
        bc.bucket_entries(keys, layout, **options)
    _assert_same_table(bc.bucket_entries(keys, layout), expected)


@pytest.mark.parametrize(
    ("bad", "error", "message"),
    [
        (3.5, TypeError, "index 7"),
        ("a\ud800b", bc.KeyEncodingError, "index 7 contains a surrogate"),
    ],
)
def test_a_refused_key_raises_with_its_index_and_changes_nothing(bad: object, error: type, message: str) -> None:
    layout = tiled_layout(4, 16)
    keys = _keys(50, 6)
    expected = bc.bucket_entries(keys, layout, max_messages=4)
    broken = list(keys)
    broken[7] = bad
    with pytest.raises(error, match=message):
        bc.bucket_entries(broken, layout, max_messages=4)
    _assert_same_table(bc.bucket_entries(keys, layout, max_messages=4), expected)


def _entries(batcher: bc.EntryBucketBatcher, keys: Any, payloads: Any) -> list[tuple[Any, ...]]:
    out = list(batcher.add_many(keys, payloads)) + list(batcher.flush())
    return [
        (e.segment_id, e.bucket, e.hash_min, e.hash_max, e.nbytes, e.message_indices.tolist(), e.payloads) for e in out
    ]


@pytest.mark.parametrize("target", list(TARGETS))
def test_add_many_of_a_list_matches_add_many_of_a_tuple(target: str) -> None:
    layout = TARGETS[target]
    keys = _keys(500, 7)
    payloads = [bytes([i % 251]) * (i % 7) for i in range(500)]
    a = bc.EntryBucketBatcher(layout, max_messages=5)
    b = bc.EntryBucketBatcher(layout, max_messages=5)
    assert _entries(a, keys, payloads) == _entries(b, tuple(keys), payloads)
    assert a.position == b.position == 500


def test_add_many_of_a_list_refuses_bad_payloads_and_keys_and_adds_nothing() -> None:
    batcher = bc.EntryBucketBatcher(tiled_layout(4, 16), max_messages=3)
    batcher.add_many(["a", "b"], [b"1", b"2"])
    with pytest.raises(TypeError, match="payloads must be a list or tuple, not set"):
        batcher.add_many(["c"], {b"3"})
    with pytest.raises(ValueError, match="payloads has 1 items for 2 keys"):
        batcher.add_many(["c", "d"], [b"3"])
    with pytest.raises(TypeError, match=r"payloads\[1\] must be bytes"):
        batcher.add_many(["c", "d"], [b"3", "text"])
    with pytest.raises(TypeError, match="index 1"):
        batcher.add_many(["c", 4], [b"3", b"4"])
    assert (batcher.position, batcher.pending) == (2, 2)
    assert batcher.add_many([], []) == []
    flushed = batcher.flush()
    assert sorted(p for e in flushed for p in e.payloads) == [b"1", b"2"]


def _hash_list_keys(n: int, seed: int) -> list[Any]:
    """_keys plus every other key kind a list may hold: bytearray, memoryview, NaN, non-ASCII."""
    keys = _keys(n, seed)
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
