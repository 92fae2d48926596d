"""Side by side in one run: bucketcore.bucket_entries vs a pure-Python reference batcher.

    python benches/compare.py producer [--n 1000000] [--repeat 5] [--segments 4] [--buckets 16]

(``python benches/compare_producer.py ...`` is the same group.)

Workload: n UUID keys, a layout of ``--segments`` equal segments with ``--buckets`` equal-width
buckets each, both policies, list[str] and Arrow string input, on one and on two threads. The
reference is written the way the Java producer batches (a dict of per-bucket lists per segment
window, around ``mmh3.hash`` and ``bisect``). Prints ns per message, the ratio to the reference,
and the peak extra memory per message (tracemalloc: numpy and the kernels' PyMem_Raw allocations
are traced).
"""

from __future__ import annotations

import argparse
import functools
import gc
import os
import tracemalloc
from collections.abc import Callable
from typing import Any

import bucketcore as bc
from bucketcore.harness import best_of, best_of_rounds, tiled_layout, uuid_keys
from bucketcore.harness.baselines import reference_batches, same_entries
from bucketcore.harness.timing import cpu_check, format_cpu_check
from bucketcore.producer import bucket_entries


def peak_bytes(fn: Callable[[], object]) -> int:
    """Peak traced memory above the starting point while fn runs (its result is dropped)."""
    gc.collect()
    tracemalloc.start()
    base, _ = tracemalloc.get_traced_memory()
    tracemalloc.reset_peak()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak - base


def print_steps(keys: list[str], layout: Any, max_messages: int, repeat: int) -> None:
    """Where the time goes, from a list of str: hashing, routing, grouping from KeyHashes."""
    n = len(keys)
    kh = bc.hash_keys(keys)
    parts = [
        ("hash_keys", functools.partial(bc.hash_keys, keys)),
        ("layout.route_index", functools.partial(layout.route_index, kh)),
        ("bucket_entries(KeyHashes)", functools.partial(bucket_entries, kh, layout, max_messages=max_messages)),
    ]
    print("\nsteps (shared policy)")
    for name, fn in parts:
        print(f"  {name:<28} {best_of(fn, repeat) / n * 1e9:8.2f} ns/msg")


def _append_reference(out: list[Any], keys: list[str], layout: Any, max_messages: int, policy: str) -> None:
    out.append(reference_batches(keys, layout, max_messages, policy))


def main(argv: list[str] | None = None) -> None:
    """The producer group (``benches/compare.py producer``); ``argv`` as the command line's."""
    parser = argparse.ArgumentParser(prog="compare.py producer", description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--ref-repeat", type=int, default=2)
    parser.add_argument("--segments", type=int, default=4)
    parser.add_argument("--buckets", type=int, default=16)
    parser.add_argument("--max-messages", type=int, default=1000)
    args = parser.parse_args(argv)
    try:
        import pyarrow as pa
    except ImportError:
        pa = None

    n = args.n
    keys = uuid_keys(n)
    layout = tiled_layout(args.segments, args.buckets)
    inputs: dict[str, Any] = {"list[str]": keys}
    if pa is not None:
        inputs["arrow string"] = pa.array(keys, type=pa.string())
    print(
        f"bucketcore {bc.__version__}: n={n} UUID keys, {args.segments} segments x N={args.buckets}, "
        f"max_messages={args.max_messages}, best of {args.repeat} rounds over the rows of a policy "
        f"(reference best of {args.ref_repeat})"
    )
    if hasattr(os, "getloadavg"):
        print("load average at start: {:.2f} {:.2f} {:.2f} on {} CPUs".format(*os.getloadavg(), os.cpu_count()))
    print(format_cpu_check(cpu_check()))

    print_steps(keys, layout, args.max_messages, args.repeat)

    print(
        f"\n{'policy':<11} {'input, threads':<16} {'bucketcore':>11} {'reference':>11} {'ratio':>7} "
        f"{'peak B/msg':>11} {'entries':>8} {'msgs/entry':>10} same"
    )
    for policy in ("shared", "per_bucket"):
        ref_result: list[Any] = []
        run_ref = functools.partial(_append_reference, ref_result, keys, layout, args.max_messages, policy)
        ref_time = best_of(run_ref, args.ref_repeat)
        ref = ref_result.pop()
        ref_result.clear()
        rows = [(f"{name} {threads}t", column, threads) for name, column in inputs.items() for threads in (1, 2)]
        runs = [
            functools.partial(
                bucket_entries, column, layout, max_messages=args.max_messages, policy=policy, threads=threads
            )
            for _, column, threads in rows
        ]
        times = best_of_rounds(runs, args.repeat)
        for (label, _, _), run, t in zip(rows, runs, times, strict=False):
            table = run()
            peak = peak_bytes(run)
            print(
                f"{policy:<11} {label:<16} {t / n * 1e9:8.2f} ns {ref_time / n * 1e9:8.1f} ns "
                f"{ref_time / t:6.1f}x {peak / n:11.2f} {len(table):8d} {n / max(1, len(table)):10.1f} "
                f"{'yes' if same_entries(table, ref) else 'NO'}"
            )
        del ref
    if hasattr(os, "getloadavg"):
        print("load average at end: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    print(format_cpu_check(cpu_check()))


if __name__ == "__main__":
    main()
