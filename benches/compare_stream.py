"""Side by side in one run: the stream store's appends and reads vs a naive SQLite log, same data.

    python benches/compare.py stream [--seconds 2] [--slices 6] [--read-entries 100000] [--dir /tmp]

(``python benches/compare_stream.py ...`` is the same group.)

Appends (fsync on: the store's SQLite head store runs synchronous=FULL and every WAL object is
fsynced with its directory; the baseline runs synchronous=FULL too), 1 KiB payloads, stamped
entries, for 1, 10, 100 and 1000 entries per append call. Baseline: one SQLite transaction per
entry holding the payload as a BLOB (WAL journal), the way a naive log would store entries.
Each row appends for about ``--seconds`` per side, the two sides alternating in ``--slices``
slices, and reports entries per second and the speed-up.

Reads, from a warm cache, over a stream of ``--read-entries`` entries appended 100 per call:
``read`` (payloads, CRC32C-verified) in MB/s and entries/s, ``read_stamps`` (stamp columns only)
in entries/s (best of 5), and the baseline's ``SELECT`` of its payload BLOBs and of its stamp
columns into numpy.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile

import numpy as np

from bucketcore.harness import best_of
from bucketcore.harness.baselines import NaiveLog
from bucketcore.harness.timing import run_for
from bucketcore.harness.workloads import payload_entries
from bucketcore.stream import StreamStore

PAYLOAD = 1024


def compare_appends(root: str, seconds: float, slices: int) -> None:
    rng = np.random.default_rng(1)
    print(
        f"\nappend, fsync on, {PAYLOAD} B payloads (entries/s; x = speed-up over one SQLite "
        f"transaction per entry, measured in the same run: {slices} alternating slices per side)"
    )
    print(f"{'entries/call':>12} {'baseline':>10} {'stream':>10} {'x':>7} {'ms/call':>8} {'ms/entry (base)':>16}")
    for per_call in (1, 10, 100, 1000):
        pool = [payload_entries(rng, per_call, PAYLOAD) for _ in range(max(1, 2000 // per_call))]
        flat = [e for batch in pool for e in batch]
        base_dir = tempfile.mkdtemp(dir=root)
        store_dir = tempfile.mkdtemp(dir=root)
        naive = NaiveLog(os.path.join(base_dir, "naive.sqlite3"))
        b_calls = calls = 0
        b_time = elapsed = 0.0
        with StreamStore.open(store_dir) as store:
            store.create_stream("bench")
            session = store.open_session("bench", "bench", ttl=3600.0)

            def append_call(i: int, store=store, session=session, pool=pool) -> None:
                store.append("bench", pool[i % len(pool)], session=session)

            def append_base(i: int, naive=naive, flat=flat) -> None:
                naive.append(flat[i % len(flat)])

            # alternate the two sides in short slices, so a change in the machine's load
            # (other processes, the disk) weighs on both alike
            for _ in range(slices):
                c, t = run_for(append_base, seconds / slices, b_calls)
                b_calls += c
                b_time += t
                c, t = run_for(append_call, seconds / slices, calls)
                calls += c
                elapsed += t
        naive.close()
        base_rate = b_calls / b_time
        rate = calls * per_call / elapsed
        print(
            f"{per_call:>12} {base_rate:>10,.0f} {rate:>10,.0f} {rate / base_rate:>7.1f} "
            f"{elapsed / calls * 1e3:>8.2f} {b_time / b_calls * 1e3:>16.2f}"
        )
        shutil.rmtree(base_dir)
        shutil.rmtree(store_dir)


def compare_reads(root: str, n: int) -> None:
    rng = np.random.default_rng(2)
    store_dir = tempfile.mkdtemp(dir=root)
    base_dir = tempfile.mkdtemp(dir=root)
    naive = NaiveLog(os.path.join(base_dir, "naive.sqlite3"))
    naive.db.execute("PRAGMA synchronous=OFF")  # filling only: the reads are measured
    with StreamStore.open(store_dir) as store:
        store.create_stream("bench")
        session = store.open_session("bench", "bench", ttl=3600.0)
        for _ in range(n // 100):
            batch = payload_entries(rng, 100, PAYLOAD)
            store.append("bench", batch, session=session)
            naive.fill(batch)
        total = n // 100 * 100

        def read_all() -> None:
            pos = 0
            while True:
                got = store.read("bench", pos, 1000)
                if not got:
                    return
                pos = got[-1].end_offset

        def stamps_all() -> None:
            cols = store.read_stamps("bench")
            assert cols.entry_count == total

        read_all()  # warm the cache
        t_read = best_of(read_all, 3)
        t_stamps = best_of(stamps_all, 5)
        t_stamps_small = best_of(lambda: store.read_stamps("bench", total // 2, 1000), 50)
        t_naive = best_of(naive.read_all, 3)
        t_naive_stamps = best_of(naive.read_stamps, 3)
    naive.close()
    mb = total * PAYLOAD / 1e6
    print(f"\nreads from a warm cache, {total:,} entries of {PAYLOAD} B appended 100 per call")
    print(f"{'':>30} {'entries/s':>12} {'MB/s':>8}")
    print(f"{'naive SELECT payload':>30} {total / t_naive:>12,.0f} {mb / t_naive:>8,.0f}")
    print(f"{'read (CRC32C verified)':>30} {total / t_read:>12,.0f} {mb / t_read:>8,.0f}")
    print(f"{'naive SELECT stamps to numpy':>30} {total / t_naive_stamps:>12,.0f} {'-':>8}")
    print(f"{'read_stamps (whole stream)':>30} {total / t_stamps:>12,.0f} {'-':>8}")
    print(f"{'read_stamps (1000 entries)':>30} {1000 / t_stamps_small:>12,.0f} {'-':>8}")
    shutil.rmtree(store_dir)
    shutil.rmtree(base_dir)


def main(argv: list[str] | None = None) -> None:
    """The stream group (``benches/compare.py stream``); ``argv`` as the command line's."""
    ap = argparse.ArgumentParser(
        prog="compare.py stream", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--seconds", type=float, default=2.0, help="seconds of appends per row and side")
    ap.add_argument("--slices", type=int, default=6, help="alternating slices per row and side")
    ap.add_argument("--read-entries", type=int, default=100_000, help="entries in the read benchmark")
    ap.add_argument("--dir", default=None, help="directory for the temporary stores (default: system temp)")
    args = ap.parse_args(argv)
    root = tempfile.mkdtemp(dir=args.dir, prefix="compare_stream-")
    try:
        compare_appends(root, args.seconds, args.slices)
        compare_reads(root, args.read_entries)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
