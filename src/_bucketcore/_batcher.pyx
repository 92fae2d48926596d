# cython: language_level=3
"""The streaming batcher's kernel: the ``Grouper`` behind ``EntryBucketBatcher``.

It keeps the batch state (_grouping) across calls, buffers the pending messages' global bucket
index and stream position (the caller keeps their payloads in a parallel list), and hashes,
routes and scans one key per ``add_key`` call with route.h's rule.
"""

from cpython.bytearray cimport PyByteArray_GET_SIZE
from cpython.bytes cimport PyBytes_GET_SIZE
from cpython.mem cimport PyMem_RawFree, PyMem_RawMalloc, PyMem_RawRealloc
from cpython.object cimport PyObject
from cpython.pythread cimport (
    NOWAIT_LOCK, WAIT_LOCK, PyThread_acquire_lock, PyThread_allocate_lock, PyThread_free_lock,
    PyThread_release_lock, PyThread_type_lock,
)
from libc.stdint cimport int32_t, int64_t, uint16_t, uint32_t

cimport numpy as cnp
import numpy as np

from _bucketcore._status cimport *
from _bucketcore._hashing cimport BC_KEY_NONE, bc_hash_key, bc_key, bc_scratch, bc_scratch_free
from _bucketcore._grouping cimport (
    GroupState, check_columns, gs_assign_slots, gs_drain, gs_finish, gs_free, gs_scan, init_state,
    optional_i32, optional_i64, record_columns,
)
from _bucketcore._routing cimport (
    bc_bucket_hash, bc_legacy_slot, bc_next_turn, bc_range_segment, bc_segment_hash,
)

cnp.import_array()

cdef extern from "lookup.h" nogil:
    uint32_t bc_bucket_of(const uint16_t *splits, uint32_t n, uint32_t h)

cdef extern from "pykeys.h":
    int bc_describe_key(PyObject *o, bc_key *k) except -1

cdef extern from "Python.h":
    PyObject *PyList_GET_ITEM(object lst, Py_ssize_t i)
    PyObject *PyTuple_GET_ITEM(object tup, Py_ssize_t i)
    bint PyBytes_Check(PyObject *o)
    bint PyByteArray_Check(PyObject *o)
    bint PyMemoryView_Check(PyObject *o)


