"""Instructions per key of hash_keys over each data-frame layout of benches/compare_frames.py, under
callgrind (deterministic on a loaded machine, unlike wall time).

    benches/compare.py frames-callgrind [ROW ...]          # runs valgrind itself, one child per row
    benches/compare.py frames-callgrind --batch [ROW ...]  # one child for all rows (one interpreter start)
    benches/compare.py frames-callgrind --cache-sim [ROW ...]  # also D1 and LL misses per key
    benches/callgrind_frames.py --child ROW [ROW ...]      # the child: one counted call per row

(``benches/callgrind_frames.py ...`` is the same group.)

Each child builds 100,000 UUID keys in the row's holder, calls ``hash_keys(keys, threads=1)`` once
uncounted (imports and first-use caches), then once through ``operator.call``, the only function
counted (``--toggle-collect=_operator_call``): the whole call, its import of the producer's
capsules, its Python glue and the kernel, and nothing of the set-up. ``--batch`` starts the
interpreter under valgrind once and dumps the counts after each row's counted call
(``--dump-after=_operator_call``): one start-up for all the rows. Rows: the pyarrow ``string``
reference, the same through its capsule stream only, ``large_string``, ``string_view``, polars,
nanoarrow, arro3, pandas ``string[pyarrow]``, numpy ``StringDType``, a list of str, duckdb's
result materialised once (``.arrow()``), and 1,000 distinct values as a plain string column and
dictionary-encoded. ``--cache-sim`` adds callgrind's cache simulation (its own model of a first-level
data cache and a last-level cache, the latter set to 1 MiB so that no row's memory stays in it
between calls; no hardware prefetcher): misses per key in each, i.e. how many 64-byte lines of the
layout's memory a call reads and writes; it says which bytes are touched, not how fast.
"""

from __future__ import annotations

import argparse
import functools
import operator
import os
import re
import tempfile
from collections.abc import Callable
from typing import Any

from bucketcore.harness.callgrind import CHILD_ENV, callgrind, totals

N = 100_000
ROWS = (
    "string",
    "capsule",
    "large_string",
    "string_view",
    "polars",
    "nanoarrow",
    "arro3",
    "pandas",
    "npstring",
    "list",
    "duckdb_table",
    "dict_plain",
    "dict",
)


@functools.cache
def _keys() -> tuple[list[str], Any]:
    """The N UUID keys and their pyarrow ``string`` array, made once for every row of a child."""
    import pyarrow as pa

    from bucketcore.harness import uuid_keys

    keys = uuid_keys(N)
    return keys, pa.array(keys, type=pa.string())


def _duckdb_result(reference: Any) -> Any:
    """duckdb's result of a query over the keys, materialised once as a pyarrow Table."""
    import duckdb
    import pyarrow as pa

    con = duckdb.connect(config={"threads": 1})
    con.register("source", pa.table({"k": reference}))
    con.execute("create table t as select k from source")
    result = con.sql("select k from t").arrow()
    return result.read_all() if hasattr(result, "read_all") else result


def make(row: str) -> Any:
    """The row's key holder over the same N UUID keys (the dictionary rows: 1,000 distinct)."""
    import numpy as np
    import pyarrow as pa

    from bucketcore.harness import uuid_keys
    from bucketcore.harness.workloads import CapsuleOnly

    keys, reference = _keys()
    makers: dict[str, Callable[[], Any]] = {
        "string": lambda: reference,
        "capsule": lambda: CapsuleOnly(pa.chunked_array([reference])),
        "large_string": lambda: reference.cast(pa.large_string()),
        "string_view": lambda: reference.cast(pa.string_view()),
        "polars": lambda: __import__("polars").Series("k", keys),
        "nanoarrow": lambda: __import__("nanoarrow").Array(reference),
        "arro3": lambda: __import__("arro3.core", fromlist=["Array"]).Array.from_arrow(reference),
        "pandas": lambda: __import__("pandas").Series(keys, dtype="string[pyarrow]"),
        "npstring": lambda: np.array(keys, dtype=np.dtypes.StringDType()),
        "list": lambda: keys,
        "duckdb_table": lambda: _duckdb_result(reference),
    }
    if row in makers:
        return makers[row]()
    distinct = pa.array(uuid_keys(1000, seed=4), type=pa.string())
    indices = pa.array(np.random.default_rng(3).integers(0, 1000, size=N, dtype=np.int32))
    encoded = pa.DictionaryArray.from_arrays(indices, distinct)
    return encoded if row == "dict" else encoded.cast(pa.string())


