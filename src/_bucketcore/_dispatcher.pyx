# cython: language_level=3
"""The dispatcher's kernel (serves bucketcore.dispatcher): the per-entry and per-bucket state of one
shared segment in C arrays, its members, and the one-call paths of ``offer``, ``ack`` and ``poll``.

bucketcore.dispatcher's ``Dispatcher`` holds a :class:`DispatchCore` and calls down into it: each
fast path takes the common call shape (exact ``int`` / ``str`` arguments, an ``np.int64`` ack
column), checks every argument, and otherwise changes nothing and returns None (a refusal),
after which the Python layer takes its general path. Nothing here calls back into the package.
Routing and sticky hashes follow entry_route.h, the spread walk spread.h, outboxes outbox.h.

Free-threaded interpreters: every method that reads or changes a core's state runs in a critical
section on it; nothing in such a section calls into Python code or into numpy calls that may
release the thread state (scratch is sorted with ``qsort``, the log is moved with ``memmove``), so
a section is never suspended half-way. A built ``Deliveries`` never changes, and each object
refuses a second ``__init__``.
"""

cimport cython
from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t

cimport numpy as cnp

from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.ref cimport Py_INCREF
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_FromStringAndSize
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from cpython.object cimport PyObject
from libc.stdlib cimport qsort
from libc.string cimport memcpy, memmove, memset

from _bucketcore._status cimport *
import numpy as np

cnp.import_array()

cdef extern from "fast_then.h":
    int bc_fast_then_ready() except -1
    object bc_fast_then_new(object fast, object general)

bc_fast_then_ready()


def fast_then(fast, general):
    """``fast(*args, **kwargs)``, or ``general(*args, **kwargs)`` when that is None (fast_then.h):
    composed by bucketcore.dispatcher of a core's fast path and its Python general path."""
    return bc_fast_then_new(fast, general)


@cython.no_gc  # holds a bytearray and arrays over it: nothing that can refer back to it
cdef class Deliveries:
    """What a consumer is to be sent, in order: ``entry_ids`` (``np.int64``), ``hashes`` (the
    entries' sticky hashes, ``np.uint16``, 0 nudged to 1) and ``redelivered`` (``np.bool_``: a
    redelivery after its previous holder crashed).

    The rows are held in one buffer; each column becomes an array over it on its first access
    (then the same array every time), so a caller that sends only ids builds one array. ``len()``
    is the number of entries. Built by :meth:`Dispatcher.poll`; ``Deliveries(entry_ids, hashes,
    redelivered)`` builds one from three columns of the same length. A Deliveries never changes
    once built. Every poll that delivers nothing returns one shared empty Deliveries
    (``NO_DELIVERIES``); an empty Deliveries gives a new empty array on every read of a column, so
    nothing a caller does to one can reach another caller.

    Parameters
    ----------
    entry_ids, hashes, redelivered : array-like
        Entry ids (int64), sticky hashes (uint16) and redelivery flags (bool), one item per entry.
    """

    # a bytearray of n int64 ids, then n uint16 hashes, then n uint8 flags (None when n == 0):
    # the columns' base, so an array keeps the rows alive without a reference cycle
    cdef object raw
    cdef char *buf
    cdef Py_ssize_t n
    cdef object ids_arr, hashes_arr, red_arr
    cdef bint built         # the rows are set: nothing changes them any more

    def __init__(self, entry_ids, hashes, redelivered):
        if self.built:
            raise TypeError("a Deliveries cannot change once built")
        ids = np.ascontiguousarray(entry_ids, dtype=np.int64)
        hs = np.ascontiguousarray(hashes, dtype=np.uint16)
        red = np.ascontiguousarray(redelivered, dtype=np.bool_)
        if ids.ndim != 1 or hs.shape != ids.shape or red.shape != ids.shape:
            raise ValueError(f"entry_ids, hashes and redelivered must be 1-D columns of one length, not "
                             f"shapes {ids.shape}, {hs.shape}, {red.shape}")
        # the columns are converted (which may run Python code) before the section, so nothing in
        # it can suspend it: two threads building one Deliveries cannot both fill it
        cdef Py_ssize_t n = ids.shape[0]
        with cython.critical_section(self):
            if self.built:
                raise TypeError("a Deliveries cannot change once built")
            self._fill(n, <const int64_t *>cnp.PyArray_DATA(ids),
                       <const uint16_t *>cnp.PyArray_DATA(hs), <const uint8_t *>cnp.PyArray_DATA(red))

    cdef int _fill(self, Py_ssize_t n, const int64_t *ids, const uint16_t *hashes,
                   const uint8_t *red) except -1:
        self.raw = None
        self.buf = NULL
        if n:
            self.raw = PyByteArray_FromStringAndSize(NULL, n * (sizeof(int64_t) + sizeof(uint16_t) + 1))
            self.buf = PyByteArray_AS_STRING(self.raw)
            memcpy(self.buf, ids, n * sizeof(int64_t))
            memcpy(self.buf + n * sizeof(int64_t), hashes, n * sizeof(uint16_t))
            memcpy(self.buf + n * (sizeof(int64_t) + sizeof(uint16_t)), red, n)
        self.n = n
        self.ids_arr = self.hashes_arr = self.red_arr = None
        self.built = True
        return 0

    cdef object _column(self, Py_ssize_t offset, int typenum):
        """A column over the rows (the array keeps them alive), or a fresh empty one (never kept:
        an empty Deliveries may be the shared one)."""
        cdef cnp.npy_intp n = self.n
        if n == 0:
            return cnp.PyArray_SimpleNew(1, &n, typenum)
        arr = cnp.PyArray_SimpleNewFromData(1, &n, typenum, self.buf + offset)
        Py_INCREF(self.raw)  # the reference PyArray_SetBaseObject takes over
        cnp.PyArray_SetBaseObject(arr, self.raw)
        return arr

    @property
    @cython.critical_section
    def entry_ids(self):
        """Entry ids, in delivery order (``np.int64``)."""
        if self.n == 0:
            return self._column(0, cnp.NPY_INT64)
        if self.ids_arr is None:
            self.ids_arr = self._column(0, cnp.NPY_INT64)
        return self.ids_arr

    @property
    @cython.critical_section
    def hashes(self):
        """The entries' sticky hashes (``np.uint16``, 0 nudged to 1)."""
        if self.n == 0:
            return self._column(self.n * sizeof(int64_t), cnp.NPY_UINT16)
        if self.hashes_arr is None:
            self.hashes_arr = self._column(self.n * sizeof(int64_t), cnp.NPY_UINT16)
        return self.hashes_arr

    @property
    @cython.critical_section
    def redelivered(self):
        """Per entry, whether it is a redelivery after its previous holder crashed (``np.bool_``)."""
        if self.n == 0:
            return self._column(self.n * (sizeof(int64_t) + sizeof(uint16_t)), cnp.NPY_BOOL)
        if self.red_arr is None:
            self.red_arr = self._column(self.n * (sizeof(int64_t) + sizeof(uint16_t)), cnp.NPY_BOOL)
        return self.red_arr

    def __len__(self):
        return self.n

    def __repr__(self):
        return (f"Deliveries(entry_ids={self.entry_ids!r}, hashes={self.hashes!r}, "
                f"redelivered={self.redelivered!r})")

    def __reduce__(self):
        return Deliveries, (self.entry_ids, self.hashes, self.redelivered)


