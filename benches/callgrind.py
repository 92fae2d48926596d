"""Instruction counts of the standard kernel rows under callgrind (deterministic, unlike wall time).

    python benches/compare.py callgrind [OUTDIR]      # the standard rows (benches/callgrind_rows.sh)
    python benches/callgrind.py hash simd list        # the child: one row's fixed input, once
    valgrind --tool=callgrind --callgrind-out-file=cg.out python benches/callgrind.py entries auto arrow shared
    callgrind_annotate --inclusive=yes cg.out | grep -E "hash_column|fused_entries|hash_run|describe_|gs_scan"

The child's arguments: the step (hash: murmur3_32; entries: bucket_entries on 4 segments x N=16,
max_messages 1000), the Murmur3 path (scalar, interleaved, simd, auto), the input (list, arrow)
and, for entries, the policy (shared, per_bucket). One thread, 100,000 UUID keys.

The rows (``compare.py callgrind``) count inside the kernel's work only (``hash_column_into``
for murmur3_32, ``fused_entries`` for bucket_entries), so the set-up and the interpreter's start
and exit do not blur the count, and divide by the 100,000 keys: instructions per key or message.
(Not ``*hash_column*``: that pattern also names ``hash_column``'s Cython wrappers around it, and
callgrind's toggle flips at each nested match, which left the work itself uncounted.)
``OUTDIR`` keeps the last row's callgrind output (``cg.out``) for callgrind_annotate.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

N = 100_000
ROWS = (
    "hash simd list",
    "hash simd arrow",
    "hash scalar list",
    "entries auto list shared",
    "entries auto arrow shared",
    "entries auto arrow per_bucket",
)


def child(step: str, path: str, kind: str, policy: str | None = None) -> None:
    """One row's call over its fixed input (run under valgrind)."""
    import bucketcore as bc
    from bucketcore import hashing
    from bucketcore.harness import tiled_layout, uuid_keys

    keys = uuid_keys(N)
    column: object = keys
    if kind == "arrow":
        import pyarrow as pa

        column = pa.array(keys, type=pa.string())
    hashing.set_kernel_path(path)
    if step == "hash":
        bc.murmur3_32(column, threads=1)
    else:
        bc.bucket_entries(column, tiled_layout(4, 16), max_messages=1000, policy=policy, threads=1)


def rows_main(argv: list[str] | None = None) -> None:
    """The callgrind group (``benches/compare.py callgrind``): every standard row's count."""
    from bucketcore.harness.callgrind import CHILD_ENV, collected

    parser = argparse.ArgumentParser(prog="compare.py callgrind", description=__doc__.splitlines()[0])
    parser.add_argument("outdir", nargs="?", help="where the last row's cg.out stays (default: a temp dir)")
    args = parser.parse_args(argv)
    out = args.outdir or tempfile.mkdtemp()
    os.makedirs(out, exist_ok=True)
    env = dict(os.environ, PYTHONHASHSEED=CHILD_ENV["PYTHONHASHSEED"])
    for row in ROWS:
        entry = "*hash_column_into*" if row.startswith("hash") else "*fused_entries*"
        count = collected([__file__, *row.split()], toggle=entry, env=env, out_file=os.path.join(out, "cg.out"))
        print(f"{row:<32} {count / N:7.1f}", flush=True)


if __name__ == "__main__":
    child(*sys.argv[1:5])
