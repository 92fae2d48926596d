"""Side by side in one run: bucket and segment lookup vs ``bisect`` in a Python loop, and balanced boundaries.

    python benches/compare.py layout [--n 1000000] [--repeat 5] [--balanced-n 10000000]

(``python benches/compare_layout.py ...`` is the same group.)

Prints ns per hash (per key for routing) and the speed-up over the baseline measured in the same
process on the same data:
- bucket_of over n uniform uint16 hashes for N in {1, 4, 16, 256, 4096, 65536}: "warm" (the
  boundary list already has its lookup table), "cold" (a fresh list each call: the table build is
  included), int64 input, and the kernel's branchless search forced (what small columns use);
- route over n pre-hashed keys (1% keyless) with 1, 16 and 256 active segments, and a 16-partition
  legacy layout (signSafeMod); baseline: bisect over the active starts in a Python loop;
- Buckets.balanced over --balanced-n hashes: seconds, and the max/mean load of the balanced list
  next to equal width on a skewed (zipf) workload.
"""

from __future__ import annotations

import argparse
import functools
from typing import Any

import numpy as np

import bucketcore as bc
from _bucketcore import _layout
from bucketcore.harness import best_of, ns, tiled_layout
from bucketcore.harness.baselines import bisect_all, python_route
from bucketcore.harness.workloads import prehashed_keys, uniform_hashes


def _next_bucket_of(fresh: Any, hashes: np.ndarray) -> np.ndarray:
    return next(fresh).bucket_of(hashes)


