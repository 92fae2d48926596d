"""The Arrow C data / C stream interface import (PyCapsules), against a hand-built producer.

The producer (ctypes, tests/arrow_producer.py) hands over exactly the structures a test
describes, malformed ones too, and counts every release callback, so each test checks that every
struct it produced is released exactly once by bucketcore, also when bucketcore refuses it. Every hash is checked
against mmh3 over the same bytes.
"""

from __future__ import annotations

import ctypes
import gc
import tracemalloc
from collections import Counter
from typing import Any

import numpy as np
import pytest
from arrow_producer import ArrowArray, ArrowSchema, Producer, offsets_array, view_array

import bucketcore as bc
from _bucketcore import _arrow, _keycolumns
from bucketcore.arrow import import_keys
from bucketcore.hashing import classify_keys, key_columns
from bucketcore.status import Status

mmh3 = pytest.importorskip("mmh3", reason="mmh3 is the reference hash of these tests")

# ----------------------------------------------------------------------------------------------
# helpers


def oracle(values: list[bytes | None]) -> list[int]:
    return [0 if v is None else mmh3.hash(v, 0, signed=False) for v in values]


def string_pair(p: Producer, values: list[bytes | None], fmt: str = "u") -> tuple[object, object]:
    offsets, data, bits = offsets_array(values, wide=fmt in ("U", "Z"))
    nulls = sum(v is None for v in values)
    return p.pair(p.schema(fmt), p.array(len(values), [bits, offsets, data], null_count=nulls))


def view_pair(p: Producer, values: list[bytes | None], fmt: str = "vu") -> tuple[object, object]:
    views, data, bits = view_array(values)
    sizes = np.array([data.size], dtype=np.int64)
    nulls = sum(v is None for v in values)
    return p.pair(p.schema(fmt), p.array(len(values), [bits, views, data, sizes], null_count=nulls))


VALUES = [b"a", b"", None, b"key-1", b"x" * 13, b"550e8400-e29b-41d4-a716-446655440000", "ключ".encode()]


# ----------------------------------------------------------------------------------------------
# every layout, hashed as mmh3 hashes the same bytes, released once


@pytest.mark.parametrize("fmt", ["u", "U", "z", "Z"])
def test_offset_layouts_hash_like_mmh3_and_release_once(fmt: str) -> None:
    p = Producer()
    kh = bc.hash_keys(string_pair(p, VALUES, fmt))
    assert kh.raw.tolist() == oracle(VALUES)
    assert kh.has_key.tolist() == [v is not None for v in VALUES]
    assert p.released == Counter(schema=1, array=1)


@pytest.mark.parametrize("fmt", ["vu", "vz"])
def test_view_layouts_inline_and_variadic_values_hash_like_mmh3(fmt: str) -> None:
    p = Producer()
    kh = bc.hash_keys(view_pair(p, VALUES, fmt))
    assert kh.raw.tolist() == oracle(VALUES)
    assert kh.has_key.tolist() == [v is not None for v in VALUES]
    assert p.released == Counter(schema=1, array=1)


def test_view_run_of_equal_long_values_back_to_back_hashes_like_mmh3() -> None:
    values = [f"{i:036d}".encode() for i in range(3000)]  # the descriptor-free run of the kernel
    p = Producer()
    assert bc.murmur3_32(view_pair(p, values)).tolist() == oracle(values)


def _run_of_views(p: Producer, views: np.ndarray, buffers: list[np.ndarray], n: int, pos: int, m: int) -> Any:
    """The run describe_view finds in views [pos, pos+m) of a string_view array, or None."""
    sizes = np.array([b.size for b in buffers], np.int64)
    pair = p.pair(p.schema("vz"), p.array(n, [None, views, *buffers, sizes]))
    _, source = classify_keys(pair)
    [column] = key_columns(source)
    return _keycolumns.described_keys(column, pos, m)[3]


