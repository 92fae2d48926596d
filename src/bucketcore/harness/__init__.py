"""The benchmark and workload harness shared by ``bucketcore bench``, ``bucketcore tune``,
``bucketcore simulate``, the bench runner ``benches/compare.py`` and the pytest-benchmark suites
``benches/bench_*.py`` (one copy of the workloads, timers and baselines; see docs/cli.md):

* :mod:`.workloads`: the inputs (keys, layouts, hashes, stamped entries, batches, store entries);
* :mod:`.timing`: the timers (best of N, rounds, rates over a time) and the per-CPU calm check;
* :mod:`.callgrind`: instruction counts of a child under valgrind;
* :mod:`.baselines`: the per-message / per-entry Python baselines, which double as cross-checks;
  :mod:`.pulsar_protobuf`, the wire baseline (protobuf); :mod:`.percall`, the per-call rows;
* :mod:`.postgres`: a throw-away PostgreSQL server (the head-store benchmark's and tests');
* :mod:`.simulator` and :mod:`.checks`: ``bucketcore simulate``.

``import bucketcore`` never imports this package; it loads only when a command or a bench
script asks for it. The baselines need ``mmh3`` (the ``bench`` extra) and import it on first use.
"""

from __future__ import annotations

from .timing import CLOCKS, Stopwatch, best_of, best_of_result, best_of_rounds, cpu_check, cpu_speeds, ns, run_for
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
    "Stopwatch",
    "best_of",
    "best_of_result",
    "best_of_rounds",
    "cpu_check",
    "cpu_speeds",
    "key_workload",
    "ns",
    "run_for",
    "short_keys",
    "tiled_layout",
    "uuid_keys",
    "zipf_keys",
]
