"""bucketcore's own worker threads: the second thread of the two-thread pipelines and the extra
threads of the block-parallel hashing stages.

A call handed to :meth:`WorkerPool.submit` runs on one of a few daemon threads that wait on one
queue. The pool is written to stay consistent whatever bytecode an asynchronous exception (a
``KeyboardInterrupt`` from a signal handler, ``_thread.interrupt_main``, a timer) interrupts in the
submitting or waiting thread:

- no lock is ever held across Python code: every step that changes shared state is one call
  into C (``SimpleQueue.put`` / ``get``, ``dict.setdefault``, ``_thread.start_new_thread``, a
  lock's ``acquire`` / ``release``), which either happened or did not when the exception comes;
- a thread is started by one C call and claims its place in the pool itself, on its own thread,
  which asynchronous exceptions do not reach (signal handlers run only on the main thread, and
  the pool's threads are never the main thread); a start the submitter did not get to record is
  made again at a later submit, and the thread that loses the claim ends at once;
- a task's outcome is published by one attribute store before its completion lock is released,
  so a waiter interrupted between acquiring and releasing that lock leaves nothing to wait for.

So a submit interrupted before its task was queued queued nothing, one interrupted after runs the
task with nobody waiting (the pipelines' ``abandon`` releases such a worker), and an interrupted
wait leaves the task running to its end on its own. After ``fork`` the child starts a new pool on
first use (the parent's threads do not exist in the child).
"""

from __future__ import annotations

import _thread
import os
import time
from collections.abc import Callable
from queue import SimpleQueue
from typing import Generic, TypeVar

__all__ = ["Task", "WorkerPool", "shared_pool"]

T = TypeVar("T")

# A thread started by a submit claims its slot within this many seconds on any sane machine; a
# slot still unclaimed after that is started again (the first thread to claim it keeps it).
LAUNCH_GRACE = 1.0
# How long a waiter sleeps on a task's completion lock before it looks at the outcome again
# (only a waiter whose lock another interrupted waiter left held ever sleeps this long).
WAIT_SLICE = 0.5


class Task(Generic[T]):
    """One call handed to a worker thread; :meth:`result` waits for it.

    Parameters
    ----------
    call : callable
        Run once, without arguments, on a worker thread.
    """

    __slots__ = ("_call", "_done", "_outcome")

    def __init__(self, call: Callable[[], T]) -> None:
        self._call: Callable[[], T] | None = call
        # (True, value) or (False, exception): stored once, by the worker, before _done is released
        self._outcome: tuple[bool, object] | None = None
        self._done = _thread.allocate_lock()
        self._done.acquire()

    def done(self) -> bool:
        """Whether the call has returned or raised.

        Returns
        -------
        bool
        """
        return self._outcome is not None

    def result(self) -> T:
        """Wait until the call is done; its return value, or its exception raised again.

        Returns
        -------
        object
            What the call returned.

        Raises
        ------
        BaseException
            What the call raised (the same object, so with the same message), or an exception
            delivered to this thread while it waited (the call then runs on to its end).
        """
        while self._outcome is None:
            if self._done.acquire(True, WAIT_SLICE):
                self._done.release()  # the next waiter, if any, goes on at once
        ok, value = self._outcome
        if ok:
            return value  # type: ignore[return-value]
        raise value  # type: ignore[misc]

    def _run(self) -> None:
        """Run the call on this (worker) thread and publish its outcome."""
        call, self._call = self._call, None  # the task keeps nothing it ran alive
        try:
            outcome: tuple[bool, object] = (True, call())  # type: ignore[misc]
        except BaseException as exc:  # noqa: BLE001  (handed to the waiter by result)
            outcome = (False, exc)
        self._outcome = outcome
        self._done.release()


class WorkerPool:
    """A fixed number of daemon threads that run submitted calls in turn from one queue.

    The threads start at the first submit and then wait on the queue (an idle thread holds no
    lock and costs only its stack). None of the calls bucketcore submits waits for another
    submitted call, so a call queued behind busy threads only starts later.

    Parameters
    ----------
    size : int
        How many threads (>= 1).
    """

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"a worker pool needs at least 1 thread, not {size}")
        self.size = size
        self._tasks: SimpleQueue[Task[object]] = SimpleQueue()
        self._claims: dict[int, int] = {}  # slot -> ident of the thread serving it
        self._launched: dict[int, float] = {}  # slot -> when a thread was last started for it

    def submit(self, call: Callable[[], T]) -> Task[T]:
        """Run ``call()`` on a worker thread.

        Parameters
        ----------
        call : callable
            Takes no arguments.

        Returns
        -------
        Task
            Its ``result()`` waits for the call.
        """
        if len(self._claims) < self.size:
            self._launch()
        task = Task(call)
        self._tasks.put(task)
        return task

    def threads(self) -> int:
        """How many threads serve the pool now.

        Returns
        -------
        int
        """
        return len(self._claims)

    def pending(self) -> int:
        """How many submitted calls no thread has taken yet.

        Returns
        -------
        int
        """
        return self._tasks.qsize()

    def _launch(self) -> None:
        """Start a thread for every slot no thread has claimed, unless one was started lately."""
        for slot in range(self.size):
            if slot not in self._claims:
                now = time.monotonic()
                if now - self._launched.get(slot, -LAUNCH_GRACE) >= LAUNCH_GRACE:
                    _thread.start_new_thread(_serve, (self, slot))
                    self._launched[slot] = now

    def _serve(self, slot: int) -> None:
        """A worker thread: claim the slot, then run tasks from the queue forever."""
        me = _thread.get_ident()
        if self._claims.setdefault(slot, me) != me:
            return  # an earlier start of this slot claimed it
        get = self._tasks.get
        while True:
            task = get()
            task._run()
            task = None  # noqa: F841  (nothing of the last task stays alive while idle)


def _serve(pool: WorkerPool, slot: int) -> None:
    pool._serve(slot)


_pool = WorkerPool(max(2, os.cpu_count() or 1))


def shared_pool() -> WorkerPool:
    """The worker threads every kernel shares (one per core, at least two).

    Returns
    -------
    WorkerPool
    """
    return _pool


def _new_pool_in_child() -> None:
    global _pool
    _pool = WorkerPool(_pool.size)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_pool_in_child)
