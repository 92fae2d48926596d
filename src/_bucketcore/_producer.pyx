# cython: language_level=3
"""Producer kernels: bucket lookup, per-bucket batch grouping with min/max stamping (DESIGN.md §3.4).

The steps are separate C-level functions over plain arrays so a later kernel can fuse them with
hashing and routing:

- ``lookup_buckets``: bucket index of every message in its segment's boundary list
  (``bc_bucket_of`` from lookup.h, the one shared bucket search);
- ``gs_scan``: the batch state machine, message by message in send order; it keeps one open
  batch per (segment, bucket) and, when a limit is reached, emits entry *records* (segment,
  bucket, stamp, count, bytes) in emission order, never touching a message list;
- ``gs_finish``: end of input, every open batch is emitted ordered by its first message;
- ``gs_drain``: one pass over the messages that places each message into its record's slot of
  the output ``order`` (a counting sort keyed by a per-bucket FIFO of records, so send order is
  kept inside every entry and no per-message entry id is ever stored).

The same state (``GroupState``) serves the one-shot ``group_entries`` and the streaming
``Grouper`` used by ``EntryBucketBatcher``, so both have identical semantics by construction.
All memory comes from ``PyMem_Raw*`` (traced by tracemalloc, callable without the GIL).
"""

from cpython.mem cimport PyMem_RawFree, PyMem_RawMalloc, PyMem_RawRealloc
from cpython.bytes cimport PyBytes_GET_SIZE
from cpython.bytearray cimport PyByteArray_GET_SIZE
from cpython.object cimport PyObject
from libc.stdint cimport int32_t, int64_t, uint16_t, uint32_t
from libc.stdlib cimport qsort
from libc.string cimport memset

cimport numpy as cnp
import numpy as np

cnp.import_array()

cdef extern from "lookup.h" nogil:
    uint32_t bc_bucket_of(const uint16_t *splits, uint32_t n, uint32_t h)

cdef extern from "Python.h":
    PyObject *PyList_GET_ITEM(object lst, Py_ssize_t i)
    PyObject *PyTuple_GET_ITEM(object tup, Py_ssize_t i)
    bint PyBytes_Check(PyObject *o)
    bint PyByteArray_Check(PyObject *o)
    bint PyMemoryView_Check(PyObject *o)

POLICY_SHARED = 0
POLICY_PER_BUCKET = 1

cdef enum:
    P_SHARED = 0
    P_PER_BUCKET = 1


# One emitted entry, before its messages are placed.
ctypedef struct Rec:
    int32_t seg          # index into the segment list the caller routed to
    int32_t bucket       # bucket index inside that segment
    uint16_t hash_min
    uint16_t hash_max
    int64_t count
    int64_t nbytes
    int64_t first        # stream position of the entry's first message
    int64_t start        # slot of its first message in the drained order
    int64_t cursor       # next free slot while draining
    int64_t next         # next undrained record of the same bucket, -1 at the end


ctypedef struct GroupState:
    int64_t nseg
    int64_t nbuckets     # total over segments; global bucket g = boff[seg] + bucket
    int64_t *boff        # nseg + 1 bucket offsets
    int policy
    int64_t max_messages
    int64_t max_bytes
    # per global bucket: the open batch and the FIFO of emitted, undrained records
    int64_t *ocount
    int64_t *obytes
    int64_t *ofirst
    uint16_t *omin
    uint16_t *omax
    int64_t *head
    int64_t *tail
    # per segment: the shared window, and the open buckets in opening order
    int64_t *wcount
    int64_t *wbytes
    int64_t *olen
    int32_t *olist       # nbuckets slots: segment s owns [boff[s], boff[s+1])
    Rec *recs
    int64_t nrec
    int64_t cap
    int64_t seq          # messages scanned so far (stream position of the next one)
    int64_t nopen        # open batches


