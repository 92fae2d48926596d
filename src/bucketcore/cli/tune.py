"""``bucketcore tune``: the segments x N trade-off for one workload.

For every segment count S and bucket count N of the sweep, and both batching policies, the
workload is bucketed by :func:`bucketcore.bucket_entries` under S equal-range segments of N
equal-width buckets, giving the mean entry fill (messages per entry) and the entries per second
a given message rate costs. For a requested consumer count C, :func:`bucketcore.compute_assignment`
("segments first, buckets absorb the surplus") and the broker's spread
(:class:`bucketcore.EntryBucketSelector`) give each consumer its buckets; their observed load
gives the usable parallelism (consumers with any load) and the imbalance (max/mean over the C
consumers), once with equal-width boundaries and once with traffic-balanced ones
(:meth:`bucketcore.Buckets.balanced`). The recommendation is the smallest N, then the smallest S,
that keeps all C consumers busy within the imbalance bound.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ._common import (
    CommandError,
    add_entry_limit_arguments,
    add_workload_arguments,
    console,
    float_range,
    int_at_least,
    int_list,
    plot_file,
    print_json,
    print_table,
    progress,
    workload_from_args,
)

__all__ = ["TunePoint", "add_parser", "recommend", "run", "sweep"]


# Peak memory of a sweep per message and per key of the population (its key columns, hashes and
# entry tables at the largest N), so a run that cannot fit is refused before it starts
BYTES_PER_MESSAGE = 400
BYTES_PER_KEY = 120


def add_parser(p: argparse.ArgumentParser) -> None:
    """Register tune's options.

    Parameters
    ----------
    p : argparse.ArgumentParser
    """
    add_workload_arguments(p, messages=200_000, keys=100_000)
    p.add_argument(
        "--segments",
        type=int_list(1, 4096),
        default=[1, 2, 4, 8],
        metavar="S,S,...",
        help="segment counts to sweep (default 1,2,4,8)",
    )
    p.add_argument(
        "--buckets",
        type=int_list(1, 32768),
        default=[1, 2, 4, 8, 16, 32, 64],
        metavar="N,N,...",
        help="bucket counts N per segment to sweep (default 1,2,4,8,16,32,64)",
    )
    p.add_argument(
        "--consumers", type=int_at_least(1, 1_000_000), default=16, help="consumer count to reach (default 16)"
    )
    p.add_argument(
        "--max-imbalance",
        type=float_range(1.0),
        default=1.25,
        metavar="RATIO",
        help="largest acceptable max/mean consumer load (default 1.25)",
    )
    p.add_argument(
        "--rate",
        type=float_range(1.0),
        default=100_000.0,
        metavar="MSGS_PER_S",
        help="message rate for the entries-per-second column (default 100,000)",
    )
    add_entry_limit_arguments(p)
    p.add_argument("--plot", metavar="FILE.png", help="draw the trade-off curves to this PNG (needs matplotlib)")
    p.add_argument("--json", action="store_true", help="print the sweep and the recommendation as JSON")


@dataclass(frozen=True)
class TunePoint:
    """One (S, N) of the sweep.

    Attributes
    ----------
    segments, buckets : int
    fill_shared, fill_per_bucket : float
        Mean messages per entry under each policy.
    entries_per_s_shared, entries_per_s_per_bucket : float
        Entries per second at the requested message rate.
    usable_equal, usable_balanced : int
        Consumers (of the requested count) that get any load.
    imbalance_equal, imbalance_balanced : float
        Max/mean load over the requested consumers (idle ones count as 0).
    """

    segments: int
    buckets: int
    fill_shared: float
    fill_per_bucket: float
    entries_per_s_shared: float
    entries_per_s_per_bucket: float
    usable_equal: int
    usable_balanced: int
    imbalance_equal: float
    imbalance_balanced: float

    def reaches(self, consumers: int, bound: float) -> str | None:
        """Which boundaries (``"equal"`` first, then ``"balanced"``) keep every consumer busy within
        the bound, or None."""
        if self.usable_equal >= consumers and self.imbalance_equal <= bound:
            return "equal"
        if self.usable_balanced >= consumers and self.imbalance_balanced <= bound:
            return "balanced"
        return None


def _consumer_loads(layout: Any, kh: Any, route: np.ndarray, consumers: int) -> np.ndarray:
    """Per consumer (sorted by name), the messages the assignment and the broker's spread give it."""
    import bucketcore as bc

    names = [f"consumer-{i:05d}" for i in range(consumers)]
    slot = {name: i for i, name in enumerate(names)}
    assignment = bc.compute_assignment(layout, names)
    owners: dict[int, list[str]] = {}
    for name in names:
        for seg in assignment[name].segments:
            owners.setdefault(seg.segment_id, []).append(name)
    loads = np.zeros(consumers, dtype=np.int64)
    bucket_hash = np.asarray(kh.bucket_hash)
    for index, seg in enumerate(layout.active_segments):
        sharers = owners.get(seg.segment_id, [])
        if not sharers:
            continue
        in_seg = route == index
        per_bucket = np.bincount(seg.buckets.bucket_of(bucket_hash[in_seg]), minlength=seg.buckets.count)
        selector = bc.EntryBucketSelector(seg.buckets)
        for cid, name in enumerate(sorted(sharers)):
            selector.add_consumer(name, cid)
        owner = selector.owner_slots
        ids = np.array([slot[name] for name, _ in selector.consumers], dtype=np.int64)
        taken = owner >= 0
        np.add.at(loads, ids[owner[taken]], per_bucket[taken])
    return loads


