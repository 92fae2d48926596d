# cython: language_level=3
"""Producer kernels: bucket lookup, per-bucket batch grouping with min/max stamping (DESIGN.md §3.4).

The steps are separate C-level functions over plain arrays, which ``fused_entries``,
``ScanStage`` (the two-thread pipeline) and ``route_keys`` (at the end of this file) chain with
hashing and routing through a ``Router``, which gives every message its *global bucket index*
(the segment's first index + its bucket), the one number the batch state is keyed by:

- ``lookup_buckets``: bucket index of every message in its segment's boundary list
  (``bc_bucket_of`` from lookup.h, the one shared bucket search), or ``lookup_buckets_table``
  through the boundary lists' own 64 Ki tables (``Buckets.lookup_table``) for long columns;
- ``gs_scan``: the batch state machine, message by message in send order; it keeps one open
  batch per (segment, bucket) and, when a limit is reached, emits entry *records* (segment,
  bucket, stamp, count, bytes) in emission order. A one-shot stream places each record's
  messages in the output ``order`` as it is emitted (every open batch lists its messages);
- ``gs_finish``: end of input, every open batch is emitted ordered by its first message;
- ``gs_drain``: the streaming ``Grouper``'s placement, one pass over its buffered messages that
  puts each into its record's slot (a counting sort keyed by a per-bucket FIFO of records, so
  send order is kept inside every entry and no per-message entry id is ever stored).

The same state (``GroupState``) serves the one-shot ``group_entries`` / ``fused_entries`` /
``ScanStage`` and the streaming ``Grouper`` used by ``EntryBucketBatcher`` (which also hashes
and routes one key per call in ``add_key``, with the shared key helpers of keys.h / pykeys.h),
so all have identical semantics by construction.
The batch state (``GroupState``) lives in ``malloc`` memory: a pipeline's worker grows it without
the GIL while the calling thread may hold the GIL and wait for the worker, and tracemalloc's hook
on ``PyMem_Raw*`` takes the GIL. Everything else comes from ``PyMem_Raw*`` or numpy (traced).
"""

from cpython.mem cimport PyMem_RawFree, PyMem_RawMalloc, PyMem_RawRealloc
from cpython.bytes cimport PyBytes_GET_SIZE
from cpython.bytearray cimport PyByteArray_GET_SIZE
from cpython.object cimport PyObject
from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc, qsort, realloc
from libc.string cimport memchr, memcpy, memset

cimport numpy as cnp
import numpy as np

cnp.import_array()


cdef inline cnp.ndarray empty_column(Py_ssize_t n, int typenum):
    """A new 1-D array of n items, by numpy's C API: a short call pays no Python-level np.empty
    (argument parsing, attribute lookups) for each of its columns."""
    cdef cnp.npy_intp dim = n
    return cnp.PyArray_EMPTY(1, &dim, typenum, 0)


cdef extern from "lookup.h" nogil:
    uint32_t bc_bucket_of(const uint16_t *splits, uint32_t n, uint32_t h)

cdef extern from "stamp.h" nogil:
    void bc_stamp(const uint16_t *h, size_t n, uint16_t *lo, uint16_t *hi)

# The shared key helpers and chunked hash run of the hashing kernel.
from _bucketcore._hashing cimport (
    BC_ERR_NOMEM, BC_ERR_SURROGATE, BC_KEY_NONE, BC_OK, CHUNK, ST_NOMEM, ST_OK, HashOut, KeyColumn,
    PyThread_acquire_lock_timed, PyThread_release_lock,
    PyThread_type_lock, bc_hash_key, bc_key, bc_observe, bc_publish, bc_scratch, bc_scratch_free,
    SPINS, ColumnView, bc_spin_for_change, free_lock, hash_run, hash_view_run, hash_views_at,
    held_lock,
)


cdef inline Py_ssize_t chunk_room(Py_ssize_t n) noexcept nogil:
    """Items in a per-chunk buffer for a stream of n: a chunk, or the whole of a shorter stream
    (no chunk is longer; 256 KiB of key descriptors would cost a short call more than its keys:
    the allocator maps and unmaps a block that large each time)."""
    return 1 if n < 1 else (n if n < CHUNK else CHUNK)


cdef extern from "pykeys.h":
    int bc_describe_key(PyObject *o, bc_key *k) except -1

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
    int64_t next         # next undrained record of the same bucket, -1 at the end


ctypedef struct SegState:
    int64_t boff         # global index of the segment's bucket 0
    int64_t nb           # its bucket count
    int64_t wcount       # shared window: messages
    int64_t wbytes       # shared window: bytes
    int64_t olen         # open buckets, listed in olist[boff:boff+olen] in opening order


# Per (segment, bucket): the open batch, in 64 bytes (one cache line, an index shift away).
ctypedef struct BucketState:
    int64_t count        # messages in the open batch (0: none open)
    int64_t *msgs        # placing on emit: the open batch's stream positions (cap of them)
    int64_t cap
    int64_t nbytes
    SegState *win        # its segment's state (the shared window)
    int32_t seg
    uint16_t hash_min    # draining later: the open batch's stamp, kept message by message
    uint16_t hash_max
    int64_t first        # stream position of the open batch's first message
    uint16_t *hashes     # placing on emit: the open batch's bucket hashes (stamped on emit)


# Per (segment, bucket), streaming only: the FIFO of emitted, undrained records and the drain cursor.
ctypedef struct DrainState:
    int64_t head         # oldest undrained record, -1: none
    int64_t tail         # newest undrained record, -1: none
    int64_t cur          # drain: next slot of the head record
    int64_t end          # drain: one past the head record's last slot


ctypedef struct GroupState:
    int64_t nseg
    int64_t nbuckets     # total over segments; global bucket g = segs[s].boff + bucket
    int policy
    int64_t max_messages
    int64_t max_bytes
    SegState *segs       # nseg + 1 (the last only holds boff = nbuckets)
    BucketState *bk
    DrainState *dr
    int32_t *olist
    Rec *recs
    int64_t nrec
    int64_t cap
    int64_t seq          # messages scanned so far (stream position of the next one)
    int64_t nopen        # open batches
    # Placing on emit (one-shot streams; order NULL: off, the messages are drained afterwards):
    # every open batch lists its messages' stream positions (BucketState.msgs), copied to
    # order[placed:placed + count], the record's slots, when it is emitted.
    int64_t *order
    int64_t placed
    # The lists start in one block for all buckets (gs_presize), presized to lists of slab_cap:
    # one allocation per stream instead of one or more per bucket, the bulk of a short call's cost.
    int64_t *slab_msgs
    uint16_t *slab_hashes
    int64_t slab_cap


cdef int gs_init(GroupState *st, const int64_t *boff, int64_t nseg, int policy,
                 int64_t max_messages, int64_t max_bytes) noexcept nogil:
    """Zero state for nseg segments; boff[s+1] - boff[s] buckets in segment s. -1: no memory."""
    cdef int64_t g, s, nb = boff[nseg]
    memset(st, 0, sizeof(GroupState))
    st.nseg = nseg
    st.nbuckets = nb
    st.policy = policy
    st.max_messages = max_messages
    st.max_bytes = max_bytes
    st.segs = <SegState *>malloc((nseg + 1) * sizeof(SegState))
    st.bk = <BucketState *>malloc(nb * sizeof(BucketState) + 1)
    st.olist = <int32_t *>malloc(nb * sizeof(int32_t) + 1)
    st.dr = <DrainState *>malloc(nb * sizeof(DrainState) + 1)
    if st.segs == NULL or st.bk == NULL or st.olist == NULL or st.dr == NULL:
        gs_free(st)
        return -1
    memset(st.segs, 0, (nseg + 1) * sizeof(SegState))
    memset(st.bk, 0, nb * sizeof(BucketState))
    memset(st.dr, 0, nb * sizeof(DrainState))
    for s in range(nseg + 1):
        st.segs[s].boff = boff[s]
        st.segs[s].nb = boff[s + 1] - boff[s] if s < nseg else 0
    for s in range(nseg):
        for g in range(boff[s], boff[s + 1]):
            st.bk[g].seg = <int32_t>s
            st.bk[g].win = &st.segs[s]
            st.dr[g].head = -1
            st.dr[g].tail = -1
    return 0


cdef void gs_free(GroupState *st) noexcept nogil:
    cdef int64_t g
    if st.bk != NULL:
        for g in range(st.nbuckets):
            if not in_slab(st, st.bk[g].msgs):
                free(st.bk[g].msgs)
                free(st.bk[g].hashes)
    free(st.slab_msgs)
    free(st.slab_hashes)
    free(st.segs)
    free(st.bk)
    free(st.olist)
    free(st.dr)
    free(st.recs)
    memset(st, 0, sizeof(GroupState))