cdef int gs_init(GroupState *st, const int64_t *boff, int64_t nseg, int policy,
                 int64_t max_messages, int64_t max_bytes) noexcept nogil:
    """Zero state for nseg segments; boff[s+1] - boff[s] buckets in segment s. -1: no memory."""
    cdef int64_t g, nb = boff[nseg]
    memset(st, 0, sizeof(GroupState))
    st.nseg = nseg
    st.nbuckets = nb
    st.policy = policy
    st.max_messages = max_messages
    st.max_bytes = max_bytes
    st.boff = <int64_t *>PyMem_RawMalloc((nseg + 1) * sizeof(int64_t))
    # one block for the per-bucket int64 columns, one for the per-segment ones
    st.ocount = <int64_t *>PyMem_RawMalloc(5 * nb * sizeof(int64_t) + 1)
    st.omin = <uint16_t *>PyMem_RawMalloc(2 * nb * sizeof(uint16_t) + 1)
    st.olist = <int32_t *>PyMem_RawMalloc(nb * sizeof(int32_t) + 1)
    st.wcount = <int64_t *>PyMem_RawMalloc(3 * nseg * sizeof(int64_t) + 1)
    if st.boff == NULL or st.ocount == NULL or st.omin == NULL or st.olist == NULL or st.wcount == NULL:
        gs_free(st)
        return -1
    for g in range(nseg + 1):
        st.boff[g] = boff[g]
    st.obytes = st.ocount + nb
    st.ofirst = st.ocount + 2 * nb
    st.head = st.ocount + 3 * nb
    st.tail = st.ocount + 4 * nb
    st.omax = st.omin + nb
    st.wbytes = st.wcount + nseg
    st.olen = st.wcount + 2 * nseg
    memset(st.ocount, 0, 3 * nb * sizeof(int64_t))
    for g in range(nb):
        st.head[g] = -1
        st.tail[g] = -1
    memset(st.wcount, 0, 3 * nseg * sizeof(int64_t))
    return 0


cdef void gs_free(GroupState *st) noexcept nogil:
    PyMem_RawFree(st.boff)
    PyMem_RawFree(st.ocount)
    PyMem_RawFree(st.omin)
    PyMem_RawFree(st.olist)
    PyMem_RawFree(st.wcount)
    PyMem_RawFree(st.recs)
    memset(st, 0, sizeof(GroupState))


cdef inline int gs_emit(GroupState *st, int64_t g, int32_t s) noexcept nogil:
    """Close bucket g's open batch into a record, appended to g's undrained FIFO."""
    cdef int64_t cap
    cdef Rec *grown
    if st.nrec == st.cap:
        cap = st.cap * 2 if st.cap else 64
        grown = <Rec *>PyMem_RawRealloc(st.recs, cap * sizeof(Rec))
        if grown == NULL:
            return -1
        st.recs = grown
        st.cap = cap
    cdef Rec *r = &st.recs[st.nrec]
    r.seg = s
    r.bucket = <int32_t>(g - st.boff[s])
    r.hash_min = st.omin[g]
    r.hash_max = st.omax[g]
    r.count = st.ocount[g]
    r.nbytes = st.obytes[g]
    r.first = st.ofirst[g]
    r.next = -1
    if st.tail[g] >= 0:
        st.recs[st.tail[g]].next = st.nrec
    else:
        st.head[g] = st.nrec
    st.tail[g] = st.nrec
    st.nrec += 1
    st.ocount[g] = 0
    st.obytes[g] = 0
    st.nopen -= 1
    return 0


cdef inline int gs_flush_segment(GroupState *st, int32_t s) noexcept nogil:
    """Emit every open batch of segment s (the shared window), in opening order = first message."""
    cdef int64_t j, base = st.boff[s]
    for j in range(st.olen[s]):
        if gs_emit(st, st.olist[base + j], s) < 0:
            return -1
    st.olen[s] = 0
    st.wcount[s] = 0
    st.wbytes[s] = 0
    return 0


