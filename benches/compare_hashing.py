"""Side by side in one run: bucketcore hashing vs a list comprehension over mmh3.hash.

    python benches/compare.py hashing [--n 1000000] [--repeat 5] [--plot hashing.png]
    python benches/compare.py hashing --scalar [--calls 200000] [--repeat 5]
    python benches/compare.py hashing --scalar --callgrind [--calls 20000]
    python benches/compare.py hashing --short [--repeat 5]

(``python benches/compare_hashing.py ...`` is the same group.)

Prints ns per key for each workload and input kind (one thread unless the row says otherwise),
and the ratio to the mmh3 baseline.

``--scalar``: one key per call, as an SDK calls it: ``bc.murmur3_32(key)`` of a UUID str and of its
bytes, and ``bc.hash_keys(key)``, against ``mmh3.hash(key, 0, False)`` of the same key, each a
loop of ``--calls`` calls over 65,536 keys (best of ``--repeat`` rounds, the rows alternating), ns
per call. With ``--callgrind`` each row's loop of ``--calls`` calls runs under ``valgrind
--tool=callgrind``, counted inside ``operator.call`` only (set-up, interpreter start and exit left
out): the instructions of one call, loop included.

``--short``: one short list per call, as a caller hashing a small batch does: ``bc.hash_keys`` and
``bc.murmur3_32`` of a list of 1, 16, 100 and 1,000 UUID strs against an mmh3 comprehension over
the same list, µs per call (best of ``--repeat`` rounds of about 200,000 keys' worth of calls, the
rows alternating).
"""

from __future__ import annotations

import argparse
import functools
import operator
from collections.abc import Callable

import numpy as np

import bucketcore as bc
from bucketcore.harness import best_of, best_of_rounds, short_keys, uuid_keys
from bucketcore.harness.baselines import mmh3_hashes
from bucketcore.harness.callgrind import collected
from bucketcore.harness.timing import cpu_check, format_cpu_check

SCALAR_ROWS = ("mmh3 str", "murmur3_32 str", "mmh3 bytes", "murmur3_32 bytes", "hash_keys str")


def scalar_row(row: str) -> Callable[[int], None]:
    """A loop of n one-key calls of the row over 65,536 UUID keys."""
    keys: list[str] | list[bytes] = uuid_keys(65536)
    if row.endswith("bytes"):
        keys = [k.encode() for k in keys]
    if row.startswith("mmh3"):
        import mmh3

        h = mmh3.hash

        def run_mmh3(n: int) -> None:
            for i in range(n):
                h(keys[i & 65535], 0, False)

        return run_mmh3
    fn = bc.murmur3_32 if row.startswith("murmur3_32") else bc.hash_keys

    def run(n: int) -> None:
        for i in range(n):
            fn(keys[i & 65535])

    return run


def scalar_callgrind(row: str, calls: int) -> float:
    """Instructions of one call of ``row``: the loop of ``calls`` calls is run through
    ``operator.call``, the only function callgrind counts, so set-up and interpreter start and exit
    are left out."""
    return collected([__file__, "--scalar-child", row, str(calls)], toggle="_operator_call") / calls


def scalar_main(args: argparse.Namespace) -> None:
    if args.callgrind:
        calls = args.calls or 20_000
        print(f"one key per call, instructions per call, loop included (callgrind, {calls} calls)")
        for row in SCALAR_ROWS:
            print(f"{row:<20}{scalar_callgrind(row, calls):>10.0f}", flush=True)
        return
    calls = args.calls or 200_000
    runs = [scalar_row(row) for row in SCALAR_ROWS]
    for run in runs:
        run(1000)  # warm
    times = best_of_rounds([functools.partial(run, calls) for run in runs], args.repeat)
    ns_per = dict(zip(SCALAR_ROWS, (t / calls * 1e9 for t in times), strict=True))
    print(f"one key per call, {calls} calls per round, best of {args.repeat} rounds; {format_cpu_check(cpu_check())}")
    print(f"{'row':<20}{'ns/call':>9}{'vs mmh3':>9}")
    for row in SCALAR_ROWS:
        base = ns_per["mmh3 bytes" if row.endswith("bytes") else "mmh3 str"]
        print(f"{row:<20}{ns_per[row]:9.1f}{ns_per[row] / base:8.2f}x")


SHORT_LENGTHS = (1, 16, 100, 1000)


