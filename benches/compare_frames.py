"""Side by side in one run: hash_keys over the same UUID keys held by every data-frame library.

    python benches/compare_frames.py [--n 1000000] [--repeat 5] [--distinct 10000] [--keys uuid|short]
                                     [--clock wall|thread]

Each row hashes the same n keys (UUIDs, 36 bytes each, or ``user-<i>`` of 6 to 12 bytes) with
hash_keys on one thread, from another holder: pyarrow ``string`` (the reference row), the same
array through the Arrow PyCapsule interface only, ``large_string``, ``string_view``, polars,
duckdb, nanoarrow, arro3, pandas ``string[pyarrow]``, numpy ``StringDType``, a Python list, and a
dictionary-encoded column of ``--distinct`` values against the same keys as a plain string column.
It prints ns per key, the ratio to the reference row, the issue's target for the row (within 10%
of the reference; the dictionary row: faster than the plain row of the same values) and whether it
is met, the time of the producer's export and bucketcore's capsule import alone (no hashing), and
two peak-memory figures of one extra call: tracemalloc's peak (Python and numpy allocations) and
the growth of the process's peak RSS (every allocation, also a producer's own). The outputs alone
(raw, segment and bucket hashes, has_key) take 9 bytes per key; a copy of the key bytes would add
their size again (the last column says whether a call's peak could hold one). ``--clock thread``
times each call by the calling thread's CPU time instead of the wall clock: on a shared machine it
leaves out the time other processes take the core (not their effect on the caches), so its ratios
move less between runs; a producer's work on its own threads (duckdb's query) is not in it.
Rows whose library is missing are skipped (and say so).
"""

from __future__ import annotations

import argparse
import functools
import gc
import os
import time
import tracemalloc
from collections.abc import Callable, Sequence
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


WITHIN = 1.10  # the target: each row within 10% of the reference row (dictionary: faster)


class Row:
    """One input of the table: the call timed, what its ratio is held to, and its import alone."""

    def __init__(
        self,
        name: str,
        fn: Callable[[], object],
        target: str | None = None,
        imported: Callable[[], object] | None = None,
    ) -> None:
        self.name = name
        self.fn = fn
        self.target = target  # "within" (<= WITHIN x reference), "faster" (< the plain row), None: shown only
        self.imported = imported  # the producer's export and bucketcore's capsule import, no hashing


def best_thread_time(fns: Sequence[Callable[[], object]], repeat: int) -> list[float]:
    """Smallest CPU time of the calling thread for each function over ``repeat`` rounds that call
    every one in turn (as best_of_rounds does with the wall clock)."""
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            start = time.thread_time()
            fn()
            best[i] = min(best[i], time.thread_time() - start)
    return best