cdef int gs_scan(GroupState *st, Py_ssize_t n, const int32_t *seg, const int32_t *bkt,
                 const uint16_t *bh, const int64_t *sizes) noexcept nogil:
    """Feed n messages in send order (seg may be NULL: one segment; sizes NULL: 0 bytes each).

    Limits (both policies): before a message is added, a non-empty batch (per_bucket) or window
    (shared) that it would push over max_bytes is emitted; after it is added, a batch or window
    that reached max_messages or max_bytes is emitted at once. So the overflowing message opens
    the next batch, and a message larger than max_bytes is an entry of its own.
    Returns 0, or -1 when the record buffer cannot grow (the state is then unusable).
    """
    cdef Py_ssize_t i
    cdef int32_t s = 0
    cdef int64_t g, sz = 0
    cdef uint16_t h
    cdef bint shared = st.policy == P_SHARED
    cdef int64_t maxm = st.max_messages, maxb = st.max_bytes
    for i in range(n):
        if seg != NULL:
            s = seg[i]
        g = st.boff[s] + bkt[i]
        if sizes != NULL:
            sz = sizes[i]
        h = bh[i]
        if shared:
            if st.wcount[s] > 0 and sz > maxb - st.wbytes[s]:
                if gs_flush_segment(st, s) < 0:
                    return -1
        elif st.ocount[g] > 0 and sz > maxb - st.obytes[g]:
            if gs_emit(st, g, s) < 0:
                return -1
        if st.ocount[g] == 0:
            st.ofirst[g] = st.seq
            st.omin[g] = h
            st.omax[g] = h
            st.nopen += 1
            if shared:
                st.olist[st.boff[s] + st.olen[s]] = <int32_t>g
                st.olen[s] += 1
        else:
            if h < st.omin[g]:
                st.omin[g] = h
            if h > st.omax[g]:
                st.omax[g] = h
        st.ocount[g] += 1
        st.obytes[g] += sz
        st.seq += 1
        if shared:
            st.wcount[s] += 1
            st.wbytes[s] += sz
            if st.wcount[s] >= maxm or st.wbytes[s] >= maxb:
                if gs_flush_segment(st, s) < 0:
                    return -1
        elif st.ocount[g] >= maxm or st.obytes[g] >= maxb:
            if gs_emit(st, g, s) < 0:
                return -1
    return 0


ctypedef struct OpenRef:
    int64_t first
    int64_t g


cdef int cmp_open(const void *a, const void *b) noexcept nogil:
    cdef int64_t x = (<const OpenRef *>a).first, y = (<const OpenRef *>b).first
    return (x > y) - (x < y)


cdef int32_t gs_segment_of(GroupState *st, int64_t g) noexcept nogil:
    """Segment owning global bucket g (binary search over boff)."""
    cdef int64_t lo = 0, hi = st.nseg - 1, mid
    while lo < hi:
        mid = (lo + hi + 1) >> 1
        if st.boff[mid] <= g:
            lo = mid
        else:
            hi = mid - 1
    return <int32_t>lo


cdef int gs_finish(GroupState *st) noexcept nogil:
    """End of input: emit every open batch, all segments together, ordered by first message."""
    if st.nopen == 0:
        return 0
    cdef int64_t g, k = 0, nopen = st.nopen
    cdef OpenRef *refs = <OpenRef *>PyMem_RawMalloc(nopen * sizeof(OpenRef))
    if refs == NULL:
        return -1
    for g in range(st.nbuckets):
        if st.ocount[g] > 0:
            refs[k].first = st.ofirst[g]
            refs[k].g = g
            k += 1
    qsort(refs, k, sizeof(OpenRef), cmp_open)
    for g in range(k):
        if gs_emit(st, refs[g].g, gs_segment_of(st, refs[g].g)) < 0:
            PyMem_RawFree(refs)
            return -1
    PyMem_RawFree(refs)
    memset(st.wcount, 0, 3 * st.nseg * sizeof(int64_t))
    return 0


cdef int64_t gs_assign_slots(GroupState *st) noexcept nogil:
    """Lay the emitted records out back to back in emission order; returns their message total."""
    cdef int64_t r, pos = 0
    for r in range(st.nrec):
        st.recs[r].start = pos
        st.recs[r].cursor = pos
        pos += st.recs[r].count
    return pos


cdef int64_t gs_drain(GroupState *st, Py_ssize_t n, const int32_t *seg, const int32_t *bkt,
                      int64_t *take, int64_t *keep) noexcept nogil:
    """Place the n buffered messages (send order) of the emitted records into ``take``.

    A bucket's buffered messages are, in send order, those of its emitted records (oldest first)
    followed by those of its open batch; the per-bucket FIFO says which record is next, so one
    pass suffices. Messages of open batches go to ``keep`` (may be NULL when there are none).
    Returns the number kept, or -1 if the messages do not match the records (caller's bug).
    """
    cdef Py_ssize_t p
    cdef int32_t s = 0
    cdef int64_t g, r, k = 0
    cdef Rec *rec
    for p in range(n):
        if seg != NULL:
            s = seg[p]
        g = st.boff[s] + bkt[p]
        r = st.head[g]
        if r < 0:
            if keep == NULL:
                return -1
            keep[k] = p
            k += 1
            continue
        rec = &st.recs[r]
        take[rec.cursor] = p
        rec.cursor += 1
        if rec.cursor == rec.start + rec.count:
            st.head[g] = rec.next
            if rec.next < 0:
                st.tail[g] = -1
    for r in range(st.nrec):
        if st.recs[r].cursor != st.recs[r].start + st.recs[r].count:
            return -1
    st.nrec = 0
    return k