def short_main(args: argparse.Namespace) -> None:
    import mmh3

    h = mmh3.hash
    print(f"one list per call, µs per call, best of {args.repeat} rounds; {format_cpu_check(cpu_check())}")
    print(f"{'keys':>6}{'hash_keys':>11}{'murmur3_32':>12}{'mmh3 comprehension':>20}{'hash_keys vs mmh3':>19}")
    for n in SHORT_LENGTHS:
        keys = uuid_keys(n)
        calls = max(200, 200_000 // n)

        def loop(fn: Callable[[], object], calls: int = calls) -> Callable[[], None]:
            def run() -> None:
                for _ in range(calls):
                    fn()

            return run

        rows = [
            functools.partial(bc.hash_keys, keys),
            functools.partial(bc.murmur3_32, keys),
            lambda keys=keys: [h(k, 0, False) for k in keys],
        ]
        times = [t / calls * 1e6 for t in best_of_rounds([loop(fn) for fn in rows], args.repeat)]
        print(f"{n:>6}{times[0]:11.2f}{times[1]:12.2f}{times[2]:20.2f}{times[2] / times[0]:18.1f}x")


def main(argv: list[str] | None = None) -> None:
    """The hashing group (``benches/compare.py hashing``); ``argv`` as the command line's."""
    parser = argparse.ArgumentParser(prog="compare.py hashing", description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--plot", help="write a bar chart of ns per key to this PNG")
    parser.add_argument("--scalar", action="store_true", help="one key per call against mmh3.hash")
    parser.add_argument("--callgrind", action="store_true", help="with --scalar: instructions per call")
    parser.add_argument("--calls", type=int, default=None, help="with --scalar: calls per round or run")
    parser.add_argument("--short", action="store_true", help="one short list per call against mmh3")
    parser.add_argument("--scalar-child", nargs=2, metavar=("ROW", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.short:
        short_main(args)
        return
    if args.scalar_child:
        run = scalar_row(args.scalar_child[0])
        run(1000)  # warm: first-call caches stay out of the count
        operator.call(run, int(args.scalar_child[1]))
        return
    if args.scalar:
        scalar_main(args)
        return
    try:
        import pyarrow as pa
    except ImportError:
        pa = None

    check_before = format_cpu_check(cpu_check())
    rows = []
    for workload, make in (("uuid", uuid_keys), ("short", short_keys)):
        keys = make(args.n)
        baseline = best_of(functools.partial(mmh3_hashes, keys), max(2, args.repeat // 2))
        rows.append((workload, "mmh3 comprehension", baseline))
        inputs = {"list[str]": keys, "numpy U": np.array(keys), "list[bytes]": [k.encode() for k in keys]}
        if pa is not None:
            inputs["arrow string"] = pa.array(keys, type=pa.string())
        runs = [
            (f"murmur3_32 {name}", functools.partial(bc.murmur3_32, column, threads=1))
            for name, column in inputs.items()
        ]
        runs.append(("murmur3_32 list[str], 2 threads", functools.partial(bc.murmur3_32, keys, threads=2)))
        if pa is not None:
            runs.append(
                ("murmur3_32 arrow, 2 threads", functools.partial(bc.murmur3_32, inputs["arrow string"], threads=2))
            )
        runs.append(("hash_keys list[str], 1 thread", functools.partial(bc.hash_keys, keys, threads=1)))
        runs.append(("hash_keys list[str], auto", functools.partial(bc.hash_keys, keys)))
        times = best_of_rounds([fn for _, fn in runs], args.repeat)
        rows.extend((workload, what, t) for (what, _), t in zip(runs, times, strict=False))

    print(f"bucketcore {bc.__version__}, n={args.n}, best of {args.repeat} rounds over the rows of a workload")
    print(f"{check_before} (before); {format_cpu_check(cpu_check()).split(': ', 1)[-1]} (after)")
    print(f"{'workload':<8} {'what':<32} {'ns/key':>8} {'vs mmh3':>8}")
    base = {w: t for w, what, t in rows if what == "mmh3 comprehension"}
    for workload, what, t in rows:
        print(f"{workload:<8} {what:<32} {t / args.n * 1e9:8.2f} {base[workload] / t:7.1f}x")

    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(9, 4.5))
        labels = [f"{w}\n{what}" for w, what, _ in rows]
        ax.barh(labels, [t / args.n * 1e9 for _, _, t in rows])
        ax.set_xscale("log")
        ax.set_xlabel("ns per key (log)")
        ax.invert_yaxis()
        fig.tight_layout()
        fig.savefig(args.plot, dpi=110)
        print("wrote", args.plot)


if __name__ == "__main__":
    main()
