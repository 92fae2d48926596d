# cython: language_level=3
"""Work split over threads with the GIL released: the multi-thread hashing stages and the
two-thread ``bucket_entries`` pipeline.

Threads hand work over through atomic counts (handoff.h): a waiting thread spins briefly, then
sleeps on a lock the other releases (a Python-level hand-off would wait for the GIL, which a
thread in long C calls yields only at the interpreter's switch interval).
"""

from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t
from libc.string cimport memcpy
from libc.stdlib cimport free, malloc
from cpython.mem cimport PyMem_RawFree, PyMem_RawMalloc

cimport numpy as cnp
import numpy as np

from _bucketcore._status cimport *
from _bucketcore._keycolumns cimport CHUNK, COL_LIST, ColumnView, KeyColumn, bc_key
from _bucketcore._hashing cimport (
    SPINS, HashOut, PyThread_acquire_lock_timed, PyThread_allocate_lock, PyThread_free_lock,
    PyThread_release_lock, PyThread_type_lock, bc_observe, bc_publish, bc_scratch, bc_scratch_free,
    bc_spin_for_change, bc_take, hash_range, hash_views_at, make_out,
)
from _bucketcore._grouping cimport GroupState, WholeStream, gs_scan, optional_i64
from _bucketcore._routing cimport BC_ROUTE_ONE, Router, bc_fill_keyless, bc_route

cnp.import_array()


cdef PyThread_type_lock held_lock() except NULL:
    """A new lock, already acquired: a thread waiting on it sleeps until another releases it."""
    cdef PyThread_type_lock lock = PyThread_allocate_lock()
    if lock == NULL:
        raise MemoryError()
    PyThread_acquire_lock_timed(lock, 0, 0)
    return lock


cdef void free_lock(PyThread_type_lock lock) noexcept:
    if lock != NULL:
        PyThread_free_lock(lock)


cdef int take_blocks(int64_t *tickets, int64_t *failed, ColumnView *views, const int64_t *col_start,
                     Py_ssize_t first, Py_ssize_t stop, Py_ssize_t block, bc_key *keys, bint replace,
                     bint allow_none, bc_scratch *scratch, HashOut *out, Py_ssize_t *bad,
                     Py_ssize_t *bad_end) noexcept nogil:
    """One thread of several hashing stream positions [first, stop) into out[position - first]:
    take blocks of ``block`` keys by ticket until none is left or one failed, this thread's or
    another's. At a failure *failed is published, *bad names it (a legacy str: the start of its
    chunk, everything before is hashed) and *bad_end is the end of its block. A thread's blocks
    only move forward, and no block is taken once one failed: every block before a failed one
    was taken already and its thread finishes it."""
    cdef Py_ssize_t lo, hi, p, m, ci = 0
    cdef int st = BC_OK
    while not bc_observe(failed):
        lo = first + bc_take(tickets) * block
        if lo >= stop:
            break
        hi = lo + block if stop - lo > block else stop
        p = lo
        while p < hi:
            m = hash_views_at(views, col_start, &ci, p, hi, keys, replace, allow_none, scratch, out,
                              p - first, &st, bad)
            if m < 0:
                if st == BC_ERR_NEEDS_GIL:
                    bad[0] = p
                bad_end[0] = hi
                bc_publish(failed, 1)
                return st
            p += m
    return BC_OK


