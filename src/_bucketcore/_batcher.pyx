# cython: language_level=3
"""The streaming batcher's kernel: ``BatcherCore``, the state behind ``EntryBucketBatcher``; the
``Entry`` it emits is _entry's, whose fields it fills directly.

Everything per send runs here with the GIL held: the key is described and hashed, routed by the
layout's Router (route.h), fed to the batch state machine (_grouping, records only: no message
is placed by it), and its payload and stream position are appended to its bucket's queue. An
emitted record takes its messages from the front of its bucket's queue (a bucket's batches are
emitted oldest first), so an entry is built from two contiguous runs: its payload references,
moved into a new list, and its positions.
"""

cimport cython
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE
from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.list cimport PyList_GET_SIZE, PyList_GetSlice, PyList_New
from cpython.object cimport PyObject
from cpython.pythread cimport PyThread_get_thread_ident
from cpython.ref cimport Py_DECREF, Py_INCREF
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memcpy, memmove

from _bucketcore._status cimport *
from _bucketcore._hashing cimport (
    BC_KEY_NONE, CHUNK, KeyColumn, bc_hash_key, bc_key, bc_scratch, bc_scratch_free,
)
from _bucketcore._entry cimport NEAR_POSITIONS, Entry, blank_entry
from _bucketcore._grouping cimport GroupState, gs_finish, gs_free, gs_scan, init_state, line_start
from _bucketcore._producer cimport KeyChunks
from _bucketcore._routing cimport Router, bc_route, bc_route_parts

from _bucketcore._keycolumns import objects_column

cdef extern from "pykeys.h":
    int bc_describe_key(PyObject *o, bc_key *k) except -1

cdef extern from "Python.h":
    void PyList_SET_ITEM(object lst, Py_ssize_t i, PyObject *o)   # steals the reference
    PyObject *PyList_GET_ITEM(object lst, Py_ssize_t i)
    PyObject *PyTuple_GET_ITEM(object tup, Py_ssize_t i)
    bint PyBytes_CheckExact(PyObject *o)
    bint PyByteArray_Check(PyObject *o)
    bint PyMemoryView_Check(PyObject *o)

# The call lock (call_lock.h says how it works with and without the GIL).
cdef extern from "call_lock.h":
    enum: BC_FREE_THREADED
    ctypedef char bc_mutex
    void bc_nap() nogil
    void bc_mutex_lock(bc_mutex *m)
    void bc_mutex_unlock(bc_mutex *m)
    unsigned long bc_owner_load(unsigned long *p)
    void bc_owner_store(unsigned long *p, unsigned long v)

cdef extern from "prefetch.h" nogil:
    void bc_prefetch(const void *p)
    enum: PREFETCH_AHEAD "BC_PREFETCH_AHEAD"


class NoEntries(list):
    """The empty result of an ``add`` / ``add_many`` / ``flush`` that emitted nothing: one shared
    list that refuses every change (so no call allocates one). Copy it (``list(result)``) to get
    a list of your own."""

    __slots__ = ()

    def _refuse(self, *args: object, **kwargs: object) -> None:
        raise TypeError("this empty result is shared by every call that emitted nothing; it cannot change")

    append = extend = insert = __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse


NO_ENTRIES = NoEntries()
cdef object no_entries = NO_ENTRIES


# A buffered message: its payload (an owned reference) and stream position, side by side (one
# line holds both).
ctypedef struct QueueItem:
    PyObject *payload
    int64_t position


# A bucket's buffered messages (its emitted-but-not-taken and open batches), oldest first:
# live items are [head, head + len) of items. 32 bytes: two to a line of the line-aligned array.
ctypedef struct PayloadQueue:
    QueueItem *items
    int64_t head
    int64_t len
    int64_t cap


cdef int queue_room(PayloadQueue *q) noexcept:
    """Room at the back of a full queue: move the live items to the front when that frees at
    least half of it, else double it. -1: no memory (the queue is unchanged)."""
    cdef int64_t cap
    cdef void *p
    if q.head * 2 >= q.cap and q.head > 0:
        memmove(q.items, q.items + q.head, q.len * sizeof(QueueItem))
        q.head = 0
        return 0
    cap = q.cap * 2 if q.cap else 4
    p = realloc(q.items, cap * sizeof(QueueItem))
    if p == NULL:
        return -1
    q.items = <QueueItem *>p
    q.cap = cap
    return 0


