"""Best-of-N wall-clock timing and the per-CPU calm check (the README's Speed section: side by side, same data)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np

T = TypeVar("T")

# The clocks a bench may time calls by: wall time, or the calling thread's CPU time (which leaves
# out the time the process waits for a core on a shared machine).
CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "thread": time.thread_time}


def best_of(fn: Callable[[], object], repeat: int = 5, clock: Callable[[], float] = time.perf_counter) -> float:
    """Smallest time of ``repeat`` calls of ``fn`` (wall time unless ``clock`` says otherwise).

    :func:`best_of_result` is the same and also hands back the last call's result.

    Parameters
    ----------
    fn : callable
        The work to time; its result is dropped.
    repeat : int
        How many calls; the fastest counts (the others saw more interference).
    clock : callable
        The clock read before and after each call: ``time.perf_counter`` (wall time) or
        ``time.thread_time`` (the calling thread's CPU time, which leaves out the time the process
        waits for a core on a shared machine).

    Returns
    -------
    float
        Seconds.
    """
    return best_of_result(fn, repeat, clock)[0]


def best_of_result(
    fn: Callable[[], T], repeat: int = 5, clock: Callable[[], float] = time.perf_counter
) -> tuple[float, T]:
    """:func:`best_of`, and the result of the last call (for the check against a baseline's).

    Parameters
    ----------
    fn, repeat, clock
        As in :func:`best_of` (``repeat`` >= 1).

    Returns
    -------
    tuple
        (seconds of the fastest call, the last call's result).
    """
    if repeat < 1:
        raise ValueError(f"repeat must be >= 1, got {repeat}")
    best = float("inf")
    for _ in range(repeat):
        start = clock()
        result = fn()
        best = min(best, clock() - start)
    return best, result


def run_for(
    fn: Callable[[int], object], seconds: float, start: int = 0, clock: Callable[[], float] = time.perf_counter
) -> tuple[int, float]:
    """Call ``fn(start)``, ``fn(start + 1)``, ... until ``seconds`` have passed (at least once): a
    rate where one call's time is too uneven for a best-of (an fsynced append, a contended CAS).

    Parameters
    ----------
    fn : callable
        Takes the call's number (to pick its input round-robin from a pool); its result is dropped.
    seconds : float
        How long to keep calling.
    start : int
        The first call's number (a later slice of the same row goes on from where the last stopped).
    clock : callable
        As in :func:`best_of`.

    Returns
    -------
    tuple
        (calls made, seconds they took).
    """
    calls = 0
    begin = clock()
    deadline = begin + seconds
    while True:
        fn(start + calls)
        calls += 1
        now = clock()
        if now >= deadline:
            return calls, now - begin


class Stopwatch:
    """Seconds spent inside a ``with`` block, for a step that runs once (a data set's generation, a
    cluster's start): ``with Stopwatch() as sw: ...`` then ``sw.seconds``."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self.clock = clock
        self.seconds = 0.0
        self._start = 0.0

    def __enter__(self) -> Stopwatch:
        self._start = self.clock()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = self.clock() - self._start


def best_of_rounds(
    fns: Sequence[Callable[[], object]],
    repeat: int = 5,
    clock: Callable[[], float] = time.perf_counter,
    warm: bool = False,
) -> list[float]:
    """Smallest time of each function over ``repeat`` rounds that call every one in turn (wall
    time unless ``clock`` says otherwise, as in :func:`best_of`).

    When the machine's speed drifts (a VM's neighbours) every function sees the same slow and
    fast spells, instead of one row taking all of a slow one.

    Parameters
    ----------
    fns : sequence of callables
        The rows to compare.
    repeat : int
        Rounds.
    clock : callable
        The clock, as in :func:`best_of`.
    warm : bool
        Call each function once, untimed, right before its timed call. Every function then starts
        from the memory its own call leaves behind (its output's pages already mapped by the
        allocator) instead of from whatever the previous function freed or returned to the
        system, which otherwise charges one function, and not its neighbours, for mapping fresh
        pages.

    Returns
    -------
    list of float
        Seconds per function, in the order given.
    """
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            if warm:
                fn()
            start = clock()
            fn()
            best[i] = min(best[i], clock() - start)
    return best


def ns(seconds: float, n: int) -> float:
    """Seconds for ``n`` items as nanoseconds per item.

    Parameters
    ----------
    seconds : float
        Total time.
    n : int
        Items (keys, messages or entries).

    Returns
    -------
    float
        Nanoseconds per item.
    """
    return seconds / n * 1e9


def cpu_speeds(fn: Callable[[], object], items: int, repeat: int = 7) -> dict[int, float]:
    """ns per item of ``fn`` on each CPU this process may use, the calling thread pinned to each.

    ``fn`` must be a fixed, in-cache, one-thread job: a vCPU that the host holds back then shows
    up as a slower figure, so a slow row can be told from a slow build.

    Parameters
    ----------
    fn : callable
        The fixed job.
    items : int
        Items ``fn`` handles per call.
    repeat : int
        Best of this many calls per CPU.

    Returns
    -------
    dict
        CPU number to ns per item; empty where threads cannot be pinned (not Linux).
    """
    if not hasattr(os, "sched_setaffinity"):
        return {}
    allowed = os.sched_getaffinity(0)
    speeds: dict[int, float] = {}
    try:
        for cpu in sorted(allowed):
            os.sched_setaffinity(0, {cpu})
            fn()  # warm this CPU's caches first
            speeds[cpu] = ns(best_of(fn, repeat), items)
    finally:
        os.sched_setaffinity(0, allowed)
    return speeds


def cpu_check() -> dict[int, float]:
    """The calm check: murmur3_32 over 4 Ki in-cache UUIDs on one thread, per CPU, in ns/key.

    Run before and after a comparison; figures that differ between CPUs or between the two checks
    mean the host slowed a vCPU during the run.

    Returns
    -------
    dict
        CPU number to ns per key (empty where threads cannot be pinned).
    """
    import bucketcore as bc

    from .workloads import uuid_keys

    probe = np.array(uuid_keys(4096, seed=9), dtype="S36")
    return cpu_speeds(lambda: [bc.murmur3_32(probe, threads=1) for _ in range(50)], 4096 * 50)


def format_cpu_check(speeds: dict[int, float]) -> str:
    """One line for a calm check's figures (empty when there are none).

    Parameters
    ----------
    speeds : dict
        The result of :func:`cpu_check`.

    Returns
    -------
    str
        ``"per-CPU check (...): cpu0 5.31, cpu1 5.28"``.
    """
    if not speeds:
        return ""
    body = ", ".join(f"cpu{cpu} {v:.2f}" for cpu, v in speeds.items())
    return f"per-CPU check (murmur3_32, 4 Ki in-cache UUIDs, ns/key): {body}"