@pytest.mark.parametrize("at", [0, 1, 7, 8, 9, 15, 16, 500, 1022, 1023])
@pytest.mark.parametrize("word", ["length", "index", "offset"])
def test_view_run_broken_in_any_compared_word_hashes_every_value(at: int, word: str) -> None:
    # 1024 values (one kernel step) of 36 bytes back to back, their prefixes all different; one
    # view is made to break the run in one word while still naming a valid value
    values = [f"{i:04d}-{i * 7919:031d}".encode() for i in range(1024)]
    p = Producer()
    views, data, _ = view_array(values)
    assert _run_of_views(p, views, [data], 1024, 0, 1024) == (36, 36)  # prefixes are not compared
    v = views.reshape(-1, 16)
    if word == "length":  # a shorter value where the run's next one would be
        values[at] = values[at][:35]
        v[at, 0:4] = np.frombuffer(np.int32(35).tobytes(), np.uint8)
        buffers = [data]
    elif word == "index":  # the same bytes, kept in a second buffer
        buffers = [data, np.frombuffer(values[at], np.uint8).copy()]
        v[at, 8:12] = np.frombuffer(np.int32(1).tobytes(), np.uint8)
        v[at, 12:16] = np.frombuffer(np.int32(0).tobytes(), np.uint8)
    else:  # the same bytes, at the end of the one buffer
        buffers = [np.concatenate([data, np.frombuffer(values[at], np.uint8)])]
        v[at, 12:16] = np.frombuffer(np.int32(data.size).tobytes(), np.uint8)
    assert _run_of_views(p, views, buffers, 1024, 0, 1024) is None
    if at >= 16:
        assert _run_of_views(p, views, buffers, 1024, 0, at) == (36, 36)
    sizes = np.array([b.size for b in buffers], np.int64)
    pair = p.pair(p.schema("vz"), p.array(1024, [None, views, *buffers, sizes]))
    assert bc.murmur3_32(pair).tolist() == oracle(values)


def test_sliced_array_offset_is_honoured() -> None:
    p = Producer()
    offsets, data, _ = offsets_array(VALUES)
    pair = p.pair(p.schema("u"), p.array(3, [None, offsets, data], offset=3))
    assert bc.hash_keys(pair).raw.tolist() == oracle(VALUES[3:6])


def test_null_type_is_all_keyless() -> None:
    p = Producer()
    kh = bc.hash_keys(p.pair(p.schema("n"), p.array(4, [], null_count=4)))
    assert kh.has_key.tolist() == [False] * 4 and kh.raw.tolist() == [0] * 4
    with pytest.raises(TypeError, match="index 0"):
        bc.murmur3_32(p.pair(p.schema("n"), p.array(4, [], null_count=4)))


@pytest.mark.parametrize(
    "index_format,dtype",
    [
        ("c", np.int8),
        ("C", np.uint8),
        ("s", np.int16),
        ("S", np.uint16),
        ("i", np.int32),
        ("I", np.uint32),
        ("l", np.int64),
        ("L", np.uint64),
    ],
)
def test_dictionary_of_any_index_type_gathers_the_dictionary_hashes(index_format: str, dtype: type) -> None:
    p = Producer()
    words = [b"p", None, b"some-routing-key"]
    offsets, data, bits = offsets_array(words)
    dictionary = p.array(3, [bits, offsets, data], null_count=1)
    indices = np.array([0, 2, 1, 0, 2, 2], dtype=dtype)
    row_bits = np.packbits([1, 1, 1, 0, 1, 1], bitorder="little")
    schema = p.schema(index_format, dictionary=p.schema("u"))
    kh = bc.hash_keys(p.pair(schema, p.array(6, [row_bits, indices], null_count=1, dictionary=dictionary)))
    expected = [words[0], words[2], None, None, words[2], words[2]]  # a null row, a null value
    assert kh.raw.tolist() == oracle(expected)
    assert kh.has_key.tolist() == [v is not None for v in expected]
    assert p.released == Counter(schema=1, array=1)