cdef inline int queue_push(PayloadQueue *q, PyObject *payload, int64_t position) noexcept:
    """Append a message (a new reference to its payload). -1: no memory (nothing appended)."""
    cdef int64_t end = q.head + q.len
    if end == q.cap:
        if queue_room(q) < 0:
            return -1
        end = q.head + q.len
    Py_INCREF(<object>payload)
    q.items[end].payload = payload
    q.items[end].position = position
    q.len += 1
    return 0


cdef inline int64_t payload_size(object payload) except -1:
    """The byte size of a payload (bytes, bytearray or memoryview)."""
    if PyBytes_CheckExact(<PyObject *>payload):
        return PyBytes_GET_SIZE(payload)
    if PyMemoryView_Check(<PyObject *>payload):
        return payload.nbytes
    return len(payload)


cdef object frozen_payload(object payload, Py_ssize_t index):
    """A payload that cannot change after it was added: a read-only view of bytes as given,
    anything else bytes-like copied to bytes (bytes themselves never come here). An Entry's
    dealloc relies on it: releasing such a payload runs no Python code (_entry.pyx)."""
    if PyByteArray_Check(<PyObject *>payload):
        return PyBytes_FromStringAndSize(PyByteArray_AS_STRING(payload), PyByteArray_GET_SIZE(payload))
    if PyMemoryView_Check(<PyObject *>payload):
        if payload.readonly and type(payload.obj) is bytes:
            return payload
        return payload.tobytes()
    name = "payload" if index < 0 else f"payloads[{index}]"
    raise TypeError(f"{name} must be bytes, bytearray or memoryview, not {type(payload).__name__}")


cdef object exported_key(object key):
    """Free-threaded builds: a bytearray or memoryview key read through a memoryview export of it,
    which no other thread can resize or release between the key's description and its hash (under
    the GIL nothing runs between the two). A released memoryview stays itself (it is refused)."""
    try:
        return memoryview(key)
    except ValueError:
        return key


