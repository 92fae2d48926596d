"""Side by side in one run: broker dispatch vs a pure-Python per-entry loop, same data, best of N.

    python benches/compare.py dispatch [--n 1000000] [--repeat 5] [--dispatch-n 200000]
    python benches/compare.py dispatch --callgrind [--calls 5000]

(``python benches/compare_dispatch.py ...`` is the same group.)

Prints ns per entry and the speed-up over the baseline measured in the same process:
- route_entries over n stamped entries with 64 consumers for N in {64, 256, 4096, 32768} buckets
  (plain; with hash_max, i.e. stamp checks and straddle counting; 10% unstamped with key hashes);
  baseline: bisect + owner list in a Python loop, the way a per-entry broker hook works;
- fits_one_bucket over the same n stamps, N=256 (baseline: two bisects per entry);
- Dispatcher throughput with 16 consumers and churn (join / clean leave / crash in turn) every
  10,000 entries, consumers acking each round except 10% held to the next; baseline: the same
  rules written per entry in Python (dicts and deques, as a broker would);
- the Dispatcher driven one entry / one ack per call (scalar fast path) against the same baseline.

``--callgrind`` runs the one-call-per-entry row of each side under ``valgrind --tool=callgrind``
twice, with ``--calls`` entries and twice as many, and prints the difference of the two runs'
instruction totals divided by ``--calls``: the instructions of one offer + ack, deterministic on a
loaded machine (set-up and interpreter start cancel out). ``--count SIDE N`` is the child.
"""

from __future__ import annotations

import argparse
import functools
import time
from collections.abc import Callable

import numpy as np

import bucketcore as bc
from bucketcore.harness import best_of, ns
from bucketcore.harness.baselines import PyDispatcher, PyDispatcherAdapter, py_fits, py_route, run_churn
from bucketcore.harness.callgrind import collected
from bucketcore.harness.workloads import stamped_entries, uniform_hashes


def consumers(k: int) -> list[tuple[str, int]]:
    return [(f"consumer-{i:03d}", i) for i in range(k)]


# ------------------------------------------------------------------------------------------
# route_entries


