"""Side by side in one run: the stream store's appends and reads vs a naive SQLite log, same data.

    python benches/compare_stream.py [--seconds 2] [--slices 6] [--read-entries 100000] [--dir /tmp]

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
import sqlite3
import tempfile
import time

import numpy as np

from bucketcore.stream import EntryPayload, StreamStore

PAYLOAD = 1024


def make_entries(rng: np.random.Generator, n: int) -> list[EntryPayload]:
    lo = rng.integers(0, 0xFF00, size=n)
    blob = rng.bytes(PAYLOAD * n)
    return [
        EntryPayload(blob[i * PAYLOAD : (i + 1) * PAYLOAD], 1, b"", int(lo[i]), int(lo[i]) + 200, 0, int(i % 16))
        for i in range(n)
    ]


class NaiveLog:
    """One SQLite transaction per entry, payload as a BLOB."""

    def __init__(self, path: str) -> None:
        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.execute(
            "CREATE TABLE log (offset INTEGER PRIMARY KEY, record_count INTEGER, "
            "hash_min INTEGER, hash_max INTEGER, metadata BLOB, payload BLOB)"
        )
        self.next = 0

    def append(self, e: EntryPayload) -> None:
        self.db.execute("BEGIN IMMEDIATE")
        self.db.execute(
            "INSERT INTO log VALUES (?, ?, ?, ?, ?, ?)",
            (self.next, e.record_count, e.hash_min, e.hash_max, e.metadata, e.payload),
        )
        self.db.execute("COMMIT")
        self.next += e.record_count

    def read_stamps(self) -> np.ndarray:
        rows = self.db.execute("SELECT offset, hash_min, hash_max FROM log ORDER BY offset").fetchall()
        return np.array(rows, dtype=np.int64)

    def read_all(self) -> int:
        n = 0
        for (payload,) in self.db.execute("SELECT payload FROM log ORDER BY offset"):
            n += len(payload)
        return n


def timed_appends(append_one_call, calls_pool: list, seconds: float, start: int = 0) -> tuple[int, float]:
    """Run append calls round-robin over the pool (from ``start``) for about ``seconds``;
    (calls, elapsed)."""
    calls = 0
    t0 = time.perf_counter()
    deadline = t0 + seconds
    while True:
        append_one_call(calls_pool[(start + calls) % len(calls_pool)])
        calls += 1
        now = time.perf_counter()
        if now >= deadline:
            return calls, now - t0


def compare_appends(root: str, seconds: float, slices: int) -> None:
    rng = np.random.default_rng(1)
    print(
        f"\nappend, fsync on, {PAYLOAD} B payloads (entries/s; x = speed-up over one SQLite "
        f"transaction per entry, measured in the same run: {slices} alternating slices per side)"
    )
    print(f"{'entries/call':>12} {'baseline':>10} {'stream':>10} {'x':>7} {'ms/call':>8} {'ms/entry (base)':>16}")
    for per_call in (1, 10, 100, 1000):
        pool = [make_entries(rng, per_call) for _ in range(max(1, 2000 // per_call))]
        flat = [e for batch in pool for e in batch]
        base_dir = tempfile.mkdtemp(dir=root)
        store_dir = tempfile.mkdtemp(dir=root)
        naive = NaiveLog(os.path.join(base_dir, "naive.sqlite3"))
        b_calls = calls = 0
        b_time = elapsed = 0.0
        with StreamStore.open(store_dir) as store:
            store.create_stream("bench")
            session = store.open_session("bench", "bench", ttl=3600.0)

            def append_call(batch: list[EntryPayload], store=store, session=session) -> None:
                store.append("bench", batch, session=session)

            # alternate the two sides in short slices, so a change in the machine's load
            # (other processes, the disk) weighs on both alike
            for _ in range(slices):
                c, t = timed_appends(naive.append, flat, seconds / slices, b_calls)
                b_calls += c
                b_time += t
                c, t = timed_appends(append_call, pool, seconds / slices, calls)
                calls += c
                elapsed += t
        naive.db.close()
        base_rate = b_calls / b_time
        rate = calls * per_call / elapsed
        print(
            f"{per_call:>12} {base_rate:>10,.0f} {rate:>10,.0f} {rate / base_rate:>7.1f} "
            f"{elapsed / calls * 1e3:>8.2f} {b_time / b_calls * 1e3:>16.2f}"
        )
        shutil.rmtree(base_dir)
        shutil.rmtree(store_dir)


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


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
            batch = make_entries(rng, 100)
            store.append("bench", batch, session=session)
            naive.db.execute("BEGIN")
            for e in batch:
                naive.db.execute(
                    "INSERT INTO log VALUES (?, ?, ?, ?, ?, ?)",
                    (naive.next, 1, e.hash_min, e.hash_max, e.metadata, e.payload),
                )
                naive.next += 1
            naive.db.execute("COMMIT")
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
        t_read = best(read_all, 3)
        t_stamps = best(stamps_all, 5)
        t_stamps_small = best(lambda: store.read_stamps("bench", total // 2, 1000), 50)
        t_naive = best(naive.read_all, 3)
        t_naive_stamps = best(naive.read_stamps, 3)
    naive.db.close()
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=2.0, help="seconds of appends per row and side")
    ap.add_argument("--slices", type=int, default=6, help="alternating slices per row and side")
    ap.add_argument("--read-entries", type=int, default=100_000, help="entries in the read benchmark")
    ap.add_argument("--dir", default=None, help="directory for the temporary stores (default: system temp)")
    args = ap.parse_args()
    root = tempfile.mkdtemp(dir=args.dir, prefix="compare_stream-")
    try:
        compare_appends(root, args.seconds, args.slices)
        compare_reads(root, args.read_entries)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