cdef void lookup_buckets(Py_ssize_t n, const int32_t *seg, const uint16_t *bh,
                         const uint16_t *splits, const int64_t *split_off,
                         int32_t *out) noexcept nogil:
    """out[i] = bucket of bh[i] in segment seg[i]'s splits (seg NULL: segment 0)."""
    cdef Py_ssize_t i
    cdef int32_t s
    cdef const uint16_t *sp
    cdef uint32_t ns
    if seg == NULL:
        sp = splits + split_off[0]
        ns = <uint32_t>(split_off[1] - split_off[0])
        for i in range(n):
            out[i] = <int32_t>bc_bucket_of(sp, ns, bh[i])
        return
    for i in range(n):
        s = seg[i]
        out[i] = <int32_t>bc_bucket_of(splits + split_off[s], <uint32_t>(split_off[s + 1] - split_off[s]), bh[i])


# ----------------------------------------------------------------------------------------------
# Python entry points


cdef const int32_t *opt_i32(object arr, Py_ssize_t n, str name) except? NULL:
    if arr is None:
        return NULL
    cdef const int32_t[::1] view = arr
    if view.shape[0] != n:
        raise ValueError(f"{name} has {view.shape[0]} values for {n} messages")
    return &view[0] if n else NULL


cdef const int64_t *opt_i64(object arr, Py_ssize_t n, str name) except? NULL:
    if arr is None:
        return NULL
    cdef const int64_t[::1] view = arr
    if view.shape[0] != n:
        raise ValueError(f"{name} has {view.shape[0]} values for {n} messages")
    return &view[0] if n else NULL


def bucket_index(object seg, const uint16_t[::1] bucket_hash, const uint16_t[::1] splits,
                 const int64_t[::1] split_offsets, int32_t[::1] out):
    """out[i] = bucket of bucket_hash[i] in segment seg[i] (seg None: one segment).

    Segment s's ascending splits are splits[split_offsets[s]:split_offsets[s+1]]; seg values
    must be valid segment indexes (the caller routed them).
    """
    cdef Py_ssize_t n = bucket_hash.shape[0]
    if out.shape[0] != n:
        raise ValueError(f"out has {out.shape[0]} values for {n} messages")
    cdef const int32_t *segp = opt_i32(seg, n, "seg")
    if n == 0:
        return
    # an empty splits view still has a data pointer; bc_bucket_of never reads it when n == 0
    with nogil:
        lookup_buckets(n, segp, &bucket_hash[0], &splits[0], &split_offsets[0], &out[0])


cdef int64_t check_columns(GroupState *st, Py_ssize_t n, const int32_t *seg, const int32_t *bkt,
                           const int64_t *sizes, int *what) noexcept nogil:
    """Index of the first message with a bad segment, bucket or size (what = 1, 2, 3), else -1."""
    cdef Py_ssize_t i
    cdef int32_t s = 0
    for i in range(n):
        if seg != NULL:
            s = seg[i]
            if s < 0 or s >= st.nseg:
                what[0] = 1
                return i
        if bkt[i] < 0 or bkt[i] >= st.boff[s + 1] - st.boff[s]:
            what[0] = 2
            return i
        if sizes != NULL and sizes[i] < 0:
            what[0] = 3
            return i
    return -1


cdef raise_bad_column(int what, int64_t index, object seg, object bkt, object sizes):
    if what == 1:
        raise ValueError(f"segment index {seg[index]} at message {index} is out of range")
    if what == 2:
        raise ValueError(f"bucket index {bkt[index]} at message {index} is out of range for its segment")
    raise ValueError(f"size {sizes[index]} at message {index} is negative")