def test_dictionary_of_views_with_sliced_rows() -> None:
    p = Producer()
    words = [b"short", b"a value longer than twelve"]
    views, data, _ = view_array(words)
    dictionary = p.array(2, [None, views, data, np.array([data.size], dtype=np.int64)])
    indices = np.array([1, 1, 0, 1, 0], dtype=np.int32)
    pair = p.pair(
        p.schema("i", dictionary=p.schema("vu")), p.array(3, [None, indices], offset=2, dictionary=dictionary)
    )
    assert bc.murmur3_32(pair).tolist() == oracle([words[0], words[1], words[0]])


def test_murmur3_of_a_dictionary_row_naming_a_null_value_names_the_row() -> None:
    p = Producer()
    offsets, data, bits = offsets_array([b"a", None])
    dictionary = p.array(2, [bits, offsets, data], null_count=1)
    pair = p.pair(
        p.schema("c", dictionary=p.schema("u")), p.array(3, [None, np.array([0, 0, 1], np.int8)], dictionary=dictionary)
    )
    with pytest.raises(TypeError, match="index 2"):
        bc.murmur3_32(pair)
    assert p.released == Counter(schema=1, array=1)


# ----------------------------------------------------------------------------------------------
# malformed structures: a clear error naming the index, nothing read out of bounds, released once


def test_decreasing_offsets_are_refused_naming_the_index() -> None:
    p = Producer()
    offsets = np.array([0, 2, 1, 3], dtype=np.int32)
    pair = p.pair(p.schema("u"), p.array(3, [None, offsets, np.zeros(3, np.uint8)]))
    with pytest.raises(ValueError, match="corrupt offsets at index 1"):
        bc.hash_keys(pair)
    assert p.released == Counter(schema=1, array=1)


def test_negative_first_offset_is_refused() -> None:
    p = Producer()
    offsets = np.array([-5, 1, 2], dtype=np.int64)
    with pytest.raises(ValueError, match="corrupt offsets at index 0"):
        bc.hash_keys(p.pair(p.schema("U"), p.array(2, [None, offsets, np.zeros(2, np.uint8)])))
    assert p.released == Counter(schema=1, array=1)


def test_negative_length_is_refused() -> None:
    p = Producer()
    offsets, data, _ = offsets_array([b"a"])
    with pytest.raises(ValueError, match="negative length"):
        bc.hash_keys(p.pair(p.schema("u"), p.array(-1, [None, offsets, data])))
    assert p.released == Counter(schema=1, array=1)


def test_missing_offsets_buffer_is_refused() -> None:
    p = Producer()
    with pytest.raises(ValueError, match="no offsets buffer"):
        bc.hash_keys(p.pair(p.schema("u"), p.array(2, [None, None, np.zeros(2, np.uint8)])))
    assert p.released == Counter(schema=1, array=1)


def test_wrong_buffer_count_is_refused() -> None:
    p = Producer()
    offsets, data, _ = offsets_array([b"a"])
    with pytest.raises(ValueError, match="2 buffers, not 3"):
        bc.hash_keys(p.pair(p.schema("u"), p.array(1, [None, offsets])))
    assert p.released == Counter(schema=1, array=1)


def _views_with(p: Producer, length: int, index: int, offset: int) -> tuple[object, object]:
    views, data, _ = view_array([b"fine", b"a value longer than twelve"])
    v = views.reshape(2, 16)
    v[1, 0:4] = np.frombuffer(np.int32(length).tobytes(), np.uint8)
    v[1, 8:12] = np.frombuffer(np.int32(index).tobytes(), np.uint8)
    v[1, 12:16] = np.frombuffer(np.int32(offset).tobytes(), np.uint8)
    return p.pair(p.schema("vu"), p.array(2, [None, views, data, np.array([data.size], np.int64)]))