def verdict(row: Row, ratio: float) -> str:
    if row.target == "within":
        return "yes" if ratio <= WITHIN else "NO"
    if row.target == "faster":
        return "yes" if ratio < 1.0 else "NO"
    return "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--distinct", type=int, default=10_000, help="distinct values of the dictionary rows")
    parser.add_argument("--keys", choices=("uuid", "short"), default="uuid", help="the key workload")
    parser.add_argument("--clock", choices=("wall", "thread"), default="wall", help="what a call's time is")
    args = parser.parse_args()
    import pyarrow as pa  # the reference row needs it

    from bucketcore.arrow import import_keys

    check_before = format_cpu_check(cpu_check())
    keys = uuid_keys(args.n) if args.keys == "uuid" else short_keys(args.n)
    reference = pa.array(keys, type=pa.string())
    hash_keys = functools.partial(bc.hash_keys, threads=1)

    def row(name: str, holder: Any, target: str | None = "within", capsule: bool = True) -> Row:
        return Row(
            name,
            functools.partial(hash_keys, holder),
            target,
            functools.partial(import_keys, holder) if capsule else None,
        )

    rows = [
        row("pyarrow string (reference)", reference, None, capsule=False),
        row("pyarrow string, capsule stream only", CapsuleOnly(pa.chunked_array([reference])), None),
        row("pyarrow large_string", reference.cast(pa.large_string()), None, capsule=False),
        row("pyarrow string_view", reference.cast(pa.string_view())),
    ]
    skipped = []
    try:
        import polars as pl

        rows.append(row("polars Series", pl.Series("k", keys)))
    except ImportError:
        skipped.append("polars")
    duckdb_rows: tuple[Row, Row] | None = None
    try:
        import duckdb

        con = duckdb.connect()
        con.register("source", pa.table({"k": reference}))
        con.execute("create table t as select k from source")
        # a duckdb result is a stream read once: every call runs the query and exports its result
        duckdb_rows = (
            Row("duckdb result (query run per call)", lambda: hash_keys(con.sql("select k from t")), "within"),
            Row("duckdb result, query and import only", lambda: import_keys(con.sql("select k from t"))),
        )
        rows.extend(duckdb_rows)
    except ImportError:
        skipped.append("duckdb")
    try:
        import nanoarrow as na

        rows.append(row("nanoarrow Array", na.Array(reference)))
    except ImportError:
        skipped.append("nanoarrow")
    try:
        import arro3.core as a3

        rows.append(row("arro3 Array", a3.Array.from_arrow(reference), None))
    except ImportError:
        skipped.append("arro3-core")
    try:
        import pandas as pd

        rows.append(row("pandas string[pyarrow]", pd.Series(keys, dtype="string[pyarrow]")))
    except ImportError:
        skipped.append("pandas")
    if hasattr(np.dtypes, "StringDType"):
        rows.append(row("numpy StringDType", np.array(keys, dtype=np.dtypes.StringDType()), capsule=False))
    rows.append(row("list[str]", keys, None, capsule=False))
    rng = np.random.default_rng(3)
    distinct = uuid_keys(args.distinct, seed=4) if args.keys == "uuid" else short_keys(args.distinct)
    values = pa.array(distinct, type=pa.string())
    indices = pa.array(rng.integers(0, args.distinct, size=args.n, dtype=np.int32))
    encoded = pa.DictionaryArray.from_arrays(indices, values)
    plain = row(f"same {args.distinct} values, plain string", encoded.cast(pa.string()), None, capsule=False)
    dictionary = row(f"same {args.distinct} values, dictionary", encoded, "faster")
    rows += [plain, dictionary]

    expected = bc.hash_keys(reference).raw
    for r in rows[:-2]:
        if duckdb_rows is not None and r is duckdb_rows[1]:
            continue
        if not np.array_equal(r.fn().raw, expected):
            raise SystemExit(f"{r.name}: hashes differ from the reference row")
    if not np.array_equal(dictionary.fn().raw, plain.fn().raw):
        raise SystemExit("dictionary row: hashes differ from the plain row")

    fns: list[Callable[[], object]] = [r.fn for r in rows]
    imports = [r for r in rows if r.imported is not None]
    timer = best_of_rounds if args.clock == "wall" else best_thread_time
    times = timer(fns + [r.imported for r in imports if r.imported is not None], args.repeat)
    import_us = {r.name: seconds * 1e6 for r, seconds in zip(imports, times[len(rows) :])}
    times = times[: len(rows)]
    base = times[0]
    key_mib = sum(len(k.encode()) for k in keys) / 2**20
    out_mib = 9 * args.n / 2**20  # raw, segment and bucket hashes, has_key
    clock = "wall clock" if args.clock == "wall" else "the calling thread's CPU time"
    print(
        f"hash_keys, one thread, {args.n:,} {args.keys} keys, best of {args.repeat} rounds by {clock}; {check_before}"
    )
    print(f"key bytes {key_mib:.1f} MiB; outputs {out_mib:.1f} MiB (a copy of the keys would add the key bytes)")
    header = (
        f"{'input':40} {'ns/key':>7} {'ratio':>6} {'target':>7} {'met':>4} {'import us':>10}"
        f" {'tracemalloc MiB':>16} {'RSS growth MiB':>15} {'key copy':>9}"
    )
    print(header)
    peaks = {r.name: peak_memory(r.fn) for r in rows}
    for r, seconds in zip(rows, times):
        traced, rss = peaks[r.name]
        producer_rss = 0.0
        if duckdb_rows is not None and r is duckdb_rows[0]:
            # duckdb materialises its query's result for every call: its own memory, not a copy
            producer_rss = peaks[duckdb_rows[1].name][1] or 0.0
        ratio_base = times[rows.index(plain)] if r is dictionary else base
        ratio = seconds / ratio_base
        target = {"within": f"<={WITHIN:.2f}", "faster": "<1.00", None: ""}[r.target]
        shown_rss = f"{rss:15.1f}" if rss is not None else f"{'n/a':>15}"
        shown_import = f"{import_us[r.name]:10.1f}" if r.name in import_us else f"{'':>10}"
        copied = "no" if max(traced, (rss or 0.0) - producer_rss) < out_mib + key_mib / 2 else "YES?"
        if duckdb_rows is not None and r is duckdb_rows[1]:
            copied = "-"  # duckdb's query result itself, no hashing
        print(
            f"{r.name:40} {ns(seconds, args.n):7.1f} {ratio:6.2f} {target:>7} {verdict(r, ratio):>4} {shown_import}"
            f" {traced:16.1f} {shown_rss} {copied:>9}"
        )
    if duckdb_rows is not None:
        full, export = (times[rows.index(r)] for r in duckdb_rows)
        print(
            f"duckdb result without duckdb's own query and export: {ns(full - export, args.n):.1f} ns/key, "
            f"ratio {(full - export) / base:.2f}"
        )
    print(
        "ratio: to the reference row (the dictionary row: to the plain row of the same values); met: the issue's "
        f"target (within {WITHIN - 1:.0%} of the reference; dictionary: faster than plain); import us: the "
        "producer's export and bucketcore's capsule import alone, no hashing (part of the row's time); key copy: "
        "whether a call's peak memory could hold a copy of the key bytes (the duckdb row: past what its query and "
        "import alone take)"
    )
    if skipped:
        print("skipped (not installed): " + ", ".join(skipped))
    print(f"after: {format_cpu_check(cpu_check())}; pid {os.getpid()}")


if __name__ == "__main__":
    main()