cdef tuple record_columns(GroupState *st, int64_t nrec):
    """Copy the emitted records into numpy columns (seg, bucket, hash_min, hash_max, start, count, nbytes)."""
    cdef cnp.ndarray a_seg = np.empty(nrec, dtype=np.int32)
    cdef cnp.ndarray a_bkt = np.empty(nrec, dtype=np.int32)
    cdef cnp.ndarray a_min = np.empty(nrec, dtype=np.uint16)
    cdef cnp.ndarray a_max = np.empty(nrec, dtype=np.uint16)
    cdef cnp.ndarray a_start = np.empty(nrec, dtype=np.int64)
    cdef cnp.ndarray a_count = np.empty(nrec, dtype=np.int64)
    cdef cnp.ndarray a_nbytes = np.empty(nrec, dtype=np.int64)
    cdef int32_t *p_seg = <int32_t *>cnp.PyArray_DATA(a_seg)
    cdef int32_t *p_bkt = <int32_t *>cnp.PyArray_DATA(a_bkt)
    cdef uint16_t *p_min = <uint16_t *>cnp.PyArray_DATA(a_min)
    cdef uint16_t *p_max = <uint16_t *>cnp.PyArray_DATA(a_max)
    cdef int64_t *p_start = <int64_t *>cnp.PyArray_DATA(a_start)
    cdef int64_t *p_count = <int64_t *>cnp.PyArray_DATA(a_count)
    cdef int64_t *p_nbytes = <int64_t *>cnp.PyArray_DATA(a_nbytes)
    cdef int64_t r
    cdef Rec *rec
    with nogil:
        for r in range(nrec):
            rec = &st.recs[r]
            p_seg[r] = rec.seg
            p_bkt[r] = rec.bucket
            p_min[r] = rec.hash_min
            p_max[r] = rec.hash_max
            p_start[r] = rec.start
            p_count[r] = rec.count
            p_nbytes[r] = rec.nbytes
    return a_seg, a_bkt, a_min, a_max, a_start, a_count, a_nbytes


cdef class Grouper:
    """Streaming batch state over a fixed list of segments (bucket_offsets[s+1]-bucket_offsets[s]
    buckets in segment s): ``scan`` chunks of messages, ``finish`` at a flush, ``drain`` the
    buffered messages into the entries emitted so far."""

    cdef GroupState st
    cdef bint ready

    def __cinit__(self, const int64_t[::1] bucket_offsets, int policy, int64_t max_messages,
                  int64_t max_bytes):
        cdef Py_ssize_t nseg = bucket_offsets.shape[0] - 1, s
        self.ready = False
        if nseg < 1:
            raise ValueError("bucket_offsets needs at least one segment")
        for s in range(nseg):
            if bucket_offsets[s + 1] <= bucket_offsets[s] or bucket_offsets[0] != 0:
                raise ValueError("bucket_offsets must start at 0 and grow by at least 1 per segment")
        if bucket_offsets[nseg] > 0x7FFFFFFF:
            raise ValueError("more than 2**31-1 buckets in total")
        if policy != P_SHARED and policy != P_PER_BUCKET:
            raise ValueError(f"unknown policy code {policy}")
        if max_messages < 1 or max_bytes < 1:
            raise ValueError("max_messages and max_bytes must be >= 1")
        if gs_init(&self.st, &bucket_offsets[0], nseg, policy, max_messages, max_bytes) < 0:
            raise MemoryError()
        self.ready = True

    def __dealloc__(self):
        gs_free(&self.st)

    cdef check(self):
        if not self.ready:
            raise RuntimeError("this Grouper ran out of memory earlier and its state is lost")

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

    def scan(self, object seg, const int32_t[::1] bucket, const uint16_t[::1] bucket_hash,
             object sizes):
        """Feed a chunk of messages; all columns are validated before the state changes."""
        self.check()
        cdef Py_ssize_t n = bucket.shape[0]
        if bucket_hash.shape[0] != n:
            raise ValueError(f"bucket_hash has {bucket_hash.shape[0]} values for {n} messages")
        cdef const int32_t *segp = opt_i32(seg, n, "seg")
        cdef const int64_t *szp = opt_i64(sizes, n, "sizes")
        if n == 0:
            return
        cdef int what = 0
        cdef int64_t bad
        cdef int rc = 0
        with nogil:
            bad = check_columns(&self.st, n, segp, &bucket[0], szp, &what)
            if bad < 0:
                rc = gs_scan(&self.st, n, segp, &bucket[0], &bucket_hash[0], szp)
        if bad >= 0:
            raise_bad_column(what, bad, seg, bucket, sizes)
        if rc < 0:
            self.ready = False
            raise MemoryError()

    def finish(self):
        """Emit every open batch (end of input or an explicit flush)."""
        self.check()
        cdef int rc
        with nogil:
            rc = gs_finish(&self.st)
        if rc < 0:
            self.ready = False
            raise MemoryError()

    def drain(self, object seg, const int32_t[::1] bucket, Py_ssize_t count):
        """Place the first ``count`` buffered messages (their seg/bucket columns, send order).

        Returns (seg, bucket, hash_min, hash_max, start, count, nbytes, take, keep): one row per
        emitted entry in emission order; ``take`` lists buffer positions entry by entry;
        ``keep`` the positions still in open batches, in send order.
        """
        self.check()
        if count < 0 or count > bucket.shape[0]:
            raise ValueError(f"count {count} is outside the buffered columns")
        cdef const int32_t *segp = NULL
        cdef const int32_t[::1] seg_view
        if seg is not None:
            seg_view = seg
            if seg_view.shape[0] < count:
                raise ValueError("seg is shorter than count")
            segp = &seg_view[0] if count else NULL
        cdef int64_t nrec = self.st.nrec, total
        with nogil:
            total = gs_assign_slots(&self.st)
        if total > count:
            raise ValueError(f"{total} messages were emitted but only {count} are buffered")
        cdef tuple cols = record_columns(&self.st, nrec)
        cdef cnp.ndarray take = np.empty(total, dtype=np.int64)
        cdef cnp.ndarray keep = np.empty(count - total, dtype=np.int64)
        cdef int64_t kept = 0
        if count:
            with nogil:
                kept = gs_drain(&self.st, count, segp, &bucket[0],
                                <int64_t *>cnp.PyArray_DATA(take),
                                <int64_t *>cnp.PyArray_DATA(keep) if count > total else NULL)
        if kept != count - total:
            self.ready = False
            raise RuntimeError("buffered messages do not match the emitted entries (state lost)")
        return cols + (take, keep)