cdef Deliveries new_deliveries(Py_ssize_t n, const int64_t *ids, const uint16_t *hashes, const uint8_t *red):
    cdef Deliveries out = Deliveries.__new__(Deliveries)
    out._fill(n, ids, hashes, red)
    return out


# What every poll of a consumer with nothing to send returns.
NO_DELIVERIES = new_deliveries(0, NULL, NULL, NULL)
cdef Deliveries no_deliveries = NO_DELIVERIES


class NoDeliveries(dict):
    """The result of a poll of every consumer when none has anything to send: one shared empty
    dict that refuses every change (so no such poll allocates one). Copy it (``dict(result)``) to
    get a dict of your own."""

    __slots__ = ()

    def _refuse(self, *args: object, **kwargs: object) -> None:
        raise TypeError("this empty poll result is shared by every poll that delivered nothing; it cannot change")

    __setitem__ = __delitem__ = __ior__ = clear = pop = popitem = setdefault = update = _refuse


NOTHING_POLLED = NoDeliveries()
cdef object nothing_polled = NOTHING_POLLED


cdef list new_log(Py_ssize_t cap):
    """Empty log columns of cap rows: ids, msgs, qnext, bucket, holder_log, hashes, state,
    redelivered (allocated, not filled: no numpy call here releases the thread state)."""
    cdef cnp.npy_intp dim = cap
    return [cnp.PyArray_SimpleNew(1, &dim, t) for t in (
        cnp.NPY_INT64, cnp.NPY_INT64, cnp.NPY_INT64, cnp.NPY_INT32, cnp.NPY_INT32, cnp.NPY_UINT16,
        cnp.NPY_INT8, cnp.NPY_UINT8)]


@cython.final
cdef class Member:
    """One consumer connected to a dispatcher: its dense key in the core, ``consumer`` (its
    ``(name, consumer_id)``) and whether it is ``leaving`` (left cleanly, still holding entries).
    Built by :meth:`DispatchCore.join`."""

    cdef readonly int32_t key
    cdef readonly tuple consumer
    cdef readonly str name
    cdef readonly object consumer_id
    cdef readonly bint leaving
    cdef Member next_of_name   # the next connected member with the same name


cdef inline bint exact_int(object v, long long lo, long long hi, long long *out) noexcept:
    """Whether ``v`` is an exact ``int`` in ``lo..hi`` (its value in *out)."""
    cdef int overflow = 0
    if type(v) is not int:
        return False
    out[0] = PyLong_AsLongLongAndOverflow(v, &overflow)
    return not overflow and lo <= out[0] <= hi