cdef int gs_emit(GroupState *st, int64_t g) noexcept nogil:
    """Close bucket g's open batch into a record: its messages placed at once (placing on
    emit), or the record appended to g's undrained FIFO for a later drain."""
    cdef int64_t cap
    cdef Rec *grown
    cdef BucketState *b = &st.bk[g]
    if st.nrec == st.cap:
        cap = st.cap * 2 if st.cap else 64
        grown = <Rec *>realloc(st.recs, cap * sizeof(Rec))
        if grown == NULL:
            return -1
        st.recs = grown
        st.cap = cap
    cdef Rec *r = &st.recs[st.nrec]
    r.seg = b.seg
    r.bucket = <int32_t>(g - st.segs[b.seg].boff)
    r.count = b.count
    r.nbytes = b.nbytes
    r.first = b.first
    r.next = -1
    if st.order != NULL:
        # stamped from the listed hashes: a vector pass here, not two compares per message
        bc_stamp(b.hashes, <size_t>b.count, &r.hash_min, &r.hash_max)
        r.start = st.placed
        memcpy(st.order + st.placed, b.msgs, b.count * sizeof(int64_t))
        st.placed += b.count
    else:
        r.hash_min = b.hash_min
        r.hash_max = b.hash_max
        if st.dr[g].tail >= 0:
            st.recs[st.dr[g].tail].next = st.nrec
            st.dr[g].tail = st.nrec
        else:
            st.dr[g].head = st.dr[g].tail = st.nrec
    st.nrec += 1
    b.count = 0
    b.nbytes = 0
    st.nopen -= 1
    return 0


cdef int gs_flush_segment(GroupState *st, int32_t s) noexcept nogil:
    """Emit every open batch of segment s (the shared window), in opening order = first message."""
    cdef SegState *seg = &st.segs[s]
    cdef int64_t j
    for j in range(seg.olen):
        if gs_emit(st, st.olist[seg.boff + j]) < 0:
            return -1
    seg.olen = 0
    seg.wcount = 0
    seg.wbytes = 0
    return 0


cdef inline bint in_slab(GroupState *st, const int64_t *msgs) noexcept nogil:
    return st.slab_msgs != NULL and st.slab_msgs <= msgs < st.slab_msgs + st.nbuckets * st.slab_cap


cdef int gs_presize(GroupState *st, int64_t cap) noexcept nogil:
    """Give every bucket lists of cap messages, out of one block (placing on emit, before the
    first message). -1: no memory."""
    cdef int64_t g
    st.slab_msgs = <int64_t *>malloc(st.nbuckets * cap * sizeof(int64_t) + 1)
    st.slab_hashes = <uint16_t *>malloc(st.nbuckets * cap * sizeof(uint16_t) + 1)
    if st.slab_msgs == NULL or st.slab_hashes == NULL:
        return -1
    st.slab_cap = cap
    for g in range(st.nbuckets):
        st.bk[g].msgs = st.slab_msgs + g * cap
        st.bk[g].hashes = st.slab_hashes + g * cap
        st.bk[g].cap = cap
    return 0


cdef int gs_grow_msgs(GroupState *st, BucketState *b) noexcept nogil:
    """Room for one more message in an open batch's position and hash lists (placing on emit);
    lists outgrowing the block gs_presize carved them from move to their own memory."""
    cdef int64_t cap = b.cap * 2 if b.cap else 16
    cdef int64_t *grown
    cdef uint16_t *grown_hashes
    if in_slab(st, b.msgs):
        grown = <int64_t *>malloc(cap * sizeof(int64_t))
        grown_hashes = <uint16_t *>malloc(cap * sizeof(uint16_t))
        if grown == NULL or grown_hashes == NULL:
            free(grown)
            free(grown_hashes)
            return -1
        memcpy(grown, b.msgs, b.count * sizeof(int64_t))
        memcpy(grown_hashes, b.hashes, b.count * sizeof(uint16_t))
        b.msgs = grown
        b.hashes = grown_hashes
        b.cap = cap
        return 0
    grown = <int64_t *>realloc(b.msgs, cap * sizeof(int64_t))
    if grown == NULL:
        return -1
    b.msgs = grown
    grown_hashes = <uint16_t *>realloc(b.hashes, cap * sizeof(uint16_t))
    if grown_hashes == NULL:
        return -1
    b.hashes = grown_hashes
    b.cap = cap
    return 0


# The scan loop calls its rare, bulky paths (emitting batches) through these pointers: they are
# then never inlined into the hot loop, which keeps its working values in registers.
ctypedef int (*flush_fn_t)(GroupState *, int32_t) noexcept nogil
ctypedef int (*emit_fn_t)(GroupState *, int64_t) noexcept nogil
ctypedef int (*grow_fn_t)(GroupState *, BucketState *) noexcept nogil
cdef flush_fn_t cold_flush = gs_flush_segment
cdef emit_fn_t cold_emit = gs_emit
cdef grow_fn_t cold_grow = gs_grow_msgs


cdef inline int scan_loop(GroupState *st, Py_ssize_t n, const int32_t *gidx, const uint16_t *bh,
                          const int64_t *sizes, bint shared, bint has_sizes, bint place) noexcept nogil:
    """The state machine of gs_scan; inlined with constant flags so each variant drops its
    unused loads, stores and tests (the common one, without sizes, never touches bytes).
    A message arrives as its global bucket index, so the bucket's state is one load away and
    the segment (for the shared window) is read from there."""
    cdef Py_ssize_t i
    cdef int64_t g, c, sz = 0
    cdef uint16_t h
    cdef int64_t maxm = st.max_messages, maxb = st.max_bytes
    cdef SegState *S
    cdef BucketState *bk = st.bk
    cdef BucketState *B
    cdef int32_t *olist = st.olist
    cdef int64_t seq = st.seq, opened = 0
    cdef int rc = 0
    for i in range(n):
        g = gidx[i]
        B = &bk[g]
        h = bh[i]
        if has_sizes:
            sz = sizes[i]
            if shared:
                S = B.win
                if S.wcount > 0 and sz > maxb - S.wbytes:
                    rc = cold_flush(st, B.seg)
                    if rc < 0:
                        break
            elif B.count > 0 and sz > maxb - B.nbytes:
                rc = cold_emit(st, g)
                if rc < 0:
                    break
        c = B.count
        if c == 0:
            B.first = seq
            if not place:
                B.hash_min = h
                B.hash_max = h
            opened += 1
            if shared:
                S = B.win
                olist[S.boff + S.olen] = <int32_t>g
                S.olen += 1
        elif not place:
            B.hash_min = h if h < B.hash_min else B.hash_min
            B.hash_max = h if h > B.hash_max else B.hash_max
        if place:  # listed; gs_emit stamps the batch from its hashes
            if c == B.cap and cold_grow(st, B) < 0:
                rc = -1
                break
            B.msgs[c] = seq
            B.hashes[c] = h
        B.count = c + 1
        seq += 1
        if has_sizes:
            B.nbytes += sz
        if shared:
            S = B.win
            S.wcount += 1
            if has_sizes:
                S.wbytes += sz
                if S.wcount >= maxm or S.wbytes >= maxb:
                    rc = cold_flush(st, B.seg)
                    if rc < 0:
                        break
            elif S.wcount >= maxm:
                rc = cold_flush(st, B.seg)
                if rc < 0:
                    break
        elif c + 1 >= maxm or (has_sizes and B.nbytes >= maxb):
            rc = cold_emit(st, g)
            if rc < 0:
                break
    st.seq = seq
    st.nopen += opened  # gs_emit decremented it per closed batch; only the sum matters
    return rc


