"""Side by side in one run: bucketcore hashing vs a list comprehension over mmh3.hash.

    python benches/compare_hashing.py [--n 1000000] [--repeat 5] [--plot hashing.png]

Prints ns per key for each workload and input kind (one thread unless the row says otherwise),
and the ratio to the mmh3 baseline.
"""

from __future__ import annotations

import argparse
import functools

import numpy as np

import bucketcore as bc
from bucketcore.harness import best_of, best_of_rounds, short_keys, uuid_keys
from bucketcore.harness.baselines import mmh3_hashes
from bucketcore.harness.timing import cpu_check, format_cpu_check


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--plot", help="write a bar chart of ns per key to this PNG")
    args = parser.parse_args()
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