cdef class DispatchCore:
    """The state of one shared segment's dispatcher: per-bucket FIFOs, pending bookkeeping,
    outboxes, the members (by name, by key, by consumer) and the offer / ack counters.

    Invariants: a bucket's entries are delivered in log (offset) order; at most one consumer key
    holds a bucket's delivered-but-unacked entries (``holder``); a bucket is *ready* when it has an
    owner and no other holder; a ready bucket's queue is empty after every public call.

    Parameters
    ----------
    table : numpy.ndarray
        The boundary list's 65536-item ``np.uint16`` bucket table.
    n_buckets : int
        Its bucket count.
    """

    cdef readonly Py_ssize_t n_buckets
    cdef const uint16_t[::1] table
    cdef int32_t[::1] owner, holder
    cdef uint8_t[::1] ready
    cdef int64_t[::1] b_pending, b_queued, b_delivered, q_head, q_tail
    # the entry log over [base, end)
    cdef int64_t[::1] ids, msgs, qnext
    cdef int32_t[::1] bucket, holder_log
    cdef uint16_t[::1] hashes
    cdef int8_t[::1] state
    cdef uint8_t[::1] redelivered
    cdef readonly Py_ssize_t base, end
    cdef readonly int64_t last_id   # the last entry id offered, -1 before the first
    cdef int64_t queued_total       # the sum of b_queued: queued entries over every bucket
    cdef readonly int64_t offered_entries, straddling_entries
    # per consumer key: counters and outbox; ``listed`` keys (those given rows since the last poll of all)
    cdef int64_t[:, ::1] kstats
    cdef bc_outbox *boxes
    cdef Py_ssize_t n_boxes
    cdef int32_t *listed
    cdef Py_ssize_t n_listed
    # the members: first Member of each name, Member of each key (None once forgotten), by consumer
    cdef dict by_name
    cdef list by_key
    cdef dict by_consumer
    # scratch of ``ack``: the log positions of the ids being acked
    cdef int64_t *ack_pos
    cdef Py_ssize_t ack_cap
    # scratch of a release: buckets whose queues may flow (one slot per bucket)
    cdef int32_t *todo

    def __init__(self, const uint16_t[::1] table not None, Py_ssize_t n_buckets):
        if table.shape[0] != 65536 or <Py_ssize_t>table[65535] + 1 != n_buckets:
            raise ValueError("the bucket table does not match the bucket count")
        # every array is built before the section is taken (numpy may release the thread state
        # while it fills one), then the fields are set in one stretch
        columns = [np.full(n_buckets, -1, dtype=np.int32), np.full(n_buckets, -1, dtype=np.int32),
                   np.zeros(n_buckets, dtype=np.uint8), np.zeros(n_buckets, dtype=np.int64),
                   np.zeros(n_buckets, dtype=np.int64), np.zeros(n_buckets, dtype=np.int64),
                   np.full(n_buckets, -1, dtype=np.int64), np.full(n_buckets, -1, dtype=np.int64)]
        log = new_log(1024)
        kstats = np.zeros((16, NKSTATS), dtype=np.int64)
        with cython.critical_section(self):
            if self.todo != NULL:
                raise TypeError("a DispatchCore is built once")
            self.todo = <int32_t *>PyMem_Malloc(max(n_buckets, 1) * sizeof(int32_t))
            if self.todo == NULL:
                raise MemoryError("dispatcher: no memory for the bucket scratch")
            self.n_buckets = n_buckets
            self.table = table
            self.owner, self.holder, self.ready, self.b_pending, self.b_queued, self.b_delivered, \
                self.q_head, self.q_tail = columns
            self._set_log(log)
            self.base = self.end = 0
            self.last_id = -1
            self.kstats = kstats
            self.by_name = {}
            self.by_key = []
            self.by_consumer = {}
            self._grow_boxes(16)

    def __dealloc__(self):
        cdef Py_ssize_t k
        for k in range(self.n_boxes):
            bc_outbox_free(&self.boxes[k])
        PyMem_Free(self.boxes)
        PyMem_Free(self.listed)
        PyMem_Free(self.ack_pos)
        PyMem_Free(self.todo)

    cdef int _grow_boxes(self, Py_ssize_t cap) except -1:
        """Room for the outboxes of keys 0..cap-1 (new ones empty)."""
        cdef bc_outbox *boxes
        cdef int32_t *listed
        if cap <= self.n_boxes:
            return 0
        boxes = <bc_outbox *>PyMem_Realloc(self.boxes, cap * sizeof(bc_outbox))
        if boxes == NULL:
            raise MemoryError("dispatcher: no memory for the outboxes")
        self.boxes = boxes
        memset(&boxes[self.n_boxes], 0, (cap - self.n_boxes) * sizeof(bc_outbox))
        listed = <int32_t *>PyMem_Realloc(self.listed, cap * sizeof(int32_t))
        if listed == NULL:
            raise MemoryError("dispatcher: no memory for the outboxes")
        self.listed = listed
        self.n_boxes = cap
        return 0

    cdef int _push_row(self, int32_t k, int64_t entry_id, uint16_t hash, uint8_t redelivered) except -1:
        """Append a row to key k's outbox and list k if it had none."""
        cdef bc_outbox *box = &self.boxes[k]
        if bc_outbox_push(box, entry_id, hash, redelivered) < 0:
            raise MemoryError("dispatcher: no memory for an outbox")
        if not box.listed:
            box.listed = 1
            self.listed[self.n_listed] = k
            self.n_listed += 1
        return 0

    cdef inline Member _member_of_key(self, Py_ssize_t k):
        cdef PyObject *item = PyList_GET_ITEM(self.by_key, k) if 0 <= k < PyList_GET_SIZE(self.by_key) else NULL
        return None if item == NULL or <object>item is None else <Member>item

    cdef object _take_box(self, int32_t k):
        """Key k's outbox rows as a Deliveries (the shared empty one when there are none); the
        outbox empties."""
        cdef bc_outbox *box = &self.boxes[k]
        cdef Deliveries out
        if box.len == 0:
            return no_deliveries
        out = new_deliveries(box.len, box.ids, box.hashes, box.redelivered)
        box.len = 0
        return out

    cdef int _set_log(self, list log) except -1:
        """Take new log columns (in new_log's order)."""
        self.ids, self.msgs, self.qnext, self.bucket, self.holder_log, self.hashes, self.state, \
            self.redelivered = log
        return 0

    cdef inline void _update_ready(self, Py_ssize_t b) noexcept:
        cdef int32_t o = self.owner[b], h = self.holder[b]
        self.ready[b] = o >= 0 and (h < 0 or h == o)

    cdef int _deliver(self, Py_ssize_t pos) except -1:
        """Hand a queued log position to its bucket's owner (the bucket must be ready)."""
        cdef Py_ssize_t b = self.bucket[pos]
        cdef int32_t k = self.owner[b]
        self.state[pos] = PENDING
        self.holder_log[pos] = k
        self.holder[b] = k
        self.b_pending[b] += 1
        self.b_delivered[b] += 1
        self.kstats[k, K_DELIVERED] += 1
        self.kstats[k, K_DELIVERED_MESSAGES] += self.msgs[pos]
        self.kstats[k, K_REDELIVERED] += self.redelivered[pos]
        self.kstats[k, K_PENDING] += 1
        self.kstats[k, K_PENDING_MESSAGES] += self.msgs[pos]
        self._push_row(k, self.ids[pos], self.hashes[pos], self.redelivered[pos])
        return 0

    cdef int _release(self, Py_ssize_t b) except -1:
        """Deliver bucket b's queue, in order, while it is ready."""
        cdef int64_t pos
        while self.q_head[b] >= 0 and self.ready[b]:
            pos = self.q_head[b]
            self.q_head[b] = self.qnext[pos]
            self.b_queued[b] -= 1
            self.queued_total -= 1
            self._deliver(pos)
        if self.q_head[b] < 0:
            self.q_tail[b] = -1
        return 0

    cdef int _release_buckets(self, const int32_t *buckets, Py_ssize_t m) except -1:
        """Deliver the queues of these ready buckets, merged in log (offset) order."""
        cdef Py_ssize_t i, j = 0, count = 0
        cdef int32_t b
        cdef int64_t pos
        cdef int64_t *p
        for i in range(m):
            count += self.b_queued[buckets[i]]
        if count == 0:
            return 0
        p = <int64_t *>PyMem_Malloc(count * sizeof(int64_t))
        if p == NULL:
            raise MemoryError("dispatcher: no memory to merge the released queues")
        try:
            for i in range(m):
                b = buckets[i]
                pos = self.q_head[b]
                while pos >= 0:
                    p[j] = pos
                    j += 1
                    pos = self.qnext[pos]
                self.q_head[b] = self.q_tail[b] = -1
                self.b_queued[b] = 0
            self.queued_total -= count
            qsort(p, count, sizeof(int64_t), bc_cmp_int64)
            for i in range(count):
                self._deliver(p[i])
        finally:
            PyMem_Free(p)
        return 0

    cdef int _release_ready(self) except -1:
        cdef Py_ssize_t b, m = 0
        for b in range(self.n_buckets):
            if self.ready[b] and self.q_head[b] >= 0:
                self.todo[m] = <int32_t>b
                m += 1
        self._release_buckets(self.todo, m)
        return 0

    # -- membership ------------------------------------------------------------------------------

    @cython.critical_section
    def join(self, tuple consumer not None):
        """A checked ``(name, consumer_id)`` connects: its Member, with the next free key (keys
        are dense and never reused) and empty counters and outbox."""
        cdef Py_ssize_t key = len(self.by_key), cap = self.kstats.shape[0], i
        cdef cnp.npy_intp dims[2]
        cdef Member m
        if len(consumer) != 2 or type(consumer[0]) is not str or type(consumer[1]) is not int:
            raise TypeError(f"consumer must be a (str, int) pair, not {consumer!r}")
        if consumer in self.by_consumer:
            raise ValueError(f"consumer {consumer!r} is connected already")
        if key >= cap:
            while key >= cap:
                cap *= 2
            dims[0] = cap
            dims[1] = NKSTATS
            grown = cnp.PyArray_ZEROS(2, dims, cnp.NPY_INT64, 0)
            memcpy(cnp.PyArray_DATA(grown), &self.kstats[0, 0], self.kstats.shape[0] * NKSTATS * sizeof(int64_t))
            self.kstats = grown
        for i in range(NKSTATS):
            self.kstats[key, i] = 0
        if key >= self.n_boxes:
            self._grow_boxes(max(key + 1, 2 * self.n_boxes))
        self.boxes[key].len = 0
        m = Member.__new__(Member)
        m.key = <int32_t>key
        m.consumer = consumer
        m.name = consumer[0]
        m.consumer_id = consumer[1]
        m.next_of_name = self.by_name.get(m.name)
        self.by_name[m.name] = m
        self.by_key.append(m)
        self.by_consumer[consumer] = m
        return m

    cdef int _forget(self, Member m) except -1:
        """A member that holds nothing any more, or crashed, is gone: its outbox rows are dropped
        (nothing left to send to it) and it is found no more."""
        cdef Member cur = self.by_name.get(m.name), prev = None
        while cur is not None and cur is not m:
            prev = cur
            cur = cur.next_of_name
        if cur is None:
            return 0  # forgotten already
        if prev is not None:
            prev.next_of_name = m.next_of_name
        elif m.next_of_name is not None:
            self.by_name[m.name] = m.next_of_name
        else:
            del self.by_name[m.name]
        m.next_of_name = None
        self.by_key[m.key] = None
        del self.by_consumer[m.consumer]
        self.boxes[m.key].len = 0
        return 0

    cdef int _settle(self, Member m) except -1:
        """Forget a leaving member that holds nothing any more."""
        if m.leaving and self.kstats[m.key, K_PENDING] == 0:
            self._forget(m)
        return 0

    @cython.critical_section
    def leave(self, Member m not None, bint crash):
        """Member ``m`` (out of the spread already) leaves: a crash requeues its unacked entries
        (flagged redelivered, to the front of their queues, in order) and forgets it; a clean leave
        marks it leaving and forgets it once it holds nothing. Returns the entries requeued."""
        cdef Py_ssize_t pos, b, count = 0
        m.leaving = True
        if not crash:
            self._settle(m)
            return 0
        for pos in range(self.end - 1, self.base - 1, -1):  # descending + prepend = ascending
            if self.state[pos] != PENDING or self.holder_log[pos] != m.key:
                continue
            b = self.bucket[pos]
            self.state[pos] = QUEUED
            self.holder_log[pos] = -1
            self.redelivered[pos] = 1
            self.qnext[pos] = self.q_head[b]
            self.q_head[b] = pos
            if self.q_tail[b] < 0:
                self.q_tail[b] = pos
            self.b_pending[b] -= 1
            self.b_queued[b] += 1
            self.queued_total += 1
            self.holder[b] = -1  # it held every unacked entry of b
            self._update_ready(b)
            count += 1
        self.kstats[m.key, K_PENDING] = 0
        self.kstats[m.key, K_PENDING_MESSAGES] = 0
        self._forget(m)
        self._release_ready()
        return count

    @cython.critical_section
    def member(self, tuple consumer not None):
        """The connected Member of a checked ``(name, consumer_id)``, or None."""
        return self.by_consumer.get(consumer)

    @cython.critical_section
    def members(self):
        """``{consumer: Member}`` of every connected consumer (a copy)."""
        return dict(self.by_consumer)

    @cython.critical_section
    def consumer_of_key(self, Py_ssize_t key):
        """The ``(name, consumer_id)`` of consumer key ``key``, or None once it is forgotten."""
        cdef Member m = self._member_of_key(key)
        return None if m is None else m.consumer

    @cython.critical_section
    def apply_spread(self, const int32_t[::1] old_keys not None, const int32_t[::1] new_keys not None) -> None:
        """Move from the spread of the members ``old_keys`` (consumer keys in spread order) to that
        of ``new_keys`` (every one an active member): only the buckets whose owner changes are
        touched, and the queues that became ready flow, merged in offset order. Walks the two
        spreads' slot boundaries: the cost grows with the consumers and the buckets that move."""
        cdef Py_ssize_t kw = new_keys.shape[0], ko = old_keys.shape[0], i
        cdef int64_t b, end, m = 0
        cdef int32_t o, w
        cdef bc_spread_walk walk
        cdef Py_ssize_t nk = PyList_GET_SIZE(self.by_key)
        cdef int32_t key
        cdef PyObject *item
        for i in range(kw):
            key = new_keys[i]
            item = PyList_GET_ITEM(self.by_key, key) if 0 <= key < nk else NULL
            if item == NULL or not isinstance(<object>item, Member) or (<Member>item).leaving:
                raise ValueError(f"slot {i} of the new spread: consumer key {key} is not an active member")
        bc_walk_begin(&walk, self.n_buckets, &old_keys[0] if ko else NULL, ko, &new_keys[0] if kw else NULL, kw)
        while bc_walk_next(&walk, &b, &end, &o, &w):
            if o != w:
                m = bc_give_run(&self.owner[0], &self.holder[0], &self.ready[0], &self.q_head[0], self.todo,
                                b, end, w, m, self.queued_total > 0)
        self._release_buckets(self.todo, m)

    # -- the log ---------------------------------------------------------------------------------

    cdef inline int _reserve(self, Py_ssize_t n) except -1:
        """Room for n more entries at the log's end."""
        if self.end + n <= self.ids.shape[0]:
            return 0
        return self._make_room(n)

    cdef int _make_room(self, Py_ssize_t n) except -1:
        """Room for n more entries at the log's end: the acked front is dropped and the live
        entries moved down (into new columns when they need more room), with memmove, never
        through numpy calls that may release the thread state."""
        cdef Py_ssize_t cap = self.ids.shape[0], live, b, i, base
        cdef int64_t[::1] ids, msgs, qnext
        cdef int32_t[::1] bucket, holder_log
        cdef uint16_t[::1] hashes
        cdef int8_t[::1] state
        cdef uint8_t[::1] red
        while self.base < self.end and self.state[self.base] == ACKED:
            self.base += 1
        base = self.base
        live = self.end - base
        while live + n > cap // 2:
            cap *= 2
        # the current columns stay alive (and are the source) until the move is done
        ids, msgs, qnext, bucket, holder_log = self.ids, self.msgs, self.qnext, self.bucket, self.holder_log
        hashes, state, red = self.hashes, self.state, self.redelivered
        if cap != ids.shape[0]:
            self._set_log(new_log(cap))
        if live:
            memmove(&self.ids[0], &ids[base], live * sizeof(int64_t))
            memmove(&self.msgs[0], &msgs[base], live * sizeof(int64_t))
            memmove(&self.qnext[0], &qnext[base], live * sizeof(int64_t))
            memmove(&self.bucket[0], &bucket[base], live * sizeof(int32_t))
            memmove(&self.holder_log[0], &holder_log[base], live * sizeof(int32_t))
            memmove(&self.hashes[0], &hashes[base], live * sizeof(uint16_t))
            memmove(&self.state[0], &state[base], live * sizeof(int8_t))
            memmove(&self.redelivered[0], &red[base], live * sizeof(uint8_t))
        for i in range(live):
            if self.qnext[i] >= 0:
                self.qnext[i] -= self.base
        for b in range(self.n_buckets):
            if self.q_head[b] >= 0:
                self.q_head[b] -= self.base
                self.q_tail[b] -= self.base
        self.base = 0
        self.end = live
        return 0

    cdef int _append(self, int64_t entry_id, Py_ssize_t b, uint16_t hash, int64_t msgs) except -1:
        """Append one entry (capacity reserved); deliver it if its bucket is ready, else queue it."""
        cdef Py_ssize_t pos = self.end
        self.end += 1
        self.last_id = entry_id
        self.ids[pos] = entry_id
        self.msgs[pos] = msgs
        self.bucket[pos] = <int32_t>b
        self.hashes[pos] = hash
        self.state[pos] = QUEUED
        self.holder_log[pos] = -1
        self.redelivered[pos] = 0
        if self.ready[b] and self.q_head[b] < 0:
            self._deliver(pos)
            return 1
        self.qnext[pos] = -1
        if self.q_tail[b] >= 0:
            self.qnext[self.q_tail[b]] = pos
        else:
            self.q_head[b] = pos
        self.q_tail[b] = pos
        self.b_queued[b] += 1
        self.queued_total += 1
        return 0

    @cython.critical_section
    def offer_routed(self, const int64_t[::1] ids not None, const int32_t[::1] bucket not None,
                     const uint16_t[::1] hashes not None, const int64_t[::1] msgs not None,
                     int64_t straddling):
        """Append routed entries (checked by the caller: ids ascending, after the log's last;
        buckets in range), ``straddling`` of them crossing a boundary, and deliver or queue each;
        returns how many were delivered right away."""
        cdef Py_ssize_t n = ids.shape[0], i, now = 0
        if bucket.shape[0] != n or hashes.shape[0] != n or msgs.shape[0] != n:
            raise ValueError("offer columns differ in length")
        for i in range(n):
            if not 0 <= bucket[i] < self.n_buckets or ids[i] <= (self.last_id if i == 0 else ids[i - 1]):
                raise ValueError(f"offer row {i}: a bucket out of range or an id out of order")
        self._reserve(n)
        for i in range(n):
            now += self._append(ids[i], bucket[i], hashes[i], msgs[i])
        self.offered_entries += n
        self.straddling_entries += straddling
        return now

    @cython.binding(False)  # a plain builtin once bound: fast_then calls its C function directly
    @cython.critical_section
    def offer_fast(self, entry_ids, hash_min=None, *, hash_max=None, key_hash=None, stamped=None,
                   message_count=None):
        """``Dispatcher.offer`` of one entry given as exact ints (``stamped`` a bool), with its
        signature: 1 delivered right away, 0 queued; None when the arguments are not of that shape
        or not valid (nothing changed: the caller's general path names what is wrong). The routing is entry_route.h's:
        a stamped entry by the bucket of ``hash_min``, an unstamped one by that of ``key_hash``'s
        low 16 bits, the sticky hash nudged from 0 to 1."""
        cdef long long entry, lo = 0, hi, key = 0, msgs = 1
        cdef bint is_stamped
        cdef uint32_t h
        cdef uint16_t b
        cdef int now
        if not exact_int(entry_ids, 0, 0x7FFFFFFFFFFFFFFF, &entry) or entry <= self.last_id:
            return None
        if stamped is not None and type(stamped) is not bool:
            return None
        if hash_min is None:
            # no stamp at all: the entry routes by its key hash (stamped and hash_max need hash_min)
            if key_hash is None or stamped is not None or hash_max is not None:
                return None
            is_stamped = False
        else:
            if key_hash is not None and stamped is None:
                return None  # key_hash routes only unstamped entries: stamped= says which
            if not exact_int(hash_min, -0x7FFFFFFFFFFFFFFF, 0x7FFFFFFFFFFFFFFF, &lo):
                return None
            is_stamped = stamped is None or stamped
        if key_hash is not None:
            if not exact_int(key_hash, 0, 0xFFFFFFFF, &key):
                return None
        elif not is_stamped:
            return None  # an unstamped entry without a key hash
        hi = lo
        if hash_max is not None and not exact_int(hash_max, -0x7FFFFFFFFFFFFFFF, 0x7FFFFFFFFFFFFFFF, &hi):
            return None
        if message_count is not None and not exact_int(message_count, 1, 0x7FFFFFFFFFFFFFFF, &msgs):
            return None
        if is_stamped:
            if bc_stamp_status(lo, hi) != BC_OK:
                return None
            h = <uint32_t>lo
        else:
            h = <uint32_t>key & 0xFFFF
        b = self.table[h]
        self._reserve(1)
        now = self._append(entry, b, bc_sticky_hash(h), msgs)
        self.offered_entries += 1
        if is_stamped and self.table[hi] != b:
            self.straddling_entries += 1
        return now

    # -- acks ------------------------------------------------------------------------------------

    cdef int64_t *_ack_room(self, Py_ssize_t n) except NULL:
        """The scratch for n log positions (grown, never shrunk)."""
        cdef int64_t *p
        if n > self.ack_cap or self.ack_pos == NULL:
            p = <int64_t *>PyMem_Realloc(self.ack_pos, max(n, 16) * sizeof(int64_t))
            if p == NULL:
                raise MemoryError("dispatcher: no memory for an ack")
            self.ack_pos = p
            self.ack_cap = max(n, 16)
        return self.ack_pos

    cdef inline Py_ssize_t _find(self, int64_t entry_id) noexcept:
        return bc_find_id(&self.ids[0], self.base, self.end, entry_id)

    cdef int _ack_ids(self, int32_t key, const int64_t *ids, Py_ssize_t n, Py_ssize_t *bad,
                      int32_t *detail) except -1:
        """Ack n ids all or nothing: BC_OK, or the status of the first failing one (its index in
        ``bad``, the holder key for BC_ERR_ACK_OTHER in ``detail``) with nothing changed."""
        cdef Py_ssize_t i, pos, j
        cdef int status = BC_OK
        cdef int8_t st
        cdef int64_t *p = self._ack_room(n)
        for i in range(n):
            pos = self._find(ids[i])
            if pos < 0:
                status = BC_ERR_ACK_UNKNOWN
            else:
                st = self.state[pos]
                if st == ACKING:
                    status = BC_ERR_ACK_DUPLICATE
                elif st == ACKED:
                    status = BC_ERR_ACK_ALREADY
                elif st == QUEUED:
                    status = BC_ERR_ACK_QUEUED
                elif self.holder_log[pos] != key:
                    status = BC_ERR_ACK_OTHER
                    detail[0] = self.holder_log[pos]
            if status != BC_OK:
                bad[0] = i
                for j in range(i):  # undo the marks
                    self.state[p[j]] = PENDING
                return status
            self.state[pos] = ACKING
            p[i] = pos
        for i in range(n):
            self._commit_ack(key, p[i])
        return BC_OK

    cdef int _commit_ack(self, int32_t key, Py_ssize_t pos) except -1:
        cdef Py_ssize_t b = self.bucket[pos]
        self.state[pos] = ACKED
        self.holder_log[pos] = -1
        self.b_pending[b] -= 1
        self.kstats[key, K_ACKED] += 1
        self.kstats[key, K_PENDING] -= 1
        self.kstats[key, K_PENDING_MESSAGES] -= self.msgs[pos]
        if self.b_pending[b] == 0:
            # The holder drained this bucket: a new owner waiting for it may take its queue now.
            self.holder[b] = -1
            self._update_ready(b)
            if self.ready[b] and self.q_head[b] >= 0:
                self._release(b)
        return 0

    cdef Py_ssize_t _ack_array(self, Member m, object ids) except -2:
        """Acks given as a one-dimensional C-contiguous native ``np.int64`` array of ids >= 0, all
        or nothing: the count acked, or -1 when ``ids`` is not such an array or an ack fails (then
        nothing changed)."""
        cdef cnp.ndarray arr
        cdef Py_ssize_t n, i, bad = -1
        cdef int32_t detail = -1
        cdef const int64_t *p
        if type(ids) is not cnp.ndarray:
            return -1
        arr = <cnp.ndarray>ids
        if (cnp.PyArray_NDIM(arr) != 1 or cnp.PyArray_TYPE(arr) != cnp.NPY_INT64
                or not cnp.PyArray_ISCARRAY_RO(arr) or not cnp.PyArray_ISNOTSWAPPED(arr)):
            return -1
        n = cnp.PyArray_DIM(arr, 0)
        p = <const int64_t *>cnp.PyArray_DATA(arr)
        for i in range(n):
            if p[i] < 0:
                return -1
        if n and self._ack_ids(m.key, p, n, &bad, &detail) != BC_OK:
            return -1
        self._settle(m)
        return n

    cdef int _ack_one(self, Member m, int64_t entry_id) except -1:
        """One individual ack: BC_OK, or why not (nothing changed then)."""
        cdef Py_ssize_t pos = self._find(entry_id)
        if pos < 0:
            return BC_ERR_ACK_UNKNOWN
        if self.state[pos] == ACKED:
            return BC_ERR_ACK_ALREADY
        if self.state[pos] == QUEUED:
            return BC_ERR_ACK_QUEUED
        if self.holder_log[pos] != m.key:
            return BC_ERR_ACK_OTHER
        self._commit_ack(m.key, pos)
        self._settle(m)
        return BC_OK

    cdef Member _find_member(self, object name, object consumer_id):
        """The connected member of an exact ``str`` name and ``int`` id, else None (not found, or
        another type: the general path decides)."""
        cdef Member m
        if type(name) is not str or type(consumer_id) is not int:
            return None
        m = self.by_name.get(name)
        while m is not None:
            if m.consumer_id == consumer_id:
                return m
            m = m.next_of_name
        return None

    @cython.binding(False)
    @cython.critical_section
    def ack_fast(self, name, consumer_id, entry_ids):
        """``Dispatcher.ack`` of an exact ``str`` name and ``int`` id with one exact ``int`` id or
        an ``np.int64`` column, every id pending on that consumer: the count acked (a leaving
        consumer that holds nothing any more is forgotten); None otherwise, nothing changed."""
        cdef Member m = self._find_member(name, consumer_id)
        cdef long long entry
        cdef Py_ssize_t n
        if m is None:
            return None
        if type(entry_ids) is int:
            if exact_int(entry_ids, 0, 0x7FFFFFFFFFFFFFFF, &entry) and self._ack_one(m, entry) == BC_OK:
                return 1
            return None
        n = self._ack_array(m, entry_ids)
        return None if n < 0 else n

    @cython.critical_section
    def ack_keyed(self, Member m not None, const int64_t[::1] ids not None):
        """Individual acks from member ``m``; all or nothing.

        Returns ``(status, index, detail)``: BC_OK, or the first failing id's index and why
        (detail: the holder key for BC_ERR_ACK_OTHER)."""
        cdef Py_ssize_t bad = -1
        cdef int32_t detail = -1
        cdef int status = BC_OK
        if ids.shape[0]:
            status = self._ack_ids(m.key, &ids[0], ids.shape[0], &bad, &detail)
        if status == BC_OK:
            self._settle(m)
        return status, bad, detail

    # -- delivery and views ----------------------------------------------------------------------

    @cython.binding(False)
    @cython.critical_section
    def poll_fast(self, name=None, consumer_id=None):
        """``Dispatcher.poll``: of every consumer (both None), or of one given as an exact ``str``
        and ``int`` that is connected; None for any other call (the general path decides)."""
        cdef Member m
        if name is None and consumer_id is None:
            return self._poll_all()
        m = self._find_member(name, consumer_id)
        return None if m is None else self._take_box(m.key)

    cdef object _poll_all(self):
        """``poll()`` in the core's section: it runs no Python code (sorting compares distinct
        ``(str, int)`` consumers only)."""
        cdef Py_ssize_t i
        cdef int32_t k
        cdef Member m
        cdef object first = None, first_rows = None
        cdef list rows = None
        for i in range(self.n_listed):
            k = self.listed[i]
            self.boxes[k].listed = 0
            if not self.boxes[k].len:
                continue
            m = self._member_of_key(k)
            if m is None:
                raise RuntimeError(f"dispatcher: consumer key {k} has rows and no member")
            if first is None:  # the common poll: one consumer was given entries
                first = m.consumer
                first_rows = self._take_box(k)
                continue
            if rows is None:
                rows = [(first, first_rows)]
            rows.append((m.consumer, self._take_box(k)))
        self.n_listed = 0
        if rows is not None:
            rows.sort()  # by consumer: the consumers differ, so their Deliveries are never compared
            return dict(rows)
        return nothing_polled if first is None else {first: first_rows}

    @cython.critical_section
    def key_stats(self, Py_ssize_t key):
        """The counters of consumer key ``key``: delivered entries and messages, redelivered,
        acked, pending entries and messages."""
        cdef Py_ssize_t i
        if not 0 <= key < len(self.by_key):
            raise ValueError(f"consumer key {key} was never given")
        return tuple([self.kstats[key, i] for i in range(NKSTATS)])

    @cython.critical_section
    def bucket_columns(self):
        """Copies of (owner keys, holder keys, delivered, pending, queued) per bucket (copied
        with memcpy: one consistent snapshot)."""
        cdef cnp.npy_intp n = self.n_buckets
        out = (cnp.PyArray_SimpleNew(1, &n, cnp.NPY_INT32), cnp.PyArray_SimpleNew(1, &n, cnp.NPY_INT32),
               cnp.PyArray_SimpleNew(1, &n, cnp.NPY_INT64), cnp.PyArray_SimpleNew(1, &n, cnp.NPY_INT64),
               cnp.PyArray_SimpleNew(1, &n, cnp.NPY_INT64))
        if n:
            memcpy(cnp.PyArray_DATA(out[0]), &self.owner[0], n * sizeof(int32_t))
            memcpy(cnp.PyArray_DATA(out[1]), &self.holder[0], n * sizeof(int32_t))
            memcpy(cnp.PyArray_DATA(out[2]), &self.b_delivered[0], n * sizeof(int64_t))
            memcpy(cnp.PyArray_DATA(out[3]), &self.b_pending[0], n * sizeof(int64_t))
            memcpy(cnp.PyArray_DATA(out[4]), &self.b_queued[0], n * sizeof(int64_t))
        return out

    @cython.critical_section
    def totals(self):
        """(pending entries, queued entries)."""
        cdef Py_ssize_t b
        cdef int64_t pending = 0
        for b in range(self.n_buckets):
            pending += self.b_pending[b]
        return pending, self.queued_total
