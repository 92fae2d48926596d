"""Per-call cost of the streaming objects an SDK or broker holds, side by side with Python baselines.

    python benches/compare.py sdk [--calls 20000] [--repeat 5] [--clock wall|thread] [ROW ...]
    python benches/compare.py sdk --callgrind [--calls 2000] [ROW ...]
    python benches/compare.py sdk --before OTHER_SRC [--callgrind] [ROW ...]
    python benches/compare.py sdk --fixed [--callgrind] [SxN ...]
    python benches/compare.py sdk --pairs [--calls 20000] [--repeat 25] [--clock wall|thread]

(``python benches/compare_sdk.py ...`` is the same group.)

Wall mode prints, per row, ns per call of bucketcore and of its baseline measured in the same
process (best of ``--repeat`` each, one after the other) and their ratio. ``--pairs`` measures the
rows of each of the issue's ratio targets (``add10`` over ``add``; the 256 x 1024 rows over their
4 x 16 rows) in one process, alternating round by round, so both rows of a pair see the same
spells of a shared machine, which runs in phases of about 1.6x that last seconds. Callgrind
mode runs each row once under ``valgrind --tool=callgrind``, counting only inside
``operator.call`` (``--toggle-collect``), through which the child makes ``--calls`` calls after
a few uncounted warm-up calls, and prints the count divided by ``--calls``: the instructions of
one call, deterministic on a loaded machine (interpreter start and set-up are not counted).
``--count ROW N`` is the child those runs start. ``--clock thread`` times by the calling thread's
CPU time instead of the wall clock (on a shared machine it leaves out the time the process waits
for a core, though not what other processes do to the caches).

``--before OTHER_SRC`` compares two builds of bucketcore in one run: every row is measured in
child processes, this tree's and one with ``OTHER_SRC`` (e.g. a built checkout of main's
``src``) first on ``PYTHONPATH``, alternating round by round (wall: best of the rounds); the
table shows both and the ratio before / after. ``--time ROW N REPEAT`` is the timing child.

Rows (one call = one message or one entry):

- ``consumer``: ``StreamConsumerState.delivered`` + ``.acked`` of one message (baseline: two
  calls of a Python method doing a set add and a set discard, the least such bookkeeping costs);
- ``dispatch256`` / ``dispatch65535``: ``Dispatcher`` offer one stamped entry, ``poll()``, ack
  what was delivered, with N=256 and 16 consumers / N=65535 and 1000 consumers (baseline: the
  harness's per-entry ``PyDispatcher`` driven the same way);
- ``membership65535``: a join and a leave at N=65535 with 1000 consumers (per operation);
- ``add`` / ``add10``: ``EntryBucketBatcher.add(key, payload)`` over UUID keys on 4 segments x
  N=16, ``max_messages`` 1000 / 10 (baseline: the harness's per-message Python batcher
  ``reference_batches``, per message; the ``mmh3`` row is a bare ``mmh3.hash`` call);
- ``many100`` / ``many100big``: ``add_many`` of 100 messages per call at 4 x 16 and 256 x 1024
  buckets (per call);
- ``entries100`` / ``entries100big`` / ``entries10``: ``bucket_entries`` of 100 keys per call at
  4 x 16 and 256 x 1024 buckets, and of 10 keys at 4 x 16 (per call);
- ``many100eq`` / ``many100bigeq`` / ``entries100eq`` / ``entries100bigeq``: the same calls given
  the same work at both layouts: the keys are drawn from a pool of 64 keys, one in each of 16
  buckets of 4 segments (``same_work_keys``), in one sequence, so both layouts hold the same
  messages pending and emit the same entries per call, and only the layout's size differs (the
  rows above give the big layout more: most keys an entry of their own, and ``add_many`` a
  window of 1000 messages in each of 256 segments);
- ``manyK@SxN`` / ``entriesK@SxN``: ``add_many`` / ``bucket_entries`` of K messages per call at
  S segments x N buckets (e.g. ``many100@16x256``, ``entries100@64x1024``): the per-call cost
  should not depend on the layout's size. ``entries65536@SxN`` / ``many65536@SxN`` give the
  per-message cost (below).

``--fixed [SxN ...]`` (wall, or instructions with ``--callgrind``; layouts default to 4x16 and
256x1024) splits the short calls' cost into per-message and fixed parts, per layout:

- per-message cost: the cost of the same call over a large column (65,536 messages per call:
  ``entries65536@SxN``, ``many65536@SxN``) divided by its messages;
- fixed (100): the cost of a call of 100 messages (``entries100@SxN``, ``many100@SxN``) minus
  100 x that per-message cost. A short call also emits more, shorter entries than a large one,
  so this counts the entries' cost in too; hence also
- slope 10..100 and intercept: the line through the costs of calls of 10 and 100 messages, per
  message within short calls and what a call costs on top (the fixed cost proper);
- big/small: the per-call cost of 100 messages at each layout divided by that at the first.

Large rows run ``--calls`` x 100 / K calls (at least 3), so every row takes about as long.
"""