def _imbalance(loads: np.ndarray) -> tuple[int, float]:
    mean = float(loads.mean())
    return int(np.count_nonzero(loads)), (float(loads.max()) / mean if mean > 0 else float("inf"))


def sweep(
    workload: Any,
    segment_counts: list[int],
    bucket_counts: list[int],
    consumers: int,
    rate: float,
    max_messages: int,
    max_bytes: int,
    update: Any = None,
) -> list[TunePoint]:
    """Measure every (S, N) of the sweep.

    Parameters
    ----------
    workload : KeyWorkload
    segment_counts, bucket_counts : list of int
    consumers : int
        The consumer count the load is spread over.
    rate : float
        Messages per second, for the entries-per-second figures.
    max_messages, max_bytes : int
        Producer batch limits.
    update : callable, optional
        Progress: called with the number of points done.

    Returns
    -------
    list of TunePoint
    """
    import bucketcore as bc
    from bucketcore.harness import tiled_layout

    kh = bc.hash_keys(workload.column())
    sizes = workload.sizes
    n = len(workload)
    points = []
    for s in segment_counts:
        route = np.asarray(tiled_layout(s, 1).route_index(kh)[0])
        for count in bucket_counts:
            equal = tiled_layout(s, count)
            fills = {}
            for policy in ("shared", "per_bucket"):
                table = bc.bucket_entries(
                    kh, equal, sizes=sizes, max_messages=max_messages, max_bytes=max_bytes, policy=policy
                )
                fills[policy] = n / max(1, len(table))
            balanced = bc.TopicLayout(
                1,
                [
                    bc.Segment(
                        seg.segment_id,
                        seg.hash_start,
                        seg.hash_end,
                        bc.Buckets.balanced(np.asarray(kh.bucket_hash)[route == i], count),
                    )
                    for i, seg in enumerate(equal.active_segments)
                ],
            )
            usable_eq, imb_eq = _imbalance(_consumer_loads(equal, kh, route, consumers))
            usable_bal, imb_bal = _imbalance(_consumer_loads(balanced, kh, route, consumers))
            points.append(
                TunePoint(
                    s,
                    count,
                    fills["shared"],
                    fills["per_bucket"],
                    rate / fills["shared"],
                    rate / fills["per_bucket"],
                    usable_eq,
                    usable_bal,
                    imb_eq,
                    imb_bal,
                )
            )
            if update is not None:
                update(len(points))
    return points


def recommend(points: list[TunePoint], consumers: int, bound: float) -> tuple[TunePoint, str] | None:
    """The smallest N, then the smallest S, reaching ``consumers`` within ``bound``.

    Parameters
    ----------
    points : list of TunePoint
    consumers : int
    bound : float

    Returns
    -------
    (TunePoint, boundaries) or None
        ``boundaries`` is ``"equal"`` or ``"balanced"``; None when no point qualifies.
    """
    for point in sorted(points, key=lambda p: (p.buckets, p.segments)):
        how = point.reaches(consumers, bound)
        if how is not None:
            return point, how
    return None