cdef class Grouper:
    """Streaming batch state over a fixed list of segments (bucket_offsets[s+1] - bucket_offsets[s]
    buckets in segment s): ``scan`` (or ``add_key``) messages, ``finish`` at a flush, and ``drain``
    the entries emitted so far. The Grouper keeps the pending messages' global bucket index and
    stream position itself, so the caller only keeps their payloads, in a list per bucket."""

    cdef GroupState st
    cdef bint ready
    cdef bint busy          # a call is running with the GIL released: refuse re-entry
    cdef int32_t *pending_bucket     # pending messages in send order: global bucket index, stream position
    cdef int64_t *pending_position
    cdef int64_t npending
    cdef int64_t pending_capacity
    # routing of one key (add_key): starts of active segments 1.., legacy order, boundary lists
    cdef bint routed
    cdef uint16_t *segment_starts
    cdef int32_t *legacy_order
    cdef uint16_t *splits
    cdef int64_t *split_offsets
    cdef bc_scratch scratch

    def __cinit__(self, const int64_t[::1] bucket_offsets, int policy, int64_t max_messages,
                  int64_t max_bytes):
        self.ready = False
        init_state(&self.st, bucket_offsets, policy, max_messages, max_bytes)
        self.ready = True

    def __dealloc__(self):
        gs_free(&self.st)
        PyMem_RawFree(self.pending_bucket)
        PyMem_RawFree(self.pending_position)
        PyMem_RawFree(self.segment_starts)
        PyMem_RawFree(self.legacy_order)
        PyMem_RawFree(self.splits)
        PyMem_RawFree(self.split_offsets)
        bc_scratch_free(&self.scratch)

    def set_routing(self, const uint16_t[::1] starts, object legacy_order, const uint16_t[::1] splits,
                    const int64_t[::1] split_offsets):
        """What add_key routes one key by (the rules of TopicLayout.route_index).

        starts: hash_start of active segments 1..S-1 (ascending); legacy_order: None, or the
        active index of each legacy segment in layout order (all-legacy layout); splits /
        split_offsets: each segment's boundary list, as bucket_index takes them.
        """
        cdef int64_t nseg = self.st.nseg, i
        cdef const int32_t[::1] legacy
        if starts.shape[0] != nseg - 1 or split_offsets.shape[0] != nseg + 1:
            raise ValueError("routing tables do not match the segment count")
        for i in range(nseg):
            if split_offsets[i + 1] - split_offsets[i] != self.st.segs[i].bucket_count - 1 or split_offsets[i] < 0 \
                    or split_offsets[i + 1] > splits.shape[0]:
                raise ValueError(f"segment {i}: its splits do not match its bucket count")
        self.segment_starts = <uint16_t *>PyMem_RawMalloc(nseg * sizeof(uint16_t))
        self.splits = <uint16_t *>PyMem_RawMalloc((splits.shape[0] + 1) * sizeof(uint16_t))
        self.split_offsets = <int64_t *>PyMem_RawMalloc((nseg + 1) * sizeof(int64_t))
        if self.segment_starts == NULL or self.splits == NULL or self.split_offsets == NULL:
            raise MemoryError()
        for i in range(nseg - 1):
            self.segment_starts[i] = starts[i]
        for i in range(splits.shape[0]):
            self.splits[i] = splits[i]
        for i in range(nseg + 1):
            self.split_offsets[i] = split_offsets[i]
        if legacy_order is not None:
            legacy = legacy_order
            if legacy.shape[0] != nseg:
                raise ValueError("legacy_order does not match the segment count")
            self.legacy_order = <int32_t *>PyMem_RawMalloc(nseg * sizeof(int32_t))
            if self.legacy_order == NULL:
                raise MemoryError()
            for i in range(nseg):
                if legacy[i] < 0 or legacy[i] >= nseg:
                    raise ValueError(f"legacy_order[{i}] = {legacy[i]} is not a segment index")
                self.legacy_order[i] = legacy[i]
        self.routed = True

    def add_key(self, object key, int64_t size, bint replace, int64_t round_robin):
        """Hash, route, look up and scan one message (the per-send path, one C call).

        key: str, bytes, bytearray, memoryview, or a missing value (None, NaN, pandas.NA: keyless,
        bucket hash 0, segment by round-robin). Returns
        (status, emitted, next_round_robin, global_bucket); a status other than BC_OK (the key's
        type, a surrogate under strict, a key too long) changes nothing. global_bucket is
        bucket_offsets[segment] + bucket, the message's (segment, bucket) as one index.
        """
        cdef int32_t g = -1
        cdef int rc = self.add_one(key, size, replace, &round_robin, &g)
        if rc != BC_OK:
            return rc, False, round_robin, -1
        return BC_OK, self.st.nrec > 0, round_robin, g

    cdef int add_one(self, object key, int64_t size, bint replace, int64_t *rr, int32_t *g_out) except -1:
        """``add_key`` in C: the status; on BC_OK the round-robin position in ``rr`` is advanced
        (keyless) and the message's global bucket is in ``g_out``; otherwise nothing changed."""
        self.check()
        if not self.routed:
            raise RuntimeError("add_key needs set_routing first")
        if size < 0:
            raise ValueError(f"size {size} is negative")
        cdef int64_t nseg = self.st.nseg
        cdef int64_t round_robin = rr[0]
        cdef bc_key k
        cdef uint32_t raw = 0
        cdef int rc
        cdef int32_t idx, bucket = 0
        cdef uint16_t h = 0
        if round_robin < 0:
            raise ValueError("round_robin must be >= 0")
        if key is None:
            k.kind = BC_KEY_NONE
        else:
            rc = bc_describe_key(<PyObject *>key, &k)
            if rc != BC_OK:
                return rc
        if k.kind == BC_KEY_NONE:  # a missing key (None, NaN, pandas.NA): keyless
            idx = <int32_t>(round_robin % nseg)
            round_robin = bc_next_turn(idx, nseg)
            if self.legacy_order != NULL:
                idx = self.legacy_order[idx]
        else:
            rc = bc_hash_key(&k, replace, &self.scratch, &raw)
            if rc == BC_ERR_NOMEM:
                raise MemoryError()
            if rc != BC_OK:
                return rc
            if self.legacy_order != NULL:
                idx = self.legacy_order[bc_legacy_slot(raw, <uint32_t>nseg)]
            else:
                idx = <int32_t>bc_range_segment(self.segment_starts, <uint32_t>(nseg - 1), bc_segment_hash(raw))
            h = bc_bucket_hash(raw)
            bucket = <int32_t>bc_bucket_of(self.splits + self.split_offsets[idx],
                                           <uint32_t>(self.split_offsets[idx + 1] - self.split_offsets[idx]), h)
        self.reserve(1)
        cdef int32_t g = <int32_t>(self.st.segs[idx].first_bucket + bucket)
        cdef int64_t first = self.st.seq
        if gs_scan(&self.st, 1, &g, &h, &size) < 0:
            self.ready = False
            raise MemoryError()
        self.pending_bucket[self.npending] = g
        self.pending_position[self.npending] = first
        self.npending += 1
        rr[0] = round_robin
        g_out[0] = g
        return BC_OK

    cdef check(self):
        if not self.ready:
            raise RuntimeError("this Grouper ran out of memory earlier and its state is lost")
        if self.busy:
            raise RuntimeError("this Grouper is in use by another thread; serialise the calls")

    cdef int reserve(self, int64_t extra) except -1:
        """Room for ``extra`` more pending messages (before the state changes)."""
        cdef int64_t need = self.npending + extra, cap
        cdef void *a
        if need <= self.pending_capacity:
            return 0
        cap = max(need, 2 * self.pending_capacity, 256)
        a = PyMem_RawRealloc(self.pending_bucket, cap * sizeof(int32_t))
        if a == NULL:
            raise MemoryError()
        self.pending_bucket = <int32_t *>a
        a = PyMem_RawRealloc(self.pending_position, cap * sizeof(int64_t))
        if a == NULL:
            raise MemoryError()
        self.pending_position = <int64_t *>a
        self.pending_capacity = cap
        return 0

    @property
    def position(self) -> int:
        """Messages scanned so far (the stream position of the next message)."""
        return self.st.seq

    @property
    def open_batches(self) -> int:
        return self.st.nopen

    @property
    def emitted(self) -> int:
        """Entries emitted and not yet drained."""
        return self.st.nrec

    @property
    def pending(self) -> int:
        """Buffered messages not yet drained into an entry."""
        return self.npending

    def scan(self, object seg, const int32_t[::1] bucket, const uint16_t[::1] bucket_hash,
             object sizes):
        """Feed a chunk of messages: segment index (seg None: one segment), bucket index, bucket
        hash and size (None: 0 bytes) each. Every column is checked before the state changes.
        Returns (status, index): BC_OK and -1, or the first bad message's status and index
        (nothing scanned); ``emitted`` then says whether entries are ready to drain."""
        self.check()
        cdef Py_ssize_t n = bucket.shape[0]
        if bucket_hash.shape[0] != n:
            raise ValueError(f"bucket_hash has {bucket_hash.shape[0]} values for {n} messages")
        cdef const int32_t *segp = optional_i32(seg, n, "seg")
        cdef const int64_t *size_ptr = optional_i64(sizes, n, "sizes")
        if n == 0:
            return BC_OK, -1
        self.reserve(n)
        cdef int32_t *global_bucket = self.pending_bucket + self.npending  # checked, straight into the buffer
        cdef int status = BC_OK
        cdef int64_t bad, i, first = self.st.seq
        cdef int rc = 0
        self.busy = True
        with nogil:
            bad = check_columns(&self.st, n, segp, &bucket[0], size_ptr, global_bucket, &status)
            if bad < 0:
                rc = gs_scan(&self.st, n, global_bucket, &bucket_hash[0], size_ptr)
                if rc == 0:
                    for i in range(n):
                        self.pending_position[self.npending + i] = first + i
                    self.npending += n
        self.busy = False
        if bad >= 0:
            return status, bad
        if rc < 0:
            self.ready = False
            raise MemoryError()
        return BC_OK, -1

    def finish(self):
        """Emit every open batch (end of input or an explicit flush)."""
        self.check()
        cdef int rc
        self.busy = True
        with nogil:
            rc = gs_finish(&self.st)
        self.busy = False
        if rc < 0:
            self.ready = False
            raise MemoryError()

    def drain(self):
        """Place the buffered messages of the emitted entries and drop them from the buffer.

        Returns (seg, bucket, hash_min, hash_max, start, count, nbytes, take, keep, index): one
        row per emitted entry in emission order; ``take`` lists buffer positions entry after
        entry, ``index`` their stream positions; ``keep`` the buffer positions still in open
        batches (send order), which become positions 0.. of the compacted buffer.
        """
        self.check()
        self.busy = True
        try:
            return self._drain()
        finally:
            self.busy = False

    cdef tuple _drain(self):
        cdef int64_t nrec = self.st.nrec, total, n = self.npending, kept = 0, j
        total = gs_assign_slots(&self.st)
        if total > n:
            self.ready = False
            raise RuntimeError(f"{total} messages were emitted but only {n} are buffered (state lost)")
        cdef tuple cols = record_columns(&self.st, nrec)
        cdef cnp.ndarray take = np.empty(total, dtype=np.int64)
        cdef cnp.ndarray keep = np.empty(n - total, dtype=np.int64)
        cdef cnp.ndarray index = np.empty(total, dtype=np.int64)
        cdef int64_t *tp = <int64_t *>cnp.PyArray_DATA(take)
        cdef int64_t *kp = <int64_t *>cnp.PyArray_DATA(keep)
        cdef int64_t *ip = <int64_t *>cnp.PyArray_DATA(index)
        if n:
            with nogil:
                kept = gs_drain(&self.st, n, self.pending_bucket, tp, kp if n > total else NULL)
                if kept == n - total:
                    for j in range(total):
                        ip[j] = self.pending_position[tp[j]]
                    # keep is ascending, so compacting in place never overwrites a later source
                    for j in range(kept):
                        self.pending_bucket[j] = self.pending_bucket[kp[j]]
                        self.pending_position[j] = self.pending_position[kp[j]]
                    self.npending = kept
        if kept != n - total:
            self.ready = False
            raise RuntimeError("buffered messages do not match the emitted entries (state lost)")
        return cols + (take, keep, index)


