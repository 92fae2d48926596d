"""Side by side in one run: plan_layout on a local Dask cluster vs the single-process plan, same Parquet data.

    python benches/compare.py dask [--keys 50000000] [--files 50] [--workers 2] [--buckets 64]
                                   [--segments 4] [--dir /tmp] [--keep]

(``python benches/compare_dask.py ...`` is the same group.)

Generates a Parquet dataset of ``--keys`` Zipf-skewed keys (``user-<rank>``, 1% keyless) in
``--files`` files, then measures, best of ``--repeat``:

- single process: what ``bucketcore plan`` does, file by file: read the key column, hash, route,
  count (:func:`bucketcore.histogram.bucket_histogram`), add, plan the boundary lists;
- cluster: :func:`bucketcore.dask.plan_layout` on a ``LocalCluster`` of ``--workers`` processes
  (one thread each) over the same files (cluster start-up reported apart, not in the rate);
- the single-thread hashing rate of the same keys in memory (``hash_keys(..., threads=1)``).

Reports keys per second of both plans (they must be identical, and are checked), the per-worker
throughput of the cluster, and its ratio to the single-thread hashing rate: how much of a core
the engine and the Parquet reading leave to the hashing.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import shutil
import tempfile

from bucketcore.harness.timing import Stopwatch, best_of, best_of_result


def generate(root: str, keys: int, files: int, seed: int) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    per = -(-keys // files)
    for f in range(files):
        n = min(per, keys - f * per)
        if n <= 0:
            break
        ranks = pa.array(rng.zipf(1.2, size=n) % 50_000_000)
        col = pc.binary_join_element_wise(pa.scalar("user-"), pc.cast(ranks, pa.string()), "")
        keyless = pa.array(rng.random(n) < 0.01)
        col = pc.if_else(keyless, pa.scalar(None, pa.string()), col)
        pq.write_table(pa.table({"key": col}), os.path.join(root, f"part-{f:04d}.parquet"), row_group_size=1 << 20)


def single_process(root: str, layout, n: int):  # type: ignore[no-untyped-def]
    import pyarrow.parquet as pq

    from bucketcore.histogram import bucket_histogram

    total = None
    for name in sorted(os.listdir(root)):
        col = pq.read_table(os.path.join(root, name), columns=["key"]).column("key")
        h = bucket_histogram(col, layout)
        total = h if total is None else total + h
    return total.balanced_layout(layout, n)


def main(argv: list[str] | None = None) -> None:
    """The dask group (``benches/compare.py dask``); ``argv`` as the command line's."""
    parser = argparse.ArgumentParser(prog="compare.py dask", description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=50_000_000)
    parser.add_argument("--files", type=int, default=50)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--buckets", type=int, default=64)
    parser.add_argument("--segments", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--dir", default=None)
    parser.add_argument("--keep", action="store_true", help="keep the generated dataset")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    import dask.dataframe as dd
    import pyarrow.parquet as pq

    import bucketcore as bc
    from bucketcore import dask as bcd
    from bucketcore.harness import tiled_layout

    root = tempfile.mkdtemp(prefix="bc-dask-", dir=args.dir)
    result: dict[str, object] = {
        "keys": args.keys,
        "files": args.files,
        "workers": args.workers,
        "buckets": args.buckets,
        "segments": args.segments,
    }
    try:
        with Stopwatch() as generated:
            generate(root, args.keys, args.files, 18)
        result["generate_s"] = round(generated.seconds, 1)
        layout = tiled_layout(args.segments, 1)

        single, planned_single = best_of_result(
            functools.partial(single_process, root, layout, args.buckets), args.repeat
        )

        def plan_on_cluster() -> bc.TopicLayout:
            return bcd.plan_layout(dd.read_parquet(root, columns=["key"]), layout, args.buckets, column="key")

        with contextlib.ExitStack() as cluster_up:
            with Stopwatch() as started:
                cluster_up.enter_context(bcd.client_for("local", n_workers=args.workers))
            result["cluster_start_s"] = round(started.seconds, 2)
            cluster, planned_cluster = best_of_result(plan_on_cluster, args.repeat)
        assert planned_cluster.to_dict() == planned_single.to_dict(), "the cluster plan differs from the single one"

        first = pq.read_table(os.path.join(root, sorted(os.listdir(root))[0]), columns=["key"]).column("key")
        hashing = best_of(functools.partial(bc.hash_keys, first, threads=1), max(3, args.repeat))
        hash_rate = len(first) / hashing

        single_rate = args.keys / single
        cluster_rate = args.keys / cluster
        per_worker = cluster_rate / args.workers
        result.update(
            {
                "single_process_keys_per_s": round(single_rate),
                "cluster_keys_per_s": round(cluster_rate),
                "cluster_over_single": round(cluster_rate / single_rate, 2),
                "per_worker_keys_per_s": round(per_worker),
                "single_thread_hash_keys_per_s": round(hash_rate),
                "hash_rate_over_per_worker": round(hash_rate / per_worker, 2),
                "identical_plans": True,
            }
        )
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            result["dataset"] = root
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(
        f"{args.keys:,} keys in {args.files} Parquet files (generated in {result['generate_s']} s), "
        f"{args.segments} segments, N={args.buckets}"
    )
    print(f"  single process plan     {result['single_process_keys_per_s']:>14,} keys/s")
    print(
        f"  cluster plan ({args.workers} workers) {result['cluster_keys_per_s']:>14,} keys/s  "
        f"(x{result['cluster_over_single']} of single; cluster start {result['cluster_start_s']} s, not counted)"
    )
    print(f"  per worker              {result['per_worker_keys_per_s']:>14,} keys/s")
    print(
        f"  single-thread hashing   {result['single_thread_hash_keys_per_s']:>14,} keys/s  "
        f"(x{result['hash_rate_over_per_worker']} of one worker: the engine's and Parquet's overhead)"
    )
    print("  plans identical: yes")


if __name__ == "__main__":
    main()