cdef class BlockStage:
    """Threads over buffer columns (Arrow, numpy S/U), ``murmur3_32(..., threads=k)``: each thread
    calls ``take``, which hashes blocks of ``block`` keys in turn, a ticket each, with the GIL
    released from start to end. A thread the machine slows down takes fewer blocks, and no thread
    goes back to Python between blocks (where two would queue for the GIL). The columns cover
    the n keys in order; every thread describes from its own copy of their views. A thread stops
    taking blocks once any failed: every block before a failed one was taken already, and its
    thread finishes it, so the lowest failing index over the threads' results is the first."""

    cdef list cols
    cdef object keep
    cdef ColumnView *views
    cdef int64_t *col_start      # stream position of each column's first key (ncols + 1)
    cdef Py_ssize_t ncols, n, block
    cdef HashOut out
    cdef bint replace, allow_none
    cdef int64_t next_block      # tickets
    cdef int64_t failed

    def __cinit__(self, list cols, object raw, object segment_hash, object bucket_hash, object has_key,
                  bint replace, bint allow_none, Py_ssize_t block):
        cdef KeyColumn col
        cdef Py_ssize_t c
        if block < 1:
            raise ValueError("block must be >= 1")
        self.ncols = len(cols)
        self.views = <ColumnView *>malloc(max(self.ncols, 1) * sizeof(ColumnView))
        self.col_start = <int64_t *>malloc((self.ncols + 1) * sizeof(int64_t))
        if self.views == NULL or self.col_start == NULL:
            raise MemoryError()
        self.col_start[0] = 0
        for c in range(self.ncols):
            col = cols[c]
            if col.needs_gil:
                raise ValueError("the block stage is for buffer columns")
            self.views[c] = col.view
            self.col_start[c + 1] = self.col_start[c] + col.length
        self.cols = cols
        self.n = self.col_start[self.ncols]
        self.keep = (raw, segment_hash, bucket_hash, has_key)
        self.out = make_out(raw, segment_hash, bucket_hash, has_key)
        self.replace = replace
        self.allow_none = allow_none
        self.block = block

    def __dealloc__(self):
        free(self.views)
        free(self.col_start)

    def take(self):
        """Hash blocks until none is left or one failed. Returns (status, stream position of
        this thread's first failing key, or -1)."""
        cdef Py_ssize_t bad = -1, bad_end = -1
        cdef int st
        cdef bc_scratch scratch
        scratch.buf = NULL
        scratch.cap = 0
        cdef bc_key *keys = <bc_key *>malloc(CHUNK * sizeof(bc_key))
        cdef ColumnView *own = <ColumnView *>malloc(max(self.ncols, 1) * sizeof(ColumnView))
        if keys == NULL or own == NULL:
            free(keys)
            free(own)
            raise MemoryError()
        memcpy(own, self.views, self.ncols * sizeof(ColumnView))
        with nogil:
            st = take_blocks(&self.next_block, &self.failed, own, self.col_start, 0, self.n, self.block,
                             keys, self.replace, self.allow_none, &scratch, &self.out, &bad, &bad_end)
            bc_scratch_free(&scratch)
        free(keys)
        free(own)
        if st == BC_ERR_NOMEM:
            raise MemoryError()
        return st, bad


