"""The benchmark and workload harness shared by ``bucketcore bench``, ``bucketcore tune``,
``bucketcore simulate`` and the ``benches/compare_*.py`` scripts (one copy of the workloads,
timers and baselines; see docs/cli.md).

``import bucketcore`` never imports this package; it loads only when a command or a bench
script asks for it. The baselines need ``mmh3`` (the ``bench`` extra) and import it on first use.
"""

from __future__ import annotations

from .timing import CLOCKS, best_of, best_of_rounds, cpu_check, cpu_speeds, ns
from .workloads import (
    WORKLOADS,
    KeyWorkload,
    key_workload,
    short_keys,
    tiled_layout,
    uuid_keys,
    zipf_keys,
)

__all__ = [
    "CLOCKS",
    "WORKLOADS",
    "KeyWorkload",
    "best_of",
    "best_of_rounds",
    "cpu_check",
    "cpu_speeds",
    "key_workload",
    "ns",
    "short_keys",
    "tiled_layout",
    "uuid_keys",
    "zipf_keys",
]
