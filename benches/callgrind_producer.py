"""Fixed input for instruction counts per message of bucket_entries under callgrind.

    valgrind --tool=callgrind --callgrind-out-file=cg.out python benches/callgrind_producer.py list shared
    callgrind_annotate --inclusive=yes cg.out | grep -E "fused_entries|hash_run|gs_scan|route|place"

argv: the input (list, arrow) and the policy (shared, per_bucket). The workload of
compare_producer.py (UUID keys, 4 segments x N=16, max_messages 1000) at N = 100,000 messages;
divide a function's inclusive count by N.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from workloads import tiled_layout, uuid_keys  # noqa: E402

import bucketcore as bc  # noqa: E402

N = 100_000

kind, policy = sys.argv[1], sys.argv[2]
keys = uuid_keys(N)
column = keys
if kind == "arrow":
    import pyarrow as pa

    column = pa.array(keys, type=pa.string())
bc.bucket_entries(column, tiled_layout(4, 16), max_messages=1000, policy=policy, threads=1)