def payload_sizes(object payloads, int64_t[::1] out):
    """out[i] = byte size of payloads[i] (bytes, bytearray or memoryview) for a list or tuple.

    Returns the index of the first payload of another type, or -1.
    """
    cdef Py_ssize_t i, n = out.shape[0]
    cdef PyObject *o
    cdef bint is_list = type(payloads) is list
    if not is_list and type(payloads) is not tuple:
        raise TypeError("payloads must be a list or tuple")
    if len(payloads) != n:
        raise ValueError("out does not match payloads")
    for i in range(n):
        o = PyList_GET_ITEM(payloads, i) if is_list else PyTuple_GET_ITEM(payloads, i)
        if PyBytes_Check(o):
            out[i] = PyBytes_GET_SIZE(<object>o)
        elif PyByteArray_Check(o):
            out[i] = PyByteArray_GET_SIZE(<object>o)
        elif PyMemoryView_Check(o):
            out[i] = (<object>o).nbytes
        else:
            return i
    return -1


cdef class BatcherLock:
    """A mutex whose uncontended acquire is one C call; a contended one waits with the GIL
    released (the holder may need it to finish). Not reentrant. A context manager."""

    cdef PyThread_type_lock lock

    def __cinit__(self):
        self.lock = PyThread_allocate_lock()
        if self.lock == NULL:
            raise MemoryError("no memory for a lock")

    def __dealloc__(self):
        if self.lock != NULL:
            PyThread_free_lock(self.lock)

    cdef inline int take(self) except -1:
        if not PyThread_acquire_lock(self.lock, NOWAIT_LOCK):
            with nogil:
                PyThread_acquire_lock(self.lock, WAIT_LOCK)
        return 0

    cdef inline void give(self) noexcept:
        PyThread_release_lock(self.lock)

    def __enter__(self) -> BatcherLock:
        self.take()
        return self

    def __exit__(self, *exc_info: object) -> bool:
        self.give()
        return False