from __future__ import annotations

import argparse
import operator
import os
import random
import re
import subprocess
import sys
from collections.abc import Callable

import bucketcore as bc
from bucketcore.harness import CLOCKS, best_of, best_of_rounds
from bucketcore.harness.baselines import PyDispatcher, reference_batches
from bucketcore.harness.callgrind import CHILD_ENV, collected
from bucketcore.harness.workloads import spread_stamps, tiled_layout, uuid_keys

ROWS = (
    "consumer",
    "dispatch256",
    "dispatch65535",
    "membership65535",
    "add",
    "add10",
    "mmh3",
    "many100",
    "many100big",
    "entries100",
    "entries100big",
    "entries10",
    "many100eq",
    "many100bigeq",
    "entries100eq",
    "entries100bigeq",
)
TOPIC = "segment://t/ns/topic/0000-ffff-7"


def _boundaries(n: int) -> bc.Buckets:
    # N=65535: bucket 0 is [0, 1] so it can hold its canonical hash 1, every other bucket one hash
    return bc.Buckets(range(2, 65536)) if n == 65535 else bc.Buckets.equal_width(n)


# Each maker returns (operation, baseline or None): operation(i0, n) performs calls i0..i0+n-1.
Op = Callable[[int, int], object]


def consumer_row() -> tuple[Op, Op | None]:
    state = bc.StreamConsumerState()
    ranges = ((0, 0x7FFF), (0x8000, 0xFFFF))
    state.apply(bc.Assignment(1, (bc.AssignedSegment(7, 0, 0xFFFF, TOPIC, ranges),)))
    delivered, acked = state.delivered, state.acked

    def run(i0: int, n: int) -> None:
        for i in range(i0, i0 + n):
            delivered(7, i)
            acked(7, i)

    class Bookkeeping:
        def __init__(self) -> None:
            self.live: set[int] = set()

        def delivered(self, segment_id: int, message_id: int) -> bool:
            live = self.live
            if message_id in live:
                return False
            live.add(message_id)
            return True

        def acked(self, segment_id: int, message_id: int) -> list[tuple[int, tuple[int, ...]]]:
            self.live.remove(message_id)
            return [(segment_id, (message_id,))]

    book = Bookkeeping()
    b_delivered, b_acked = book.delivered, book.acked

    def base(i0: int, n: int) -> None:
        for i in range(i0, i0 + n):
            b_delivered(7, i)
            b_acked(7, i)

    return run, base


def dispatch_row(n_buckets: int, n_consumers: int) -> tuple[Op, Op | None]:
    buckets = _boundaries(n_buckets)
    d = bc.Dispatcher(buckets)
    py = PyDispatcher(list(buckets.splits))
    for c in range(n_consumers):
        d.add_consumer(f"consumer-{c:04d}", c)
        py.members.append((f"consumer-{c:04d}", c))
    py.members.sort()
    py._spread()
    stamps = spread_stamps(4096)
    offer, poll, ack = d.offer, d.poll, d.ack

    def run(i0: int, n: int) -> None:
        for i in range(i0, i0 + n):
            offer(i, stamps[i & 4095])
            for (name, cid), batch in poll().items():
                ack(name, cid, batch.entry_ids)

    def base(i0: int, n: int) -> None:
        for i in range(i0, i0 + n):
            py.offer([i], [stamps[i & 4095]])
            for consumer, ids in py.poll().items():
                py.ack(consumer, ids)

    return run, base