@pytest.mark.parametrize(
    "length,index,offset",
    [(-3, 0, 0), (26, 1, 0), (26, -1, 0), (26, 0, 1), (26, 0, -4), (1 << 30, 0, 0)],
    ids=[
        "negative length",
        "buffer index past the buffers",
        "negative buffer index",
        "range past the buffer end",
        "negative offset",
        "huge length",
    ],
)
def test_view_outside_its_buffers_is_refused_naming_the_index(length: int, index: int, offset: int) -> None:
    p = Producer()
    with pytest.raises(ValueError, match="view at index 1"):
        bc.hash_keys(_views_with(p, length, index, offset))
    assert p.released == Counter(schema=1, array=1)


def test_view_array_without_buffer_sizes_is_refused() -> None:
    p = Producer()
    views, data, _ = view_array([b"a value longer than twelve"])
    with pytest.raises(ValueError, match="no buffer sizes"):
        bc.hash_keys(p.pair(p.schema("vu"), p.array(1, [None, views, data, None])))


@pytest.mark.parametrize("index", [3, -1, 127])
def test_dictionary_index_outside_the_dictionary_is_refused_naming_the_row(index: int) -> None:
    p = Producer()
    offsets, data, _ = offsets_array([b"a", b"b", b"c"])
    dictionary = p.array(3, [None, offsets, data])
    indices = np.array([0, 1, index, 2], dtype=np.int8)
    pair = p.pair(p.schema("c", dictionary=p.schema("u")), p.array(4, [None, indices], dictionary=dictionary))
    with pytest.raises(ValueError, match="outside its dictionary at index 2"):
        bc.hash_keys(pair)
    assert p.released == Counter(schema=1, array=1)


def test_out_of_range_dictionary_index_in_a_null_row_is_not_read() -> None:
    p = Producer()
    offsets, data, _ = offsets_array([b"a"])
    dictionary = p.array(1, [None, offsets, data])
    bits = np.packbits([1, 0], bitorder="little")
    pair = p.pair(
        p.schema("c", dictionary=p.schema("u")),
        p.array(2, [bits, np.array([0, 99], np.int8)], null_count=1, dictionary=dictionary),
    )
    assert bc.hash_keys(pair).has_key.tolist() == [True, False]


def test_dictionary_with_corrupt_offsets_is_refused_naming_the_dictionary_index() -> None:
    p = Producer()
    dictionary = p.array(3, [None, np.array([0, 1, 3, 2], np.int32), np.zeros(3, np.uint8)])
    pair = p.pair(
        p.schema("c", dictionary=p.schema("u")), p.array(1, [None, np.array([0], np.int8)], dictionary=dictionary)
    )
    with pytest.raises(ValueError, match="dictionary index 1"):
        bc.hash_keys(pair)
    assert p.released == Counter(schema=1, array=1)


def test_dictionary_of_floats_is_not_a_key_column() -> None:
    p = Producer()
    dictionary = p.array(1, [None, np.zeros(1, np.float64)])
    pair = p.pair(
        p.schema("c", dictionary=p.schema("g")), p.array(1, [None, np.zeros(1, np.int8)], dictionary=dictionary)
    )
    with pytest.raises(TypeError, match="dictionary of float64"):
        bc.hash_keys(pair)
    assert p.released == Counter(schema=1, array=1)


@pytest.mark.parametrize("fmt,name", [("i", "int32"), ("g", "float64"), ("b", "bool")])
def test_non_key_type_is_refused_naming_the_type(fmt: str, name: str) -> None:
    p = Producer()
    with pytest.raises(TypeError, match=f"type {name}"):
        bc.hash_keys(p.pair(p.schema(fmt), p.array(1, [None, np.zeros(8, np.uint8)])))
    assert p.released == Counter(schema=1, array=1)


def test_a_consumed_capsule_is_refused() -> None:
    p = Producer()
    pair = string_pair(p, [b"a"])
    bc.hash_keys(pair)
    with pytest.raises(ValueError, match="consumed already"):
        bc.hash_keys(pair)
    assert p.released == Counter(schema=1, array=1)


# ----------------------------------------------------------------------------------------------
# tables and streams


