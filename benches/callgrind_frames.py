"""Instructions per key of hash_keys over each data-frame layout of benches/compare_frames.py, under
callgrind (deterministic on a loaded machine, unlike wall time).

    benches/callgrind_frames.py [ROW ...]          # runs valgrind itself, one child per row
    benches/callgrind_frames.py --child ROW        # the child: one counted call

Each child builds 100,000 UUID keys in the row's holder, calls ``hash_keys(keys, threads=1)`` once
uncounted (imports and first-use caches), then once through ``operator.call``, the only function
counted (``--toggle-collect=_operator_call``): the whole call, its import of the producer's
capsules, its Python glue and the kernel, and nothing of the set-up. Rows: the pyarrow ``string``
reference, the same through its capsule stream only, ``large_string``, ``string_view``, polars,
nanoarrow, arro3, pandas ``string[pyarrow]``, numpy ``StringDType``, a list of str, and 1,000
distinct values as a plain string column and dictionary-encoded.
"""

from __future__ import annotations

import argparse
import operator
import os
import re
import subprocess
import sys
from collections.abc import Callable
from typing import Any

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
    "dict_plain",
    "dict",
)


class CapsuleOnly:
    """An object that exposes nothing but the Arrow PyCapsule stream interface of a column."""

    def __init__(self, column: Any) -> None:
        self.column = column

    def __arrow_c_stream__(self, requested_schema: object = None) -> object:
        return self.column.__arrow_c_stream__(requested_schema)


def make(row: str) -> Any:
    """The row's key holder over the same N UUID keys (the dictionary rows: 1,000 distinct)."""
    import numpy as np
    import pyarrow as pa

    from bucketcore.harness import uuid_keys

    keys = uuid_keys(N)
    reference = pa.array(keys, type=pa.string())
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
    }
    if row in makers:
        return makers[row]()
    distinct = pa.array(uuid_keys(1000, seed=4), type=pa.string())
    indices = pa.array(np.random.default_rng(3).integers(0, 1000, size=N, dtype=np.int32))
    encoded = pa.DictionaryArray.from_arrays(indices, distinct)
    return encoded if row == "dict" else encoded.cast(pa.string())


def child(row: str) -> None:
    import bucketcore as bc

    keys = make(row)
    bc.hash_keys(keys, threads=1)
    operator.call(bc.hash_keys, keys, threads=1)


def count(row: str) -> float:
    """Instructions per key of one counted call of the row."""
    python = sys.executable  # the real interpreter (valgrind cannot start a shim script)
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", PYTHONHASHSEED="0", POLARS_MAX_THREADS="1")
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--collect-atstart=no", "--toggle-collect=_operator_call"]
        + ["--callgrind-out-file=/dev/null", python, __file__, "--child", row],
        env=env,
        capture_output=True,
        text=True,
    )
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode or found is None:
        raise SystemExit(f"{row}: the callgrind run failed:\n{done.stderr[-2000:]}")
    return int(found.group(1)) / N


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rows", nargs="*", default=list(ROWS))
    parser.add_argument("--child", metavar="ROW")
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    print(f"{'row':<14}{'instructions/key':>18}")
    for row in args.rows:
        if row not in ROWS:
            raise SystemExit(f"unknown row {row!r}; rows: {', '.join(ROWS)}")
        print(f"{row:<14}{count(row):>18.1f}", flush=True)


if __name__ == "__main__":
    main()
