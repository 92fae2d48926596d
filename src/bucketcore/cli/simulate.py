"""``bucketcore simulate``: the end-to-end run (docs/simulate.md explains the model and every
line of the report).

A keyed message stream is bucketed and stamped, appended to a stream store, dispatched by
stamp to consumers that join, leave and crash, reassigned by the controller through a split and a
rebucket rollover, and acked after random delays. The report gives the counts and the three
checks; the exit status is 1 when a check fails.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from ._common import (
    CommandError,
    add_entry_limit_arguments,
    add_workload_arguments,
    console,
    int_at_least,
    print_json,
    print_table,
    progress,
    workload_from_args,
)

__all__ = ["add_parser", "report_dict", "run"]


# Peak memory of a run per message and per key of the population (the stream's columns, its store
# and the consumers' bookkeeping), so a run that cannot fit is refused before it starts
BYTES_PER_MESSAGE = 200
BYTES_PER_KEY = 120


def add_parser(p: argparse.ArgumentParser) -> None:
    """Register simulate's options.

    Parameters
    ----------
    p : argparse.ArgumentParser
    """
    add_workload_arguments(p, messages=1_000_000, keys=100_000)
    p.add_argument("--segments", type=int_at_least(1, 4096), default=4, help="active segments at the start (default 4)")
    p.add_argument(
        "--buckets",
        type=int_at_least(1, 32768),
        default=16,
        metavar="N",
        help="equal-width buckets per segment at the start (default 16)",
    )
    p.add_argument("--consumers", type=int_at_least(1, 10_000), default=6, help="consumers at the start (default 6)")
    p.add_argument(
        "--churn",
        type=int_at_least(0, 100_000),
        default=12,
        help="membership events (join, clean leave, crash) during the run (default 12)",
    )
    p.add_argument(
        "--policy", choices=("shared", "per_bucket"), default="shared", help="producer batching policy (default shared)"
    )
    add_entry_limit_arguments(p)
    p.add_argument(
        "--chunk",
        type=int_at_least(1),
        default=10_000,
        help="messages produced per tick; each tick's end flushes the producer (default 10,000)",
    )
    p.add_argument("--no-layout-changes", action="store_true", help="skip the split and the rebucket rollover")
    p.add_argument(
        "--store",
        metavar="PATH",
        help="keep the stream store in this new or empty directory (default: a temporary one, removed at the end)",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")


def report_dict(report: Any, workload: Any, config: Any, seconds: float) -> dict[str, Any]:
    """The report as plain JSON-ready data (what ``--json`` prints).

    Parameters
    ----------
    report : SimReport
    workload : KeyWorkload
    config : SimConfig
    seconds : float
        Wall time of the run.

    Returns
    -------
    dict
    """
    checks = report.checks
    return {
        "workload": workload.description,
        "config": dict(vars(config)),
        "produced": report.produced,
        "keyless": report.keyless,
        "consumed": checks.consumed,
        "entries": report.entries,
        "mean_messages_per_entry": report.produced / max(1, report.entries),
        "delivered_entries": report.delivered_entries,
        "redelivered_entries": report.redelivered_entries,
        "redelivered_messages": report.redelivered_messages,
        "paused_bucket_ticks": report.paused_bucket_ticks,
        "bucket_ticks": report.bucket_ticks,
        "ticks": report.ticks,
        "events": report.events,
        "layout_epoch": report.layout_epochs,
        "consumers": [
            {
                "name": c.name,
                "consumer_id": c.consumer_id,
                "fate": c.fate,
                "segments": sorted(c.segments),
                "entries": c.entries,
                "messages": c.messages,
                "redelivered_entries": c.redelivered_entries,
            }
            for c in report.consumers
        ],
        "checks": {
            "order_violations": checks.order_violations,
            "lost": checks.lost,
            "duplicated_after_ack": checks.duplicated_after_ack,
            "first_violation": checks.first_violation,
            "first_lost": checks.first_lost,
            "first_duplicate": checks.first_duplicate,
            "misrouted_entries": report.misrouted_entries,
        },
        "ok": report.ok,
        "store": report.store_path,
        "seconds": round(seconds, 3),
    }


def _check_store(path: str | None) -> None:
    """A new or empty directory for the kept store, made now so that a path that cannot be one
    fails before the run, not after it."""
    if path is None:
        return
    p = Path(path)
    if p.exists() and (not p.is_dir() or any(p.iterdir())):
        raise CommandError(f"argument --store: {path!r} must be a new or empty directory")
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise CommandError(f"argument --store: cannot make the directory {path!r}: {err.strerror}") from None
    if not os.access(p, os.W_OK):
        raise CommandError(f"argument --store: the directory {path!r} is not writable")


def run(args: argparse.Namespace, *, _faults: tuple[str, ...] = ()) -> int:
    """Run the simulation and print the report.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed options.
    _faults : tuple of str
        Test-only fault injection, passed to :func:`bucketcore.harness.simulator.simulate`.

    Returns
    -------
    int
        0 when every check passed, 1 otherwise.

    Raises
    ------
    CommandError
        A bad option value or store directory.
    """
    from bucketcore.harness.simulator import SimConfig, simulate

    _check_store(args.store)
    workload = workload_from_args(args, bytes_per_message=BYTES_PER_MESSAGE, bytes_per_key=BYTES_PER_KEY)
    layout_changes = not args.no_layout_changes
    config = SimConfig(
        segments=args.segments,
        buckets=args.buckets,
        consumers=args.consumers,
        churn=args.churn,
        seed=args.seed,
        policy=args.policy,
        max_messages=args.max_messages,
        max_bytes=args.max_bytes,
        chunk=args.chunk,
        split=layout_changes,
        rebucket=layout_changes,
    )
    start = time.perf_counter()
    with progress("simulate", 2 * len(workload), enabled=not args.json) as update:
        report = simulate(
            workload,
            config,
            store_path=args.store,
            progress=lambda produced, acked: update(produced + acked),
            _faults=_faults,
        )
    seconds = time.perf_counter() - start
    data = report_dict(report, workload, config, seconds)
    if args.json:
        print_json(data)
    else:
        _print_report(report, data, config)
    return 0 if report.ok else 1


def _print_report(report: Any, data: dict[str, Any], config: Any) -> None:
    out = console()
    ev = report.events
    out.print(f"bucketcore simulate: {data['workload']}; seed {config.seed}")
    out.print(f"topology: {config.segments} segments x N={config.buckets} at the start, {config.consumers} consumers")
    out.print(
        f"producer: policy {config.policy}, max_messages {config.max_messages}, max_bytes {config.max_bytes}, "
        f"{config.chunk:,} messages per tick"
    )
    out.print(
        f"layout: {ev['splits']} split, {ev['rebuckets']} rebucket rollover, {ev['drained']} sealed segments "
        f"drained; final epoch {report.layout_epochs}"
    )
    out.print(
        f"membership: {ev['joins']} joins, {ev['leaves']} clean leaves, {ev['crashes']} crashes; "
        f"{ev['assignments']} assignments computed"
    )
    paused_share = report.paused_bucket_ticks / report.bucket_ticks if report.bucket_ticks else 0.0
    rows = [
        ("messages produced", f"{report.produced:,}", f"{report.keyless:,} keyless"),
        ("messages consumed", f"{report.checks.consumed:,}", "distinct messages acked"),
        ("entries", f"{report.entries:,}", "appended to the stream store"),
        ("mean messages per entry", f"{data['mean_messages_per_entry']:.1f}", ""),
        (
            "redeliveries",
            f"{report.redelivered_entries:,}",
            f"entries ({report.redelivered_messages:,} messages) redelivered after crashes",
        ),
        (
            "paused-bucket time",
            f"{report.paused_bucket_ticks:,}",
            f"bucket-ticks withheld for a drain ({paused_share:.1%} of {report.bucket_ticks:,})",
        ),
        ("ticks", f"{report.ticks:,}", f"simulated steps; {data['seconds']:.1f} s wall"),
    ]
    print_table(None, ("", "count", "what"), rows, out=out)
    loads = report.consumers
    total = sum(c.messages for c in loads) or 1
    load_rows = [
        (
            c.name,
            c.fate,
            ",".join(map(str, sorted(c.segments))) or "-",
            c.entries,
            c.messages,
            f"{c.messages / total:.1%}",
            c.redelivered_entries,
        )
        for c in loads
    ]
    live = [c.messages for c in loads if c.fate == "active"]
    caption = None
    if live:
        mean = sum(live) / len(live)
        caption = f"consumers present at the end: max/mean messages {max(live) / mean:.2f}" if mean else None
    print_table(
        "per-consumer load",
        ("consumer", "fate", "segments", "entries", "messages", "share", "redelivered"),
        load_rows,
        out=out,
        caption=caption,
    )
    checks = report.checks
    check_rows = [
        (
            "per-key order violations",
            checks.order_violations,
            _verdict(checks.order_violations, checks.first_violation),
        ),
        ("lost messages", checks.lost, _verdict(checks.lost, checks.first_lost)),
        (
            "duplicated after ack",
            checks.duplicated_after_ack,
            _verdict(checks.duplicated_after_ack, checks.first_duplicate),
        ),
        (
            "entries misrouted (vs route_entries)",
            report.misrouted_entries,
            "ok" if report.misrouted_entries == 0 else "FAIL",
        ),
    ]
    print_table("checks (all must be 0)", ("check", "count", "result"), check_rows, out=out)
    if report.store_path != "(temporary, removed)":
        out.print(f"stream store kept in {report.store_path}")
    out.print("result: PASS" if report.ok else "result: FAIL")


def _verdict(count: int, first: int) -> str:
    return "ok" if count == 0 else f"FAIL (first: message {first})"