def group_entries(object seg, const int32_t[::1] bucket, const uint16_t[::1] bucket_hash,
                  object sizes, const int64_t[::1] bucket_offsets, int policy,
                  int64_t max_messages, int64_t max_bytes):
    """One-shot grouping of a whole message stream, flushed at the end.

    Returns (seg, bucket, hash_min, hash_max, start, count, nbytes, order): one row per entry in
    emission order, and ``order`` the message indices entry after entry (send order inside each).
    """
    cdef Grouper grouper = Grouper(bucket_offsets, policy, max_messages, max_bytes)
    cdef GroupState *st = &grouper.st
    cdef Py_ssize_t n = bucket.shape[0]
    if bucket_hash.shape[0] != n:
        raise ValueError(f"bucket_hash has {bucket_hash.shape[0]} values for {n} messages")
    cdef const int32_t *segp = opt_i32(seg, n, "seg")
    cdef const int64_t *szp = opt_i64(sizes, n, "sizes")
    cdef cnp.ndarray order = np.empty(n, dtype=np.int64)
    cdef int what = 0
    cdef int64_t bad = -1, kept = 0, nrec = 0
    cdef int rc = 0
    if n:
        with nogil:
            bad = check_columns(st, n, segp, &bucket[0], szp, &what)
            if bad < 0:
                rc = gs_scan(st, n, segp, &bucket[0], &bucket_hash[0], szp)
            if bad < 0 and rc == 0:
                rc = gs_finish(st)
            if bad < 0 and rc == 0:
                nrec = st.nrec
                gs_assign_slots(st)
                kept = gs_drain(st, n, segp, &bucket[0], <int64_t *>cnp.PyArray_DATA(order), NULL)
        if bad >= 0:
            raise_bad_column(what, bad, seg, bucket, sizes)
        if rc < 0:
            raise MemoryError()
        if kept != 0:
            raise RuntimeError("internal error: messages left over after the final flush")
    # the drain consumed the records but left them in place: copy them out now
    return record_columns(st, nrec) + (order,)


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
