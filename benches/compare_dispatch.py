"""Side by side in one run: broker dispatch vs a pure-Python per-entry loop, same data, best of N.

    python benches/compare_dispatch.py [--n 1000000] [--repeat 5] [--dispatch-n 200000]

Prints ns per entry and the speed-up over the baseline measured in the same process:
- route_entries over n stamped entries with 64 consumers for N in {64, 256, 4096, 65536} buckets
  (plain; with hash_max, i.e. stamp checks and straddle counting; 10% unstamped with key hashes);
  baseline: bisect + owner list in a Python loop, the way a per-entry broker hook works;
- fits_one_bucket over n stamps (baseline: two bisects per entry);
- Dispatcher throughput with 16 consumers and churn (join / clean leave / crash in turn) every
  10,000 entries, consumers acking each round except 10% held to the next; baseline: the same
  rules written per entry in Python (dicts and deques, as a broker would);
- the Dispatcher driven one entry / one ack per call (scalar fast path) against the same baseline.
"""

from __future__ import annotations

import argparse
import bisect
import os
import sys
import time
from collections import deque

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from timing import best_of, ns  # noqa: E402

import bucketcore as bc  # noqa: E402


def consumers(k: int) -> list[tuple[str, int]]:
    return [(f"consumer-{i:03d}", i) for i in range(k)]


# ------------------------------------------------------------------------------------------
# route_entries


def py_route(splits: list[int], owner: list[int], hash_min: list[int]) -> list[int]:
    return [owner[bisect.bisect_right(splits, h)] for h in hash_min]