def compare_bucket_of(n: int, repeat: int) -> None:
    hashes = uniform_hashes(n)
    wide = hashes.astype(np.int64)
    as_list = hashes.tolist()
    print(f"\nbucket_of over {n:,} uniform hashes (ns per hash; x = speed-up over bisect in a Python loop)")
    print(
        f"{'N':>6} {'bisect loop':>12} {'warm':>7} {'x':>6} {'cold':>7} {'x':>6} {'int64 in':>9} {'search':>7}  method"
    )
    for count in (1, 4, 16, 256, 4096, 65536):
        buckets = bc.Buckets.equal_width(count)
        splits = list(buckets.splits)
        expected = np.searchsorted(buckets.splits_array, hashes, side="right")
        assert np.array_equal(buckets.bucket_of(hashes), expected)  # also builds the table (warm)
        baseline = best_of(functools.partial(bisect_all, splits, as_list), max(2, repeat // 2))
        warm = best_of(functools.partial(buckets.bucket_of, hashes), repeat)
        fresh = iter([bc.Buckets._trusted(buckets.splits) for _ in range(repeat)])  # built untimed
        cold = best_of(functools.partial(_next_bucket_of, fresh, hashes), repeat)
        wide_t = best_of(functools.partial(buckets.bucket_of, wide), repeat)
        out = np.empty(n, dtype=np.int32)
        search = best_of(
            functools.partial(
                _layout.bucket_of, buckets.splits_array, hashes, out, None, _layout.LookupMethod.METHOD_SEARCH
            ),
            repeat,
        )
        method = {0: "constant", 1: "one compare", 2: "search", 3: "64Ki table"}[buckets._plan(n)[0]]
        print(
            f"{count:>6} {ns(baseline, n):>12.1f} {ns(warm, n):>7.2f} {baseline / warm:>5.0f}x "
            f"{ns(cold, n):>7.2f} {baseline / cold:>5.0f}x {ns(wide_t, n):>9.2f} {ns(search, n):>7.2f}  {method}"
        )


def compare_route(n: int, repeat: int) -> None:
    kh = prehashed_keys(n)
    seg_list, key_list, raw_list = kh.segment_hash.tolist(), kh.has_key.tolist(), kh.raw.tolist()
    print(f"\nroute over {n:,} pre-hashed keys, 1% keyless (ns per key; x = speed-up over a Python bisect loop)")
    print(f"{'layout':>14} {'bisect loop':>12} {'route_index':>12} {'x':>6} {'route':>7} {'x':>6}")
    layouts = [(f"{c} active", tiled_layout(c)) for c in (1, 16, 256)]
    layouts.append(("16 legacy", tiled_layout(16, legacy=True)))
    for name, layout in layouts:

        def loop(layout: bc.TopicLayout = layout) -> list[int]:
            return python_route(layout, raw_list, seg_list, key_list)

        assert loop() == layout.route(kh).tolist()
        baseline = best_of(loop, max(2, repeat // 2))
        index_t = best_of(functools.partial(layout.route_index, kh), repeat)
        route_t = best_of(functools.partial(layout.route, kh), repeat)
        print(
            f"{name:>14} {ns(baseline, n):>12.1f} {ns(index_t, n):>12.2f} {baseline / index_t:>5.0f}x "
            f"{ns(route_t, n):>7.2f} {baseline / route_t:>5.0f}x"
        )


def compare_balanced(n: int, repeat: int) -> None:
    rng = np.random.default_rng(3)
    uniform = rng.integers(0, 0x10000, size=n, dtype=np.int64).astype(np.uint16)
    weights = rng.random(n)
    # Skewed traffic: zipf-distributed keys hashed with Murmur3 give a few hot bucket hashes.
    ranks = rng.zipf(1.3, size=min(n, 1_000_000))
    hot = bc.split_hash(bc.murmur3_32([f"user-{r}" for r in ranks.tolist()]))[1]
    print(f"\nBuckets.balanced over {n:,} hashes (seconds, best of {max(2, repeat // 2)})")
    int_weights = (weights * 1000).astype(np.int64)
    # Message sizes: heavy-tailed bytes per message (lognormal), balanced by bytes.
    sizes = np.random.default_rng(4).lognormal(6.0, 2.0, size=min(n, 1_000_000))
    sized = uniform[: sizes.size]
    print(f"{'N':>6} {'counts':>8} {'float w':>8} {'int w':>8}   max/mean load, equal width -> balanced:")
    print(f"{'':>35}uniform counts | zipf keys (floor = hottest hash) | lognormal bytes")
    for count in (16, 256, 4096, 65536):
        reps = max(2, repeat // 2)
        counts = best_of(functools.partial(bc.Buckets.balanced, uniform, count), reps)
        float_w = best_of(functools.partial(bc.Buckets.balanced, uniform, count, weights=weights), reps)
        int_w = best_of(functools.partial(bc.Buckets.balanced, uniform, count, weights=int_weights), reps)
        equal = bc.Buckets.equal_width(count)
        balanced = bc.Buckets.balanced(uniform, count)
        zipf_balanced = bc.Buckets.balanced(hot, count)
        bytes_balanced = bc.Buckets.balanced(sized, count, weights=sizes)
        print(
            f"{count:>6} {counts:>8.3f} {float_w:>8.3f} {int_w:>8.3f}   "
            f"{equal.load(uniform).ratio:.3f} -> {balanced.load(uniform).ratio:.3f} | "
            f"{equal.load(hot).ratio:.1f} -> {zipf_balanced.load(hot).ratio:.1f} "
            f"(floor {np.bincount(hot).max() / (hot.size / count):.1f}) | "
            f"{equal.load(sized, weights=sizes).ratio:.2f} -> {bytes_balanced.load(sized, weights=sizes).ratio:.2f}"
        )


def main(argv: list[str] | None = None) -> None:
    """The layout group (``benches/compare.py layout``); ``argv`` as the command line's."""
    parser = argparse.ArgumentParser(prog="compare.py layout", description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--balanced-n", type=int, default=10_000_000)
    args = parser.parse_args(argv)
    print(f"bucketcore {bc.__version__}, best of {args.repeat} (baselines best of {max(2, args.repeat // 2)})")
    compare_bucket_of(args.n, args.repeat)
    compare_route(args.n, args.repeat)
    compare_balanced(args.balanced_n, args.repeat)


if __name__ == "__main__":
    main()