cdef class BatcherCore:
    """The per-send half of ``EntryBucketBatcher``: ``add`` of a bytes payload runs here (hash,
    route, scan, keep the payload in its bucket's list) under the batcher's lock. A subclass
    provides ``_add_checked`` (every other payload, and the errors) and ``_drain``."""

    cdef public Grouper _grouper
    cdef public list _open          # per global bucket: payloads of its open batch in send order, or None
    cdef public BatcherLock _lock
    cdef public int64_t _round_robin
    cdef public bint _replace

    def add(self, object key, object payload) -> list:
        """Add one message: one kernel call hashes, routes, looks up and batches it.

        Parameters
        ----------
        key : str, bytes or None
            The message key (``None``: keyless, round-robin over the segments).
        payload : bytes, bytearray or memoryview
            Its payload; its byte size counts toward ``max_bytes``. A mutable buffer is copied
            (the entry keeps what was sent, whatever the caller does to it afterwards).

        Returns
        -------
        list of Entry
            The entries that became ready (often none).

        Raises
        ------
        TypeError
            A key or payload of another type.
        KeyEncodingError
            A str key with a surrogate under ``errors="strict"``.
        """
        cdef Grouper grouper = self._grouper
        cdef int64_t rr = self._round_robin
        cdef int32_t g = -1
        cdef int status
        cdef object batch
        if type(payload) is not bytes or grouper is None:
            return self._add_checked(key, payload)
        self._lock.take()
        try:
            status = grouper.add_one(key, PyBytes_GET_SIZE(payload), self._replace, &rr, &g)
            if status == BC_OK:
                self._round_robin = rr
                batch = self._open[g]   # g < len(_open): the list has one slot per bucket of the layout
                if batch is None:
                    self._open[g] = [payload]
                else:
                    (<list>batch).append(payload)
                if grouper.st.nrec > 0:
                    return self._drain()
                return []
        finally:
            self._lock.give()
        return self._add_checked(key, payload)  # nothing changed: the checked path names the error
