"""Fixed input for instruction counts per key under callgrind (deterministic, unlike wall time).

    valgrind --tool=callgrind --callgrind-out-file=cg.%p python benches/callgrind_hashing.py scalar list
    callgrind_annotate cg.<pid> | grep -E "hash_column|hash_run|describe_|bc_hash"

argv: the kernel path (scalar, interleaved, simd, auto) and the input (list, arrow).
Divide the kernel's inclusive instruction count by N (100,000 UUID keys).
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from workloads import uuid_keys  # noqa: E402

import bucketcore as bc  # noqa: E402
from bucketcore import hashing  # noqa: E402

N = 100_000

path, kind = sys.argv[1], sys.argv[2]
keys = uuid_keys(N)
column = keys
if kind == "arrow":
    import pyarrow as pa

    column = pa.array(keys, type=pa.string())
hashing.set_kernel_path(path)
bc.murmur3_32(column, threads=1)