def membership_row() -> tuple[Op, Op | None]:
    d = bc.Dispatcher(_boundaries(65535))
    for c in range(1000):
        d.add_consumer(f"consumer-{c:04d}", c)
    stamps = spread_stamps(4096)
    for i in range(20000):  # entries in flight, so moved buckets pause
        d.offer(i, stamps[i & 4095])

    def run(i0: int, n: int) -> None:
        for i in range(i0, i0 + n):
            if i % 2 == 0:
                d.add_consumer("joiner", 10_000 + i)
            else:
                d.remove_consumer("joiner", 10_000 + i - 1)

    return run, None


def batcher_row(max_messages: int) -> tuple[Op, Op | None]:
    keys = uuid_keys(65536)
    layout = tiled_layout(4, 16)
    payload = b"x" * 100
    batcher = bc.EntryBucketBatcher(layout, max_messages=max_messages)
    add = batcher.add

    def run(i0: int, n: int) -> None:
        for i in range(i0, i0 + n):
            add(keys[i & 65535], payload)

    def base(i0: int, n: int) -> None:
        reference_batches([keys[i & 65535] for i in range(i0, i0 + n)], layout, max_messages)

    return run, base


def mmh3_row() -> tuple[Op, Op | None]:
    import mmh3

    keys = uuid_keys(65536)
    h = mmh3.hash

    def run(i0: int, n: int) -> None:
        for i in range(i0, i0 + n):
            h(keys[i & 65535], 0, False)

    return run, None


def same_work_keys(segments: int, buckets: int, count: int = 100, calls: int = 64) -> list[list[str]]:
    """``calls`` lists of ``count`` keys for ``tiled_layout(segments, buckets)`` whose messages go
    to the same number of segments and buckets at every layout: a pool of 64 UUID keys, one in
    each of the first 16 buckets (holding any of the UUID keys) of the first 4 segments, drawn in
    one fixed sequence of pool positions. Pool position p is the same (segment, bucket) rank at
    every layout, so the grouping (pending messages, entries, their sizes) is the same too."""
    keys = uuid_keys(65536)
    table = bc.bucket_entries(keys, tiled_layout(segments, buckets), policy="per_bucket", max_messages=65536)
    first: dict[int, list[tuple[int, int]]] = {}
    for seg, bucket, start in zip(table.segment_id.tolist(), table.bucket.tolist(), table.start.tolist()):
        first.setdefault(seg, []).append((bucket, int(table.order[start])))
    pool = []
    for seg in sorted(first)[:4]:
        pool += [keys[i] for _, i in sorted(first[seg])[:16]]
    if len(pool) != 64:
        raise SystemExit(f"{segments}x{buckets}: the UUID keys do not cover 16 buckets of 4 segments")
    draw = random.Random(7).randrange  # a fixed, layout-independent sequence of pool positions
    return [[pool[draw(64)] for _ in range(count)] for _ in range(calls)]


def call_keys(segments: int, buckets: int, count: int, same_work: bool) -> list[list[str]]:
    """The key lists of a row's calls of ``count`` keys: consecutive runs of UUID keys, or the same
    work at every layout (same_work_keys)."""
    if same_work:
        return same_work_keys(segments, buckets, count)
    keys = uuid_keys(max(65536, 2 * count))
    return [keys[j : j + count] for j in range(0, len(keys) - count + 1, count)]


def many_row(segments: int, buckets: int, count: int = 100, same_work: bool = False) -> tuple[Op, Op | None]:
    payloads = [b"x" * 100] * count
    batcher = bc.EntryBucketBatcher(tiled_layout(segments, buckets), max_messages=1000)
    add_many = batcher.add_many
    chunks = call_keys(segments, buckets, count, same_work)

    def run(i0: int, n: int) -> None:
        for i in range(i0, i0 + n):
            add_many(chunks[i % len(chunks)], payloads)

    return run, None