def compare_route(n: int, repeat: int) -> None:
    rng = np.random.default_rng(1)
    hash_min = rng.integers(0, 0x10000, size=n, dtype=np.int64).astype(np.uint16)
    hash_max = np.minimum(hash_min.astype(np.int64) + rng.integers(0, 64, n), 0xFFFF).astype(np.uint16)
    stamped = rng.random(n) >= 0.10
    key_hash = rng.integers(0, 1 << 32, size=n, dtype=np.uint64).astype(np.uint32)
    as_list = hash_min.tolist()
    print(f"\nroute_entries over {n:,} stamped entries, 64 consumers "
          f"(ns per entry; x = speed-up over a per-entry Python loop)")
    print(f"{'N':>6} {'py loop':>8} {'route':>7} {'x':>6} {'+hash_max':>10} {'x':>6} {'10% unstamped':>14} {'x':>6}")
    for count in (64, 256, 4096, 65536):
        buckets = bc.Buckets.equal_width(count)
        sel = bc.EntryBucketSelector(buckets)
        for c in consumers(64):
            sel.add_consumer(*c)
        splits, owner = list(buckets.splits), sel.owner_slots.tolist()
        expected = np.array(py_route(splits, owner, as_list), dtype=np.int32)
        assert np.array_equal(bc.route_entries(sel, hash_min), expected)
        baseline = best_of(lambda: py_route(splits, owner, as_list), max(1, repeat // 2))
        plain = best_of(lambda: bc.route_entries(sel, hash_min), repeat)
        checked = best_of(lambda: bc.route_entries(sel, hash_min, hash_max=hash_max), repeat)
        mixed = best_of(lambda: bc.route_entries(sel, hash_min, key_hash=key_hash, stamped=stamped), repeat)
        print(f"{count:>6} {ns(baseline, n):>8.1f} {ns(plain, n):>7.2f} {baseline / plain:>5.0f}x "
              f"{ns(checked, n):>10.2f} {baseline / checked:>5.0f}x {ns(mixed, n):>14.2f} {baseline / mixed:>5.0f}x")


def compare_fits(n: int, repeat: int) -> None:
    rng = np.random.default_rng(2)
    lo = rng.integers(0, 0x10000, size=n, dtype=np.int64).astype(np.uint16)
    hi = np.minimum(lo.astype(np.int64) + rng.integers(0, 512, n), 0xFFFF).astype(np.uint16)
    buckets = bc.Buckets.equal_width(256)
    splits, lo_l, hi_l = list(buckets.splits), lo.tolist(), hi.tolist()

    def py_fits() -> list[bool]:
        return [bisect.bisect_right(splits, a) == bisect.bisect_right(splits, b) for a, b in zip(lo_l, hi_l)]

    assert bc.fits_one_bucket(buckets, lo, hi).tolist() == py_fits()
    baseline = best_of(py_fits, max(1, repeat // 2))
    fast = best_of(lambda: bc.fits_one_bucket(buckets, lo, hi), repeat)
    print(f"\nfits_one_bucket over {n:,} stamps, N=256: py loop {ns(baseline, n):.1f} ns, "
          f"fits_one_bucket {ns(fast, n):.2f} ns per entry ({baseline / fast:.0f}x)")


# ------------------------------------------------------------------------------------------
# Dispatcher under churn


class PyDispatcher:
    """The Dispatcher's rules written per entry in plain Python: the baseline (and a cross-check)."""

    def __init__(self, splits: list[int]) -> None:
        self.splits = splits
        self.n = len(splits) + 1
        self.members: list[tuple[str, int]] = []
        self.owner: list[tuple[str, int] | None] = [None] * self.n
        self.holder: list[tuple[str, int] | None] = [None] * self.n
        self.held = [0] * self.n
        self.queue: list[deque[int]] = [deque() for _ in range(self.n)]
        self.pending: dict[int, tuple[tuple[str, int], int]] = {}
        self.info: dict[int, int] = {}  # entry -> bucket
        self.outbox: dict[tuple[str, int], list[int]] = {}

    def _spread(self) -> None:
        k = len(self.members)
        self.owner = [None] * self.n
        for j, c in enumerate(self.members):
            for b in range(j * self.n // k, (j + 1) * self.n // k):
                self.owner[b] = c
        for b in range(self.n):
            self._release(b)

    def _ready(self, b: int) -> bool:
        o = self.owner[b]
        return o is not None and (self.holder[b] is None or self.holder[b] == o)

    def _deliver(self, e: int, b: int) -> None:
        o = self.owner[b]
        self.pending[e] = (o, b)
        self.holder[b] = o
        self.held[b] += 1
        self.outbox.setdefault(o, []).append(e)

    def _release(self, b: int) -> None:
        q = self.queue[b]
        while q and self._ready(b):
            self._deliver(q.popleft(), b)

    def offer(self, ids: list[int], hash_min: list[int]) -> None:
        splits, queue = self.splits, self.queue
        for e, h in zip(ids, hash_min):
            b = bisect.bisect_right(splits, h)
            self.info[e] = b
            if not queue[b] and self._ready(b):
                self._deliver(e, b)
            else:
                queue[b].append(e)

    def ack(self, consumer: tuple[str, int], ids: list[int]) -> None:
        for e in ids:
            c, b = self.pending.pop(e)
            assert c == consumer
            self.held[b] -= 1
            if self.held[b] == 0:
                self.holder[b] = None
                self._release(b)

    def poll(self) -> dict[tuple[str, int], list[int]]:
        out, self.outbox = self.outbox, {}
        return out

    def add_consumer(self, name: str, cid: int) -> None:
        self.members = sorted(self.members + [(name, cid)])
        self._spread()

    def remove_consumer(self, name: str, cid: int, crash: bool = False) -> None:
        c = (name, cid)
        if c in self.members:
            self.members.remove(c)
        if crash:
            mine = sorted(e for e, (h, _) in self.pending.items() if h == c)
            self.outbox.pop(c, None)
            for e in reversed(mine):
                b = self.pending.pop(e)[1]
                self.held[b] -= 1
                self.holder[b] = None
                self.queue[b].appendleft(e)
        self._spread()


def run_churn(make, n_entries: int, n_consumers: int = 16, churn_every: int = 10_000,
              n_buckets: int = 256, seed: int = 3) -> dict[str, int]:
    """Drive a dispatcher (fresh from ``make(splits)``) through the churn workload; returns totals."""
    rng = np.random.default_rng(seed)
    buckets = bc.Buckets.equal_width(n_buckets)
    d = make(buckets)
    members = consumers(n_consumers)
    for c in members:
        d.add_consumer(*c)
    next_id = n_consumers
    unacked: dict[tuple[str, int], list[np.ndarray]] = {}
    hash_min = rng.integers(0, 0x10000, size=n_entries, dtype=np.int64).astype(np.uint16)
    delivered = 0
    checksum = 0  # which entries went to which consumer, order-insensitive
    events = ("leave", "join", "crash", "join")

    def collect() -> None:
        nonlocal delivered, checksum
        for c, batch in d.poll().items():
            got = batch.entry_ids if hasattr(batch, "entry_ids") else np.asarray(batch, dtype=np.int64)
            delivered += got.size
            checksum += int(got.sum()) * (c[1] + 1)
            unacked.setdefault(c, []).append(got)

    for r, start in enumerate(range(0, n_entries, churn_every)):
        stop = min(start + churn_every, n_entries)
        d.offer(np.arange(start, stop), hash_min[start:stop])
        collect()
        # Every consumer acks what it holds except the newest 10% (in flight across the churn).
        for c in list(unacked):
            held = np.sort(np.concatenate(unacked[c]))  # order-insensitive: hold the highest ids
            keep = held.size // 10
            done, rest = held[: held.size - keep], held[held.size - keep:]
            if done.size:
                d.ack(*c, done)
            unacked[c] = [rest]
        event = events[r % len(events)]
        if event == "join":
            c = (f"consumer-{next_id:03d}", next_id)
            next_id += 1
            d.add_consumer(*c)
            members.append(c)
        elif members:
            c = members.pop(int(rng.integers(len(members))))
            d.remove_consumer(*c, crash=event == "crash")
            if event == "crash":
                unacked.pop(c, None)
    # Drain: everyone still connected acks the rest.
    for _ in range(4):
        collect()
        for c in list(unacked):
            held = np.concatenate(unacked.pop(c))
            if held.size:
                d.ack(*c, held)
    return {"delivered": delivered, "checksum": checksum, "pending": _pending(d)}


def _pending(d) -> int:
    return d.pending_entries + d.queued_entries if hasattr(d, "pending_entries") else len(d.d.pending) + sum(
        len(q) for q in d.d.queue)


class _PyAdapter:
    """PyDispatcher behind the Dispatcher's call shapes (numpy columns in, lists inside)."""

    def __init__(self, buckets: bc.Buckets) -> None:
        self.d = PyDispatcher(list(buckets.splits))

    def add_consumer(self, name: str, cid: int) -> None:
        self.d.add_consumer(name, cid)

    def remove_consumer(self, name: str, cid: int, crash: bool = False) -> None:
        self.d.remove_consumer(name, cid, crash)

    def offer(self, ids: np.ndarray, hash_min: np.ndarray) -> None:
        self.d.offer(ids.tolist(), hash_min.tolist())

    def ack(self, name: str, cid: int, ids: np.ndarray) -> None:
        self.d.ack((name, cid), ids.tolist())

    def poll(self) -> dict:
        return self.d.poll()


def compare_dispatcher(n: int, repeat: int) -> None:
    fast = run_churn(bc.Dispatcher, n)
    slow = run_churn(_PyAdapter, n)
    assert fast == slow, (fast, slow)  # same rules, same deliveries (redeliveries included)
    t_fast = best_of(lambda: run_churn(bc.Dispatcher, n), repeat)
    t_slow = best_of(lambda: run_churn(_PyAdapter, n), max(1, repeat // 2))
    print(f"\nDispatcher: {n:,} entries, 16 consumers, churn every 10,000 entries, N=256 "
          f"({fast['delivered']:,} deliveries incl. crash redeliveries)")
    print(f"  py per-entry loop {ns(t_slow, n):8.1f} ns/entry  {n / t_slow / 1e6:6.2f} M entries/s")
    print(f"  bc.Dispatcher     {ns(t_fast, n):8.1f} ns/entry  {n / t_fast / 1e6:6.2f} M entries/s  "
          f"({t_slow / t_fast:.1f}x)")


def compare_scalar(n: int) -> None:
    """One call per entry and per ack (a broker handing entries over one by one), no churn."""
    rng = np.random.default_rng(4)
    hs = rng.integers(0, 0x10000, n).tolist()
    buckets = bc.Buckets.equal_width(256)

    def run(d, offer, ack) -> None:
        for c in consumers(16):
            d.add_consumer(*c)
        for i, h in enumerate(hs):
            offer(d, i, h)
        for c, got in d.poll().items():
            for e in (got.entry_ids.tolist() if hasattr(got, "entry_ids") else got):
                ack(d, c, e)

    fast = best_of(lambda: run(bc.Dispatcher(buckets), lambda d, i, h: d.offer(i, h),
                               lambda d, c, e: d.ack(*c, e)), 3)
    slow = best_of(lambda: run(PyDispatcher(list(buckets.splits)), lambda d, i, h: d.offer([i], [h]),
                               lambda d, c, e: d.ack(c, [e])), 3)
    print(f"\nDispatcher, one call per entry and per ack ({n:,} entries, 16 consumers, N=256): "
          f"py loop {ns(slow, n):.0f} ns, bc.Dispatcher {ns(fast, n):.0f} ns per entry "
          f"(offer + ack; {slow / fast:.2f}x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="entries for route/fits (default 1M)")
    parser.add_argument("--repeat", type=int, default=5, help="best of this many runs")
    parser.add_argument("--dispatch-n", type=int, default=200_000, help="entries for the Dispatcher run")
    args = parser.parse_args()
    print(f"bucketcore {bc.__version__}, numpy {np.__version__}, {time.strftime('%Y-%m-%d %H:%M:%S')}")
    compare_route(args.n, args.repeat)
    compare_fits(args.n, args.repeat)
    compare_dispatcher(args.dispatch_n, args.repeat)
    compare_scalar(min(args.dispatch_n, 50_000))


if __name__ == "__main__":
    main()