cdef class HashStage:
    """Two threads over an object column (``murmur3_32(list, threads=2)``): describing a Python
    object needs the GIL only to ready a legacy str, reading it needs no more than that no Python
    code runs. So the calling thread takes the GIL for good and pins the column's view
    (``run_calling_thread``), while a worker describes and hashes from the pinned view with the GIL released
    (``run``); both take blocks of ``block`` keys by ticket, so a thread the machine slows down
    takes fewer. The calling thread keeps the GIL until the worker is done, so nothing can change
    the column meanwhile and no item needs holding; only results cross between the cores (on a
    free-threaded CPython, where other threads run meanwhile, the pin is a tuple of strong
    references to the items, KeyColumn.pin_items, which no other thread can change). A
    thread stops taking blocks once one failed (every earlier block was taken already and is
    finished). A legacy str (not ready, only before Python 3.12) stops its block: readying it
    writes to it, which waits until the worker is done (the same object may be in two blocks);
    then the calling thread hashes what was left, readying as it goes. Both return (status,
    failing key's index in the column or -1); ``run_calling_thread`` returns the first by index."""

    cdef KeyColumn col
    cdef HashOut out
    cdef bint replace, allow_none
    cdef Py_ssize_t start, stop, block
    cdef ColumnView view        # the worker's
    cdef ColumnView own         # the calling thread's (describing writes the last run's form)
    cdef int64_t started        # the worker runs without the GIL
    cdef int64_t pinned         # the calling thread holds the GIL and pinned the view (or gave up)
    cdef int64_t finished       # the worker is done
    cdef int64_t next_block     # tickets
    cdef int64_t failed         # a block failed: no more are taken
    cdef int64_t span[2]        # the one column, as a stream for take_blocks
    cdef int wstatus
    cdef Py_ssize_t windex, wend
    cdef PyThread_type_lock wake_worker, wake_caller
    cdef object keep

    def __cinit__(self, KeyColumn col, object raw, object segment_hash, object bucket_hash,
                  object has_key, bint replace, bint allow_none, Py_ssize_t start, Py_ssize_t stop,
                  Py_ssize_t block=1 << 14):
        if not col.needs_gil:
            raise ValueError("the hashing stage is for object columns")
        if block < 1:
            raise ValueError("block must be >= 1")
        self.col = col
        self.keep = (raw, segment_hash, bucket_hash, has_key)
        self.out = make_out(raw, segment_hash, bucket_hash, has_key)
        self.replace = replace
        self.allow_none = allow_none
        self.start = start
        self.stop = stop
        self.span[0] = 0
        self.span[1] = col.length
        self.block = block
        self.wstatus = BC_OK
        self.windex = -1
        self.wake_worker = held_lock()
        self.wake_caller = held_lock()

    def __dealloc__(self):
        free_lock(self.wake_worker)
        free_lock(self.wake_caller)

    def run_calling_thread(self):
        """The calling thread's part (after submitting ``run``): pin, take blocks, wait for the
        worker, then ready and hash what a legacy str stopped and the blocks nobody took."""
        cdef Py_ssize_t err_index = -1, err_end = -1, taken_end, lo, hi, index = -1, e
        cdef int st = BC_OK, status = BC_OK
        cdef bc_key *keys = <bc_key *>malloc(CHUNK * sizeof(bc_key))
        cdef bc_scratch scratch
        scratch.buf = NULL
        scratch.cap = 0
        cdef bint pinned = False
        try:
            with nogil:  # the worker needs the GIL until it is inside run's nogil block
                while not bc_observe(&self.started):
                    PyThread_acquire_lock_timed(self.wake_caller, 1000, 0)
            # from here on the GIL stays with this thread until the worker is done
            try:
                # a list cut after its keys were counted has fewer than stop: refused, not read
                st = self.col.pin(&self.view) if self.stop <= self.col.length else BC_ERR_LIST_CHANGED
                if st != BC_OK:
                    err_index = self.start
                else:
                    pinned = True
                self.own = self.view
            finally:
                if not pinned or keys == NULL:
                    bc_publish(&self.failed, 1)  # the worker takes nothing
                bc_publish(&self.pinned, 1)
                PyThread_release_lock(self.wake_worker)
            if keys == NULL:
                raise MemoryError()
            if pinned:
                st = take_blocks(&self.next_block, &self.failed, &self.own, self.span, self.start,
                                 self.stop, self.block, keys, self.replace, self.allow_none, &scratch,
                                 &self.out, &err_index, &err_end)
        finally:
            while not bc_observe(&self.finished):
                PyThread_acquire_lock_timed(self.wake_caller, 1000, 0)
        if not pinned:
            free(keys)
            return st, err_index
        # alone now: this thread may ready legacy strs (hash_range describes with the GIL).
        # Failures by index; what is left to hash: each thread's block from a legacy str on, and
        # the blocks nobody took (all after every taken one)
        if st != BC_OK and st != BC_ERR_NEEDS_GIL:
            status, index = st, err_index
        if self.wstatus != BC_OK and self.wstatus != BC_ERR_NEEDS_GIL and (status == BC_OK or self.windex < index):
            status, index = self.wstatus, self.windex
        left = []
        if st == BC_ERR_NEEDS_GIL:
            left.append((err_index, err_end))
        if self.wstatus == BC_ERR_NEEDS_GIL:
            left.append((self.windex, self.wend))
        taken_end = self.start + bc_observe(&self.next_block) * self.block
        if taken_end < self.stop:
            left.append((taken_end, self.stop))
        try:
            for lo, hi in sorted(left):
                if status != BC_OK and index < lo:
                    break
                st = hash_range(self.col, lo, hi, &self.out, lo - self.start, keys, &scratch, self.replace,
                                self.allow_none, True, &e)
                if st != BC_OK:
                    status, index = st, e  # before every failure after lo, and nothing before lo failed
                    break
        finally:
            free(keys)
            bc_scratch_free(&scratch)
        if status == BC_ERR_NOMEM:
            raise MemoryError()
        return status, (index if status != BC_OK else -1)

    def run_with(self, object submit):
        """Both threads: ``submit(self.run)`` starts the worker's part (a call returning a task
        whose ``result()`` waits for it), then this thread runs ``run_calling_thread`` and waits
        for the worker. The hand-off runs no Python bytecode of its own, so an asynchronous
        exception (a KeyboardInterrupt) can only come out of ``submit`` or ``result``: raised
        by ``submit``, the worker is released (``abandon``) whether or not its task was queued;
        raised by ``result``, the worker has finished with every key already and ends alone."""
        cdef object task
        try:
            task = submit(self.run)
        except BaseException:
            self.abandon()
            raise
        try:
            return self.run_calling_thread()
        finally:
            task.result()

    def abandon(self):
        """Release a worker whose calling thread will not run its part (an exception, e.g. a
        KeyboardInterrupt, between submitting ``run`` and ``run_calling_thread``): the worker
        takes nothing and returns. After ``run_calling_thread`` it changes nothing."""
        if not bc_observe(&self.pinned):
            bc_publish(&self.failed, 1)
            bc_publish(&self.pinned, 1)
            PyThread_release_lock(self.wake_worker)

    def run(self):
        """The worker's part: take blocks from the pinned view (none without memory for them)."""
        cdef Py_ssize_t err_index = -1, err_end = -1
        cdef int st = BC_OK
        cdef bc_key *keys = <bc_key *>malloc(CHUNK * sizeof(bc_key))
        cdef bc_scratch scratch
        scratch.buf = NULL
        scratch.cap = 0
        with nogil:
            bc_publish(&self.started, 1)
            PyThread_release_lock(self.wake_caller)
            while not bc_observe(&self.pinned):
                PyThread_acquire_lock_timed(self.wake_worker, 1000, 0)
            if keys != NULL:
                st = take_blocks(&self.next_block, &self.failed, &self.view, self.span, self.start,
                                 self.stop, self.block, keys, self.replace, self.allow_none, &scratch,
                                 &self.out, &err_index, &err_end)
            self.wstatus = st
            self.windex = err_index
            self.wend = err_end
            bc_scratch_free(&scratch)
            bc_publish(&self.finished, 1)
            PyThread_release_lock(self.wake_caller)
        free(keys)
        return st, (err_index if st != BC_OK else -1)


