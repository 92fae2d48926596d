"""Best-of-N wall-clock timing shared by the side-by-side comparison scripts."""

from __future__ import annotations

import os
import time
from typing import Callable, Sequence


def best_of(fn: Callable[[], object], repeat: int = 5) -> float:
    """Smallest wall time of ``repeat`` calls, in seconds."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def best_of_rounds(fns: Sequence[Callable[[], object]], repeat: int = 5) -> list[float]:
    """Smallest wall time of each function over ``repeat`` rounds that call every function
    once, in turn: when the machine's speed drifts (a VM's neighbours), each function sees the
    same slow and fast spells instead of one row taking all of a slow one."""
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            start = time.perf_counter()
            fn()
            best[i] = min(best[i], time.perf_counter() - start)
    return best


def ns(seconds: float, n: int) -> float:
    """Seconds for n items as nanoseconds per item."""
    return seconds / n * 1e9


def cpu_speeds(fn: Callable[[], object], items: int, repeat: int = 7) -> str:
    """ns per item of ``fn`` (a fixed, in-cache, one-thread workload) on each CPU this process
    may use, the calling thread pinned to each in turn: a VM's vCPU that the host holds back
    shows up here, so a slow row can be told from a slow machine. Empty where threads cannot be
    pinned."""
    if not hasattr(os, "sched_setaffinity"):
        return ""
    allowed = os.sched_getaffinity(0)
    speeds = []
    try:
        for cpu in sorted(allowed):
            os.sched_setaffinity(0, {cpu})
            fn()  # warm this CPU's caches first
            speeds.append(f"cpu{cpu} {ns(best_of(fn, repeat), items):.2f}")
    finally:
        os.sched_setaffinity(0, allowed)
    return ", ".join(speeds)
