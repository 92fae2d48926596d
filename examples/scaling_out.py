"""Scaling out: plan and replay a key log on a Dask cluster, share stream heads through PostgreSQL.

    python3 examples/scaling_out.py                      # a local 2-worker cluster, no PostgreSQL part
    python3 examples/scaling_out.py --pg-url postgresql://user@host/db
    python3 examples/scaling_out.py --scheduler tcp://scheduler:8786 --pg-url ... --dir /shared/demo

Needs ``pip install 'bucketcore[dask,postgres]'``. The key log is written as Parquet under
``--dir`` (default: a temporary directory); on a real cluster that directory must be one every
worker reads (a shared filesystem, or use an object-store URL with ``dd.read_parquet``), and the
stream store's directory one every broker writes.
"""

from __future__ import annotations

import argparse
import os
import tempfile

import numpy as np


def write_key_log(root: str, files: int = 4, per_file: int = 25_000) -> None:
    """A Zipf-skewed log of order keys, a few keyless, as Parquet files."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(42)
    os.makedirs(root, exist_ok=True)
    for f in range(files):
        ranks = rng.zipf(1.4, size=per_file) % 5_000
        keyless = rng.random(per_file) < 0.01
        keys = [None if gone else f"customer-{r}" for r, gone in zip(ranks.tolist(), keyless.tolist())]
        sizes = rng.integers(100, 2_000, size=per_file)
        pq.write_table(pa.table({"key": keys, "size": sizes}), os.path.join(root, f"part-{f}.parquet"))


def plan_and_replay(log_dir: str, scheduler: str) -> tuple[object, object]:
    import dask.dataframe as dd

    import bucketcore as bc
    from bucketcore import dask as bcd

    layout = bc.TopicLayout(1, [bc.Segment(0, 0x0000, 0x7FFF), bc.Segment(1, 0x8000, 0xFFFF)])
    with bcd.client_for(scheduler) as client:
        print(f"cluster: {len(client.scheduler_info()['workers'])} workers at {client.scheduler.address}")
        ddf = dd.read_parquet(log_dir)
        # bcd.plan_layout(ddf, layout, 8, column="key") does these two steps in one call
        hist = bcd.bucket_histogram(ddf, layout, column="key")
        planned = hist.balanced_layout(layout, 8)
        print(f"histogram: {hist.total:,} keyed messages, {hist.keyless:,} keyless, segments {list(hist)}")
        for sid in hist:
            equal = bc.Buckets.equal_width(8).load(hist[sid]).ratio
            balanced = planned.segment(sid).buckets.load(hist[sid]).ratio
            print(f"segment {sid}: bucket load max/mean {equal:.2f} equal width -> {balanced:.2f} balanced")
        rows = bcd.assign(ddf, planned, column="key")
        per_segment = rows.groupby("segment_id").size().compute().sort_index()
        print(f"messages per segment: {per_segment.to_dict()}")
        entries = bcd.bucket_entries(ddf, planned, column="key", size_column="size", max_messages=100)
        first = entries.get_partition(0).compute()
        print(f"partition 0 replayed: {first['entry'].nunique():,} entries for {len(first):,} messages")
    return planned, first


def share_heads(pg_url: str, store_dir: str, replayed: object) -> None:
    from bucketcore.stream import EntryPayload, FencedError, StreamStore

    # two brokers: each its own store on the shared WAL directory, heads in one database
    with StreamStore.open(store_dir, heads=pg_url) as a, StreamStore.open(store_dir, heads=pg_url) as b:
        stream = f"demo-{os.getpid()}"
        a.create_stream(stream)
        session_a = a.open_session(stream, "broker-a")
        frame = replayed  # the replayed partition: rows grouped into entries
        for _, entry in list(frame.groupby("entry", sort=False))[:20]:  # type: ignore[attr-defined]
            payload = "\n".join(str(k) for k in entry["key"]).encode()
            stamp = (int(entry["hash_min"].iloc[0]), int(entry["hash_max"].iloc[0]))
            a.append(stream, [EntryPayload(payload, len(entry), b"", *stamp)], session=session_a)
        session_b = b.open_session(stream, "broker-b")  # broker-b takes the stream over
        try:
            a.append(stream, [EntryPayload(b"late")], session=session_a)
        except FencedError as err:
            print(f"broker-a fenced: {err}")
        res = b.append(stream, [EntryPayload(b"after takeover")], session=session_b)
        stamps = a.read_stamps(stream)
        print(
            f"stream {stream}: committed end {res.committed_end}, {len(stamps.hash_min)} entries, "
            f"version {res.commit_version}, read back by broker-a from the shared heads"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scheduler", default="local", help="'local' or a Dask scheduler address")
    parser.add_argument("--pg-url", default=os.environ.get("BUCKETCORE_PG_URL"), help="PostgreSQL for the heads")
    parser.add_argument("--dir", default=None, help="where the key log and the store go (shared in production)")
    args = parser.parse_args()
    root = args.dir or tempfile.mkdtemp(prefix="bc-scaling-")
    write_key_log(os.path.join(root, "keys"))
    _, replayed = plan_and_replay(os.path.join(root, "keys"), args.scheduler)
    if args.pg_url:
        share_heads(args.pg_url, os.path.join(root, "store"), replayed)
    else:
        print("PostgreSQL part skipped: pass --pg-url postgresql://... (or set BUCKETCORE_PG_URL)")


if __name__ == "__main__":
    main()