def _table(
    p: Producer, columns: dict[str, list[bytes | None]], *, offset: int = 0, length: int | None = None
) -> tuple[ArrowSchema, ArrowArray]:
    schemas, arrays = [], []
    for name, values in columns.items():
        offsets, data, bits = offsets_array(values)
        schemas.append(p.schema("u", name))
        arrays.append(p.array(len(values), [bits, offsets, data], null_count=sum(v is None for v in values)))
    n = len(next(iter(columns.values()))) if length is None else length
    return p.schema("+s", children=schemas), p.array(n, [None], offset=offset, children=arrays)


def test_table_column_by_name_and_by_index() -> None:
    p = Producer()
    columns = {"user": [b"u1", b"u2", None], "key": [b"k1", None, b"k3"]}
    assert bc.hash_keys(p.pair(*_table(p, columns)), column="key").raw.tolist() == oracle(columns["key"])
    assert bc.hash_keys(p.pair(*_table(p, columns)), column=0).raw.tolist() == oracle(columns["user"])
    assert p.released == Counter(schema=2, array=2)


def test_table_rows_sliced_by_the_struct_offset() -> None:
    p = Producer()
    columns = {"key": [b"k0", b"k1", b"k2", b"k3"]}
    schema, array = _table(p, columns, offset=1, length=2)
    assert bc.hash_keys(p.pair(schema, array)).raw.tolist() == oracle(columns["key"][1:3])


def test_table_without_column_names_its_columns() -> None:
    p = Producer()
    with pytest.raises(ValueError, match=r"2 columns \['user', 'key'\]: pass column="):
        bc.hash_keys(p.pair(*_table(p, {"user": [b"a"], "key": [b"b"]})))
    assert p.released == Counter(schema=1, array=1)


@pytest.mark.parametrize(
    "column,message",
    [("nope", r"'nope' is not a column.*\['user', 'key'\]"), (2, r"column index 2 is out of range.*\['user', 'key'\]")],
)
def test_unknown_column_names_the_columns(column: object, message: str) -> None:
    p = Producer()
    with pytest.raises(ValueError, match=message):
        bc.hash_keys(p.pair(*_table(p, {"user": [b"a"], "key": [b"b"]})), column=column)
    assert p.released == Counter(schema=1, array=1)


def test_column_given_for_a_plain_column_is_refused() -> None:
    p = Producer()
    with pytest.raises(ValueError, match="single column"):
        bc.hash_keys(string_pair(p, [b"a"]), column="key")
    with pytest.raises(ValueError, match="not one"):
        bc.hash_keys(["a"], column="key")


def test_stream_of_batches_is_read_chunk_by_chunk_and_released_once() -> None:
    p = Producer()
    batches = [[b"a", None], [], [b"some-routing-key"] * 3000, [b"z"]]
    arrays = []
    for values in batches:
        offsets, data, bits = offsets_array(values)
        arrays.append(p.array(len(values), [bits, offsets, data], null_count=sum(v is None for v in values)))
    stream = p.stream(lambda: p.schema("u"), arrays)
    flat = [v for values in batches for v in values]
    kh = bc.hash_keys(stream, threads=2)
    assert kh.raw.tolist() == oracle(flat)
    gc.collect()
    assert p.released == Counter(stream=1, schema=1, array=len(batches))


def test_stream_failure_raises_the_producer_message_and_releases_everything_once() -> None:
    p = Producer()
    offsets, data, _ = offsets_array([b"a"])
    arrays = [p.array(1, [None, offsets, data]), p.array(1, [None, offsets, data])]
    stream = p.stream(lambda: p.schema("u"), arrays, fail_at=1)
    with pytest.raises(RuntimeError, match="get_next.*boom"):
        bc.hash_keys(stream)
    gc.collect()
    assert p.released == Counter(stream=1, schema=1, array=1)  # the batch it never gave stays with it