cdef int gs_scan(GroupState *st, Py_ssize_t n, const int32_t *gidx, const uint16_t *bh,
                 const int64_t *sizes) noexcept nogil:
    """Feed n messages in send order: global bucket index (segs[s].boff + bucket), bucket hash
    and size (sizes NULL: 0 bytes each).

    Limits (both policies): before a message is added, a non-empty batch (per_bucket) or window
    (shared) that it would push over max_bytes is emitted; after it is added, a batch or window
    that reached max_messages or max_bytes is emitted at once. So the overflowing message opens
    the next batch, and a message larger than max_bytes is an entry of its own.
    Every index must be in range and every size >= 0 (check_columns, or the router's own
    output): the loop does not look. Returns 0, or -1 when memory ran out (the state then holds
    part of the chunk and is discarded).
    """
    cdef bint shared = st.policy == P_SHARED
    if st.order != NULL:
        if shared:
            if sizes != NULL:
                return scan_loop(st, n, gidx, bh, sizes, True, True, True)
            return scan_loop(st, n, gidx, bh, sizes, True, False, True)
        if sizes != NULL:
            return scan_loop(st, n, gidx, bh, sizes, False, True, True)
        return scan_loop(st, n, gidx, bh, sizes, False, False, True)
    if shared:
        if sizes != NULL:
            return scan_loop(st, n, gidx, bh, sizes, True, True, False)
        return scan_loop(st, n, gidx, bh, sizes, True, False, False)
    if sizes != NULL:
        return scan_loop(st, n, gidx, bh, sizes, False, True, False)
    return scan_loop(st, n, gidx, bh, sizes, False, False, False)


ctypedef struct OpenRef:
    int64_t first
    int64_t g


cdef int cmp_open(const void *a, const void *b) noexcept nogil:
    cdef int64_t x = (<const OpenRef *>a).first, y = (<const OpenRef *>b).first
    return (x > y) - (x < y)


cdef int gs_finish(GroupState *st) noexcept nogil:
    """End of input: emit every open batch, all segments together, ordered by first message."""
    if st.nopen == 0:
        return 0
    cdef int64_t g, k = 0
    cdef OpenRef *refs = <OpenRef *>malloc(st.nopen * sizeof(OpenRef))
    if refs == NULL:
        return -1
    for g in range(st.nbuckets):
        if st.bk[g].count > 0:
            refs[k].first = st.bk[g].first
            refs[k].g = g
            k += 1
    qsort(refs, k, sizeof(OpenRef), cmp_open)
    for g in range(k):
        if gs_emit(st, refs[g].g) < 0:
            free(refs)
            return -1
    free(refs)
    for g in range(st.nseg):
        st.segs[g].wcount = 0
        st.segs[g].wbytes = 0
        st.segs[g].olen = 0
    return 0


cdef int64_t gs_assign_slots(GroupState *st) noexcept nogil:
    """Lay the emitted records out back to back in emission order and point every bucket's drain
    cursor at its oldest record; returns the records' message total."""
    cdef int64_t r, g, pos = 0
    cdef Rec *rec
    cdef DrainState *b
    for r in range(st.nrec):
        rec = &st.recs[r]
        rec.start = pos
        pos += rec.count
        g = st.segs[rec.seg].boff + rec.bucket
        b = &st.dr[g]
        if b.head == r:
            b.cur = rec.start
            b.end = rec.start + rec.count
    return pos


cdef int64_t gs_drain(GroupState *st, Py_ssize_t n, const int32_t *gidx, int64_t *take,
                      int64_t *keep) noexcept nogil:
    """Place the n buffered messages (send order, by global bucket index) of the emitted records
    into ``take``.

    A bucket's buffered messages are, in send order, those of its emitted records (oldest first)
    followed by those of its open batch; the per-bucket FIFO says which record is next, so one
    pass suffices (gs_assign_slots first). Messages of open batches go to ``keep`` (may be NULL
    when there are none). Returns the number kept, or -1 if the messages do not match the
    records (a caller's bug).
    """
    # a bucket with no undrained record has cur == end (zeroed at init, exhausted after a drain)
    cdef Py_ssize_t p
    cdef int64_t r, c, g, k = 0
    cdef Rec *recs = st.recs
    cdef DrainState *B
    for p in range(n):
        B = &st.dr[gidx[p]]
        c = B.cur
        if c < B.end:
            take[c] = p
            c += 1
            B.cur = c
            if c == B.end:
                r = recs[B.head].next
                B.head = r
                if r >= 0:
                    B.cur = recs[r].start
                    B.end = B.cur + recs[r].count
                else:
                    B.tail = -1
        else:
            if keep == NULL:
                return -1
            keep[k] = p
            k += 1
    for r in range(st.nrec):
        g = st.segs[recs[r].seg].boff + recs[r].bucket
        if st.dr[g].head >= 0:
            return -1
    st.nrec = 0
    return k


cdef void lookup_buckets(Py_ssize_t n, const int32_t *seg, const uint16_t *bh,
                         const uint16_t *splits, const int64_t *split_off,
                         int32_t *out) noexcept nogil:
    """out[i] = bucket of bh[i] in segment seg[i]'s splits (seg NULL: segment 0), by search."""
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


cdef void lookup_buckets_table(Py_ssize_t n, const int32_t *seg, const uint16_t *bh,
                               const uint16_t **tables, int32_t *out) noexcept nogil:
    """out[i] = tables[seg[i]][bh[i]]: the boundary lists' 64 Ki lookup tables (Buckets.lookup_table),
    for long columns, where a table load beats the search's mispredicted compares."""
    cdef Py_ssize_t i
    cdef const uint16_t *t
    if seg == NULL:
        t = tables[0]
        for i in range(n):
            out[i] = t[bh[i]]
        return
    for i in range(n):
        out[i] = tables[seg[i]][bh[i]]


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
                 const int64_t[::1] split_offsets, int32_t[::1] out, object tables=None):
    """out[i] = bucket of bucket_hash[i] in segment seg[i] (seg None: one segment).

    Segment s's ascending splits are splits[split_offsets[s]:split_offsets[s+1]]; seg values
    must be valid segment indexes (the caller routed them). ``tables``: optional sequence of each
    segment's 65536-entry uint16 lookup table (Buckets.lookup_table), used instead of the search.
    """
    cdef Py_ssize_t n = bucket_hash.shape[0], nseg = split_offsets.shape[0] - 1, s
    if out.shape[0] != n:
        raise ValueError(f"out has {out.shape[0]} values for {n} messages")
    cdef const int32_t *segp = opt_i32(seg, n, "seg")
    cdef const uint16_t **tp = NULL
    cdef const uint16_t[::1] table
    if tables is not None:
        if len(tables) != nseg:
            raise ValueError(f"{len(tables)} lookup tables for {nseg} segments")
        for s in range(nseg):
            table = tables[s]
            if table.shape[0] != 65536:
                raise ValueError(f"lookup table {s} has {table.shape[0]} entries, not 65536")
    if n == 0:
        return
    if tables is not None:
        tp = <const uint16_t **>PyMem_RawMalloc(nseg * sizeof(uint16_t *))
        if tp == NULL:
            raise MemoryError()
        for s in range(nseg):
            table = tables[s]
            tp[s] = &table[0]
        # the tables stay referenced by ``tables`` for the call
        with nogil:
            lookup_buckets_table(n, segp, &bucket_hash[0], tp, &out[0])
        PyMem_RawFree(tp)
        return
    # an empty splits view still has a data pointer; bc_bucket_of never reads it when n == 0
    with nogil:
        lookup_buckets(n, segp, &bucket_hash[0], &splits[0], &split_offsets[0], &out[0])


cdef int64_t check_columns(GroupState *st, Py_ssize_t n, const int32_t *seg, const int32_t *bkt,
                           const int64_t *sizes, int32_t *gidx, int *what) noexcept nogil:
    """Index of the first message with a bad segment, bucket or size (what = 1, 2, 3), else -1.
    gidx[i]: the message's global bucket index (written up to the first bad message)."""
    cdef Py_ssize_t i
    cdef int32_t s = 0, b
    for i in range(n):
        if seg != NULL:
            s = seg[i]
            if s < 0 or s >= st.nseg:
                what[0] = 1
                return i
        b = bkt[i]
        if b < 0 or b >= st.segs[s].nb:
            what[0] = 2
            return i
        if sizes != NULL and sizes[i] < 0:
            what[0] = 3
            return i
        gidx[i] = <int32_t>(st.segs[s].boff + b)
    return -1


cdef int64_t check_global(GroupState *st, Py_ssize_t n, const int32_t *gidx, const int64_t *sizes,
                          int *what) noexcept nogil:
    """check_columns for messages given by global bucket index (what = 4: bad index)."""
    cdef Py_ssize_t i
    for i in range(n):
        if gidx[i] < 0 or gidx[i] >= st.nbuckets:
            what[0] = 4
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
    if what == 4:
        raise ValueError(f"global bucket index {bkt[index]} at message {index} is out of range")
    raise ValueError(f"size {sizes[index]} at message {index} is negative")


