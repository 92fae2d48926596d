"""Key columns from the data-frame libraries, and results handed back to them.

Every library's column is hashed as mmh3 hashes the same bytes: pyarrow (every string layout,
through the PyCapsule interface where it is not plain string/binary), polars, duckdb, nanoarrow,
arro3, pandas (Arrow-backed and object columns, with their missing values), numpy StringDType,
and bytearray/memoryview keys. EntryTable and KeyHashes go back out to pyarrow, polars and duckdb.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import bucketcore as bc

mmh3 = pytest.importorskip("mmh3", reason="mmh3 is the reference hash of these tests")

KEYS = ["a", "", None, "key-1", "x" * 13, "550e8400-e29b-41d4-a716-446655440000", "ключ", "键🔑"]


def oracle(keys: list[object]) -> list[int]:
    out = []
    for k in keys:
        if k is None:
            out.append(0)
        else:
            out.append(mmh3.hash(k.encode() if isinstance(k, str) else bytes(k), 0, signed=False))
    return out


def present(keys: list[object]) -> list[bool]:
    return [k is not None for k in keys]


def check(kh: bc.KeyHashes, keys: list[object]) -> None:
    assert kh.raw.tolist() == oracle(keys)
    assert kh.has_key.tolist() == present(keys)
    assert kh.segment_hash.tolist() == [h >> 16 for h in oracle(keys)]
    assert kh.bucket_hash.tolist() == [h & 0xFFFF for h in oracle(keys)]


# ----------------------------------------------------------------------------------------------
# pyarrow: every layout, sliced, chunked, empty, all null, dictionaries


@pytest.fixture(scope="module")
def pa():  # type: ignore[no-untyped-def]
    return pytest.importorskip("pyarrow", reason="pyarrow builds the Arrow layouts of these tests")


LAYOUTS = ["string", "large_string", "binary", "large_binary", "string_view", "binary_view"]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_pyarrow_layout_sliced_and_chunked_hashes_like_mmh3(pa, layout: str) -> None:  # type: ignore[no-untyped-def]
    t = getattr(pa, layout)()
    arr = pa.array(KEYS, type=pa.string()).cast(t)
    check(bc.hash_keys(arr), KEYS)
    check(bc.hash_keys(arr.slice(2, 4)), KEYS[2:6])
    chunked = pa.chunked_array([arr.slice(3), arr.slice(0, 0), arr.slice(1, 2)], type=t)
    check(bc.hash_keys(chunked), KEYS[3:] + KEYS[1:3])
    assert bc.hash_keys(pa.array([], type=t)).raw.size == 0
    check(bc.hash_keys(pa.array([None] * 5, type=t)), [None] * 5)


@pytest.mark.parametrize("index", ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"])
@pytest.mark.parametrize("value", ["string", "large_binary", "string_view"])
def test_pyarrow_dictionary_any_index_and_value_type(pa, index: str, value: str) -> None:  # type: ignore[no-untyped-def]
    values = pa.array(["p", None, "some-routing-key"], type=pa.string()).cast(getattr(pa, value)())
    indices = pa.array([0, 2, None, 1, 2, 0], type=getattr(pa, index)())
    arr = pa.DictionaryArray.from_arrays(indices, values)
    expected = ["p", "some-routing-key", None, None, "some-routing-key", "p"]  # null row, null value
    check(bc.hash_keys(arr), expected)
    check(bc.hash_keys(arr.slice(1, 3)), expected[1:4])


def test_pyarrow_dictionary_chunks_with_their_own_dictionaries(pa) -> None:  # type: ignore[no-untyped-def]
    a = pa.array(["x", "y", "x"]).dictionary_encode()
    b = pa.array(["z", None, "y"]).dictionary_encode()
    check(bc.hash_keys(pa.chunked_array([a, b])), ["x", "y", "x", "z", None, "y"])
    assert bc.murmur3_32(pa.chunked_array([a])).tolist() == oracle(["x", "y", "x"])


def test_pyarrow_dictionary_index_out_of_range_names_the_row(pa) -> None:  # type: ignore[no-untyped-def]
    arr = pa.DictionaryArray.from_arrays(pa.array([0, 1, 7], pa.int32()), pa.array(["a", "b"]), safe=False)
    with pytest.raises(ValueError, match="outside its dictionary at index 2"):
        bc.hash_keys(arr)


def test_pyarrow_null_type_and_all_null_dictionary_are_keyless(pa) -> None:  # type: ignore[no-untyped-def]
    check(bc.hash_keys(pa.nulls(3)), [None] * 3)
    arr = pa.DictionaryArray.from_arrays(pa.array([None, None], pa.int8()), pa.array([], pa.string()))
    check(bc.hash_keys(arr), [None, None])


def test_pyarrow_table_and_record_batch_need_column(pa) -> None:  # type: ignore[no-untyped-def]
    table = pa.table({"user": [1, 2, 3], "key": ["a", None, "c"]})
    check(bc.hash_keys(table, column="key"), ["a", None, "c"])
    check(bc.hash_keys(table.to_batches()[0], column=1), ["a", None, "c"])
    check(bc.hash_keys(pa.table({"key": ["a"]})), ["a"])  # one column: no column= needed
    with pytest.raises(ValueError, match=r"\['user', 'key'\]"):
        bc.hash_keys(table)
    with pytest.raises(TypeError, match="int64"):
        bc.hash_keys(table, column="user")


def test_pyarrow_sliced_table_column(pa) -> None:  # type: ignore[no-untyped-def]
    table = pa.table({"key": [f"k{i}" for i in range(10)], "v": list(range(10))}).slice(3, 4)
    check(bc.hash_keys(table, column="key"), [f"k{i}" for i in range(3, 7)])


def test_threads_give_the_same_hashes_over_capsule_chunks(pa) -> None:  # type: ignore[no-untyped-def]
    keys = [f"user-{i}" if i % 11 else None for i in range(40_000)]
    views = pa.chunked_array([pa.array(keys[:15_000], pa.string_view()), pa.array(keys[15_000:], pa.string_view())])
    one = bc.hash_keys(views, threads=1)
    for threads in (2, 3):
        many = bc.hash_keys(views, threads=threads)
        assert np.array_equal(one.raw, many.raw) and np.array_equal(one.has_key, many.has_key)
    check(one, keys)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_bucket_entries_over_a_dictionary_equals_the_plain_keys(pa, threads: int) -> None:  # type: ignore[no-untyped-def]
    keys = [f"k{i % 97}" if i % 13 else None for i in range(30_000)]
    layout = bc.Buckets.equal_width(16)
    expected = bc.bucket_entries(keys, layout)
    got = bc.bucket_entries(pa.array(keys).dictionary_encode(), layout, threads=threads)
    for name in ("order", "start", "count", "hash_min", "hash_max", "bucket"):
        assert getattr(got, name).tolist() == getattr(expected, name).tolist()


def test_key_hashes_and_entry_table_go_to_pyarrow(pa) -> None:  # type: ignore[no-untyped-def]
    keys = [f"k{i}" if i % 5 else None for i in range(1000)]
    kh = bc.hash_keys(keys)
    table = pa.table(kh)
    assert table.column_names == ["raw", "segment_hash", "bucket_hash", "has_key"]
    assert table.column("raw").to_numpy().tolist() == kh.raw.tolist()
    assert table.column("has_key").to_pylist() == kh.has_key.tolist()
    assert str(table.schema.field("segment_hash").type) == "uint16"
    entries = bc.bucket_entries(keys, bc.Buckets.equal_width(4), sizes=[10] * 1000)
    batch = pa.record_batch(entries)
    assert batch.num_rows == len(entries)
    for name in ("segment_id", "bucket", "hash_min", "hash_max", "start", "count", "nbytes"):
        assert batch.column(name).to_pylist() == getattr(entries, name).tolist()
    # the exported column is the numpy buffer itself, not a copy
    assert table.column("raw").chunk(0).buffers()[1].address == kh.raw.ctypes.data
    assert pa.array(kh).type.num_fields == 4
    # a multi-dimensional KeyHashes goes out flat
    grid = bc.hash_keys(np.array([["a", "b"], ["c", "d"]]))
    assert pa.table(grid).column("raw").to_pylist() == oracle(["a", "b", "c", "d"])


def test_export_of_a_single_key_hashes_scalar(pa) -> None:  # type: ignore[no-untyped-def]
    assert pa.table(bc.hash_keys("a")).column("raw").to_pylist() == oracle(["a"])


# ----------------------------------------------------------------------------------------------
# polars, duckdb, nanoarrow, arro3


def test_polars_series_frame_and_results(pa) -> None:  # type: ignore[no-untyped-def]
    pl = pytest.importorskip("polars", reason="polars is one of the data-frame libraries tested")
    series = pl.Series("k", KEYS)
    check(bc.hash_keys(series), KEYS)
    check(bc.hash_keys(series.slice(2, 5)), KEYS[2:7])
    frame = pl.DataFrame({"k": KEYS, "v": list(range(len(KEYS)))})
    check(bc.hash_keys(frame, column="k"), KEYS)
    with pytest.raises(ValueError, match=r"\['k', 'v'\]"):
        bc.hash_keys(frame)
    check(bc.hash_keys(pl.Series(KEYS, dtype=pl.Categorical)), KEYS)
    check(bc.hash_keys(pl.Series([None if k is None else k.encode() for k in KEYS], dtype=pl.Binary)), KEYS)
    check(bc.hash_keys(pl.concat([series, series], rechunk=False)), KEYS * 2)
    entries = bc.bucket_entries(series, bc.Buckets.equal_width(4))
    out = pl.DataFrame(entries)
    assert out.columns == ["segment_id", "bucket", "hash_min", "hash_max", "start", "count", "nbytes"]
    assert out["count"].to_list() == entries.count.tolist()
    hashes = pl.DataFrame(bc.hash_keys(series))
    assert hashes["raw"].to_list() == oracle(KEYS) and hashes["has_key"].to_list() == present(KEYS)


def test_duckdb_relation_reader_and_sql_over_results() -> None:
    duckdb = pytest.importorskip("duckdb", reason="duckdb is one of the data-frame libraries tested")
    con = duckdb.connect()
    con.execute("create table t as select * from (values ('a', 1), (NULL, 2), ('key-1', 3)) v(k, n)")
    check(bc.hash_keys(con.sql("select k from t order by n")), ["a", None, "key-1"])
    check(bc.hash_keys(con.sql("select n, k from t order by n"), column="k"), ["a", None, "key-1"])
    reader = con.sql("select k from t order by n").arrow()
    check(bc.hash_keys(reader), ["a", None, "key-1"])
    keys = [f"k{i}" for i in range(2000)]
    entries = bc.bucket_entries(keys, bc.Buckets.equal_width(8))
    assert duckdb.sql("select sum(count) from entries").fetchall() == [(2000,)]
    assert len(entries) > 1
    kh = bc.hash_keys(keys)
    got = duckdb.sql("select raw from kh where has_key").fetchall()
    assert [r[0] for r in got] == kh.raw.tolist()


def test_nanoarrow_and_arro3_columns() -> None:
    na = pytest.importorskip("nanoarrow", reason="nanoarrow is one of the Arrow producers tested")
    check(bc.hash_keys(na.Array(KEYS, na.string())), KEYS)
    check(bc.hash_keys(na.c_array(KEYS, na.large_string())), KEYS)
    a3 = pytest.importorskip("arro3.core", reason="arro3-core is one of the Arrow producers tested")
    check(bc.hash_keys(a3.Array(KEYS, a3.DataType.string())), KEYS)
    check(bc.hash_keys(a3.Array(KEYS, a3.DataType.string_view())), KEYS)
    table = a3.Table.from_pydict({"k": a3.Array(KEYS, a3.DataType.large_utf8())})
    check(bc.hash_keys(table, column="k"), KEYS)
    back = a3.Table.from_arrow(bc.hash_keys(KEYS))
    assert back.num_rows == len(KEYS)


def test_without_pyarrow_nanoarrow_and_arro3_columns_hash() -> None:
    pytest.importorskip("nanoarrow", reason="nanoarrow is one of the Arrow producers tested")
    pytest.importorskip("arro3.core", reason="arro3-core is one of the Arrow producers tested")
    code = textwrap.dedent(
        """
        import sys
        sys.modules["pyarrow"] = None  # any import of pyarrow fails
        import bucketcore as bc, nanoarrow as na, arro3.core as a3, mmh3
        keys = ["a", None, "550e8400-e29b-41d4-a716-446655440000"]
        expect = [mmh3.hash(k.encode(), 0, signed=False) if k else 0 for k in keys]
        assert bc.hash_keys(na.Array(keys, na.string())).raw.tolist() == expect
        assert bc.hash_keys(a3.Array(keys, a3.DataType.string_view())).raw.tolist() == expect
        entries = bc.bucket_entries(na.Array(keys, na.string()), bc.Buckets.equal_width(2))
        assert a3.Table.from_arrow(entries).num_rows == len(entries)
        checked = ["nanoarrow", "arro3"]
        try:
            import polars as pl
        except ImportError:
            pass
        else:
            assert bc.hash_keys(pl.DataFrame({"k": keys, "v": [1, 2, 3]}), column="k").raw.tolist() == expect
            checked.append("polars")
        try:
            import duckdb
        except ImportError:
            pass
        else:
            rel = duckdb.sql("select * from (values ('a'), (NULL)) t(k)")
            assert bc.hash_keys(rel).has_key.tolist() == [True, False]
            checked.append("duckdb")
        try:
            import pandas as pd
        except ImportError:
            pass
        else:  # pandas' strings without pyarrow: read through their numpy view
            assert bc.hash_keys(pd.Series(keys)).raw.tolist() == expect
            checked.append("pandas")
        assert sys.modules["pyarrow"] is None
        print("ok", *checked)
        """
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split()[:3] == ["ok", "nanoarrow", "arro3"], res.stdout


def test_import_bucketcore_loads_no_frame_library() -> None:
    libraries = ("pyarrow", "polars", "pandas", "duckdb", "nanoarrow", "arro3")
    code = f"import sys, bucketcore; print(sorted(m for m in {libraries!r} if m in sys.modules))"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[]"


# ----------------------------------------------------------------------------------------------
# pandas


def test_pandas_missing_values_are_keyless() -> None:
    pd = pytest.importorskip("pandas", reason="pandas is one of the data-frame libraries tested")
    check(bc.hash_keys(pd.Series(["a", None, "b"])), ["a", None, "b"])  # NaN under pandas' string handling
    check(bc.hash_keys(pd.Series(["a", pd.NA, "b"], dtype=object)), ["a", None, "b"])
    check(bc.hash_keys(pd.Series(["a", np.nan, b"b"], dtype=object)), ["a", None, b"b"])
    check(bc.hash_keys(["a", float("nan"), pd.NA, None]), ["a", None, None, None])
    check(bc.hash_keys(pd.Series(["a", None], dtype="string[python]")), ["a", None])
    with pytest.raises(TypeError, match="index 1"):
        bc.murmur3_32(["a", pd.NA])
    with pytest.raises(TypeError, match="index 1 has type float"):
        bc.hash_keys(["a", 1.5])  # only NaN is a missing float


def test_pandas_arrow_backed_columns_and_frames(pa) -> None:  # type: ignore[no-untyped-def]
    pd = pytest.importorskip("pandas", reason="pandas is one of the data-frame libraries tested")
    check(bc.hash_keys(pd.Series(KEYS, dtype="string[pyarrow]")), KEYS)
    check(bc.hash_keys(pd.Series(KEYS, dtype=pd.ArrowDtype(pa.string_view()))), KEYS)
    check(bc.hash_keys(pd.Series(KEYS, dtype="category")), KEYS)
    frame = pd.DataFrame({"k": KEYS, "v": range(len(KEYS))})
    check(bc.hash_keys(frame, column="k"), KEYS)
    check(bc.hash_keys(frame, column=0), KEYS)
    with pytest.raises(ValueError, match=r"'nope' is not a column.*\['k', 'v'\]"):
        bc.hash_keys(frame, column="nope")
    with pytest.raises(ValueError, match=r"2 columns \['k', 'v'\]"):
        bc.hash_keys(frame)
    entries = bc.bucket_entries(pd.Series(KEYS, dtype="string[pyarrow]"), bc.Buckets.equal_width(4))
    assert entries.order.tolist() == bc.bucket_entries(KEYS, bc.Buckets.equal_width(4)).order.tolist()


def test_pandas_arrow_backed_sliced_chunked_and_dictionary_series(pa) -> None:  # type: ignore[no-untyped-def]
    pd = pytest.importorskip("pandas", reason="pandas is one of the data-frame libraries tested")
    from bucketcore import arrow

    many = KEYS * 300
    series = pd.Series(many, dtype="string[pyarrow]")
    # read as the chunks pandas holds, not through pandas' own conversion
    imported = arrow.import_keys(series)
    assert imported.length == len(many)
    check(bc.hash_keys(series[5:-7], threads=1), many[5:-7])
    check(bc.hash_keys(series[::-1].reset_index(drop=True)), many[::-1])
    chunked = pa.chunked_array([pa.array(many[:100]), pa.array(many[100:])[3:]])
    parts = pd.Series(pd.arrays.ArrowExtensionArray(chunked))
    assert arrow.import_keys(parts).starts == [0, 100, len(many) - 3]
    check(bc.hash_keys(parts, threads=2), many[:100] + many[103:])
    encoded = pd.Series(pd.arrays.ArrowExtensionArray(pa.array(many).dictionary_encode()))
    check(bc.hash_keys(encoded), many)
    check(bc.hash_keys(pd.Series([], dtype="string[pyarrow]")), [])
    check(bc.hash_keys(pd.Series([None, None], dtype="string[pyarrow]")), [None, None])


# ----------------------------------------------------------------------------------------------
# numpy StringDType, bytearray and memoryview keys


@pytest.mark.skipif(
    not hasattr(np, "dtypes") or not hasattr(np.dtypes, "StringDType"), reason="numpy < 2 has no StringDType"
)
def test_numpy_string_dtype_short_long_and_missing() -> None:
    dt = np.dtypes.StringDType(na_object=None)
    keys = KEYS + ["y" * 300, "z" * 15, "w" * 16]  # inline, arena and heap strings
    arr = np.array(keys, dtype=dt)
    check(bc.hash_keys(arr), keys)
    check(bc.hash_keys(arr[::-2]), keys[::-2])
    plain = np.array([k for k in keys if k is not None], dtype=np.dtypes.StringDType())
    check(bc.hash_keys(plain), [k for k in keys if k is not None])
    grid = bc.hash_keys(np.array([["a", "b"], ["c", None]], dtype=dt))
    assert grid.raw.shape == (2, 2) and grid.has_key.tolist() == [[True, True], [True, False]]
    with pytest.raises(TypeError, match="index 2"):
        bc.murmur3_32(arr)
    big = np.array([f"user-{i}" for i in range(50_000)], dtype=np.dtypes.StringDType())
    assert np.array_equal(bc.murmur3_32(big, threads=2), bc.murmur3_32(np.array(big.tolist()), threads=1))
    table = bc.bucket_entries(big, bc.Buckets.equal_width(8), threads=2)
    assert table.order.tolist() == bc.bucket_entries(big.tolist(), bc.Buckets.equal_width(8)).order.tolist()


def test_bytearray_and_memoryview_keys_hash_as_their_bytes() -> None:
    keys = [bytearray(b"key-1"), memoryview(b"abc"), memoryview(b"xxabcxx")[2:5], None, b"key-1"]
    check(bc.hash_keys(keys), [b"key-1", b"abc", b"abc", None, b"key-1"])
    as_ints = memoryview(np.array([1, 2], dtype=np.int32))
    assert bc.murmur3_32([as_ints]).tolist() == oracle([np.array([1, 2], dtype=np.int32).tobytes()])
    big = [bytearray(f"user-{i}".encode()) for i in range(300_000)]  # two threads: held while hashed
    assert bc.murmur3_32(big, threads=2).tolist() == bc.murmur3_32([bytes(b) for b in big], threads=1).tolist()


def test_strided_or_released_memoryview_is_refused_naming_the_index() -> None:
    strided = memoryview(b"abcdef")[::2]
    with pytest.raises(ValueError, match="index 1 is a memoryview that is released or not C-contiguous"):
        bc.hash_keys([b"a", strided])
    released = memoryview(b"abc")
    released.release()
    with pytest.raises(ValueError, match="index 0 is a memoryview"):
        bc.hash_keys([released])


def test_a_bytearray_held_while_hashed_cannot_be_resized() -> None:
    key = bytearray(b"abc")
    keys = [key] * 4000
    assert bc.murmur3_32(keys).tolist() == oracle([b"abc"] * 4000)
    key.extend(b"d")  # nothing holds it any more
    assert bc.murmur3_32([key]).tolist() == oracle([b"abcd"])


def test_unsupported_input_mentions_the_capsule_interface() -> None:
    with pytest.raises(TypeError, match="Arrow PyCapsule interface"):
        bc.hash_keys(object())


def test_bucket_entries_picks_a_table_column(pa) -> None:  # type: ignore[no-untyped-def]
    import inspect

    if "column" not in inspect.signature(bc.bucket_entries).parameters:
        pytest.skip("bucket_entries has no column= yet (producer.py passes it to hashing.select_column)")
    keys = [f"k{i}" if i % 9 else None for i in range(3000)]
    table = pa.table({"n": list(range(3000)), "key": keys})
    layout = bc.Buckets.equal_width(8)
    got = bc.bucket_entries(table, layout, column="key")
    assert got.order.tolist() == bc.bucket_entries(keys, layout).order.tolist()
    with pytest.raises(ValueError, match=r"\['n', 'key'\]"):
        bc.bucket_entries(table, layout)