def test_empty_stream_gives_no_hashes_but_checks_the_type() -> None:
    p = Producer()
    assert bc.hash_keys(p.stream(lambda: p.schema("u"), [])).raw.size == 0
    with pytest.raises(TypeError, match="int64"):
        bc.hash_keys(p.stream(lambda: p.schema("l"), []))
    assert p.released == Counter(stream=2, schema=2)


def test_stream_of_a_table_is_hashed_and_grouped_by_column() -> None:
    p = Producer()
    keys = [f"k{i}".encode() for i in range(500)]
    schema_array = [_table(p, {"v": keys, "k": keys[::-1]}) for _ in range(2)]
    stream = p.stream(lambda: _table(p, {"v": [], "k": []})[0], [a for _, a in schema_array])
    kh = bc.hash_keys(stream, column="k")
    assert kh.raw.tolist() == oracle(keys[::-1] * 2)


def test_bucket_entries_reads_an_imported_stream_as_the_same_keys() -> None:
    p = Producer()
    keys = [f"key-{i}".encode() if i % 7 else None for i in range(5000)]
    offsets, data, bits = offsets_array(keys)
    arrays = [p.array(2500, [bits, offsets, data], null_count=357, offset=o) for o in (0, 2500)]
    for a in arrays:
        a.null_count = -1  # unknown: the bitmap is read
    layout = bc.Buckets.equal_width(8)
    expected = bc.bucket_entries(keys, layout)
    for threads in (1, 2, 3):
        got = bc.bucket_entries(
            p.stream(
                lambda: p.schema("u"),
                [p.array(2500, [bits, offsets, data], null_count=-1, offset=o) for o in (0, 2500)],
            ),
            layout,
            threads=threads,
        )
        assert got.order.tolist() == expected.order.tolist()
        assert got.hash_min.tolist() == expected.hash_min.tolist()


# ----------------------------------------------------------------------------------------------
# export


def test_key_hashes_export_through_the_capsule_import() -> None:
    kh = bc.hash_keys(["a", None, "key-1"])
    schema, array = kh.__arrow_c_array__()
    imported_schema, imported = _arrow.import_array(schema, array)
    assert imported_schema.child_names() == ["raw", "segment_hash", "bucket_hash", "has_key"]
    assert [imported_schema.format(i)[0] for i in range(4)] == [b"I", b"S", b"S", b"b"]
    del imported
    assert not kh.raw.flags.writeable or kh.raw is not None


def test_export_keeps_numpy_owners_until_released_and_leaks_nothing() -> None:
    kh = bc.hash_keys([f"k{i}" for i in range(100)])
    table = bc.bucket_entries(kh, bc.Buckets.equal_width(4))
    raw, start = kh.raw, table.start
    base = (_refcount(raw), _refcount(start))
    capsules = [kh.__arrow_c_array__(), table.__arrow_c_stream__()]
    held = (_refcount(raw), _refcount(start))
    del capsules
    gc.collect()
    after = (_refcount(raw), _refcount(start))
    assert held == (base[0] + 1, base[1] + 1)
    assert after == base
    # a consumed stream hands its batch over: the columns live as long as the imported batch
    stream_schema, batches = _arrow.import_stream(table.__arrow_c_stream__())
    held_by_batch = _refcount(start)
    del stream_schema, batches
    gc.collect()
    released = _refcount(start)
    assert (held_by_batch, released) == (base[1] + 1, base[1])


def _refcount(obj: object) -> int:
    import sys

    return sys.getrefcount(obj)


def test_ten_thousand_imports_and_exports_leak_nothing() -> None:
    p = Producer()
    kh = bc.hash_keys(["a", "b", None])
    raw = kh.raw
    base = _refcount(raw)
    rounds = 10_000
    pairs = [string_pair(p, [b"a", None, b"c"]) for _ in range(rounds + 200)]  # the producer's own memory

    def cycle(pair: tuple[object, object]) -> None:
        bc.hash_keys(pair)
        s, a = kh.__arrow_c_array__()
        _arrow.import_array(s, a)
        _arrow.import_stream(kh.__arrow_c_stream__())

    for pair in pairs[:200]:  # warm up caches and free lists
        cycle(pair)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for pair in pairs[200:]:
        cycle(pair)
    gc.collect()
    grown = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    now = _refcount(raw)
    assert p.released == Counter(schema=rounds + 200, array=rounds + 200)
    assert now == base
    assert grown < 64 * 1024, f"{grown} bytes kept over {rounds:,} imports and exports"


