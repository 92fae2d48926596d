"""Side by side in one run: hash_keys over the same UUID keys held by every data-frame library.

    python benches/compare_frames.py [--n 1000000] [--repeat 5] [--distinct 10000] [--keys uuid|short]

Each row hashes the same n keys (UUIDs, 36 bytes each, or ``user-<i>`` of 6 to 12 bytes) with
hash_keys on one thread, from another holder: pyarrow ``string`` (the reference row), the same
array through the Arrow PyCapsule interface only, ``large_string``, ``string_view``, polars,
duckdb, nanoarrow, arro3, pandas ``string[pyarrow]``, numpy ``StringDType``, a Python list, and a
dictionary-encoded column of ``--distinct`` values against the same keys as a plain string column.
It prints ns per key, the ratio to the reference row, and two peak-memory figures of one extra
call: tracemalloc's peak (Python and numpy allocations) and the growth of the process's peak RSS
(every allocation, also a producer's own). The outputs alone (raw, segment and bucket hashes,
has_key) take 9 bytes per key; a copy of the key bytes would add their size again.
Rows whose library is missing are skipped (and say so).
"""

from __future__ import annotations

import argparse
import functools
import gc
import os
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np

import bucketcore as bc
from bucketcore.harness import best_of_rounds, short_keys, uuid_keys
from bucketcore.harness.timing import cpu_check, format_cpu_check, ns


class CapsuleOnly:
    """An object that exposes nothing but the Arrow PyCapsule stream interface of a column."""

    def __init__(self, column: Any) -> None:
        self.column = column

    def __arrow_c_stream__(self, requested_schema: object = None) -> object:
        return self.column.__arrow_c_stream__(requested_schema)


def _peak_rss_kib() -> int | None:
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _reset_peak_rss() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")  # Linux: the peak RSS starts again from the current RSS
        return True
    except OSError:
        return False


def _rss_kib() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def peak_memory(fn: Callable[[], object]) -> tuple[float, float | None]:
    """(tracemalloc peak in MiB, growth of the peak RSS over the RSS before, MiB) of one call."""
    gc.collect()
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    gc.collect()
    rss_growth = None
    if _reset_peak_rss():
        before = _rss_kib()
        fn()
        after = _peak_rss_kib()
        if after is not None:
            rss_growth = (after - before) / 1024
    return peak / 2**20, rss_growth


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--distinct", type=int, default=10_000, help="distinct values of the dictionary rows")
    parser.add_argument("--keys", choices=("uuid", "short"), default="uuid", help="the key workload")
    args = parser.parse_args()
    import pyarrow as pa  # the reference row needs it

    check_before = format_cpu_check(cpu_check())
    keys = uuid_keys(args.n) if args.keys == "uuid" else short_keys(args.n)
    reference = pa.array(keys, type=pa.string())
    hash_keys = functools.partial(bc.hash_keys, threads=1)
    rows: list[tuple[str, Callable[[], object]]] = [
        ("pyarrow string (reference)", functools.partial(hash_keys, reference)),
        (
            "pyarrow string, capsule stream only",
            functools.partial(hash_keys, CapsuleOnly(pa.chunked_array([reference]))),
        ),
        ("pyarrow large_string", functools.partial(hash_keys, reference.cast(pa.large_string()))),
        ("pyarrow string_view", functools.partial(hash_keys, reference.cast(pa.string_view()))),
    ]
    skipped = []
    try:
        import polars as pl

        rows.append(("polars Series", functools.partial(hash_keys, pl.Series("k", keys))))
    except ImportError:
        skipped.append("polars")
    try:
        import duckdb

        con = duckdb.connect()
        con.register("source", pa.table({"k": reference}))
        con.execute("create table t as select k from source")
        rows.append(("duckdb relation (query run per call)", lambda: hash_keys(con.sql("select k from t"))))
        from _bucketcore import _arrow

        # what the duckdb row costs before any hashing: the query and its Arrow export
        export_only = (
            "duckdb relation, export only",
            lambda: _arrow.import_stream(con.sql("select k from t").__arrow_c_stream__()),
        )
    except ImportError:
        skipped.append("duckdb")
    try:
        import nanoarrow as na

        rows.append(("nanoarrow Array", functools.partial(hash_keys, na.Array(reference))))
    except ImportError:
        skipped.append("nanoarrow")
    try:
        import arro3.core as a3

        rows.append(("arro3 Array", functools.partial(hash_keys, a3.Array.from_arrow(reference))))
    except ImportError:
        skipped.append("arro3-core")
    try:
        import pandas as pd

        rows.append(("pandas string[pyarrow]", functools.partial(hash_keys, pd.Series(keys, dtype="string[pyarrow]"))))
    except ImportError:
        skipped.append("pandas")
    if hasattr(np.dtypes, "StringDType"):
        rows.append(("numpy StringDType", functools.partial(hash_keys, np.array(keys, dtype=np.dtypes.StringDType()))))
    rows.append(("list[str]", functools.partial(hash_keys, keys)))
    rng = np.random.default_rng(3)
    distinct = uuid_keys(args.distinct, seed=4) if args.keys == "uuid" else short_keys(args.distinct)
    values = pa.array(distinct, type=pa.string())
    indices = pa.array(rng.integers(0, args.distinct, size=args.n, dtype=np.int32))
    encoded = pa.DictionaryArray.from_arrays(indices, values)
    rows.append((f"same {args.distinct} values, plain string", functools.partial(hash_keys, encoded.cast(pa.string()))))
    rows.append((f"same {args.distinct} values, dictionary", functools.partial(hash_keys, encoded)))

    expected = bc.hash_keys(reference).raw
    for name, fn in rows[:-2]:
        got = fn().raw
        if not np.array_equal(got, expected):
            raise SystemExit(f"{name}: hashes differ from the reference row")
    if not np.array_equal(rows[-1][1]().raw, rows[-2][1]().raw):
        raise SystemExit("dictionary row: hashes differ from the plain row")

    if "duckdb" not in skipped:
        rows.insert([name for name, _ in rows].index("duckdb relation (query run per call)") + 1, export_only)
    times = best_of_rounds([fn for _, fn in rows], args.repeat)
    print(f"hash_keys, one thread, {args.n:,} {args.keys} keys, best of {args.repeat} rounds; {check_before}")
    print(f"{'input':40} {'ns/key':>8} {'ratio':>7} {'tracemalloc peak MiB':>21} {'peak RSS growth MiB':>20}")
    base = times[0]
    for (name, fn), seconds in zip(rows, times):
        traced, rss = peak_memory(fn)
        ratio_base = times[-2] if name.endswith("dictionary") else base
        shown_rss = f"{rss:20.1f}" if rss is not None else f"{'n/a':>20}"
        print(f"{name:40} {ns(seconds, args.n):8.1f} {seconds / ratio_base:7.2f} {traced:21.1f} {shown_rss}")
    print("ratio: to the reference row (the dictionary row: to the plain row of the same values)")
    if skipped:
        print("skipped (not installed): " + ", ".join(skipped))
    print(f"after: {format_cpu_check(cpu_check())}; pid {os.getpid()}")


if __name__ == "__main__":
    main()
