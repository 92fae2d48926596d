"""bucketcore.workers: the pool the two-thread pipelines and the block-parallel hashing hand work to.

Interrupts at every bytecode of the hand-off are in
tests/scaleout/test_threads_under_stress_lose_nothing.py; these check the pool's own promises:
results and exceptions come back unchanged, its thread count stays fixed, and a forked child gets
a working pool of its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading

import pytest

from bucketcore import workers
from bucketcore.hashing import shared_pool


class Refused(ValueError):
    pass


def test_a_task_returns_what_its_call_returned():
    pool = workers.WorkerPool(2)
    assert pool.submit(lambda: ("done", 42)).result() == ("done", 42)


def test_a_task_raises_the_exception_object_its_call_raised():
    pool = workers.WorkerPool(2)
    error = Refused("key 3 is not a str")

    def fail() -> None:
        raise error

    task = pool.submit(fail)
    with pytest.raises(Refused, match="key 3 is not a str") as caught:
        task.result()
    assert caught.value is error
    with pytest.raises(Refused):  # asked again: the same outcome, at once
        task.result()
    assert task.done()


def test_a_call_raising_base_exception_leaves_the_worker_serving():
    pool = workers.WorkerPool(1)

    def leave() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        pool.submit(leave).result()
    assert pool.submit(lambda: 7).result() == 7
    assert pool.threads() == 1


def test_pending_counts_the_calls_no_thread_has_taken_yet():
    pool = workers.WorkerPool(1)
    started, release = threading.Event(), threading.Event()
    first = pool.submit(lambda: (started.set(), release.wait(30))[1])
    try:
        assert started.wait(30)
        assert pool.pending() == 0  # the one thread took the first call
        queued = [pool.submit(lambda i=i: i) for i in range(3)]
        assert pool.pending() == 3  # behind the busy thread
    finally:
        release.set()  # the worker never stays blocked, whatever failed
    assert first.result() is True
    assert [task.result() for task in queued] == [0, 1, 2]
    assert pool.pending() == 0


def test_calls_from_many_threads_all_run_once_on_the_pools_threads_only():
    pool = workers.WorkerPool(3)
    ran: list[int] = []
    idents: set[int] = set()

    def job(i: int) -> int:
        idents.add(threading.get_ident())
        ran.append(i)
        return i * i

    results: dict[int, int] = {}

    def submitter(base: int) -> None:
        tasks = [(base + j, pool.submit(lambda i=base + j: job(i))) for j in range(200)]
        for i, task in tasks:
            results[i] = task.result()

    threads = [threading.Thread(target=submitter, args=(b * 1000,)) for b in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    assert sorted(ran) == sorted(results) and len(ran) == 1200
    assert all(results[i] == i * i for i in results)
    assert len(idents) <= 3 and pool.threads() == 3


def test_a_waiting_task_keeps_nothing_alive_once_its_call_ran():
    pool = workers.WorkerPool(1)

    class Big:
        pass

    alive = Big()
    task = pool.submit(alive.__repr__)
    task.result()
    assert task._call is None


def test_a_pool_needs_a_thread():
    with pytest.raises(ValueError, match="at least 1 thread, not 0"):
        workers.WorkerPool(0)


def test_the_shared_pool_is_bucketcores_own():
    assert shared_pool() is workers.shared_pool()
    assert shared_pool().size >= 2


@pytest.mark.skipif(sys.platform == "win32", reason="os.fork is POSIX only")
@pytest.mark.skipif(
    "TSAN_OPTIONS" in os.environ, reason="ThreadSanitizer cannot run threads started after a multi-threaded fork"
)
def test_a_forked_child_gets_a_working_pool_of_its_own():
    script = textwrap.dedent(
        """
        import os, sys
        import numpy as np
        import bucketcore as bc
        from bucketcore import workers

        keys = [f"key-{i}" for i in range(50_000)]
        want = bc.murmur3_32(keys, threads=1)
        assert np.array_equal(bc.murmur3_32(keys, threads=2), want)  # the parent's pool started
        parent_pool = workers.shared_pool()
        pid = os.fork()
        if pid == 0:
            ok = workers.shared_pool() is not parent_pool
            ok = ok and np.array_equal(bc.murmur3_32(keys, threads=2), want)
            ok = ok and workers.shared_pool().threads() >= 1
            os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0", done.stderr
