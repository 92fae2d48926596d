"""The one runner of the side-by-side comparisons: ``python3 benches/compare.py GROUP [options]``.

Every group measures bucketcore against its Python baseline in one run, on the workloads, timers
and baselines of :mod:`bucketcore.harness` (the pytest-benchmark suites, ``benches/bench_*.py``,
time the same workloads; ``bucketcore bench`` runs the hash, produce and dispatch rows in one
table). ``python3 benches/compare.py GROUP --help`` lists a group's options and rows.
"""

from __future__ import annotations

import importlib
import sys

#: group -> (module in benches/, its entry point, what it measures)
GROUPS = {
    "hashing": ("compare_hashing", "main", "murmur3_32 / hash_keys vs an mmh3 comprehension (--short, --scalar)"),
    "layout": ("compare_layout", "main", "bucket_of / route vs bisect in a Python loop; Buckets.balanced"),
    "producer": ("compare_producer", "main", "bucket_entries vs a pure-Python reference batcher"),
    "dispatch": ("compare_dispatch", "main", "route_entries / fits_one_bucket / Dispatcher vs per-entry loops"),
    "sdk": ("compare_sdk", "main", "one call at a time: batcher add, dispatcher, consumer (--pairs, --fixed)"),
    "stream": ("compare_stream", "main", "stream store appends and reads vs a naive SQLite log"),
    "heads": ("compare_heads", "main", "appends through the SQLite and the PostgreSQL head store"),
    "wire": ("compare_wire", "main", "wire encoding and stamp reads vs the protobuf library"),
    "frames": ("compare_frames", "main", "hash_keys over every Arrow / data-frame holder vs pyarrow string"),
    "frames-callgrind": ("callgrind_frames", "main", "instructions per key of the frames rows"),
    "dask": ("compare_dask", "main", "plan_layout on a local Dask cluster vs the single-process plan"),
    "callgrind": ("callgrind", "rows_main", "instructions per key of the standard hashing and producer rows"),
}


def main(argv: list[str] | None = None) -> None:
    """Run one group with the rest of the command line."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in GROUPS:
        width = max(map(len, GROUPS))
        listing = "\n".join(f"  {name:<{width}}  {what}" for name, (_, _, what) in GROUPS.items())
        print(f"usage: compare.py GROUP [options]   (GROUP --help for its options)\n\ngroups:\n{listing}")
        if argv and argv[0] not in ("-h", "--help"):
            raise SystemExit(f"unknown group {argv[0]!r}")
        return
    module, entry, _ = GROUPS[argv[0]]
    getattr(importlib.import_module(module), entry)(argv[1:])


if __name__ == "__main__":
    main()