def test_chunks_sharing_one_dictionary_hash_it_once_and_gather_right() -> None:
    p = Producer()
    words = [b"alpha", None, b"a value longer than sixteen"]
    offsets, data, bits = offsets_array(words)
    buffers = [bits, offsets, data]

    def chunk(indices: list[int]) -> ArrowArray:
        return p.array(len(indices), [None, np.array(indices, np.int16)], dictionary=p.array(3, buffers, null_count=1))

    stream = p.stream(lambda: p.schema("s", dictionary=p.schema("u")), [chunk([0, 2]), chunk([2, 1, 0])])
    keys = import_keys(stream)
    parts = keys.parts(0, keys.length)
    assert len(parts) == 2 and len(keys.dictionaries) == 1  # the second chunk reused the first's hashes
    kh = bc.hash_keys(keys)
    expected = [words[0], words[2], words[2], None, words[0]]
    assert kh.raw.tolist() == oracle(expected) and kh.has_key.tolist() == [w is not None for w in expected]


def test_struct_array_without_a_child_pointer_is_refused() -> None:
    p = Producer()
    schema, array = _table(p, {"k": [b"a"], "v": [b"b"]})
    array.children[1] = ctypes.POINTER(ArrowArray)()
    with pytest.raises(ValueError, match="no child array 1"):
        bc.hash_keys(p.pair(schema, array), column="v")
    assert p.released == Counter(schema=1, array=1)


def test_view_run_across_two_data_buffers_hashes_like_mmh3() -> None:
    p = Producer()
    values = [f"{i:020d}".encode() for i in range(40)]
    views, data, _ = view_array(values)
    v = views.reshape(-1, 16)
    half = 20 * 20
    second = data[half:].copy()
    for i in range(20, 40):  # the second half of the values lives in a second buffer
        v[i, 8:12] = np.frombuffer(np.int32(1).tobytes(), np.uint8)
        v[i, 12:16] = np.frombuffer(np.int32((i - 20) * 20).tobytes(), np.uint8)
    sizes = np.array([half, second.size], np.int64)
    pair = p.pair(p.schema("vz"), p.array(40, [None, views, data[:half].copy(), second, sizes]))
    assert bc.murmur3_32(pair).tolist() == oracle(values)


def _views_in_buffers(values: list[bytes], counts: list[int]) -> tuple[np.ndarray, list[np.ndarray]]:
    """Views of values laid in data buffers one after another, counts[i] values in buffer i (as
    polars fills its buffers), each buffer exactly as large as its values."""
    views, data, _ = view_array(values)
    v = views.reshape(-1, 16)
    buffers, at = [], 0
    for index, count in enumerate(counts):
        chunk = b"".join(values[at : at + count])
        buffers.append(np.frombuffer(chunk, np.uint8).copy())
        offset = 0
        for i in range(at, at + count):
            v[i, 8:12] = np.frombuffer(np.int32(index).tobytes(), np.uint8)
            v[i, 12:16] = np.frombuffer(np.int32(offset).tobytes(), np.uint8)
            offset += len(values[i])
        at += count
    return views, buffers


