"""``bucketcore bench``: the kernels side by side with their per-message Python baselines, one run.

Rows (ns per key, message or entry; best of ``--repeat`` rounds in which every row of a group runs
once in turn, so a slow spell of the machine hits every row alike):

* hashing — ``murmur3_32`` over list, numpy and Arrow columns of the keys (``--workload``: UUIDs by
  default, or ``--keys FILE``), 1 and 2 threads, against a list comprehension over ``mmh3.hash``;
* producer — ``bucket_entries`` (4 segments x N=16) over the same inputs, against a per-message
  Python batcher written the way the Java reference batches; the SDK's paths
  (``EntryBucketBatcher.add``, one call per message, and ``add_many``) against the same baseline;
* dispatch — ``route_entries`` over stamped entries (64 consumers, N=256) against bisect in a
  loop, and the ``Dispatcher`` under churn against the same rules written per entry; the SDK's
  per-call path (``offer`` of one entry, ``poll``, ``ack``; N=256, 16 consumers) against that
  per-entry dispatcher driven the same way, and a membership change at N=65535 with 1000
  consumers (:mod:`bucketcore.harness.percall`'s ``dispatch256`` and ``membership65535`` rows,
  which ``benches/compare.py sdk`` times too).

Every fast row is checked against its baseline's result before it is timed. The per-CPU calm
check runs before and after (see :func:`bucketcore.harness.timing.cpu_check`).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from ._common import (
    CommandError,
    console,
    int_at_least,
    print_json,
    print_table,
    progress,
)

__all__ = ["add_parser", "measure", "run"]


def add_parser(p: argparse.ArgumentParser) -> None:
    """Register bench's options.

    Parameters
    ----------
    p : argparse.ArgumentParser
    """
    p.add_argument(
        "--n", type=int_at_least(1000), default=200_000, help="keys / messages / entries per row (default 200,000)"
    )
    p.add_argument("--repeat", type=int_at_least(1), default=5, help="best of this many rounds (default 5)")
    p.add_argument(
        "--workload",
        choices=("uuid", "short", "zipf"),
        default="uuid",
        help="keys of the hash and produce groups: distinct UUIDs (36 bytes), short 'user-<i>' "
        "keys, or Zipf-distributed 'user-<rank>' keys (default uuid)",
    )
    p.add_argument(
        "--keys", metavar="FILE", help="take the keys from this file instead (one per line, repeated to --n)"
    )
    p.add_argument(
        "--groups",
        default="hash,produce,dispatch",
        metavar="G,G",
        help="which groups to run: hash, produce, dispatch (default all)",
    )
    p.add_argument("--json", action="store_true", help="print the results as JSON (keep them for --compare)")
    p.add_argument("--compare", metavar="OLD.json", help="show the change against an earlier --json run")
    p.add_argument("--plot", metavar="FILE.png", help="draw a bar chart of ns per item (needs matplotlib)")


def _row(
    group: str, what: str, inputs: str, threads: int | str, unit: str, n: int, seconds: float, baseline: str | None
) -> dict[str, Any]:
    return {
        "group": group,
        "what": what,
        "input": inputs,
        "threads": threads,
        "unit": unit,
        "n": n,
        "ns": seconds / n * 1e9,
        "baseline": baseline,
    }


def bench_keys(workload: str, n: int, key_file: str | None = None, seed: int = 1) -> list[str]:
    """The keys of the hash and produce groups.

    Parameters
    ----------
    workload : {"uuid", "short", "zipf"}
        A :data:`bucketcore.harness.WORKLOADS` generator (ignored with ``key_file``).
    n : int
        How many keys.
    key_file : str, optional
        A file of keys, one per line, repeated in order up to ``n``.
    seed : int
        Generator seed (uuid and zipf).

    Returns
    -------
    list of str

    Raises
    ------
    CommandError
        An unreadable or empty key file.
    """
    from bucketcore.harness import WORKLOADS
    from bucketcore.harness.workloads import read_key_file

    if key_file is None:
        make = WORKLOADS[workload]
        return make(n) if workload == "short" else make(n, seed=seed)
    try:
        lines = read_key_file(key_file)
    except ValueError as err:
        raise CommandError(f"argument --keys: {err}") from None
    return [lines[i % len(lines)] for i in range(n)]


def _columns(keys: list[str], pa: Any) -> dict[str, Any]:
    """The same keys as a list, a numpy bytes column and (with pyarrow) an Arrow string column."""
    encoded = [k.encode() for k in keys]
    width = max(1, max(map(len, encoded)))
    inputs: dict[str, Any] = {"list[str]": keys, f"numpy S{width}": np.array(encoded, dtype=f"S{width}")}
    if pa is not None:
        inputs["arrow string"] = pa.array(keys, type=pa.string())
    return inputs


def _hash_group(keys: list[str], repeat: int, pa: Any) -> list[dict[str, Any]]:
    import bucketcore as bc
    from bucketcore.harness import best_of_rounds
    from bucketcore.harness.baselines import mmh3_hashes

    n = len(keys)
    inputs = _columns(keys, pa)
    expected = np.array(mmh3_hashes(keys), dtype=np.uint32)
    runs: list[tuple[str, str, int | str, Any]] = [
        ("mmh3 comprehension", "list[str]", 1, functools.partial(mmh3_hashes, keys))
    ]
    for name, column in inputs.items():
        for threads in (1, 2):
            fn = functools.partial(bc.murmur3_32, column, threads=threads)
            if not np.array_equal(fn(), expected):
                raise RuntimeError(f"murmur3_32 over {name} differs from mmh3")
            runs.append(("murmur3_32", name, threads, fn))
    times = best_of_rounds([r[3] for r in runs], repeat)
    return [
        _row("hash", what, inp, th, "key", n, t, None if i == 0 else "mmh3 comprehension")
        for i, ((what, inp, th, _), t) in enumerate(zip(runs, times, strict=False))
    ]


def _produce_group(keys: list[str], repeat: int, pa: Any) -> list[dict[str, Any]]:
    import bucketcore as bc
    from bucketcore.harness import best_of, best_of_rounds, tiled_layout
    from bucketcore.harness.baselines import reference_batches, same_entries

    n = len(keys)
    layout = tiled_layout(4, 16)
    ref: list[Any] = []
    ref_time = best_of(lambda: ref.append(reference_batches(keys, layout)), max(1, repeat // 2))
    expected = ref[-1]
    rows = [_row("produce", "python batcher (reference)", "list[str]", 1, "message", n, ref_time, None)]
    inputs = _columns(keys, pa)
    runs = []
    for name, column in inputs.items():
        for threads in (1, 2):
            fn = functools.partial(bc.bucket_entries, column, layout, threads=threads)
            if not same_entries(fn(), expected):
                raise RuntimeError(f"bucket_entries over {name} differs from the reference batcher")
            runs.append((name, threads, fn))
    times = best_of_rounds([r[2] for r in runs], repeat)
    rows += [
        _row("produce", "bucket_entries", name, th, "message", n, t, "python batcher (reference)")
        for (name, th, _), t in zip(runs, times, strict=False)
    ]
    # the SDK's per-call path: one add() per message, payload-free
    m = min(n, 50_000)
    payload = b""

    def per_call() -> None:
        batcher = bc.EntryBucketBatcher(layout)
        add = batcher.add
        for k in keys[:m]:
            add(k, payload)
        batcher.flush()

    rows.append(
        _row(
            "produce",
            "EntryBucketBatcher.add per call",
            "str",
            1,
            "message",
            m,
            best_of(per_call, max(1, repeat // 2)),
            "python batcher (reference)",
        )
    )
    payloads = [payload] * m

    def many() -> None:
        batcher = bc.EntryBucketBatcher(layout)
        batcher.add_many(keys[:m], payloads)
        batcher.flush()

    rows.append(
        _row(
            "produce",
            "EntryBucketBatcher.add_many",
            "list[str]",
            1,
            "message",
            m,
            best_of(many, max(1, repeat // 2)),
            "python batcher (reference)",
        )
    )
    return rows


def _dispatch_group(n: int, repeat: int) -> list[dict[str, Any]]:
    import bucketcore as bc
    from bucketcore.harness import best_of
    from bucketcore.harness.baselines import PyDispatcherAdapter, py_route, run_churn
    from bucketcore.harness.workloads import uniform_hashes

    hash_min = uniform_hashes(n)
    buckets = bc.Buckets.equal_width(256)
    selector = bc.EntryBucketSelector(buckets)
    for i in range(64):
        selector.add_consumer(f"consumer-{i:03d}", i)
    splits, owner, as_list = list(buckets.splits), selector.owner_slots.tolist(), hash_min.tolist()
    expected = np.array(py_route(splits, owner, as_list), dtype=np.int32)
    if not np.array_equal(bc.route_entries(selector, hash_min), expected):
        raise RuntimeError("route_entries differs from the per-entry loop")
    base = best_of(lambda: py_route(splits, owner, as_list), max(1, repeat // 2))
    fast = best_of(lambda: bc.route_entries(selector, hash_min), repeat)
    m = min(n, 100_000)
    if run_churn(bc.Dispatcher, m) != run_churn(PyDispatcherAdapter, m):
        raise RuntimeError("Dispatcher and the per-entry dispatcher deliver differently")
    churn_base = best_of(lambda: run_churn(PyDispatcherAdapter, m), max(1, repeat // 2))
    churn_fast = best_of(lambda: run_churn(bc.Dispatcher, m), repeat)
    return [
        _row("dispatch", "python route loop", "list[int]", 1, "entry", n, base, None),
        _row("dispatch", "route_entries", "numpy u16", 1, "entry", n, fast, "python route loop"),
        _row("dispatch", "python dispatcher, churn", "list[int]", 1, "entry", m, churn_base, None),
        _row("dispatch", "Dispatcher, churn", "numpy", 1, "entry", m, churn_fast, "python dispatcher, churn"),
        *_dispatch_per_call_rows(min(n, 20_000), repeat),
    ]


def _dispatch_per_call_rows(n: int, repeat: int) -> list[dict[str, Any]]:
    """The broker's per-call paths, :mod:`bucketcore.harness.percall`'s ``dispatch256`` and
    ``membership65535`` rows: offer one stamped entry, poll, ack what was delivered (N=256, 16
    consumers), against the per-entry Python dispatcher driven the same way; and a join or a
    leave at N=65535 with 1000 consumers (per membership change)."""
    from bucketcore.harness import best_of, percall

    if not percall.dispatch_agrees(256, 16, n):
        raise RuntimeError("Dispatcher's per-call path and the per-entry dispatcher deliver differently")
    changes = 10  # even: every timed call leaves the sharers as they were
    what = "N=65535, 1000 consumers"
    rows = []
    for (run, base), label, inputs, unit, calls in (
        (percall.dispatch_row(256, 16), "offer+poll+ack per call", "int", "entry", n),
        (percall.membership_row(), "join or leave", what, "change", changes),
    ):
        assert base is not None
        counter = [0]  # call numbers keep increasing across the rounds: fresh entry ids
        base_time = best_of(percall.timed_calls(base, counter, calls), max(1, repeat // 2))
        fast_time = best_of(percall.timed_calls(run, counter, calls), repeat)
        base_what = "python dispatcher " + ("per call" if unit == "entry" else label)
        rows += [
            _row("dispatch", base_what, inputs, 1, unit, calls, base_time, None),
            _row("dispatch", f"Dispatcher {label}", inputs, 1, unit, calls, fast_time, base_what),
        ]
    return rows


def measure(
    n: int, repeat: int, groups: list[str], update: Any = None, keys: list[str] | None = None, workload: str = "uuid"
) -> dict[str, Any]:
    """Run the chosen groups and the calm checks.

    Parameters
    ----------
    n : int
        Items per row.
    keys : list of str, optional
        Keys of the hash and produce groups (default: ``n`` UUIDs).
    workload : str
        What the keys are, for the record.
    repeat : int
        Rounds.
    groups : list of str
        Among ``hash``, ``produce``, ``dispatch``.
    update : callable, optional
        Progress: called with the number of groups done.

    Returns
    -------
    dict
        ``rows`` (each with ``ns`` per item and ``ratio`` to its baseline), ``cpu_check_before`` /
        ``cpu_check_after``, and the run's context.
    """
    import bucketcore as bc
    from bucketcore.harness.timing import cpu_check

    try:
        import pyarrow as pa
    except ImportError:
        pa = None
    if keys is None:
        keys = bench_keys("uuid", n)
    before = cpu_check()
    rows: list[dict[str, Any]] = []
    for i, group in enumerate(groups):
        if group == "hash":
            rows += _hash_group(keys, repeat, pa)
        elif group == "produce":
            rows += _produce_group(keys, repeat, pa)
        else:
            rows += _dispatch_group(n, repeat)
        if update is not None:
            update(i + 1)
    after = cpu_check()
    base = {r["what"]: r["ns"] for r in rows if r["baseline"] is None}
    for r in rows:
        r["ratio"] = base[r["baseline"]] / r["ns"] if r["baseline"] else None
    return {
        "bucketcore": bc.__version__,
        "numpy": np.__version__,
        "pyarrow": None if pa is None else pa.__version__,
        "cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "n": n,
        "workload": workload,
        "repeat": repeat,
        "when": time.strftime("%Y-%m-%d %H:%M:%S"),
        "cpu_check_before": {f"cpu{k}": round(v, 3) for k, v in before.items()},
        "cpu_check_after": {f"cpu{k}": round(v, 3) for k, v in after.items()},
        "rows": rows,
    }


def _key(row: dict[str, Any]) -> tuple[str, str, str, str]:
    return (row["group"], row["what"], row["input"], str(row["threads"]))


def _load_old(path: str) -> dict[tuple[str, str, str, str], float]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        return {_key(r): float(r["ns"]) for r in data["rows"]}
    except OSError as err:
        raise CommandError(f"argument --compare: cannot read {path!r}: {err.strerror}") from None
    except (ValueError, KeyError, TypeError) as err:
        raise CommandError(
            f"argument --compare: {path!r} is not the --json output of bucketcore bench ({err})"
        ) from None


def run(args: argparse.Namespace) -> int:
    """Measure, then print the table (or JSON), the comparison and the plot.

    Parameters
    ----------
    args : argparse.Namespace

    Returns
    -------
    int
        0.

    Raises
    ------
    CommandError
        A bad option, a missing baseline library, or an unreadable comparison file.
    """
    groups = [g.strip() for g in args.groups.split(",") if g.strip()]
    unknown = [g for g in groups if g not in ("hash", "produce", "dispatch")]
    if unknown or not groups:
        raise CommandError(
            f"argument --groups: unknown group {unknown[0] if unknown else '(none)'!r} "
            "(choose from hash, produce, dispatch)"
        )
    try:
        import mmh3  # noqa: F401 - the baselines need it
    except ImportError:
        raise CommandError("the baselines need mmh3: pip install 'bucketcore[bench]'") from None
    old = _load_old(args.compare) if args.compare else None
    keys = bench_keys(args.workload, args.n, args.keys)
    workload = f"keys of {args.keys}" if args.keys else args.workload
    with progress("bench", len(groups), enabled=not args.json) as update:
        result = measure(args.n, args.repeat, groups, update, keys=keys, workload=workload)
    if old is not None:
        for r in result["rows"]:
            was = old.get(_key(r))
            r["old_ns"] = was
            r["change"] = None if was is None else r["ns"] / was - 1.0
    if args.plot:
        _plot(result, args.plot)
    if args.json:
        print_json(result)
        return 0
    out = console()
    check = ", ".join(f"{k} {v:.2f}" for k, v in result["cpu_check_before"].items())
    check_after = ", ".join(f"{k} {v:.2f}" for k, v in result["cpu_check_after"].items())
    out.print(
        f"bucketcore {result['bucketcore']} bench: n={args.n:,} ({workload} keys), best of {args.repeat} rounds, "
        f"{result['cpus']} CPUs, pyarrow {result['pyarrow'] or 'absent (no Arrow rows)'}"
    )
    if check:
        out.print(f"per-CPU calm check (murmur3_32, 4 Ki in-cache UUIDs, ns/key): before {check}; after {check_after}")
    columns = ["group", "what", "input", "threads", "ns per item", "x baseline"]
    if old is not None:
        columns.append(f"vs {Path(args.compare).name}")
    rows = []
    for r in result["rows"]:
        row = [
            r["group"],
            r["what"],
            r["input"],
            r["threads"],
            f"{r['ns']:.2f} /{r['unit']}",
            "baseline" if r["ratio"] is None else f"{r['ratio']:.1f}x",
        ]
        if old is not None:
            row.append("-" if r["change"] is None else f"{r['change']:+.1%}")
        rows.append(row)
    print_table(None, columns, rows, out=out)
    if args.plot:
        out.print(f"plot written to {args.plot}")
    return 0


def _plot(result: dict[str, Any], path: str) -> None:
    try:
        import matplotlib
    except ImportError:
        raise CommandError("--plot needs matplotlib: pip install 'bucketcore[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["rows"]
    fig, ax = plt.subplots(figsize=(9, 0.3 * len(rows) + 1.2))
    labels = [f"{r['what']} ({r['input']}, {r['threads']}t)" for r in rows]
    colours = ["#b0b0b0" if r["baseline"] is None else "#3b75af" for r in rows]
    ax.barh(labels, [r["ns"] for r in rows], color=colours)
    ax.set_xscale("log")
    ax.set_xlabel("ns per key / message / entry (log; grey = Python baseline)")
    ax.invert_yaxis()
    ax.tick_params(axis="y", labelsize=7)
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=100)
    except OSError as err:
        raise CommandError(f"argument --plot: cannot write {path!r}: {err.strerror}") from None
    finally:
        plt.close(fig)
