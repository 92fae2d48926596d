"""Fixed inputs for instruction counts under callgrind (deterministic, unlike wall time).

    valgrind --tool=callgrind --callgrind-out-file=cg.out python benches/callgrind.py hash simd list
    valgrind --tool=callgrind --callgrind-out-file=cg.out python benches/callgrind.py entries auto arrow shared
    callgrind_annotate --inclusive=yes cg.out | grep -E "hash_column|fused_entries|hash_run|describe_|gs_scan"

argv: the step (hash: murmur3_32; entries: bucket_entries on 4 segments x N=16, max_messages
1000), the Murmur3 path (scalar, interleaved, simd, auto), the input (list, arrow) and, for
entries, the policy (shared, per_bucket). One thread, 100,000 UUID keys: divide a function's
inclusive count by 100,000 for instructions per key or message (benches/callgrind_rows.sh does so
for the standard rows).
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from workloads import tiled_layout, uuid_keys  # noqa: E402

import bucketcore as bc  # noqa: E402
from bucketcore import hashing  # noqa: E402

N = 100_000

step, path, kind = sys.argv[1:4]
keys = uuid_keys(N)
column = keys
if kind == "arrow":
    import pyarrow as pa

    column = pa.array(keys, type=pa.string())
hashing.set_kernel_path(path)
if step == "hash":
    bc.murmur3_32(column, threads=1)
else:
    bc.bucket_entries(column, tiled_layout(4, 16), max_messages=1000, policy=sys.argv[4], threads=1)