STEP_CODES = {"left": 0, "hashed": 1, "routed": 2}  # ScanStage(levels=...) for tests


# How far the publisher took a pipeline step before publishing it (ScanStage).
cdef enum:
    STEP_LEFT = 0        # nothing: the worker describes, hashes, routes and groups it
    STEP_HASHED = 1      # raw / has_key written: the worker routes and groups
    STEP_ROUTED = 2      # global_bucket / bucket_hash written, keyless left at -1: the worker places them and groups


cdef class ScanStage:
    """The two-thread pipeline of ``bucket_entries`` (``threads=2``).

    ``feed`` (the calling thread) publishes the stream a step at a time; ``run`` (a worker, the
    GIL released throughout) takes the steps in stream order, finishes each and groups it (the
    keyless rotation is placed there: it is only known in stream order). Per step, the publisher
    leaves the whole step to a worker that ran out of work, else hashes it, and routes it too
    when the worker is a step behind; so both threads stay busy whatever the keys cost to read.

    Python keys are read with the GIL held by ``feed`` and nothing INCREF'd: the worker
    describes from pinned views while ``feed`` runs no Python code until the worker is done (on
    a free-threaded CPython a pinned list or object array is a tuple of strong references to its
    items, KeyColumn.pin_items, so other threads cannot change what the two threads read).
    The first bad key by stream position wins, whichever thread found it. ``finish`` returns
    the entries."""

    cdef Router router
    cdef WholeStream stream
    cdef const int64_t *size_ptr
    cdef object keep_sizes
    cdef Py_ssize_t n
    cdef Py_ssize_t step
    cdef bint replace
    # counts crossing between the threads (bc_publish / bc_observe)
    cdef int64_t ready           # publisher: messages published
    cdef int64_t taken           # worker: messages it has started on
    cdef int64_t done            # worker: messages it has grouped
    cdef int64_t aborted         # publisher: nothing more will come
    cdef int64_t started         # worker: inside its nogil block
    cdef int64_t finished        # worker: out of it
    cdef int64_t failed          # worker: a bad key (wstatus, windex) or out of memory
    cdef int wstatus
    cdef Py_ssize_t windex
    cdef PyThread_type_lock wake              # released by the publisher: the worker may go on
    cdef PyThread_type_lock wake_publisher    # released by the worker: started, finished
    cdef Py_ssize_t scanned
    cdef int64_t rr
    cdef int rc
    cdef cnp.ndarray a_raw, a_has, a_gidx, a_bh, a_level, a_deferred, a_views, a_col_start
    cdef uint32_t *raw
    cdef uint8_t *has_key
    cdef int32_t *global_bucket           # steps the publisher routed: global bucket index, bucket hash
    cdef uint16_t *bucket_hash
    cdef int8_t *level           # per step: STEP_*
    cdef int64_t *deferred       # per routed step: keyless messages left to the worker
    cdef ColumnView *views       # the worker's pinned views of the key columns
    cdef ColumnView *own_views   # the publisher's (describing writes the last run's form in it)
    cdef int64_t *col_start      # stream position of each column's first key (ncols + 1)
    cdef bint objects            # Python keys: feed keeps the GIL until the worker is done
    cdef list columns            # the key columns the worker reads, alive while the stage is
    cdef bytes forced            # tests: the STEP_* of each step in turn, instead of the rule

    def __cinit__(self, Router router, const int64_t[::1] bucket_offsets, int policy,
                  int64_t max_messages, int64_t max_bytes, object sizes, Py_ssize_t n,
                  int64_t round_robin, Py_ssize_t step, bytes levels=None):
        if step < 1:
            raise ValueError("step must be >= 1")
        if levels is not None and (not levels or any(lv > STEP_ROUTED for lv in levels)):
            raise ValueError("levels must be STEP_* codes")
        self.forced = levels
        router.check_offsets(bucket_offsets)
        self.router = router
        self.stream = WholeStream(bucket_offsets, policy, max_messages, max_bytes, n)
        self.size_ptr = optional_i64(sizes, n, "sizes")
        self.keep_sizes = sizes
        self.n = n
        self.step = step
        self.rr = router.first_turn(round_robin)
        nsteps = (n + step - 1) // step
        self.a_raw = np.empty(n, dtype=np.uint32)
        self.a_has = np.empty(n, dtype=np.uint8)
        self.a_gidx = np.empty(n, dtype=np.int32)
        self.a_bh = np.empty(n, dtype=np.uint16)
        self.a_level = np.empty(nsteps, dtype=np.int8)
        self.a_deferred = np.zeros(nsteps, dtype=np.int64)
        self.raw = <uint32_t *>cnp.PyArray_DATA(self.a_raw)
        self.has_key = <uint8_t *>cnp.PyArray_DATA(self.a_has)
        self.global_bucket = <int32_t *>cnp.PyArray_DATA(self.a_gidx)
        self.bucket_hash = <uint16_t *>cnp.PyArray_DATA(self.a_bh)
        self.level = <int8_t *>cnp.PyArray_DATA(self.a_level)
        self.deferred = <int64_t *>cnp.PyArray_DATA(self.a_deferred)
        self.wake = held_lock()  # the worker sleeps on it until a publish
        self.wake_publisher = held_lock()

    def __dealloc__(self):
        free_lock(self.wake)
        free_lock(self.wake_publisher)

    cdef void publish(self, Py_ssize_t upto) noexcept nogil:
        bc_publish(&self.ready, upto)
        PyThread_release_lock(self.wake)

    cdef void abort(self) noexcept nogil:
        bc_publish(&self.aborted, 1)
        PyThread_release_lock(self.wake)

    cdef int64_t route_for_worker(self, Py_ssize_t pos, Py_ssize_t m, const uint32_t *raw,
                                  const uint8_t *has) noexcept nogil:
        """The publisher routes m hashed messages from stream position pos (has NULL: all keyed),
        leaving the keyless to the worker; returns how many it left."""
        cdef int64_t unused = 0, left = 0
        cdef Py_ssize_t i
        bc_route(&self.router.rule, m, raw, has, True, &unused, self.global_bucket + pos, self.bucket_hash + pos)
        if has != NULL and self.router.rule.mode != BC_ROUTE_ONE:
            for i in range(m):
                left += has[i] == 0
        return left

    cdef int pin_columns(self, list columns) except -2:
        """Pin the columns' views for the worker; BC_ERR_LIST_CHANGED if one changed (error index 0)."""
        cdef Py_ssize_t c, ncols = len(columns)
        cdef KeyColumn col
        cdef int status
        self.columns = columns  # the worker may read them after feed returned (an interrupted wait)
        self.a_views = np.empty(2 * max(ncols, 1) * sizeof(ColumnView), dtype=np.uint8)
        self.a_col_start = np.zeros(ncols + 1, dtype=np.int64)
        self.views = <ColumnView *>cnp.PyArray_DATA(self.a_views)
        self.own_views = self.views + max(ncols, 1)
        self.col_start = <int64_t *>cnp.PyArray_DATA(self.a_col_start)
        for c in range(ncols):
            col = columns[c]
            status = col.pin(&self.views[c])
            if status != BC_OK:
                return status
            self.own_views[c] = self.views[c]
            self.objects |= col.needs_gil
            self.col_start[c + 1] = self.col_start[c] + col.length
        if self.col_start[ncols] != self.n:
            # a key list that another thread resized between the stream's measure and its columns
            for c in range(ncols):
                col = columns[c]
                if col.view.mode == COL_LIST:
                    return BC_ERR_LIST_CHANGED
            raise ValueError(f"the key columns hold {self.col_start[ncols]} keys for {self.n} messages")
        return BC_OK

    def feed(self, list columns, bint replace):
        """The publisher: read the key columns, which cover the n messages in order, step after
        step. Returns (status, stream position of the first bad key or -1); on any failure the
        worker is stopped. BC_ERR_NEEDS_GIL: a legacy str, which only the GIL holder may ready
        and not while the other thread reads the keys (run the stream on one thread instead)."""
        cdef bc_scratch scratch
        scratch.buf = NULL
        scratch.cap = 0
        cdef bc_key *keys = <bc_key *>PyMem_RawMalloc(CHUNK * sizeof(bc_key))
        cdef Py_ssize_t pos = 0, stop, ci = 0, k = 0, err_index = -1
        cdef int status = BC_OK, level_now
        cdef bint starved = True
        cdef uint32_t own_raw[CHUNK]
        cdef uint8_t own_has[CHUNK]
        self.replace = replace
        try:
            if keys == NULL:
                raise MemoryError()
            with nogil:
                while not bc_observe(&self.started) and not bc_observe(&self.aborted):
                    PyThread_acquire_lock_timed(self.wake_publisher, 1000, 0)
            # pinned once the GIL is back for good: nothing can change the columns from here on
            status = self.pin_columns(columns)
            if status != BC_OK:
                err_index = 0
            while pos < self.n and status == BC_OK and not bc_observe(&self.failed):
                stop = self.n if self.n - pos < self.step else pos + self.step
                # (with the GIL: the worker may be describing Python keys)
                if self.forced is not None:
                    level_now = self.forced[k % len(self.forced)]
                elif starved:
                    level_now = STEP_LEFT
                else:  # route too when the worker has not even taken the previous step yet
                    level_now = STEP_ROUTED if bc_observe(&self.ready) - bc_observe(&self.taken) >= self.step \
                        else STEP_HASHED
                # a step left to the worker needs nothing here (the column cursor follows pos)
                if level_now != STEP_LEFT and self.objects:  # the GIL stays: the worker reads Python keys
                    status = self.hash_step(k, level_now, pos, stop, &ci, keys, own_raw, own_has, &scratch,
                                            &err_index)
                elif level_now != STEP_LEFT:
                    with nogil:
                        status = self.hash_step(k, level_now, pos, stop, &ci, keys, own_raw, own_has,
                                                &scratch, &err_index)
                if status != BC_OK:
                    break
                # the worker ran out of work while this thread was on the step: leave it the next
                starved = bc_observe(&self.done) == bc_observe(&self.ready)
                self.level[k] = <int8_t>level_now
                self.publish(stop)
                pos = stop
                k += 1
        finally:
            if bc_observe(&self.ready) != self.n:  # a bad key or an exception: stop the worker
                self.abort()
            # Python keys: the GIL stays until the worker no longer reads them
            while self.objects and bc_observe(&self.started) and not bc_observe(&self.finished):
                PyThread_acquire_lock_timed(self.wake_publisher, 1000, 0)
            PyMem_RawFree(keys)
            bc_scratch_free(&scratch)
        if bc_observe(&self.failed) and self.wstatus != BC_OK:  # the worker's bad key comes first
            status, err_index = self.wstatus, self.windex
        if status == BC_ERR_NOMEM:
            raise MemoryError()
        return status, err_index if status != BC_OK else -1

    cdef Py_ssize_t hash_chunk_at(self, ColumnView *views, Py_ssize_t *ci, Py_ssize_t p, Py_ssize_t e,
                                  bc_key *keys, uint32_t *raw, uint8_t *has, bc_scratch *scratch,
                                  int *status, Py_ssize_t *bad) noexcept nogil:
        """hash_views_at over the key columns into raw / has (from 0): never readies a legacy str
        (BC_ERR_NEEDS_GIL), which the other thread may be reading."""
        cdef HashOut out
        out.raw = raw
        out.has_key = has
        out.segment_hash = NULL
        out.bucket_hash = NULL
        return hash_views_at(views, self.col_start, ci, p, e, keys, self.replace, True, scratch, &out, 0,
                             status, bad)

    cdef int hash_step(self, Py_ssize_t k, int level_now, Py_ssize_t pos, Py_ssize_t stop, Py_ssize_t *ci,
                       bc_key *keys, uint32_t *own_raw, uint8_t *own_has, bc_scratch *scratch,
                       Py_ssize_t *bad) noexcept nogil:
        """The publisher hashes step k, messages [pos, stop), from its own pinned views into raw /
        has_key, or (STEP_ROUTED) a chunk at a time into its own buffers and routes it from
        there, so only the routed columns go to the worker. Returns a status (*bad: the key)."""
        cdef Py_ssize_t m
        cdef int status = BC_OK
        cdef int64_t left = 0
        while pos < stop:
            if level_now == STEP_ROUTED:
                m = self.hash_chunk_at(self.own_views, ci, pos, stop, keys, own_raw, own_has, scratch,
                                       &status, bad)
                if m > 0:
                    left += self.route_for_worker(pos, m, own_raw,
                                                  NULL if self.own_views[ci[0]].plain else own_has)
            else:
                m = self.hash_chunk_at(self.own_views, ci, pos, stop, keys, self.raw + pos,
                                       self.has_key + pos, scratch, &status, bad)
            if m < 0:
                return status
            pos += m
        self.deferred[k] = left
        return BC_OK

    cdef int take_left(self, Py_ssize_t p, Py_ssize_t e, Py_ssize_t *wc, bc_key *keys,
                       uint32_t *raw, uint8_t *has, bc_scratch *scratch) noexcept nogil:
        """The worker describes, hashes, routes and groups messages [p, e) itself, CHUNK keys
        at a time; *wc is its column cursor. Returns 0, a scan's -1 (no memory), or 1 with
        wstatus / windex naming a bad key."""
        cdef GroupState *st = &self.stream.st
        cdef Py_ssize_t m
        cdef int status, rc = 0
        while p < e and rc == 0:
            m = self.hash_chunk_at(self.views, wc, p, e, keys, raw, has, scratch, &status, &self.windex)
            if m < 0:
                self.wstatus = status
                return 1
            bc_route(&self.router.rule, m, raw, NULL if self.views[wc[0]].plain else has, False, &self.rr,
                     self.stream.global_bucket, self.stream.bucket_hash)
            rc = gs_scan(st, m, self.stream.global_bucket, self.stream.bucket_hash,
                         self.size_ptr + p if self.size_ptr != NULL else NULL)
            p += m
        return rc

    def feed_with(self, object submit, list columns, bint replace):
        """Both threads: ``submit(self.run)`` starts the worker (a call returning a task whose
        ``result()`` waits for it), then this thread feeds it (``feed``) and waits for it. The
        hand-off runs no Python bytecode of its own, so an asynchronous exception (a
        KeyboardInterrupt) can only come out of ``submit`` or ``result``: raised by ``submit``,
        the worker is stopped whether or not its task was queued; raised by ``result``, the
        worker finishes alone (the stage keeps alive everything it reads)."""
        cdef object task
        try:
            task = submit(self.run)
        except BaseException:
            self.abort()
            raise
        try:
            return self.feed(columns, replace)
        finally:
            task.result()

    def abandon(self):
        """Stop the worker when the publisher will not feed it (an exception, e.g. a
        KeyboardInterrupt, before or inside ``feed``): it returns without waiting for more."""
        self.abort()

    def run(self):
        """The worker: finish and group every published step, in order, until all n messages
        are or the stage is aborted. Returns the number of messages scanned."""
        cdef GroupState *st = &self.stream.st
        cdef const int64_t *size_ptr = self.size_ptr
        cdef Py_ssize_t p = self.scanned, ready, e, m, k, wc = 0
        cdef int8_t level_now
        cdef int rc = self.rc
        cdef bc_scratch scratch
        scratch.buf = NULL
        scratch.cap = 0
        cdef bc_key *keys = <bc_key *>PyMem_RawMalloc(CHUNK * (sizeof(bc_key) + sizeof(uint32_t) + 1))
        cdef uint32_t *raw = <uint32_t *>(keys + CHUNK)
        cdef uint8_t *has = <uint8_t *>(raw + CHUNK)
        if keys == NULL:
            rc = -1
        with nogil:
            bc_publish(&self.started, 1)
            PyThread_release_lock(self.wake_publisher)
            while p < self.n and rc == 0:
                ready = bc_observe(&self.ready)
                if ready == p:
                    if bc_observe(&self.aborted):
                        break
                    if not bc_spin_for_change(&self.ready, p, SPINS):
                        PyThread_acquire_lock_timed(self.wake, 1000, 0)
                    continue
                while p < ready and rc == 0:  # published counts end steps
                    k = p // self.step
                    e = p + self.step if self.n - p > self.step else self.n
                    level_now = self.level[k]
                    bc_publish(&self.taken, e)
                    if level_now == STEP_LEFT:
                        rc = self.take_left(p, e, &wc, keys, raw, has, &scratch)
                        p = e
                    elif level_now == STEP_ROUTED:
                        if self.deferred[k] > 0:
                            self.rr = bc_fill_keyless(&self.router.rule, self.global_bucket + p, e - p, self.rr)
                        rc = gs_scan(st, e - p, self.global_bucket + p, self.bucket_hash + p,
                                     size_ptr + p if size_ptr != NULL else NULL)
                        p = e
                    while p < e and rc == 0:
                        m = e - p if e - p < CHUNK else CHUNK
                        bc_route(&self.router.rule, m, self.raw + p, self.has_key + p, False, &self.rr,
                                 self.stream.global_bucket, self.stream.bucket_hash)
                        rc = gs_scan(st, m, self.stream.global_bucket, self.stream.bucket_hash,
                                     size_ptr + p if size_ptr != NULL else NULL)
                        p += m
                    bc_publish(&self.done, p)
            bc_scratch_free(&scratch)
            if rc != 0:
                bc_publish(&self.failed, 1)
            bc_publish(&self.finished, 1)
            PyThread_release_lock(self.wake_publisher)
        PyMem_RawFree(keys)
        self.scanned = p
        self.rc = rc
        return p

    def finish(self):
        """The entry columns and the next round-robin position, once run has scanned all."""
        if self.rc == 1:
            raise RuntimeError("the pipeline stopped at a bad key")
        if self.scanned != self.n and self.rc == 0:
            raise ValueError(f"{self.scanned} of {self.n} messages were scanned")
        return self.stream.finish(self.rc), self.rr