def child(rows: list[str]) -> None:
    import bucketcore as bc

    holders = [make(row) for row in rows]
    for keys in holders:
        bc.hash_keys(keys, threads=1)
    for keys in holders:
        operator.call(bc.hash_keys, keys, threads=1)


def _callgrind(rows: list[str], extra: list[str], out_file: str) -> None:
    env = dict(os.environ, **CHILD_ENV, POLARS_MAX_THREADS="1")
    callgrind([__file__, "--child", *rows], toggle="_operator_call", options=extra, env=env, out_file=out_file)


def _per_key(counts: dict[str, int]) -> tuple[float, ...]:
    """(instructions, D1 misses, LL misses) per key; the misses only when simulated."""
    ir = counts.get("Ir", 0) / N
    if "D1mr" not in counts:
        return (ir,)
    d1 = (counts.get("D1mr", 0) + counts.get("D1mw", 0)) / N
    ll = (counts.get("DLmr", 0) + counts.get("DLmw", 0)) / N
    return ir, d1, ll


def count(row: str, extra: list[str]) -> tuple[float, ...]:
    """Per key of one counted call of the row: instructions (and misses, see _per_key)."""
    with tempfile.TemporaryDirectory() as tmp:
        _callgrind([row], extra, f"{tmp}/cg.out")
        return _per_key(totals(f"{tmp}/cg.out"))


def count_batch(rows: list[str], extra: list[str]) -> list[tuple[float, ...]]:
    """Per key of one counted call of each row, all in one child."""
    with tempfile.TemporaryDirectory() as tmp:
        _callgrind(rows, [*extra, "--dump-after=_operator_call"], f"{tmp}/cg.out")
        dumps = sorted(
            (p for p in os.listdir(tmp) if re.fullmatch(r"cg\.out\.\d+", p)), key=lambda p: int(p.rsplit(".", 1)[1])
        )
        counts = [totals(os.path.join(tmp, name)) for name in dumps]
    if len(counts) < len(rows):  # one dump per counted call, then maybe the (empty) one at exit
        raise SystemExit(f"expected {len(rows)} dumps, found {len(counts)}")
    return [_per_key(t) for t in counts[: len(rows)]]


def main(argv: list[str] | None = None) -> None:
    """The frames-callgrind group (``benches/compare.py frames-callgrind``); ``argv`` as the command line's."""
    parser = argparse.ArgumentParser(prog="compare.py frames-callgrind", description=__doc__.splitlines()[0])
    parser.add_argument("rows", nargs="*", default=list(ROWS))
    parser.add_argument("--child", action="store_true", help="run the rows' counted calls (under valgrind)")
    parser.add_argument("--batch", action="store_true", help="one valgrind child for every row")
    parser.add_argument("--cache-sim", action="store_true", help="also D1 and LL misses per key (slower)")
    args = parser.parse_args(argv)
    for row in args.rows:
        if row not in ROWS:
            raise SystemExit(f"unknown row {row!r}; rows: {', '.join(ROWS)}")
    if args.child:
        child(args.rows)
        return
    # a last-level cache smaller than one row's memory (its keys alone are 3.4 MiB): what a call
    # misses there is every line it reads, not what the uncounted first call left cached
    extra = ["--cache-sim=yes", "--LL=1048576,16,64"] if args.cache_sim else []
    heads = ["instructions/key"] + (["D1 misses/key", "LL misses/key"] if args.cache_sim else [])
    print(f"{'row':<14}" + "".join(f"{h:>18}" for h in heads))

    def show(row: str, figures: tuple[float, ...]) -> None:
        print(f"{row:<14}" + "".join(f"{f:>18.2f}" if i else f"{f:>18.1f}" for i, f in enumerate(figures)), flush=True)

    if args.batch:
        for row, figures in zip(args.rows, count_batch(args.rows, extra)):
            show(row, figures)
        return
    for row in args.rows:
        show(row, count(row, extra))


if __name__ == "__main__":
    main()
