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

Rows: :mod:`bucketcore.harness.percall` defines them (``--help`` lists them after this text).

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
import subprocess
import sys

from bucketcore.harness import CLOCKS, best_of, best_of_rounds, percall
from bucketcore.harness.callgrind import CHILD_ENV, collected
from bucketcore.harness.percall import PAIRS, ROWS, calls_for, make, timed_calls


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
    t = best_of(timed_calls(run, counter, n), repeat, read) / n * 1e9
    if base is None:
        return t, None
    return t, best_of(timed_calls(base, counter, n), repeat, read) / n * 1e9


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
        ta, tb = best_of_rounds([timed_calls(run_a, [1000], na), timed_calls(run_b, [1000], nb)], repeat, read)
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


def main(argv: list[str] | None = None) -> None:
    """The sdk group (``benches/compare.py sdk``); ``argv`` as the command line's."""
    parser = argparse.ArgumentParser(
        prog="compare.py sdk",
        description=f"{__doc__}\n{percall.__doc__}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
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