cdef class BatcherCore:
    """The state of an ``EntryBucketBatcher``: the batch state machine over the layout's segments,
    one payload queue per (segment, bucket), the keyless turn, and the entries it emits.

    ``_setup`` (from the subclass's ``__init__``) gives it the layout's plan. Calls are serialised:
    under the GIL by a flag taken and released with the GIL held (nothing is released in between,
    so no other thread can see it half-set), and a thread that finds it taken (the holder let the
    GIL go, e.g. in hashing or a garbage collection) yields until it is free; on a free-threaded
    build by a PyMutex held for the whole call. A call made again from the thread running one (a
    finalizer, a payload's own code) is refused.
    """

    cdef GroupState st
    cdef PayloadQueue *queues    # one per global bucket, 64-byte aligned inside queue_block
    cdef void *queue_block
    cdef Router router
    cdef int64_t *segment_ids     # each segment's id
    cdef int64_t turn            # the keyless turn of the next keyless message
    cdef bint replace
    cdef bint ready              # set up, and no state was lost to a failed allocation
    cdef int64_t npending        # messages in the queues
    cdef bc_scratch scratch
    cdef int busy
    cdef unsigned long owner     # the thread in a call (under the GIL: the last one)
    cdef bc_mutex mutex          # free-threaded builds: held for a whole call
    cdef KeyChunks chunks        # add_many's key reader, made on first use
    cdef void *work              # add_many's per-message columns
    cdef Py_ssize_t work_cap

    def __cinit__(self, *args: object, **kwargs: object):
        self.ready = False

    def __dealloc__(self):
        cdef int64_t g, i
        cdef PayloadQueue *q
        if self.queues != NULL:
            for g in range(self.st.nbuckets):
                q = &self.queues[g]
                for i in range(q.head, q.head + q.len):
                    Py_DECREF(<object>q.items[i].payload)
                free(q.items)
        free(self.queue_block)
        gs_free(&self.st)
        bc_scratch_free(&self.scratch)
        free(self.work)
        free(self.segment_ids)

    def _setup(self, const int64_t[::1] bucket_offsets, int policy, int64_t max_messages, int64_t max_bytes,
               Router router, const int64_t[::1] segment_ids, int64_t round_robin, bint replace) -> None:
        """Build the state (once): the segments' buckets (bucket_offsets), the limits, the
        layout's Router over the same segments, each segment's id (int64), the first keyless
        turn and the surrogate rule. Free-threaded builds: under the call mutex, so a call
        finds the state built or not at all."""
        bc_mutex_lock(&self.mutex)
        try:
            self.setup(bucket_offsets, policy, max_messages, max_bytes, router, segment_ids, round_robin, replace)
        finally:
            bc_mutex_unlock(&self.mutex)

    @cython.final
    cdef int setup(self, const int64_t[::1] bucket_offsets, int policy, int64_t max_messages, int64_t max_bytes,
                   Router router, const int64_t[::1] segment_ids, int64_t round_robin, bint replace) except -1:
        cdef Py_ssize_t s
        if self.queues != NULL:
            raise RuntimeError("this batcher is set up already")
        if segment_ids.shape[0] != bucket_offsets.shape[0] - 1:
            raise ValueError("segment_ids must hold one id per segment")
        if router.nsegments != bucket_offsets.shape[0] - 1:
            raise ValueError("the router's bucket tables do not match the segments")
        for s in range(bucket_offsets.shape[0]):
            if router.rule.first_bucket[s] != bucket_offsets[s]:
                raise ValueError("the router's bucket tables do not match the segments")
        if round_robin < 0:
            raise ValueError("round_robin must be >= 0")
        init_state(&self.st, bucket_offsets, policy, max_messages, max_bytes)
        # two queues more than buckets, so the array can start on a line boundary
        self.queue_block = calloc(self.st.nbuckets + 3, sizeof(PayloadQueue))
        if self.queue_block == NULL:
            raise MemoryError()
        self.queues = <PayloadQueue *>line_start(self.queue_block)
        self.segment_ids = <int64_t *>malloc(segment_ids.shape[0] * sizeof(int64_t))
        if self.segment_ids == NULL:
            raise MemoryError()
        for s in range(segment_ids.shape[0]):
            self.segment_ids[s] = segment_ids[s]
        self.router = router
        self.turn = router.first_turn(round_robin)
        self.replace = replace
        self.ready = True
        return 0

    # -- the lock ---------------------------------------------------------------------------------

    @cython.final
    cdef inline int enter(self) except -1:
        if BC_FREE_THREADED:
            return self.enter_mutex()
        if self.busy or not self.ready:
            self.wait_turn()
        self.busy = 1
        self.owner = PyThread_get_thread_ident()
        return 0

    @cython.final
    cdef inline void leave(self) noexcept:
        if BC_FREE_THREADED:
            bc_owner_store(&self.owner, 0)
            bc_mutex_unlock(&self.mutex)
        else:
            self.busy = 0

    @cython.final
    cdef int check_usable(self) except -1:
        if not self.ready:
            if self.queues == NULL:
                raise RuntimeError("this batcher was not set up (EntryBucketBatcher.__init__ sets it up)")
            raise RuntimeError("this batcher ran out of memory earlier and its state is lost")
        return 0

    @cython.final
    cdef int wait_turn(self) except -1:
        self.check_usable()
        if self.owner == PyThread_get_thread_ident():
            raise RuntimeError("this batcher was called again while one of its calls was running in this thread")
        while self.busy:
            with nogil:
                bc_nap()
        self.check_usable()  # the call waited for may have lost the state
        return 0

    @cython.final
    cdef int enter_mutex(self) except -1:
        """enter on a free-threaded build: only the thread holding the mutex finds its own id in
        owner (it is cleared before the mutex is released), so a call from that thread is refused
        instead of waiting for itself."""
        if bc_owner_load(&self.owner) == PyThread_get_thread_ident():
            raise RuntimeError("this batcher was called again while one of its calls was running in this thread")
        bc_mutex_lock(&self.mutex)
        if not self.ready:
            bc_mutex_unlock(&self.mutex)
            self.check_usable()
        bc_owner_store(&self.owner, PyThread_get_thread_ident())
        return 0

    @cython.final
    cdef int lost(self) except -1:
        self.ready = False
        raise MemoryError()

    # -- the per-send path ----------------------------------------------------------------------

    def add(self, object key, object payload):
        """Add one message: one kernel call hashes, routes, batches and, when a batch fills,
        builds the entries.

        Parameters
        ----------
        key : str, bytes, bytearray, memoryview or None
            The message key; ``None`` (or another missing value: NaN, pandas.NA) is keyless,
            round-robin over the segments.
        payload : bytes, bytearray or memoryview
            Its payload; its byte size counts toward ``max_bytes``. A mutable buffer is copied
            (the entry keeps what was sent, whatever the caller does to it afterwards).

        Returns
        -------
        list of Entry
            The entries that became ready; when none did, one shared empty list that cannot be
            changed.

        Raises
        ------
        TypeError
            A key or payload of another type.
        KeyEncodingError
            A str key with a surrogate under ``errors="strict"``.
        """
        cdef bc_key k
        cdef uint32_t raw = 0
        cdef int rc = BC_OK
        cdef int has_key = 0
        cdef int32_t g
        cdef uint16_t h
        cdef int64_t size, turn
        if type(payload) is bytes:
            size = PyBytes_GET_SIZE(payload)
        else:
            payload = frozen_payload(payload, -1)
            size = payload_size(payload)
        if BC_FREE_THREADED and (PyByteArray_Check(<PyObject *>key) or PyMemoryView_Check(<PyObject *>key)):
            key = exported_key(key)
        self.enter()
        try:
            if key is not None:
                rc = bc_describe_key(<PyObject *>key, &k)
                if rc == BC_OK and k.kind != BC_KEY_NONE:
                    has_key = 1
                    rc = bc_hash_key(&k, self.replace, &self.scratch, &raw)
            if rc == BC_OK:
                turn = self.turn
                h = <uint16_t>(raw & 0xFFFF)
                g = bc_route_parts(&self.router.rule, raw, raw >> 16, h, has_key, &turn)
                if queue_push(&self.queues[g], <PyObject *>payload, self.st.seq) < 0:
                    raise MemoryError()
                return self.scanned(1, &g, &h, &size, turn)
        finally:
            self.leave()
        if rc == BC_ERR_NOMEM:
            raise MemoryError()
        self._refuse(key, rc, -1)

    def add_many(self, object keys, object payloads):
        """Add a batch of sends in one kernel call.

        Parameters
        ----------
        keys : key column
            Any key input of :func:`hash_keys` (one-dimensional), or its :class:`KeyHashes`.
        payloads : list or tuple
            One bytes-like payload per key.

        Returns
        -------
        list of Entry
            The entries that became ready (the shared empty result when none did).

        Raises
        ------
        TypeError, ValueError, KeyEncodingError
            A bad key or payload (named by index), or a length mismatch; nothing is added.
        """
        if type(keys) is list:  # the common call: its key column is made here
            return self.add_columns(keys, [objects_column(keys)], PyList_GET_SIZE(keys), payloads, None)
        return self._add_many_keys(keys, payloads)

    def _add_columns(self, object keys, list columns, Py_ssize_t n, object payloads, object hashes):
        """``add_columns`` from Python (the subclass's reader of other key inputs)."""
        return self.add_columns(keys, columns, n, payloads, hashes)

    @cython.final
    cdef object add_columns(self, object keys, list columns, Py_ssize_t n, object payloads, object hashes):
        """Add n messages: keys as key columns (hash_keys' readers) or, with ``hashes``, as
        precomputed (raw, segment_hash, bucket_hash, has_key) columns; one payload each (a list or
        tuple of n). Every key and payload is checked before anything changes; a bad one raises
        through ``_refuse`` (keys) or a TypeError naming the payload."""
        cdef Py_ssize_t i, j, cpos, m, base, err = -1
        cdef bint is_list = type(payloads) is list
        cdef PyObject *p
        cdef object item
        cdef list copies = None
        cdef KeyColumn col
        cdef int rc = BC_OK
        cdef int64_t turn, seq
        cdef uint32_t *raw
        cdef uint8_t *has
        cdef int32_t *glob
        cdef uint16_t *bh
        cdef int64_t *sizes
        cdef const uint32_t[::1] h_raw
        cdef const uint16_t[::1] h_seg, h_bkt
        cdef const uint8_t[::1] h_has
        cdef PayloadQueue *q
        if not is_list and type(payloads) is not tuple:
            raise TypeError(f"payloads must be a list or tuple, not {type(payloads).__name__}")
        if is_list:
            # a list of our own: the GIL is let go while keys are hashed, and the caller's list
            # could change meanwhile
            payloads = PyList_GetSlice(payloads, 0, PyList_GET_SIZE(payloads))
        if len(payloads) != n:
            raise ValueError(f"payloads has {len(payloads)} items for {n} keys")
        if n == 0:
            return no_entries
        self.enter()
        try:
            self.reserve_work(n)
            sizes = <int64_t *>self.work
            raw = <uint32_t *>(sizes + self.work_cap)
            glob = <int32_t *>(raw + self.work_cap)
            bh = <uint16_t *>(glob + self.work_cap)
            has = <uint8_t *>(bh + self.work_cap)
            # the payloads: sizes, and a copy of every mutable one
            for i in range(n):
                p = PyList_GET_ITEM(payloads, i) if is_list else PyTuple_GET_ITEM(payloads, i)
                if PyBytes_CheckExact(p):
                    sizes[i] = PyBytes_GET_SIZE(<object>p)
                else:
                    item = frozen_payload(<object>p, i)
                    if copies is None:
                        copies = list(payloads)
                    copies[i] = item
                    sizes[i] = payload_size(item)
            if copies is not None:
                payloads = copies
                is_list = True
            # the keys: hashed (every one checked) before anything changes
            if hashes is None:
                if self.chunks is None:
                    self.chunks = KeyChunks(CHUNK)
                base = 0
                for col in columns:
                    cpos = 0
                    while cpos < col.length:
                        m = col.length - cpos if col.length - cpos < CHUNK else CHUNK
                        rc = self.chunks.hash_chunk(col, cpos, m, self.replace, &err)
                        if rc != BC_OK:
                            err += base - cpos
                            break
                        memcpy(raw + base, self.chunks.raw, m * sizeof(uint32_t))
                        if col.view.plain:
                            for j in range(m):
                                has[base + j] = 1
                        else:
                            memcpy(has + base, self.chunks.has_key, m)
                        cpos += m
                        base += m
                    if rc != BC_OK:
                        break
                if rc == BC_OK and base != n:
                    raise ValueError(f"the key columns hold {base} keys, not {n}")
                turn = self.turn
                if rc == BC_OK:
                    bc_route(&self.router.rule, n, raw, has, False, &turn, glob, bh)
            else:
                h_raw, h_seg, h_bkt, h_has = hashes
                if h_raw.shape[0] != n or h_seg.shape[0] != n or h_bkt.shape[0] != n or h_has.shape[0] != n:
                    raise ValueError(f"the hash columns do not all hold {n} values")
                turn = self.turn
                for i in range(n):
                    bh[i] = h_bkt[i]
                    glob[i] = bc_route_parts(&self.router.rule, h_raw[i], h_seg[i], h_bkt[i], h_has[i] != 0, &turn)
            if rc == BC_OK:
                seq = self.st.seq
                for i in range(n):
                    # the queues of a large layout outgrow the caches: ask for the queue a few
                    # messages ahead, then for the slot its next message goes to
                    if i + 2 * PREFETCH_AHEAD < n:
                        bc_prefetch(&self.queues[glob[i + 2 * PREFETCH_AHEAD]])
                    if i + PREFETCH_AHEAD < n:
                        q = &self.queues[glob[i + PREFETCH_AHEAD]]
                        if q.items != NULL:  # a queue not used yet has no items to offset
                            bc_prefetch(q.items + q.head + q.len)
                    p = PyList_GET_ITEM(payloads, i) if is_list else PyTuple_GET_ITEM(payloads, i)
                    if queue_push(&self.queues[glob[i]], p, seq + i) < 0:
                        self.lost()
                return self.scanned(n, glob, bh, sizes, turn)
        finally:
            self.leave()
        if rc == BC_ERR_NOMEM:
            raise MemoryError()
        self._refuse(keys, rc, err)

    @cython.final
    cdef inline object scanned(self, Py_ssize_t n, const int32_t *glob, const uint16_t *bh, const int64_t *sizes,
                               int64_t turn):
        """Batch the n messages just queued (their buckets, bucket hashes and sizes), take the
        keyless turn they leave, and return the entries that became ready (the shared empty
        result when none did)."""
        if gs_scan(&self.st, n, glob, bh, sizes) < 0:
            self.lost()
        self.turn = turn
        self.npending += n
        if self.st.nrec:
            return self.emit()
        return no_entries

    cdef int reserve_work(self, Py_ssize_t n) except -1:
        """add_many's columns for n messages: sizes (i64), raw (u32), global bucket (i32), bucket
        hash (u16), has_key (u8), each work_cap long, in one block (in that order, so each is
        aligned)."""
        cdef void *p
        if n <= self.work_cap:
            return 0
        p = realloc(self.work, n * (sizeof(uint32_t) + sizeof(int64_t) + sizeof(int32_t) + sizeof(uint16_t) + 1) + 8)
        if p == NULL:
            raise MemoryError()
        self.work = p
        self.work_cap = n
        return 0

    def flush(self):
        """Emit every open batch (all segments), ordered by first message.

        Returns
        -------
        list of Entry
            The entries; when there were none, the shared empty result.
        """
        self.enter()
        try:
            if gs_finish(&self.st) < 0:
                self.lost()
            if self.st.nrec:
                return self.emit()
            return no_entries
        finally:
            self.leave()

    @cython.final
    cdef list emit(self):
        """The entries of the emitted records, in emission order; each takes its messages from the
        front of its bucket's queue."""
        cdef GroupState *st = &self.st
        cdef int64_t r, i, c, g, nrec = st.nrec, taken = 0
        cdef list out = PyList_New(nrec)
        cdef Entry e
        cdef PayloadQueue *q
        cdef QueueItem *item
        cdef int64_t *positions
        cdef PyObject **refs
        for r in range(nrec):
            c = st.recs[r].count
            g = st.segs[st.recs[r].seg].first_bucket + st.recs[r].bucket
            q = &self.queues[g]
            if c > q.len:
                self.ready = False
                raise RuntimeError("an entry holds more messages than its bucket buffered (state lost)")
            e = blank_entry()
            item = q.items + q.head
            # nothing below fails once the blocks exist: the queue's references move into the entry
            if c <= NEAR_POSITIONS and q.head + NEAR_POSITIONS <= q.cap:
                # all NEAR_POSITIONS slots, whatever c: a constant count the compiler unrolls, with
                # no loop exit to mispredict (the slots past c are never read)
                for i in range(NEAR_POSITIONS):
                    e.near[i] = item[i].position
                    e.near_payloads[i] = item[i].payload
            else:
                if c > NEAR_POSITIONS:
                    positions = <int64_t *>malloc(c * sizeof(int64_t))
                    refs = <PyObject **>malloc(c * sizeof(PyObject *))
                    if positions == NULL or refs == NULL:
                        free(positions)
                        free(refs)
                        self.lost()
                    e.positions = positions
                    e.far_payloads = refs
                else:
                    positions = e.near
                    refs = e.near_payloads
                for i in range(c):
                    positions[i] = item[i].position
                    refs[i] = item[i].payload
            e.held = c
            e.n = c
            q.head += c
            q.len -= c
            if q.len == 0:
                q.head = 0
            e.segment_id = self.segment_ids[st.recs[r].seg]
            e.bucket = st.recs[r].bucket
            e.hash_min = st.recs[r].hash_min
            e.hash_max = st.recs[r].hash_max
            e.nbytes = st.recs[r].nbytes
            Py_INCREF(e)
            PyList_SET_ITEM(out, r, <PyObject *>e)
            taken += c
        st.nrec = 0
        self.npending -= taken
        return out

    # -- what the subclass provides ---------------------------------------------------------------

    def _refuse(self, keys: object, status: int, index: int) -> None:
        raise NotImplementedError

    def _add_many_keys(self, keys: object, payloads: object) -> list:
        raise NotImplementedError

    # -- state (free-threaded builds: read under the call mutex, between calls) --------------------

    @cython.final
    cdef inline int64_t read_state(self, const int64_t *field) noexcept:
        """A state field, read between calls. Free-threaded builds take the call mutex for it,
        unless this thread holds it already (a read from Python code its own call runs, e.g. a
        finalizer); under the GIL a read runs whole and takes nothing."""
        cdef int64_t value
        if not BC_FREE_THREADED or bc_owner_load(&self.owner) == PyThread_get_thread_ident():
            return field[0]
        bc_mutex_lock(&self.mutex)
        value = field[0]
        bc_mutex_unlock(&self.mutex)
        return value

    @property
    def round_robin(self) -> int:
        """Round-robin position (keyless turn) of the next keyless message."""
        return self.read_state(&self.turn)

    @property
    def pending(self) -> int:
        """Messages added and not yet emitted in an entry."""
        return self.read_state(&self.npending)

    @property
    def position(self) -> int:
        """Messages added so far (the message index the next one gets)."""
        return self.read_state(&self.st.seq)