def entries_row(count: int, segments: int, buckets: int, same_work: bool = False) -> tuple[Op, Op | None]:
    layout = tiled_layout(segments, buckets)
    chunks = call_keys(segments, buckets, count, same_work)
    entries = bc.bucket_entries

    def run(i0: int, n: int) -> None:
        for i in range(i0, i0 + n):
            entries(chunks[i % len(chunks)], layout, max_messages=1000)

    return run, None


def _layout_of(row: str) -> tuple[int, int]:
    segments, buckets = row.split("@", 1)[1].split("x")
    return int(segments), int(buckets)


_SIZED = re.compile(r"(many|entries)(\d+)@(\d+)x(\d+)$")


def messages_per_call(row: str) -> int:
    """Messages (keys) one call of a row takes: K of ``manyK@..`` / ``entriesK@..``, else the
    named rows' own (1 for the per-message rows)."""
    sized = _SIZED.match(row)
    if sized:
        return int(sized.group(2))
    if row.startswith(("many100", "entries100")):
        return 100
    return {"entries10": 10}.get(row, 1)


def calls_for(row: str, calls: int) -> int:
    """Calls of a row to measure: ``calls`` for calls of up to 100 messages, fewer for larger."""
    return max(3, calls * 100 // max(100, messages_per_call(row)))


def make(row: str) -> tuple[Op, Op | None]:
    """The operation and baseline of a row."""
    sized = _SIZED.match(row)
    if sized:
        kind, count, segments, buckets = sized.group(1), *(int(g) for g in sized.groups()[1:])
        if kind == "many":
            return many_row(segments, buckets, count)
        return entries_row(count, segments, buckets)
    if row == "consumer":
        return consumer_row()
    if row == "dispatch256":
        return dispatch_row(256, 16)
    if row == "dispatch65535":
        return dispatch_row(65535, 1000)
    if row == "membership65535":
        return membership_row()
    if row in ("add", "add10"):
        return batcher_row(1000 if row == "add" else 10)
    if row == "mmh3":
        return mmh3_row()
    if row == "many100":
        return many_row(4, 16)
    if row == "many100big":
        return many_row(256, 1024)
    if row == "entries100":
        return entries_row(100, 4, 16)
    if row == "entries100big":
        return entries_row(100, 256, 1024)
    if row == "entries10":
        return entries_row(10, 4, 16)
    if row in ("many100eq", "many100bigeq"):
        return many_row(*((4, 16) if row == "many100eq" else (256, 1024)), same_work=True)
    if row in ("entries100eq", "entries100bigeq"):
        return entries_row(100, *((4, 16) if row == "entries100eq" else (256, 1024)), same_work=True)
    raise SystemExit(f"unknown row {row!r}; rows: {', '.join(ROWS)}")


def _env(src: str | None) -> dict[str, str]:
    """The children's environment; ``src`` first on PYTHONPATH (another build of bucketcore)."""
    env = dict(os.environ, **CHILD_ENV)
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join([src] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return env


def callgrind(row: str, calls: int, src: str | None = None) -> float:
    """Instructions of one call of ``row``: a run counting only the calls, per call."""
    calls = calls_for(row, calls)
    argv = [__file__, "--count", row, str(calls)]
    return collected(argv, toggle="_operator_call", env=_env(src)) / calls


def time_row(row: str, calls: int, repeat: int, clock: str = "wall") -> tuple[float, float | None]:
    """ns per call of a row and of its baseline (None without one), best of ``repeat`` by the
    wall clock or (``clock="thread"``) the thread's CPU time."""
    run, base = make(row)
    read = CLOCKS[clock]
    n = calls_for(row, calls) if row != "membership65535" else 20
    run(0, min(n, 1000))  # warm
    if base is not None:
        base(0, min(n, 1000))
    counter = [1000]
    t = best_of(_timed(run, counter, n), repeat, read) / n * 1e9
    if base is None:
        return t, None
    return t, best_of(_timed(base, counter, n), repeat, read) / n * 1e9


# The ratio targets: (row, row it is compared with, the largest ratio allowed)
PAIRS = (
    ("add10", "add", 1.5),
    ("entries100big", "entries100", 1.2),
    ("entries100bigeq", "entries100eq", 1.2),
    ("many100bigeq", "many100eq", 1.2),
)


def time_pairs(calls: int, repeat: int, clock: str = "wall") -> None:
    """Each pair of PAIRS in this process, its two rows alternating round by round (best of
    ``repeat`` rounds each), and their ratio against the target."""
    read = CLOCKS[clock]
    print(f"{'rows':<32}{'ns':>9}{'ns':>9}{'ratio':>8}{'target':>8}{'met':>5}")
    for row, other, most in PAIRS:
        (run_a, _), (run_b, _) = make(row), make(other)
        na, nb = calls_for(row, calls), calls_for(other, calls)
        run_a(0, min(na, 1000))  # warm
        run_b(0, min(nb, 1000))
        ta, tb = best_of_rounds([_timed(run_a, [1000], na), _timed(run_b, [1000], nb)], repeat, read)
        a, b = ta / na * 1e9, tb / nb * 1e9
        met = "yes" if a / b <= most else "NO"
        print(f"{row + ' / ' + other:<32}{a:>9.0f}{b:>9.0f}{a / b:>7.2f}x{most:>7.2f}x{met:>5}", flush=True)


def timed_child(row: str, calls: int, repeat: int, src: str | None, clock: str = "wall") -> tuple[float, float | None]:
    """time_row in a child process (with ``src`` first on PYTHONPATH)."""
    done = subprocess.run(
        [sys.executable, __file__, "--time", row, str(calls), str(repeat), "--clock", clock],
        env=_env(src),
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise SystemExit(f"{row}: the timed run failed:\n{done.stderr[-2000:]}")
    t, b = done.stdout.split()
    return float(t), None if b == "-" else float(b)


def compare_builds(
    rows: list[str], before: str, calls: int | None, repeat: int, use_callgrind: bool, clock: str = "wall"
) -> None:
    """Each row in this tree and in ``before``, side by side (children alternating round by round)."""
    if use_callgrind:
        n = calls or 2000
        print(f"{'row':<20}{'before instr':>14}{'after instr':>13}{'before/after':>14}")
        for row in rows:
            b, a = callgrind(row, n, before), callgrind(row, n)
            print(f"{row:<20}{b:>14.0f}{a:>13.0f}{b / a:>13.2f}x", flush=True)
        return
    n = calls or 20000
    print(f"{'row':<20}{'before ns':>11}{'after ns':>10}{'before/after':>14}{'baseline ns':>13}{'after vs base':>15}")
    for row in rows:
        best_b, best_a, best_base = float("inf"), float("inf"), float("inf")
        for _ in range(3):
            tb, _base_b = timed_child(row, n, repeat, before, clock)
            ta, base_a = timed_child(row, n, repeat, None, clock)
            best_b, best_a = min(best_b, tb), min(best_a, ta)
            if base_a is not None:
                best_base = min(best_base, base_a)
        if best_base < float("inf"):
            base_txt = f"{best_base:>13.0f}{best_base / best_a:>14.2f}x"
        else:
            base_txt = f"{'-':>13}{'-':>15}"
        print(f"{row:<20}{best_b:>11.0f}{best_a:>10.0f}{best_b / best_a:>13.2f}x{base_txt}", flush=True)


def fixed_costs(layouts: list[str], calls: int | None, repeat: int, use_callgrind: bool, clock: str = "wall") -> None:
    """Per-message and fixed cost of the short calls at each layout, and big/small ratios (see
    the module doc): every row in a child process of its own, wall (best of 3 children x
    ``repeat``) or instructions."""

    def measure(row: str) -> float:
        if use_callgrind:
            return callgrind(row, calls or 2000)
        return min(timed_child(row, calls or 20000, repeat, None, clock)[0] for _ in range(3))

    unit = "instr" if use_callgrind else "ns"
    print(
        f"{'call':<10}{'layout':>10}{'per call 10':>13}{'per call 100':>14}{'per msg (65536)':>17}"
        f"{'fixed (100)':>13}{'slope 10..100':>15}{'intercept':>11}{'big/small (100)':>17}   [{unit}]"
    )
    for kind in ("entries", "many"):
        first = None
        for layout in layouts:
            per_message = measure(f"{kind}65536@{layout}") / 65536
            ten, hundred = measure(f"{kind}10@{layout}"), measure(f"{kind}100@{layout}")
            first = hundred if first is None else first
            slope = (hundred - ten) / 90  # per message within short calls
            print(
                f"{kind:<10}{layout:>10}{ten:>13.0f}{hundred:>14.0f}{per_message:>17.1f}"
                f"{hundred - 100 * per_message:>13.0f}{slope:>15.1f}{ten - 10 * slope:>11.0f}"
                f"{hundred / first:>16.2f}x",
                flush=True,
            )


def _timed(fn: Op, counter: list[int], n: int) -> Callable[[], None]:
    """``n`` calls of ``fn`` from ``counter[0]`` on (ids keep increasing across rounds)."""

    def go() -> None:
        fn(counter[0], n)
        counter[0] += n

    return go


def main(argv: list[str] | None = None) -> None:
    """The sdk group (``benches/compare.py sdk``); ``argv`` as the command line's."""
    parser = argparse.ArgumentParser(
        prog="compare.py sdk", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("rows", nargs="*", default=[])
    parser.add_argument("--calls", type=int, default=None)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--callgrind", action="store_true")
    parser.add_argument("--count", nargs=2, metavar=("ROW", "N"))
    parser.add_argument("--time", nargs=3, metavar=("ROW", "N", "REPEAT"))
    parser.add_argument("--before", metavar="OTHER_SRC", help="compare with the build whose src is OTHER_SRC")
    parser.add_argument("--fixed", action="store_true", help="per-message and fixed cost of the short calls")
    parser.add_argument("--pairs", action="store_true", help="the issue's ratio targets, each pair alternating")
    parser.add_argument("--clock", choices=("wall", "thread"), default="wall", help="what a call's time is")
    args = parser.parse_args(argv)
    if args.pairs:
        time_pairs(args.calls or 20000, args.repeat, args.clock)
        return
    if args.fixed:
        fixed_costs(args.rows or ["4x16", "256x1024"], args.calls, args.repeat, args.callgrind, args.clock)
        return
    if args.count:
        run, _ = make(args.count[0])
        n = int(args.count[1])
        run(0, max(3, min(n, 200)))  # warm-up, not counted: first-use caches, kept states
        operator.call(run, 1000, n)  # the only call callgrind counts (--toggle-collect)
        return
    if args.time:
        t, b = time_row(args.time[0], int(args.time[1]), int(args.time[2]), args.clock)
        print(t, "-" if b is None else b)
        return
    args.rows = args.rows or list(ROWS)
    if args.before:
        compare_builds(args.rows, args.before, args.calls, args.repeat, args.callgrind, args.clock)
        return
    if args.callgrind:
        calls = args.calls or 2000
        print(f"{'row':<18}{'instructions/call':>18}")
        for row in args.rows:
            print(f"{row:<18}{callgrind(row, calls):>18.0f}", flush=True)
        return
    calls = args.calls or 20000
    print(f"{'row':<18}{'bucketcore ns':>14}{'baseline ns':>13}{'ratio':>8}")
    for row in args.rows:
        t, b = time_row(row, calls, args.repeat, args.clock)
        if b is None:
            print(f"{row:<18}{t:>14.0f}{'-':>13}{'-':>8}", flush=True)
            continue
        print(f"{row:<18}{t:>14.0f}{b:>13.0f}{b / t:>7.1f}x", flush=True)


if __name__ == "__main__":
    main()