cdef tuple record_columns(GroupState *st, int64_t nrec):
    """Copy the emitted records into numpy columns (seg, bucket, hash_min, hash_max, start, count, nbytes)."""
    cdef cnp.ndarray a_seg = empty_column(nrec, cnp.NPY_INT32)
    cdef cnp.ndarray a_bkt = empty_column(nrec, cnp.NPY_INT32)
    cdef cnp.ndarray a_min = empty_column(nrec, cnp.NPY_UINT16)
    cdef cnp.ndarray a_max = empty_column(nrec, cnp.NPY_UINT16)
    cdef cnp.ndarray a_start = empty_column(nrec, cnp.NPY_INT64)
    cdef cnp.ndarray a_count = empty_column(nrec, cnp.NPY_INT64)
    cdef cnp.ndarray a_nbytes = empty_column(nrec, cnp.NPY_INT64)
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
    buckets in segment s): ``scan`` (or ``add_key``) messages, ``finish`` at a flush, and
    ``drain`` the entries emitted so far. With ``buffered`` (the default) the Grouper keeps the
    pending messages' segment, bucket and stream position itself, so a streaming caller only
    keeps its payloads in a list parallel to that buffer."""

    cdef GroupState st
    cdef bint ready
    cdef bint buffered
    cdef bint busy          # a call is running with the GIL released: refuse re-entry
    cdef int32_t *pg        # pending messages in send order: global bucket index, stream position
    cdef int64_t *pidx
    cdef int64_t plen
    cdef int64_t pcap
    # routing of one key (add_key): starts of active segments 1.., legacy order, boundary lists
    cdef bint routed
    cdef uint16_t *rstarts
    cdef int32_t *rlegacy
    cdef uint16_t *rsplits
    cdef int64_t *rsoff
    cdef bc_scratch scratch

    def __cinit__(self, const int64_t[::1] bucket_offsets, int policy, int64_t max_messages,
                  int64_t max_bytes, bint buffered=True):
        cdef Py_ssize_t nseg = bucket_offsets.shape[0] - 1, s
        self.ready = False
        self.buffered = buffered
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
        PyMem_RawFree(self.pg)
        PyMem_RawFree(self.pidx)
        PyMem_RawFree(self.rstarts)
        PyMem_RawFree(self.rlegacy)
        PyMem_RawFree(self.rsplits)
        PyMem_RawFree(self.rsoff)
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
            if split_offsets[i + 1] - split_offsets[i] != self.st.segs[i].nb - 1 or split_offsets[i] < 0 \
                    or split_offsets[i + 1] > splits.shape[0]:
                raise ValueError(f"segment {i}: its splits do not match its bucket count")
        self.rstarts = <uint16_t *>PyMem_RawMalloc(nseg * sizeof(uint16_t))
        self.rsplits = <uint16_t *>PyMem_RawMalloc((splits.shape[0] + 1) * sizeof(uint16_t))
        self.rsoff = <int64_t *>PyMem_RawMalloc((nseg + 1) * sizeof(int64_t))
        if self.rstarts == NULL or self.rsplits == NULL or self.rsoff == NULL:
            raise MemoryError()
        for i in range(nseg - 1):
            self.rstarts[i] = starts[i]
        for i in range(splits.shape[0]):
            self.rsplits[i] = splits[i]
        for i in range(nseg + 1):
            self.rsoff[i] = split_offsets[i]
        if legacy_order is not None:
            legacy = legacy_order
            if legacy.shape[0] != nseg:
                raise ValueError("legacy_order does not match the segment count")
            self.rlegacy = <int32_t *>PyMem_RawMalloc(nseg * sizeof(int32_t))
            if self.rlegacy == NULL:
                raise MemoryError()
            for i in range(nseg):
                if legacy[i] < 0 or legacy[i] >= nseg:
                    raise ValueError(f"legacy_order[{i}] = {legacy[i]} is not a segment index")
                self.rlegacy[i] = legacy[i]
        self.routed = True

    def add_key(self, object key, int64_t size, bint replace, int64_t round_robin):
        """Hash, route, look up and scan one message (the per-send path, one C call).

        key: str, bytes or None (keyless: bucket hash 0, segment by round-robin). Returns
        (status, emitted, next_round_robin, global_bucket); status 0 ok, 1 key of another type,
        2 unpaired surrogate (strict), and then nothing changed. global_bucket is
        bucket_offsets[segment] + bucket, the message's (segment, bucket) as one index.
        """
        self.check()
        if not self.routed:
            raise RuntimeError("add_key needs set_routing first")
        if size < 0:
            raise ValueError(f"size {size} is negative")
        cdef int64_t nseg = self.st.nseg
        cdef bc_key k
        cdef uint32_t raw = 0
        cdef int rc
        cdef int32_t idx, bucket = 0
        cdef uint16_t h = 0
        if round_robin < 0:
            raise ValueError("round_robin must be >= 0")
        if key is None:
            idx = <int32_t>(round_robin % nseg)
            round_robin = (round_robin + 1) % nseg
            if self.rlegacy != NULL:
                idx = self.rlegacy[idx]
        else:
            if bc_describe_key(<PyObject *>key, &k) != 0 or k.kind == BC_KEY_NONE:
                return 1, False, round_robin, -1
            rc = bc_hash_key(&k, replace, &self.scratch, &raw)
            if rc == BC_ERR_NOMEM:
                raise MemoryError()
            if rc != BC_OK:
                return 2, False, round_robin, -1
            if self.rlegacy != NULL:
                idx = self.rlegacy[(raw & 0x7FFFFFFF) % <uint32_t>nseg]
            else:
                idx = <int32_t>bc_bucket_of(self.rstarts, <uint32_t>(nseg - 1), raw >> 16)
            h = <uint16_t>(raw & 0xFFFF)
            bucket = <int32_t>bc_bucket_of(self.rsplits + self.rsoff[idx],
                                           <uint32_t>(self.rsoff[idx + 1] - self.rsoff[idx]), h)
        if self.buffered:
            self.reserve(1)
        cdef int32_t g = <int32_t>(self.st.segs[idx].boff + bucket)
        cdef int64_t first = self.st.seq
        if gs_scan(&self.st, 1, &g, &h, &size) < 0:
            self.ready = False
            raise MemoryError()
        if self.buffered:
            self.pg[self.plen] = g
            self.pidx[self.plen] = first
            self.plen += 1
        return 0, self.st.nrec > 0, round_robin, g

    cdef check(self):
        if not self.ready:
            raise RuntimeError("this Grouper ran out of memory earlier and its state is lost")
        if self.busy:
            raise RuntimeError("this Grouper is in use by another thread; serialise the calls")

    cdef int reserve(self, int64_t extra) except -1:
        """Room for ``extra`` more pending messages (before the state changes)."""
        cdef int64_t need = self.plen + extra, cap
        cdef void *a
        if need <= self.pcap:
            return 0
        cap = max(need, 2 * self.pcap, 256)
        a = PyMem_RawRealloc(self.pg, cap * sizeof(int32_t))
        if a == NULL:
            raise MemoryError()
        self.pg = <int32_t *>a
        a = PyMem_RawRealloc(self.pidx, cap * sizeof(int64_t))
        if a == NULL:
            raise MemoryError()
        self.pidx = <int64_t *>a
        self.pcap = cap
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
        return self.plen

    def scan(self, object seg, const int32_t[::1] bucket, const uint16_t[::1] bucket_hash,
             object sizes):
        """Feed a chunk of messages; returns whether entries are now emitted. All columns are
        validated before the state changes."""
        self.check()
        cdef Py_ssize_t n = bucket.shape[0]
        if bucket_hash.shape[0] != n:
            raise ValueError(f"bucket_hash has {bucket_hash.shape[0]} values for {n} messages")
        cdef const int32_t *segp = opt_i32(seg, n, "seg")
        cdef const int64_t *szp = opt_i64(sizes, n, "sizes")
        if n == 0:
            return self.st.nrec > 0
        cdef int32_t *gidx
        if self.buffered:
            self.reserve(n)
            gidx = self.pg + self.plen  # checked indexes land in the pending buffer directly
        else:
            gidx = <int32_t *>PyMem_RawMalloc(n * sizeof(int32_t))
            if gidx == NULL:
                raise MemoryError()
        cdef int what = 0
        cdef int64_t bad, i, first = self.st.seq
        cdef int rc = 0
        self.busy = True
        with nogil:
            bad = check_columns(&self.st, n, segp, &bucket[0], szp, gidx, &what)
            if bad < 0:
                rc = gs_scan(&self.st, n, gidx, &bucket_hash[0], szp)
                if rc == 0 and self.buffered:
                    for i in range(n):
                        self.pidx[self.plen + i] = first + i
                    self.plen += n
        self.busy = False
        if not self.buffered:
            PyMem_RawFree(gidx)
        if bad >= 0:
            raise_bad_column(what, bad, seg, bucket, sizes)
        if rc < 0:
            self.ready = False
            raise MemoryError()
        return self.st.nrec > 0

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
        if not self.buffered:
            raise RuntimeError("drain needs a buffered Grouper")
        self.busy = True
        try:
            return self._drain()
        finally:
            self.busy = False

    cdef tuple _drain(self):
        cdef int64_t nrec = self.st.nrec, total, n = self.plen, kept = 0, j
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
                kept = gs_drain(&self.st, n, self.pg, tp, kp if n > total else NULL)
                if kept == n - total:
                    for j in range(total):
                        ip[j] = self.pidx[tp[j]]
                    # keep is ascending, so compacting in place never overwrites a later source
                    for j in range(kept):
                        self.pg[j] = self.pg[kp[j]]
                        self.pidx[j] = self.pidx[kp[j]]
                    self.plen = kept
        if kept != n - total:
            self.ready = False
            raise RuntimeError("buffered messages do not match the emitted entries (state lost)")
        return cols + (take, keep, index)


def group_entries(object seg, const int32_t[::1] bucket, const uint16_t[::1] bucket_hash,
                  object sizes, const int64_t[::1] bucket_offsets, int policy,
                  int64_t max_messages, int64_t max_bytes, bint global_index=False):
    """One-shot grouping of a whole message stream, flushed at the end.

    Each message is (segment index, bucket index in that segment) from ``seg`` (None: one
    segment) and ``bucket``, or with ``global_index`` its global bucket index
    bucket_offsets[segment] + bucket in ``bucket`` alone (seg None). Every index and size is
    checked, a chunk at a time, before that chunk is scanned.
    Returns (seg, bucket, hash_min, hash_max, start, count, nbytes, order): one row per entry in
    emission order, and ``order`` the message indices entry after entry (send order inside each).
    """
    cdef Py_ssize_t n = bucket.shape[0], pos = 0, m
    if bucket_hash.shape[0] != n:
        raise ValueError(f"bucket_hash has {bucket_hash.shape[0]} values for {n} messages")
    if global_index and seg is not None:
        raise ValueError("seg must be None with global bucket indexes")
    cdef const int32_t *segp = opt_i32(seg, n, "seg")
    cdef const int64_t *szp = opt_i64(sizes, n, "sizes")
    cdef OneShot shot = OneShot(bucket_offsets, policy, max_messages, max_bytes, n)
    cdef GroupState *st = &shot.grouper.st
    cdef const int32_t *gidx
    cdef int64_t bad = -1
    cdef int rc = 0, what = 0
    with nogil:
        while pos < n:
            m = n - pos if n - pos < CHUNK else CHUNK
            if global_index:
                gidx = &bucket[pos]
                bad = check_global(st, m, gidx, szp + pos if szp != NULL else NULL, &what)
            else:
                gidx = shot.gidx
                bad = check_columns(st, m, segp + pos if segp != NULL else NULL, &bucket[pos],
                                    szp + pos if szp != NULL else NULL, shot.gidx, &what)
            if bad >= 0:
                bad += pos
                break
            rc = gs_scan(st, m, gidx, &bucket_hash[pos], szp + pos if szp != NULL else NULL)
            if rc != 0:
                break
            pos += m
    if bad >= 0:
        raise_bad_column(what, bad, seg, bucket, sizes)
    return shot.finish(rc)


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


# ----------------------------------------------------------------------------------------------
# The fused kernel: keys to entries in one pass over the keys


ROUTE_ONE = 0       # a bare Buckets or one active segment
ROUTE_TABLE = 1     # keyed: segment_table[segment_hash]; keyless: round-robin over the segments
ROUTE_LEGACY = 2    # all-legacy layout: signSafeMod(raw & 0x7FFFFFFF, n) over the legacy order

cdef enum:
    R_ONE = 0
    R_TABLE = 1
    R_LEGACY = 2


# Lookup tables of 8-bit entries where every index fits (N <= 256 buckets, <= 256 segments):
# half the cache footprint of 16-bit ones, which matters once keys stream through the cache.
ctypedef fused table_t:
    uint8_t
    uint16_t


cdef inline void route_chunk(Py_ssize_t m, const uint32_t *raw, const uint8_t *has_key, int mode,
                             bint defer, const table_t *segment_table, const int32_t *rotation,
                             int64_t nrotation, int64_t *rr, const table_t **tables,
                             const int32_t *boff, int32_t *gidx, uint16_t *bh) noexcept nogil:
    """Global bucket index (boff[segment] + bucket) and bucket hash of m hashed messages.

    rotation: the segments keyless messages take in turn (legacy: the legacy order, which is
    also what keyed legacy routing indexes); *rr is the next keyless position. With defer, a
    keyless message gets index -1 instead, for place_keyless to fill in send order (a thread
    routing a later part of the stream cannot know where the rotation stands). has_key NULL: the
    chunk has no keyless message (the test is loop-invariant: the compiler unswitches it)."""
    cdef Py_ssize_t i
    cdef uint32_t h
    cdef int32_t s = 0
    cdef int64_t r = rr[0]
    cdef bint all_keyed = has_key == NULL
    for i in range(m):
        h = raw[i]
        if mode != R_ONE:
            if not all_keyed and not has_key[i]:
                if defer:
                    gidx[i] = -1
                    bh[i] = 0
                    continue
                s = rotation[r]
                r += 1
                if r == nrotation:
                    r = 0
            elif mode == R_TABLE:
                s = segment_table[h >> 16]
            else:
                s = rotation[(h & 0x7FFFFFFFu) % <uint32_t>nrotation]
        bh[i] = <uint16_t>(h & 0xFFFF)
        gidx[i] = boff[s] + tables[s][h & 0xFFFF]
    rr[0] = r


cdef inline void route_by_mode(int mode, Py_ssize_t m, const uint32_t *raw, const uint8_t *has_key,
                               bint defer, const table_t *segment_table, const int32_t *rotation,
                               int64_t nrotation, int64_t *rr, const table_t **tables,
                               const int32_t *boff, int32_t *gidx, uint16_t *bh) noexcept nogil:
    # one call per mode with a constant: each inlined copy of the loop drops the other modes' tests
    if mode == R_TABLE:
        route_chunk(m, raw, has_key, R_TABLE, defer, segment_table, rotation, nrotation, rr, tables,
                    boff, gidx, bh)
    elif mode == R_LEGACY:
        route_chunk(m, raw, has_key, R_LEGACY, defer, segment_table, rotation, nrotation, rr, tables,
                    boff, gidx, bh)
    else:
        route_chunk(m, raw, has_key, R_ONE, defer, segment_table, rotation, nrotation, rr, tables,
                    boff, gidx, bh)


cdef class Router:
    """How hashed keys reach their global bucket index for one producer target: the route mode,
    the 64 Ki segment table (ROUTE_TABLE), the keyless rotation, every segment's 64 Ki bucket
    table, narrowed to 8-bit entries when every segment and bucket index fits, and each
    segment's first global index (its bucket count is its table's last entry + 1)."""

    cdef int mode
    cdef bint narrow
    cdef object keep             # the tables (and their owners), alive while the pointers are used
    cdef const void *segment_table
    cdef const int32_t *rotation
    cdef int64_t nrotation
    cdef const void **tables
    cdef cnp.ndarray a_tables
    cdef cnp.ndarray a_boff
    cdef const int32_t *boff

    def __cinit__(self, int route_mode, object segment_table, const int32_t[::1] rotation,
                  list bucket_tables):
        cdef Py_ssize_t s, nseg = len(bucket_tables)
        cdef cnp.ndarray table
        if route_mode not in (R_ONE, R_TABLE, R_LEGACY):
            raise ValueError(f"unknown route mode {route_mode}")
        if route_mode != R_ONE and rotation.shape[0] < 1:
            raise ValueError("routing needs at least one segment in the rotation")
        tables = [np.asarray(t) for t in bucket_tables]
        for t in tables:
            if t.dtype != np.uint16 or t.shape != (0x10000,) or not t.flags.c_contiguous:
                raise ValueError("a bucket table must be 65536 contiguous uint16 entries")
        if route_mode == R_TABLE:
            segment_table = np.asarray(segment_table)
            if segment_table.dtype != np.uint16 or segment_table.shape != (0x10000,):
                raise ValueError("the segment table must be 65536 uint16 entries")
        self.a_boff = np.zeros(nseg + 1, dtype=np.int64)
        np.cumsum([int(t[0xFFFF]) + 1 for t in tables], out=self.a_boff[1:])
        if self.a_boff[nseg] > 0x7FFFFFFF:
            raise ValueError("more than 2**31-1 buckets in total")
        self.a_boff = self.a_boff.astype(np.int32)
        self.boff = <const int32_t *>cnp.PyArray_DATA(self.a_boff)
        self.narrow = nseg <= 256 and all(int(t.max()) <= 0xFF for t in tables)
        if self.narrow:
            tables = [t.astype(np.uint8) for t in tables]
            if route_mode == R_TABLE:
                segment_table = np.ascontiguousarray(segment_table, dtype=np.uint8)
        # segments with the same boundary list (a tiled layout's usual case) share one table:
        # fewer cache lines for the lookups to miss while keys stream through the cache
        same = {}
        tables = [same.setdefault(t.tobytes(), t) for t in tables]
        self.mode = route_mode
        self.keep = (segment_table, rotation, tables)
        self.a_tables = np.empty(nseg, dtype=np.uintp)
        self.tables = <const void **>cnp.PyArray_DATA(self.a_tables)
        for s in range(nseg):
            table = tables[s]
            self.tables[s] = cnp.PyArray_DATA(table)
        self.segment_table = NULL
        if route_mode == R_TABLE:
            table = np.ascontiguousarray(segment_table)
            self.keep = (table, rotation, tables)
            self.segment_table = cnp.PyArray_DATA(table)
        self.rotation = &rotation[0] if rotation.shape[0] else NULL
        self.nrotation = rotation.shape[0]

    cdef check_offsets(self, const int64_t[::1] bucket_offsets):
        """The grouping's segments must be the router's."""
        cdef Py_ssize_t s
        if bucket_offsets.shape[0] != self.a_boff.shape[0]:
            raise ValueError("the router's bucket tables do not match the segments")
        for s in range(bucket_offsets.shape[0]):
            if bucket_offsets[s] != self.boff[s]:
                raise ValueError("the router's bucket tables do not match the segments")

    cdef inline void route(self, Py_ssize_t m, const uint32_t *raw, const uint8_t *has_key,
                           bint defer, int64_t *rr, int32_t *gidx, uint16_t *bh) noexcept nogil:
        """Route m hashed messages (has_key NULL: every one has a key)."""
        if self.narrow:
            route_by_mode(self.mode, m, raw, has_key, defer, <const uint8_t *>self.segment_table,
                          self.rotation, self.nrotation, rr, <const uint8_t **>self.tables, self.boff,
                          gidx, bh)
        else:
            route_by_mode(self.mode, m, raw, has_key, defer, <const uint16_t *>self.segment_table,
                          self.rotation, self.nrotation, rr, <const uint16_t **>self.tables, self.boff,
                          gidx, bh)

    cdef inline int32_t keyless_index(self, int32_t s) noexcept nogil:
        """The global bucket index of hash 0 in segment s (a keyless message's bucket)."""
        if self.narrow:
            return self.boff[s] + (<const uint8_t **>self.tables)[s][0]
        return self.boff[s] + (<const uint16_t **>self.tables)[s][0]


cdef class KeyChunks:
    """Reads a KeyColumn a chunk at a time: describes, hashes (multi-lane) and routes each chunk
    into caller-given columns. The scratch buffers are allocated once."""

    cdef bc_key *keys
    cdef uint32_t *raw
    cdef uint8_t *has_key
    cdef Py_ssize_t cap          # the longest chunk the buffers hold
    cdef bc_scratch scratch
    cdef cnp.ndarray a_keys, a_raw, a_has
    cdef HashOut out

    def __cinit__(self, Py_ssize_t longest):
        self.cap = chunk_room(longest)
        self.a_keys = empty_column(self.cap * sizeof(bc_key), cnp.NPY_UINT8)
        self.a_raw = empty_column(self.cap, cnp.NPY_UINT32)
        self.a_has = empty_column(self.cap, cnp.NPY_UINT8)
        self.keys = <bc_key *>cnp.PyArray_DATA(self.a_keys)
        self.raw = <uint32_t *>cnp.PyArray_DATA(self.a_raw)
        self.has_key = <uint8_t *>cnp.PyArray_DATA(self.a_has)
        self.out.raw = self.raw
        self.out.has_key = self.has_key
        self.out.segment_hash = NULL
        self.out.bucket_hash = NULL
        self.scratch.buf = NULL
        self.scratch.cap = 0

    def __dealloc__(self):
        bc_scratch_free(&self.scratch)

    cdef int hash_chunk(self, KeyColumn col, Py_ssize_t cpos, Py_ssize_t m, bint replace,
                        Py_ssize_t *err_index) except -2:
        """Hash keys [cpos, cpos+m) of col into self.raw / self.has_key; the GIL is held only
        while an object column's chunk is described. On failure *err_index is the key's
        position in the column."""
        cdef int status
        cdef Py_ssize_t out_index = -1
        if m > self.cap:
            raise ValueError(f"a chunk of {m} keys is longer than the buffers ({self.cap})")
        if not col.needs_gil:
            with nogil:
                status = hash_view_run(&col.view, cpos, m, self.keys, replace, True, &self.scratch,
                                       &self.out, 0, err_index)
            return status
        status = col.describe_objects(cpos, m, self.keys, err_index)
        if status == ST_OK:
            with nogil:
                status = hash_run(self.keys, m, col.view.plain, NULL, 0, replace, True, &self.scratch,
                                  &self.out, 0, &out_index)
        col.release()
        if out_index >= 0:
            err_index[0] = cpos + out_index
        return status


def route_keys(Router router, KeyColumn col, Py_ssize_t lo, Py_ssize_t hi, bint replace,
               int32_t[::1] gidx, uint16_t[::1] bucket_hash):
    """Hash and route keys [lo, hi) of a column into global bucket indexes and bucket hashes
    (hi - lo values each). Keyless messages are left at index -1 for place_keyless. Several
    threads may route disjoint parts at once. Returns (status, index of the failing key in the
    column)."""
    if gidx.shape[0] != hi - lo or bucket_hash.shape[0] != hi - lo:
        raise ValueError("output columns do not match the key range")
    cdef KeyChunks chunks = KeyChunks(hi - lo)
    cdef Py_ssize_t cpos = lo, m, done, err_index = -1
    cdef int64_t rr = 0
    cdef int status = ST_OK
    while cpos < hi:
        m = hi - cpos if hi - cpos < CHUNK else CHUNK
        status = chunks.hash_chunk(col, cpos, m, replace, &err_index)
        if status != ST_OK:
            break
        done = cpos - lo
        with nogil:
            router.route(m, chunks.raw, chunks.has_key, True, &rr, &gidx[done], &bucket_hash[done])
        cpos += m
    if status == ST_NOMEM:
        raise MemoryError()
    return status, err_index


def place_keyless(Router router, int32_t[::1] gidx, int64_t round_robin):
    """Give the keyless messages route_keys deferred (index -1) their round-robin segment's
    keyless bucket in send order, starting at round_robin; returns the next position."""
    cdef int64_t r = round_robin % router.nrotation if router.nrotation else 0
    if gidx.shape[0]:
        with nogil:
            r = fill_keyless(router, &gidx[0], gidx.shape[0], r)
    return r


def fused_entries(list columns, object sizes, const int64_t[::1] bucket_offsets, int policy,
                  int64_t max_messages, int64_t max_bytes, bint replace, Router router,
                  int64_t round_robin):
    """Hash, route, look up and group a key stream a chunk at a time, placing messages as their
    entries are emitted.

    Each chunk of keys is described, hashed (multi-lane), routed, looked up in its segment's
    64 Ki bucket table (Buckets.lookup_table) and fed to the batch state machine while it is in
    L1; an emitted entry's messages are copied to ``order`` at once (GroupState.order), so no
    per-message column outlives its chunk and there is no placement pass. The GIL is released
    except while an object column's chunk is described.

    Returns (status, err_index, columns or None, next_round_robin): status is a hashing
    STATUS_* code for the first bad key (err_index its stream position); the columns are those
    of group_entries: (seg, bucket, hash_min, hash_max, start, count, nbytes, order).
    """
    cdef Py_ssize_t n = 0, pos, cpos, m
    cdef KeyColumn col
    for col in columns:
        n += col.length
    router.check_offsets(bucket_offsets)
    cdef const int64_t *szp = opt_i64(sizes, n, "sizes")
    cdef int64_t rr = round_robin % router.nrotation if router.nrotation else 0
    cdef OneShot shot = OneShot(bucket_offsets, policy, max_messages, max_bytes, n)
    cdef GroupState *st = &shot.grouper.st
    cdef KeyChunks chunks = KeyChunks(n)
    cdef int status = ST_OK, rc = 0
    cdef Py_ssize_t err_index = -1
    pos = 0
    for col in columns:
        cpos = 0
        while cpos < col.length:
            m = col.length - cpos if col.length - cpos < CHUNK else CHUNK
            status = chunks.hash_chunk(col, cpos, m, replace, &err_index)
            if status != ST_OK:
                err_index += pos - cpos  # the key's stream position
                break
            with nogil:
                router.route(m, chunks.raw, NULL if col.view.plain else chunks.has_key, False, &rr,
                             shot.gidx, shot.bh)
                rc = gs_scan(st, m, shot.gidx, shot.bh, szp + pos if szp != NULL else NULL)
            if rc != 0:
                break
            cpos += m
            pos += m
        if status != ST_OK or rc != 0:
            break
    if status == ST_NOMEM:
        raise MemoryError()
    if status != ST_OK:
        return status, err_index, None, rr
    return ST_OK, -1, shot.finish(rc), rr


def hashed_entries(const uint16_t[::1] segment_hash, const uint16_t[::1] bucket_hash,
                   const uint8_t[::1] has_key, object sizes, const int64_t[::1] bucket_offsets, int policy,
                   int64_t max_messages, int64_t max_bytes, Router router, int64_t round_robin):
    """Route precomputed hashes and group them a chunk at a time, as fused_entries does keys
    (bucket_entries over KeyHashes): each message is routed by its segment hash, looked up by its
    bucket hash and stamped with it, the columns read as given. Not for a legacy router, which
    routes by the whole raw hash. Returns (the columns of group_entries, next_round_robin)."""
    cdef Py_ssize_t n = segment_hash.shape[0], pos = 0, m, i
    if bucket_hash.shape[0] != n or has_key.shape[0] != n:
        raise ValueError("the hash columns differ in length")
    if router.mode == R_LEGACY:
        raise ValueError("a legacy router routes by the raw hash")
    router.check_offsets(bucket_offsets)
    cdef const int64_t *szp = opt_i64(sizes, n, "sizes")
    cdef int64_t rr = round_robin % router.nrotation if router.nrotation else 0
    cdef OneShot shot = OneShot(bucket_offsets, policy, max_messages, max_bytes, n)
    cdef GroupState *st = &shot.grouper.st
    cdef uint32_t key[CHUNK]
    cdef int rc = 0
    cdef bint keyless
    with nogil:
        while pos < n and rc == 0:
            m = n - pos if n - pos < CHUNK else CHUNK
            # the router's key: segment hash above, bucket hash below
            for i in range(m):
                key[i] = (<uint32_t>segment_hash[pos + i] << 16) | bucket_hash[pos + i]
            keyless = memchr(&has_key[pos], 0, <size_t>m) != NULL
            router.route(m, key, &has_key[pos] if keyless else NULL, False, &rr, shot.gidx, shot.bh)
            rc = gs_scan(st, m, shot.gidx, shot.bh, szp + pos if szp != NULL else NULL)
            pos += m
    return shot.finish(rc), rr


# The most messages gs_presize gives each bucket's lists up front (2.5 KiB): longer batches grow.
cdef enum:
    PRESIZE_MAX = 256


cdef class OneShot:
    """A one-shot stream's batch state, placing on emit: the order column, and one chunk's
    routed (global bucket index, bucket hash) columns."""

    cdef Grouper grouper
    cdef Py_ssize_t n
    cdef cnp.ndarray a_order, a_gidx, a_bh
    cdef int32_t *gidx
    cdef uint16_t *bh

    def __cinit__(self, const int64_t[::1] bucket_offsets, int policy, int64_t max_messages,
                  int64_t max_bytes, Py_ssize_t n):
        self.grouper = Grouper(bucket_offsets, policy, max_messages, max_bytes, False)
        self.n = n
        self.a_order = empty_column(n, cnp.NPY_INT64)
        self.a_gidx = empty_column(chunk_room(n), cnp.NPY_INT32)
        self.a_bh = empty_column(chunk_room(n), cnp.NPY_UINT16)
        self.gidx = <int32_t *>cnp.PyArray_DATA(self.a_gidx)
        self.bh = <uint16_t *>cnp.PyArray_DATA(self.a_bh)
        self.grouper.st.order = <int64_t *>cnp.PyArray_DATA(self.a_order)
        # a batch holds at most max_messages (and n) messages; most hold about n / buckets
        if gs_presize(&self.grouper.st, max(16, min(2 * n // self.grouper.st.nbuckets, max_messages,
                                                     PRESIZE_MAX))) < 0:
            raise MemoryError()

    cdef tuple finish(self, int rc):
        """End of the stream (rc: the scan's result): emit every open batch and return the
        entry columns (seg, bucket, hash_min, hash_max, start, count, nbytes, order)."""
        cdef GroupState *st = &self.grouper.st
        if rc == 0:
            with nogil:
                rc = gs_finish(st)
        if rc == -1:
            raise MemoryError()
        if rc != 0 or st.placed != self.n or st.seq != self.n:
            raise RuntimeError(f"internal error: {st.placed} of {self.n} messages placed (scan {rc})")
        return record_columns(st, st.nrec) + (self.a_order,)


cdef inline int64_t fill_keyless(Router router, int32_t *gidx, Py_ssize_t n, int64_t r) noexcept nogil:
    """Give the keyless messages the router deferred (index -1) their round-robin segment's
    keyless bucket in send order from rotation position r; returns the next position."""
    cdef Py_ssize_t i
    for i in range(n):
        if gidx[i] < 0:
            gidx[i] = router.keyless_index(router.rotation[r])
            r += 1
            if r == router.nrotation:
                r = 0
    return r


STEP_CODES = {"left": 0, "hashed": 1, "routed": 2}  # ScanStage(levels=...) for tests


# How far the publisher took a pipeline step before publishing it (ScanStage).
cdef enum:
    STEP_LEFT = 0        # nothing: the worker describes, hashes, routes and groups it
    STEP_HASHED = 1      # raw / has_key written: the worker routes and groups
    STEP_ROUTED = 2      # gidx / bh written, keyless left at -1: the worker places them and groups


cdef class ScanStage:
    """The two-thread pipeline of ``bucket_entries`` (``threads=2``).

    ``feed`` (the calling thread) reads the key columns a step at a time and publishes each step
    after taking it as far as balance asks; meanwhile ``run``, on a worker thread with the GIL
    released from start to end, takes the published steps in stream order, does what is left of
    each and feeds the batch state machine (the keyless round-robin is placed there too: the
    rotation is only known in stream order). The rule, per step: when the worker ran out of work
    while the publisher was on the previous step, the publisher leaves it this whole step;
    otherwise it hashes the step, and routes it too when the worker has not yet taken the
    previous one (a routed step is hashed a chunk at a time into the publisher's own buffers, so
    only its routed columns cross). Both threads then stay busy whatever the keys (Python objects
    take long to describe, Arrow keys almost nothing) and however the machine's load shifts, and
    only the steps the publisher worked on cross between the cores. Over Arrow/numpy keys the
    publisher's steps run without the GIL.

    Python keys are read with the GIL held and nothing held (INCREF): the worker describes its
    steps from pinned column views (describe_view) while ``feed`` keeps the GIL and runs no
    Python code until the worker is done. The hand-off is atomic counts; a waiting thread spins
    briefly, then sleeps on a lock the other releases (a Python-level hand-off would wait for
    the GIL, which a thread in long C calls yields only at the interpreter's switch interval).
    The first bad key by stream position wins, whichever thread found it. ``finish`` returns
    the entries."""

    cdef Router router
    cdef OneShot shot
    cdef const int64_t *szp
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
    cdef int32_t *gidx           # steps the publisher routed: global bucket index, bucket hash
    cdef uint16_t *bh
    cdef int8_t *level           # per step: STEP_*
    cdef int64_t *deferred       # per routed step: keyless messages left to the worker
    cdef ColumnView *views       # the worker's pinned views of the key columns
    cdef ColumnView *own_views   # the publisher's (describing writes the last run's form in it)
    cdef int64_t *col_start      # stream position of each column's first key (ncols + 1)
    cdef bint objects            # Python keys: feed keeps the GIL until the worker is done
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
        self.shot = OneShot(bucket_offsets, policy, max_messages, max_bytes, n)
        self.szp = opt_i64(sizes, n, "sizes")
        self.keep_sizes = sizes
        self.n = n
        self.step = step
        self.rr = round_robin % router.nrotation if router.nrotation else 0
        nsteps = (n + step - 1) // step
        self.a_raw = np.empty(n, dtype=np.uint32)
        self.a_has = np.empty(n, dtype=np.uint8)
        self.a_gidx = np.empty(n, dtype=np.int32)
        self.a_bh = np.empty(n, dtype=np.uint16)
        self.a_level = np.empty(nsteps, dtype=np.int8)
        self.a_deferred = np.zeros(nsteps, dtype=np.int64)
        self.raw = <uint32_t *>cnp.PyArray_DATA(self.a_raw)
        self.has_key = <uint8_t *>cnp.PyArray_DATA(self.a_has)
        self.gidx = <int32_t *>cnp.PyArray_DATA(self.a_gidx)
        self.bh = <uint16_t *>cnp.PyArray_DATA(self.a_bh)
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
        self.router.route(m, raw, has, True, &unused, self.gidx + pos, self.bh + pos)
        if has != NULL and self.router.mode != R_ONE:
            for i in range(m):
                left += has[i] == 0
        return left

    cdef int pin_columns(self, list columns) except -2:
        """Pin the columns' views for the worker; ST_CHANGED if one changed (error index 0)."""
        cdef Py_ssize_t c, ncols = len(columns)
        cdef KeyColumn col
        cdef int status
        self.a_views = np.empty(2 * max(ncols, 1) * sizeof(ColumnView), dtype=np.uint8)
        self.a_col_start = np.zeros(ncols + 1, dtype=np.int64)
        self.views = <ColumnView *>cnp.PyArray_DATA(self.a_views)
        self.own_views = self.views + max(ncols, 1)
        self.col_start = <int64_t *>cnp.PyArray_DATA(self.a_col_start)
        for c in range(ncols):
            col = columns[c]
            status = col.pin(&self.views[c])
            if status != ST_OK:
                return status
            self.own_views[c] = self.views[c]
            self.objects |= col.needs_gil
            self.col_start[c + 1] = self.col_start[c] + col.length
        if self.col_start[ncols] != self.n:
            raise ValueError(f"the key columns hold {self.col_start[ncols]} keys for {self.n} messages")
        return ST_OK

    def feed(self, list columns, bint replace):
        """The publisher: read the key columns, which cover the n messages in order, step after
        step. Returns (status, stream position of the first bad key or -1); on any failure the
        worker is stopped. STATUS_NEEDS_GIL: a legacy str, which only the GIL holder may ready
        and not while the other thread reads the keys (run the stream on one thread instead)."""
        cdef bc_scratch scratch
        scratch.buf = NULL
        scratch.cap = 0
        cdef bc_key *keys = <bc_key *>PyMem_RawMalloc(CHUNK * sizeof(bc_key))
        cdef Py_ssize_t pos = 0, stop, ci = 0, k = 0, err_index = -1
        cdef int status = ST_OK, lvl
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
            if status != ST_OK:
                err_index = 0
            while pos < self.n and status == ST_OK and not bc_observe(&self.failed):
                stop = self.n if self.n - pos < self.step else pos + self.step
                # (with the GIL: the worker may be describing Python keys)
                if self.forced is not None:
                    lvl = self.forced[k % len(self.forced)]
                elif starved:
                    lvl = STEP_LEFT
                else:  # route too when the worker has not even taken the previous step yet
                    lvl = STEP_ROUTED if bc_observe(&self.ready) - bc_observe(&self.taken) >= self.step \
                        else STEP_HASHED
                # a step left to the worker needs nothing here (the column cursor follows pos)
                if lvl != STEP_LEFT and self.objects:  # the GIL stays: the worker reads Python keys
                    status = self.hash_step(k, lvl, pos, stop, &ci, keys, own_raw, own_has, &scratch,
                                            &err_index)
                elif lvl != STEP_LEFT:
                    with nogil:
                        status = self.hash_step(k, lvl, pos, stop, &ci, keys, own_raw, own_has,
                                                &scratch, &err_index)
                if status != ST_OK:
                    break
                # the worker ran out of work while this thread was on the step: leave it the next
                starved = bc_observe(&self.done) == bc_observe(&self.ready)
                self.level[k] = <int8_t>lvl
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
        if bc_observe(&self.failed) and self.wstatus != ST_OK:  # the worker's bad key comes first
            status, err_index = self.wstatus, self.windex
        if status == ST_NOMEM:
            raise MemoryError()
        return status, err_index if status != ST_OK else -1

    cdef Py_ssize_t hash_chunk_at(self, ColumnView *views, Py_ssize_t *ci, Py_ssize_t p, Py_ssize_t e,
                                  bc_key *keys, uint32_t *raw, uint8_t *has, bc_scratch *scratch,
                                  int *status, Py_ssize_t *bad) noexcept nogil:
        """hash_views_at over the key columns into raw / has (from 0): never readies a legacy str
        (ST_NEEDS_GIL), which the other thread may be reading."""
        cdef HashOut out
        out.raw = raw
        out.has_key = has
        out.segment_hash = NULL
        out.bucket_hash = NULL
        return hash_views_at(views, self.col_start, ci, p, e, keys, self.replace, True, scratch, &out, 0,
                             status, bad)

    cdef int hash_step(self, Py_ssize_t k, int lvl, Py_ssize_t pos, Py_ssize_t stop, Py_ssize_t *ci,
                       bc_key *keys, uint32_t *own_raw, uint8_t *own_has, bc_scratch *scratch,
                       Py_ssize_t *bad) noexcept nogil:
        """The publisher hashes step k, messages [pos, stop), from its own pinned views into raw /
        has_key, or (STEP_ROUTED) a chunk at a time into its own buffers and routes it from
        there, so only the routed columns go to the worker. Returns a status (*bad: the key)."""
        cdef Py_ssize_t m
        cdef int status = ST_OK
        cdef int64_t left = 0
        while pos < stop:
            if lvl == STEP_ROUTED:
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
        return ST_OK

    cdef int take_left(self, Py_ssize_t p, Py_ssize_t e, Py_ssize_t *wc, bc_key *keys,
                       uint32_t *raw, uint8_t *has, bc_scratch *scratch) noexcept nogil:
        """The worker describes, hashes, routes and groups messages [p, e) itself, CHUNK keys
        at a time; *wc is its column cursor. Returns 0, a scan's -1 (no memory), or 1 with
        wstatus / windex naming a bad key."""
        cdef GroupState *st = &self.shot.grouper.st
        cdef Py_ssize_t m
        cdef int status, rc = 0
        while p < e and rc == 0:
            m = self.hash_chunk_at(self.views, wc, p, e, keys, raw, has, scratch, &status, &self.windex)
            if m < 0:
                self.wstatus = status
                return 1
            self.router.route(m, raw, NULL if self.views[wc[0]].plain else has, False, &self.rr,
                              self.shot.gidx, self.shot.bh)
            rc = gs_scan(st, m, self.shot.gidx, self.shot.bh, self.szp + p if self.szp != NULL else NULL)
            p += m
        return rc

    def run(self):
        """The worker: finish and group every published step, in order, until all n messages
        are or the stage is aborted. Returns the number of messages scanned."""
        cdef GroupState *st = &self.shot.grouper.st
        cdef const int64_t *szp = self.szp
        cdef Py_ssize_t p = self.scanned, ready, e, m, k, wc = 0
        cdef int8_t lvl
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
                    lvl = self.level[k]
                    bc_publish(&self.taken, e)
                    if lvl == STEP_LEFT:
                        rc = self.take_left(p, e, &wc, keys, raw, has, &scratch)
                        p = e
                    elif lvl == STEP_ROUTED:
                        if self.deferred[k] > 0:
                            self.rr = fill_keyless(self.router, self.gidx + p, e - p, self.rr)
                        rc = gs_scan(st, e - p, self.gidx + p, self.bh + p, szp + p if szp != NULL else NULL)
                        p = e
                    while p < e and rc == 0:
                        m = e - p if e - p < CHUNK else CHUNK
                        self.router.route(m, self.raw + p, self.has_key + p, False, &self.rr,
                                          self.shot.gidx, self.shot.bh)
                        rc = gs_scan(st, m, self.shot.gidx, self.shot.bh, szp + p if szp != NULL else NULL)
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
        return self.shot.finish(self.rc), self.rr