@pytest.mark.parametrize("threads", [1, 2])
def test_view_runs_ending_at_buffer_ends_inside_a_step_hash_like_mmh3(threads: int) -> None:
    counts = [5, 16, 17, 227, 1000, 15, 1, 454, 1300]  # ends before, at and past 16 values into a step
    values = [f"{i:06d}-{i * 104729:029d}".encode() for i in range(sum(counts))]
    views, buffers = _views_in_buffers(values, counts)
    p = Producer()
    sizes = np.array([b.size for b in buffers], np.int64)
    pair = p.pair(p.schema("vz"), p.array(len(values), [None, views, *buffers, sizes]))
    assert bc.murmur3_32(pair, threads=threads).tolist() == oracle(values)
    # a missing value inside a run that ends at its buffer's end; a bad view past that end
    bits = np.packbits([i != 30 for i in range(len(values))], bitorder="little")
    pair = p.pair(p.schema("vz"), p.array(len(values), [bits, views, *buffers, sizes], null_count=1))
    kh = bc.hash_keys(pair, threads=threads)
    assert kh.raw.tolist() == oracle([None if i == 30 else v for i, v in enumerate(values)])
    bad = views.copy()
    bad.reshape(-1, 16)[300, 12:16] = np.frombuffer(np.int32(1 << 30).tobytes(), np.uint8)
    pair = p.pair(p.schema("vz"), p.array(len(values), [None, bad, *buffers, sizes]))
    with pytest.raises(ValueError, match="index 300"):
        bc.murmur3_32(pair, threads=threads)


# ----------------------------------------------------------------------------------------------
# the describer itself (describe_view), which every kernel reads keys through


def _described(keys: Any) -> list[Any]:
    _, source = classify_keys(keys)
    out: list[Any] = []
    for column in key_columns(source):
        status, index, values, _ = _keycolumns.described_keys(column, 0, column.length)
        assert (status, index) == (0, -1)
        out += values
    return out


DESCRIBED = [b"a", None, b"x" * 20, b"", "ключ".encode(), b"y" * 13]


@pytest.mark.parametrize("layout", ["u", "U", "vu"])
def test_describer_gives_each_layouts_bytes_and_missing_values(layout: str) -> None:
    p = Producer()
    pair = view_pair(p, DESCRIBED) if layout == "vu" else string_pair(p, DESCRIBED, layout)
    assert _described(pair) == DESCRIBED
    equal = [b"k" * 20] * 5  # a run of one length: described without a descriptor per key
    pair = view_pair(p, equal) if layout == "vu" else string_pair(p, equal, layout)
    assert _described(pair) == equal


def test_describer_gives_dictionary_rows_their_values() -> None:
    p = Producer()
    words = [b"a value longer than sixteen", b"b", None]
    offsets, data, bits = offsets_array(words)
    dictionary = p.array(3, [bits, offsets, data], null_count=1)
    row_bits = np.packbits([1, 1, 0, 1, 1], bitorder="little")
    indices = np.array([0, 1, 9, 2, 0], np.uint8)
    pair = p.pair(
        p.schema("C", dictionary=p.schema("u")), p.array(5, [row_bits, indices], null_count=1, dictionary=dictionary)
    )
    assert _described(pair) == [words[0], b"b", None, None, words[0]]
    bad = p.array(2, [None, np.array([1, 5], np.uint8)], dictionary=p.array(3, [bits, offsets, data], null_count=1))
    [(column, *_)] = import_keys(p.pair(p.schema("C", dictionary=p.schema("u")), bad)).parts(0, 2)
    status, index, _, _ = _keycolumns.described_keys(column, 0, 2)
    assert (Status(status).name, index) == ("BC_ERR_DICT_INDEX", 1)


def test_describer_gives_numpy_and_null_columns() -> None:
    assert _described(np.array([b"ab", b"c\0"])) == [b"ab", b"c"]
    assert _described(np.array(["ab", "ключ"])) == ["ab", "ключ"]
    p = Producer()
    assert _described(p.pair(p.schema("n"), p.array(2, [], null_count=2))) == [None, None]
    if hasattr(np, "dtypes") and hasattr(np.dtypes, "StringDType"):
        arr = np.array(["a", None, "z" * 40], dtype=np.dtypes.StringDType(na_object=None))
        assert _described(arr) == [b"a", None, b"z" * 40]