def run(args: argparse.Namespace) -> int:
    """Run the sweep, print the table and the recommendation, optionally draw the plot.

    Parameters
    ----------
    args : argparse.Namespace

    Returns
    -------
    int
        0 (also when nothing qualifies: the table says why).

    Raises
    ------
    CommandError
        A bad option or an unwritable plot path.
    """
    if args.plot:
        plot_file(args.plot)
    workload = workload_from_args(args, bytes_per_message=BYTES_PER_MESSAGE, bytes_per_key=BYTES_PER_KEY)
    start = time.perf_counter()
    total = len(args.segments) * len(args.buckets)
    with progress("tune", total, enabled=not args.json) as update:
        points = sweep(
            workload, args.segments, args.buckets, args.consumers, args.rate, args.max_messages, args.max_bytes, update
        )
    best = recommend(points, args.consumers, args.max_imbalance)
    if args.plot:
        _plot(points, best, args)
    if args.json:
        print_json(
            {
                "workload": workload.description,
                "consumers": args.consumers,
                "max_imbalance": args.max_imbalance,
                "rate": args.rate,
                "points": [
                    {k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in asdict(p).items()}
                    for p in points
                ],
                "recommendation": None
                if best is None
                else {"segments": best[0].segments, "buckets": best[0].buckets, "boundaries": best[1]},
                "plot": args.plot,
                "seconds": round(time.perf_counter() - start, 3),
            }
        )
        return 0
    out = console()
    out.print(
        f"bucketcore tune: {workload.description}; {args.consumers} consumers wanted, "
        f"imbalance bound {args.max_imbalance:g}, {args.rate:,.0f} messages/s"
    )
    rows = [
        (
            p.segments,
            p.buckets,
            p.fill_shared,
            p.fill_per_bucket,
            p.entries_per_s_shared,
            p.entries_per_s_per_bucket,
            f"{p.usable_equal}/{p.usable_balanced}",
            _r(p.imbalance_equal),
            _r(p.imbalance_balanced),
            "<-" if best is not None and p is best[0] else "",
        )
        for p in points
    ]
    print_table(
        None,
        (
            "S",
            "N",
            "fill shared",
            "fill per_bucket",
            "entries/s shared",
            "entries/s per_bucket",
            "busy eq/bal",
            "imbal. equal",
            "imbal. balanced",
            "",
        ),
        rows,
        out=out,
        caption="fill = mean messages per entry; busy = consumers with load (equal/balanced "
        "boundaries); imbal. = max/mean load over the wanted consumers",
    )
    if best is None:
        out.print(
            f"recommendation: none of the sweep keeps {args.consumers} consumers busy within "
            f"{args.max_imbalance:g}; widen --segments or --buckets, or relax --max-imbalance"
        )
    else:
        p, how = best
        out.print(
            f"recommendation: {p.segments} segments x N={p.buckets} buckets with {how}-width boundaries"
            if how == "equal"
            else f"recommendation: {p.segments} segments x N={p.buckets} buckets with traffic-balanced boundaries "
            f"(bucketcore plan)"
        )
        out.print(
            f"  entries {p.fill_shared:.1f} messages on average (shared policy), "
            f"{p.entries_per_s_shared:,.0f} entries/s at {args.rate:,.0f} messages/s"
        )
    if args.plot:
        out.print(f"plot written to {args.plot}")
    return 0


def _r(x: float) -> str:
    return "inf" if not np.isfinite(x) else f"{x:.2f}"


def _plot(points: list[TunePoint], best: tuple[TunePoint, str] | None, args: argparse.Namespace) -> None:
    try:
        import matplotlib
    except ImportError:
        raise CommandError("--plot needs matplotlib: pip install 'bucketcore[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.4))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, s in enumerate(sorted({p.segments for p in points})):
        row = sorted((p for p in points if p.segments == s), key=lambda p: p.buckets)
        x = [p.buckets for p in row]
        c = colours[i % len(colours)]
        left.plot(x, [p.fill_shared for p in row], "-o", color=c, ms=3, label=f"S={s} shared")
        left.plot(x, [p.fill_per_bucket for p in row], "--", color=c, label=f"S={s} per_bucket")
        right.plot(x, [min(p.imbalance_equal, 10) for p in row], "-o", color=c, ms=3, label=f"S={s} equal")
        right.plot(x, [min(p.imbalance_balanced, 10) for p in row], ":", color=c, label=f"S={s} balanced")
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("buckets per segment N")
        ax.grid(True, alpha=0.3)
    left.set_yscale("log")
    left.set_ylabel("mean messages per entry")
    left.set_title("batching cost: entry fill")
    right.set_ylabel(f"max/mean load over {args.consumers} consumers (capped at 10)")
    right.set_title("parallelism: load imbalance")
    right.axhline(args.max_imbalance, color="grey", lw=1)
    if best is not None:
        p, how = best
        y = p.imbalance_equal if how == "equal" else p.imbalance_balanced
        right.plot(
            [p.buckets], [y], marker="*", ms=14, color="black", ls="none", label=f"pick: S={p.segments}, N={p.buckets}"
        )
    left.legend(fontsize=7, ncol=2)
    right.legend(fontsize=7, ncol=2)
    fig.suptitle(f"bucketcore tune: {args.messages:,} messages, {args.consumers} consumers", fontsize=10)
    fig.tight_layout()
    try:
        fig.savefig(args.plot, dpi=100)
    except OSError as err:
        raise CommandError(f"argument --plot: cannot write {args.plot!r}: {err.strerror}") from None
    finally:
        plt.close(fig)
