"""Best-of-N wall-clock timing shared by the side-by-side comparison scripts."""

from __future__ import annotations

import time
from typing import Callable


def best_of(fn: Callable[[], object], repeat: int = 5) -> float:
    """Smallest wall time of ``repeat`` calls, in seconds."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def ns(seconds: float, n: int) -> float:
    """Seconds for n items as nanoseconds per item."""
    return seconds / n * 1e9