def compare_route(n: int, repeat: int) -> None:
    entries = stamped_entries(n)
    hash_min, hash_max, stamped, key_hash = entries.hash_min, entries.hash_max, entries.stamped, entries.key_hash
    as_list = hash_min.tolist()
    print(
        f"\nroute_entries over {n:,} stamped entries, 64 consumers "
        f"(ns per entry; x = speed-up over a per-entry Python loop)"
    )
    print(f"{'N':>6} {'py loop':>8} {'route':>7} {'x':>6} {'+hash_max':>10} {'x':>6} {'10% unstamped':>14} {'x':>6}")
    # 32768 is the most buckets a broker can dispatch (bucket 0 must hold hash 1)
    for count in (64, 256, 4096, 32768):
        buckets = bc.Buckets.equal_width(count)
        sel = bc.EntryBucketSelector(buckets)
        for c in consumers(64):
            sel.add_consumer(*c)
        splits, owner = list(buckets.splits), sel.owner_slots.tolist()
        expected = np.array(py_route(splits, owner, as_list), dtype=np.int32)
        assert np.array_equal(bc.route_entries(sel, hash_min), expected)
        baseline = best_of(functools.partial(py_route, splits, owner, as_list), max(1, repeat // 2))
        plain = best_of(functools.partial(bc.route_entries, sel, hash_min), repeat)
        checked = best_of(functools.partial(bc.route_entries, sel, hash_min, hash_max=hash_max), repeat)
        mixed = best_of(functools.partial(bc.route_entries, sel, hash_min, key_hash=key_hash, stamped=stamped), repeat)
        print(
            f"{count:>6} {ns(baseline, n):>8.1f} {ns(plain, n):>7.2f} {baseline / plain:>5.0f}x "
            f"{ns(checked, n):>10.2f} {baseline / checked:>5.0f}x {ns(mixed, n):>14.2f} {baseline / mixed:>5.0f}x"
        )


def compare_fits(n: int, repeat: int) -> None:
    entries = stamped_entries(n)
    lo, hi = entries.hash_min, entries.hash_max
    buckets = bc.Buckets.equal_width(256)
    baseline_fits = functools.partial(py_fits, list(buckets.splits), lo.tolist(), hi.tolist())
    assert bc.fits_one_bucket(buckets, lo, hi).tolist() == baseline_fits()
    baseline = best_of(baseline_fits, max(1, repeat // 2))
    fast = best_of(lambda: bc.fits_one_bucket(buckets, lo, hi), repeat)
    print(
        f"\nfits_one_bucket over {n:,} stamps, N=256: py loop {ns(baseline, n):.1f} ns, "
        f"fits_one_bucket {ns(fast, n):.2f} ns per entry ({baseline / fast:.0f}x)"
    )


# ------------------------------------------------------------------------------------------
# Dispatcher under churn


def compare_dispatcher(n: int, repeat: int) -> None:
    fast = run_churn(bc.Dispatcher, n)
    slow = run_churn(PyDispatcherAdapter, n)
    assert fast == slow, (fast, slow)  # same rules, same deliveries (redeliveries included)
    t_fast = best_of(lambda: run_churn(bc.Dispatcher, n), repeat)
    t_slow = best_of(lambda: run_churn(PyDispatcherAdapter, n), max(1, repeat // 2))
    print(
        f"\nDispatcher: {n:,} entries, 16 consumers, churn every 10,000 entries, N=256 "
        f"({fast['delivered']:,} deliveries incl. crash redeliveries)"
    )
    print(f"  py per-entry loop {ns(t_slow, n):8.1f} ns/entry  {n / t_slow / 1e6:6.2f} M entries/s")
    print(
        f"  bc.Dispatcher     {ns(t_fast, n):8.1f} ns/entry  {n / t_fast / 1e6:6.2f} M entries/s  "
        f"({t_slow / t_fast:.1f}x)"
    )


def _scalar_side(side: str, n: int) -> Callable[[], None]:
    """One call per entry and per ack (a broker handing entries over one by one), no churn: 16
    consumers, N=256, ``n`` random stamps; ``side`` is ``"bc"`` or ``"py"``. Each side's loop calls
    its own methods directly (no wrapper in between), so the driver costs the same on both."""
    hs = uniform_hashes(n, seed=4).tolist()
    buckets = bc.Buckets.equal_width(256)

    def run_bc() -> None:
        d = bc.Dispatcher(buckets)
        for c in consumers(16):
            d.add_consumer(*c)
        offer, ack = d.offer, d.ack
        for i, h in enumerate(hs):
            offer(i, h)
        for (name, cid), got in d.poll().items():
            for e in got.entry_ids.tolist():
                ack(name, cid, e)

    def run_py() -> None:
        d = PyDispatcher(list(buckets.splits))
        for c in consumers(16):
            d.add_consumer(*c)
        offer, ack = d.offer, d.ack
        for i, h in enumerate(hs):
            offer([i], [h])
        for c, got in d.poll().items():
            for e in got:
                ack(c, [e])

    return run_bc if side == "bc" else run_py


def compare_scalar(n: int) -> None:
    """The one-call-per-entry row, wall clock, both sides in this process."""
    fast = best_of(_scalar_side("bc", n), 3)
    slow = best_of(_scalar_side("py", n), 3)
    print(
        f"\nDispatcher, one call per entry and per ack ({n:,} entries, 16 consumers, N=256): "
        f"py loop {ns(slow, n):.0f} ns, bc.Dispatcher {ns(fast, n):.0f} ns per entry "
        f"(offer + ack; {slow / fast:.2f}x)"
    )


def callgrind(side: str, calls: int) -> float:
    """Instructions of one offer + ack of ``side``: the difference of two runs' totals, per entry."""
    runs = [collected([__file__, "--count", side, str(n)]) for n in (calls, 2 * calls)]
    return (runs[1] - runs[0]) / calls


def main(argv: list[str] | None = None) -> None:
    """The dispatch group (``benches/compare.py dispatch``); ``argv`` as the command line's."""
    parser = argparse.ArgumentParser(prog="compare.py dispatch", description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="entries for route/fits (default 1M)")
    parser.add_argument("--repeat", type=int, default=5, help="best of this many runs")
    parser.add_argument("--dispatch-n", type=int, default=200_000, help="entries for the Dispatcher run")
    parser.add_argument("--callgrind", action="store_true", help="instructions per offer + ack instead")
    parser.add_argument("--calls", type=int, default=5000, help="entries of the smaller callgrind run")
    parser.add_argument("--count", nargs=2, metavar=("SIDE", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.count:
        _scalar_side(args.count[0], int(args.count[1]))()
        return
    if args.callgrind:
        ours, base = callgrind("bc", args.calls), callgrind("py", args.calls)
        print(
            f"instructions per entry, one offer + one ack per call (16 consumers, N=256): "
            f"py loop {base:.0f}, bc.Dispatcher {ours:.0f} ({base / ours:.2f}x)"
        )
        return
    print(f"bucketcore {bc.__version__}, numpy {np.__version__}, {time.strftime('%Y-%m-%d %H:%M:%S')}")
    compare_route(args.n, args.repeat)
    compare_fits(args.n, args.repeat)
    compare_dispatcher(args.dispatch_n, args.repeat)
    compare_scalar(min(args.dispatch_n, 50_000))


if __name__ == "__main__":
    main()
