# cython: language_level=3
"""The producer's batch state machine (docs/design.md, "Producer bucketing and stamping"), shared
by every way of making entries.

A message reaches it as its *global bucket index* (its segment's first index + its bucket):

- ``gs_scan``: the state machine, message by message in send order; it keeps one open batch per
  (segment, bucket) and, when a limit is reached, emits entry *records* (segment, bucket, stamp,
  count, bytes) in emission order. A whole stream (``WholeStream``) places each record's messages
  in the output ``order`` as it is emitted (every open batch lists its messages);
- ``gs_finish``: end of input, every open batch is emitted ordered by its first message (the
  log of openings says which, so a flush touches only the buckets that were used);
- ``gs_reset``: close whatever a failed stream left open, again only where it was used, so the
  state, sized to the layout, is built once per layout and reused (``WholeStream.begin``);
- ``gs_compact``: a short stream on a large layout is grouped on per-bucket states numbered by
  first touch (found through a small open-addressed table) instead of the layout's array, so
  its cost follows the buckets it touches, not the layout's size. The same state machine runs
  on them; only the records' bucket is mapped back.

The state lives in ``malloc`` memory: a pipeline's worker grows it without the GIL while the
calling thread may hold the GIL and wait for the worker, and tracemalloc's hook on
``PyMem_Raw*`` takes the GIL.
"""

from libc.stdint cimport int32_t, int64_t, uint16_t, uint32_t
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memcpy, memset

cimport numpy as cnp

from _bucketcore._columns cimport empty_column
from _bucketcore._status cimport *

cnp.import_array()

cdef extern from "layout_lookup.h" nogil:
    int bc_segment_map_init(bc_segment_map *m, const int64_t *first_bucket, int64_t nseg)
    void bc_segment_map_free(bc_segment_map *m)
    int64_t bc_segment_of(const bc_segment_map *m, int64_t g)

cdef extern from "prefetch.h" nogil:
    void bc_prefetch(const void *p)
    enum: PREFETCH_AHEAD "BC_PREFETCH_AHEAD"

cdef int gs_init(GroupState *st, const int64_t *first_bucket, int64_t nseg, int policy,
                 int64_t max_messages, int64_t max_bytes) noexcept nogil:
    """Zero state for nseg segments; first_bucket[s+1] - first_bucket[s] buckets in segment s. -1: no memory."""
    cdef int64_t g, s, nb = first_bucket[nseg]
    memset(st, 0, sizeof(GroupState))
    st.nseg = nseg
    st.nbuckets = nb
    st.policy = policy
    st.max_messages = max_messages
    st.max_bytes = max_bytes
    st.segs = <SegState *>malloc((nseg + 1) * sizeof(SegState))
    # one line more than the states, so they can start on a line boundary
    st.bk_block = calloc(nb + 2, sizeof(BucketState))
    if st.segs == NULL or st.bk_block == NULL or bc_segment_map_init(&st.segmap, first_bucket, nseg) < 0:
        gs_free(st)
        return -1
    st.bk = <BucketState *>line_start(st.bk_block)
    st.wide = st.bk
    memset(st.segs, 0, (nseg + 1) * sizeof(SegState))
    for s in range(nseg + 1):
        st.segs[s].first_bucket = first_bucket[s]
        st.segs[s].bucket_count = first_bucket[s + 1] - first_bucket[s] if s < nseg else 0
    for s in range(nseg):
        for g in range(first_bucket[s], first_bucket[s + 1]):
            st.bk[g].win = &st.segs[s]
    return 0


cdef int check_limits(int policy, int64_t max_messages, int64_t max_bytes) except -1:
    """A grouping's policy and limits, as every state takes them (init_state, WholeStream.begin)."""
    if policy != POLICY_SHARED and policy != POLICY_PER_BUCKET:
        raise ValueError(f"unknown policy code {policy}")
    if max_messages < 1 or max_bytes < 1:
        raise ValueError("max_messages and max_bytes must be >= 1")
    return 0


cdef int init_state(GroupState *st, const int64_t[::1] bucket_offsets, int policy, int64_t max_messages,
                    int64_t max_bytes) except -1:
    """Validate a grouping's arguments and zero its state: bucket_offsets[s] is segment s's first
    global bucket index (from 0, growing by at least 1 per segment)."""
    cdef Py_ssize_t nseg = bucket_offsets.shape[0] - 1, s
    if nseg < 1:
        raise ValueError("bucket_offsets needs at least one segment")
    for s in range(nseg):
        if bucket_offsets[s + 1] <= bucket_offsets[s] or bucket_offsets[0] != 0:
            raise ValueError("bucket_offsets must start at 0 and grow by at least 1 per segment")
    if bucket_offsets[nseg] > 0x7FFFFFFF:
        raise ValueError("more than 2**31-1 buckets in total")
    check_limits(policy, max_messages, max_bytes)
    if gs_init(st, &bucket_offsets[0], nseg, policy, max_messages, max_bytes) < 0:
        raise MemoryError()
    return 0


cdef void gs_free(GroupState *st) noexcept nogil:
    cdef ArenaBlock *a = st.arena
    cdef ArenaBlock *prev
    while a != NULL:
        prev = a.prev
        free(a)
        a = prev
    free(st.listed)
    free(st.segs)
    free(st.bk_block)
    free(st.narrow_block)
    free(st.global_of)
    free(st.slots)
    free(st.local)
    free(st.log)
    free(st.recs)
    bc_segment_map_free(&st.segmap)
    memset(st, 0, sizeof(GroupState))


cdef int gs_emit(GroupState *st, int64_t g) noexcept nogil:
    """Close bucket g's open batch into a record: its messages placed at once (placing on
    emit), or only the record (the caller takes its messages, the oldest ones of bucket g)."""
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
    r.seg = <int32_t>(b.win - st.segs)
    r.bucket = <int32_t>((st.global_of[g] if st.compact else g) - b.win.first_bucket)
    r.count = b.count
    r.nbytes = b.nbytes
    r.first = b.first
    if st.order != NULL:
        r.start = st.placed
        if b.count == 1:
            # a batch of one message (most of them on a layout with many buckets per message)
            r.hash_min = r.hash_max = b.hashes[0]
            st.order[st.placed] = b.msgs[0]
        else:
            # stamped from the listed hashes: a vector pass here, not two compares per message
            bc_stamp(b.hashes, <size_t>b.count, &r.hash_min, &r.hash_max)
            memcpy(st.order + st.placed, b.msgs, b.count * sizeof(int64_t))
        st.placed += b.count
    else:
        r.hash_min = b.hash_min
        r.hash_max = b.hash_max
        r.start = -1
    st.nrec += 1
    b.count = 0
    b.nbytes = 0
    st.nopen -= 1
    return 0


cdef int gs_flush_segment(GroupState *st, int32_t s) noexcept nogil:
    """Emit every open batch of segment s (the shared window), in opening order = first message."""
    cdef SegState *seg = &st.segs[s]
    cdef int64_t _j, g = seg.open_head, following
    for _j in range(seg.open_count):
        following = st.bk[g].next_open
        if gs_emit(st, g) < 0:
            return -1
        g = following
    seg.open_count = 0
    seg.window_count = 0
    seg.window_bytes = 0
    return 0


cdef int gs_log_opening(GroupState *st, int64_t g, int64_t first) noexcept nogil:
    """Log that bucket g opens a batch at stream position first. When the log is full, the
    openings whose batch is closed are dropped first (at most one per open batch stays), so it
    grows only with the open batches. -1: no memory (nothing opened)."""
    cdef int64_t i, k = 0, cap
    cdef Opening *grown
    cdef Opening o
    if st.nlog == st.log_cap:
        # every opening is written at k and k advances past the kept ones: no branch on which
        # batches are still open, a pattern as random as the keys
        for i in range(st.nlog):
            o = st.log[i]
            st.log[k] = o
            k += (st.bk[o.g].count > 0) & (st.bk[o.g].first == o.first)
        st.nlog = k
        # room for three openings per one kept: a compaction's cost, shared by the openings
        # logged until the next, stays a small constant per opening
        if k * 4 > st.log_cap or st.log_cap == 0:
            cap = st.log_cap * 2 if st.log_cap else 64
            grown = <Opening *>realloc(st.log, cap * sizeof(Opening))
            if grown == NULL:
                return -1
            st.log = grown
            st.log_cap = cap
    st.log[st.nlog].g = g
    st.log[st.nlog].first = first
    st.nlog += 1
    return 0


cdef void *arena_alloc(GroupState *st, int64_t size) noexcept nogil:
    """size bytes (8-aligned) from the lists' arena; a full block is followed by one twice as
    large. NULL: no memory."""
    cdef ArenaBlock *a = st.arena
    cdef ArenaBlock *grown
    cdef int64_t cap
    size = (size + 7) & ~(<int64_t>7)
    if a == NULL or a.used + size > a.cap:
        cap = 2 * a.cap if a != NULL else 16384
        if cap < size:
            cap = size
        grown = <ArenaBlock *>malloc(sizeof(ArenaBlock) + cap)
        if grown == NULL:
            return NULL
        grown.prev = a
        grown.used = 0
        grown.cap = cap
        st.arena = a = grown
    cdef void *p = <char *>(a + 1) + a.used
    a.used += size
    return p


cdef void arena_empty(GroupState *st) noexcept nogil:
    """Drop every list carved so far; the memory stays for the next stream, in one block as large
    as all the blocks together (so a stream like the last one fits without a new block)."""
    cdef ArenaBlock *a = st.arena
    cdef ArenaBlock *prev
    cdef int64_t total = 0
    if a == NULL:
        return
    if a.prev == NULL:
        a.used = 0
        return
    while a != NULL:
        total += a.cap
        prev = a.prev
        free(a)
        a = prev
    st.arena = <ArenaBlock *>malloc(sizeof(ArenaBlock) + total)
    if st.arena != NULL:
        st.arena.prev = NULL
        st.arena.used = 0
        st.arena.cap = total


cdef int gs_grow_msgs(GroupState *st, BucketState *b) noexcept nogil:
    """Room for one more message in an open batch's position and hash lists (placing on emit);
    a bucket's first batch in a stream gets lists of first_cap, a full one lists twice as long."""
    cdef int64_t cap = b.cap * 2 if b.cap else st.first_cap
    cdef int32_t *grown_listed
    if cap < 1:
        cap = 1
    cdef char *p = <char *>arena_alloc(st, cap * (sizeof(int64_t) + sizeof(uint16_t)))
    if p == NULL:
        return -1
    if b.cap == 0:
        # the layout's array lists the buckets given lists (the next stream forgets them); a
        # compact state is zeroed when a stream first touches it instead
        if not st.compact:
            if st.nlisted == st.listed_cap:
                grown_listed = <int32_t *>realloc(st.listed, (2 * st.listed_cap + 64) * sizeof(int32_t))
                if grown_listed == NULL:
                    return -1
                st.listed = grown_listed
                st.listed_cap = 2 * st.listed_cap + 64
            st.listed[st.nlisted] = <int32_t>(b - st.bk)
            st.nlisted += 1
    else:
        memcpy(p, b.msgs, b.count * sizeof(int64_t))
        memcpy(p + cap * sizeof(int64_t), b.hashes, b.count * sizeof(uint16_t))
    b.msgs = <int64_t *>p
    b.hashes = <uint16_t *>(p + cap * sizeof(int64_t))
    b.cap = cap
    return 0


# The scan loop calls its rare, bulky paths (emitting batches) through these pointers: they are
# then never inlined into the hot loop, which keeps its working values in registers.
ctypedef int (*flush_fn_t)(GroupState *, int32_t) noexcept nogil
ctypedef int (*emit_fn_t)(GroupState *, int64_t) noexcept nogil
ctypedef int (*grow_fn_t)(GroupState *, BucketState *) noexcept nogil
ctypedef int (*log_fn_t)(GroupState *, int64_t, int64_t) noexcept nogil
cdef flush_fn_t cold_flush = gs_flush_segment
cdef emit_fn_t cold_emit = gs_emit
cdef grow_fn_t cold_grow = gs_grow_msgs
cdef log_fn_t cold_log = gs_log_opening
# gs_scan's path for a compact state, likewise kept out of it (scan_variant, which both call,
# then stays one copy with its variants inlined)
ctypedef int (*scan_fn_t)(GroupState *, Py_ssize_t, const int32_t *, const uint16_t *, const int64_t *) noexcept nogil
cdef scan_fn_t compact_scan = compact_scan_impl


cdef inline int scan_loop(GroupState *st, Py_ssize_t n, const int32_t *global_bucket, const uint16_t *bucket_hash,
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
    cdef int64_t seq = st.seq, opened = 0
    cdef int rc = 0
    for i in range(n if n < PREFETCH_AHEAD else PREFETCH_AHEAD):
        bc_prefetch(&bk[global_bucket[i]])
    for i in range(n):
        g = global_bucket[i]
        if i + PREFETCH_AHEAD < n:
            bc_prefetch(&bk[global_bucket[i + PREFETCH_AHEAD]])
        B = &bk[g]
        h = bucket_hash[i]
        if has_sizes:
            sz = sizes[i]
            if shared:
                S = B.win
                if S.window_count > 0 and sz > maxb - S.window_bytes:
                    rc = cold_flush(st, <int32_t>(B.win - st.segs))
                    if rc < 0:
                        break
            elif B.count > 0 and sz > maxb - B.nbytes:
                rc = cold_emit(st, g)
                if rc < 0:
                    break
        c = B.count
        if c == 0:
            if st.nlog == st.log_cap:
                if cold_log(st, g, seq) < 0:
                    rc = -1
                    break
            else:
                st.log[st.nlog].g = g
                st.log[st.nlog].first = seq
                st.nlog += 1
            B.first = seq
            if not place:
                B.hash_min = h
                B.hash_max = h
            opened += 1
            if shared:
                S = B.win
                if S.open_count == 0:
                    S.open_head = g
                else:
                    bk[S.open_tail].next_open = <int32_t>g
                S.open_tail = g
                S.open_count += 1
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
            S.window_count += 1
            if has_sizes:
                S.window_bytes += sz
                if S.window_count >= maxm or S.window_bytes >= maxb:
                    rc = cold_flush(st, <int32_t>(B.win - st.segs))
                    if rc < 0:
                        break
            elif S.window_count >= maxm:
                rc = cold_flush(st, <int32_t>(B.win - st.segs))
                if rc < 0:
                    break
        elif c + 1 >= maxm or (has_sizes and B.nbytes >= maxb):
            rc = cold_emit(st, g)
            if rc < 0:
                break
    st.seq = seq
    st.nopen += opened  # gs_emit decremented it per closed batch; only the sum matters
    return rc


cdef int gs_scan(GroupState *st, Py_ssize_t n, const int32_t *global_bucket, const uint16_t *bucket_hash,
                 const int64_t *sizes) noexcept nogil:
    """Feed n messages in send order: global bucket index (segs[s].first_bucket + bucket), bucket hash
    and size (sizes NULL: 0 bytes each).

    Limits (both policies): before a message is added, a non-empty batch (per_bucket) or window
    (shared) that it would push over max_bytes is emitted; after it is added, a batch or window
    that reached max_messages or max_bytes is emitted at once. So the overflowing message opens
    the next batch, and a message larger than max_bytes is an entry of its own.
    Every index must be in range and every size >= 0 (check_columns, or the router's own
    output): the loop does not look. A compact state (gs_compact) first finds each message's
    compact bucket. Returns 0, -1 when memory ran out (the state then holds part of the chunk
    and is discarded), or -2 when a compact stream is fed more messages than it was begun for.
    """
    if st.compact:
        return compact_scan(st, n, global_bucket, bucket_hash, sizes)
    return scan_variant(st, n, global_bucket, bucket_hash, sizes)


cdef int compact_scan_impl(GroupState *st, Py_ssize_t n, const int32_t *global_bucket, const uint16_t *bucket_hash,
                           const int64_t *sizes) noexcept nogil:
    """gs_scan on a compact state: a chunk's compact buckets are found, then scanned."""
    cdef Py_ssize_t m
    cdef int rc
    while n > 0:
        m = n if n < CHUNK else CHUNK
        rc = compact_index(st, m, global_bucket)
        if rc == 0:
            rc = scan_variant(st, m, st.local, bucket_hash, sizes)
        if rc != 0:
            return rc
        n -= m
        global_bucket += m
        bucket_hash += m
        if sizes != NULL:
            sizes += m
    return 0


cdef int scan_variant(GroupState *st, Py_ssize_t n, const int32_t *global_bucket,
                      const uint16_t *bucket_hash, const int64_t *sizes) noexcept nogil:
    """gs_scan's state machine in the variant for the state's policy and placing, and for sizes."""
    cdef bint shared = st.policy == POLICY_SHARED
    if st.order != NULL:
        if shared:
            if sizes != NULL:
                return scan_loop(st, n, global_bucket, bucket_hash, sizes, True, True, True)
            return scan_loop(st, n, global_bucket, bucket_hash, sizes, True, False, True)
        if sizes != NULL:
            return scan_loop(st, n, global_bucket, bucket_hash, sizes, False, True, True)
        return scan_loop(st, n, global_bucket, bucket_hash, sizes, False, False, True)
    if shared:
        if sizes != NULL:
            return scan_loop(st, n, global_bucket, bucket_hash, sizes, True, True, False)
        return scan_loop(st, n, global_bucket, bucket_hash, sizes, True, False, False)
    if sizes != NULL:
        return scan_loop(st, n, global_bucket, bucket_hash, sizes, False, True, False)
    return scan_loop(st, n, global_bucket, bucket_hash, sizes, False, False, False)


cdef inline void prefetch_logged(GroupState *st, int64_t start) noexcept nogil:
    """Ask for the lines of the PREFETCH_AHEAD buckets logged from ``start`` on (a walk over the
    log then asks for each next one PREFETCH_AHEAD ahead)."""
    cdef int64_t i
    for i in range(start, min(st.nlog, start + PREFETCH_AHEAD)):
        bc_prefetch(&st.bk[st.log[i].g])


cdef int gs_finish(GroupState *st) noexcept nogil:
    """End of input: emit every open batch, all segments together, ordered by first message (the
    log is in send order, so its live openings are)."""
    cdef int64_t i
    cdef Opening *o
    cdef SegState *seg
    prefetch_logged(st, 0)
    for i in range(st.nlog):
        if i + PREFETCH_AHEAD < st.nlog:
            bc_prefetch(&st.bk[st.log[i + PREFETCH_AHEAD].g])
        o = &st.log[i]
        if st.bk[o.g].count > 0 and st.bk[o.g].first == o.first:
            seg = st.bk[o.g].win
            seg.window_count = 0
            seg.window_bytes = 0
            seg.open_count = 0
            if gs_emit(st, o.g) < 0:
                return -1
    st.nlog = 0
    return 0


cdef void gs_reset(GroupState *st) noexcept nogil:
    """Drop every open batch, record and list and start the stream over at position 0 (what the
    last stream left behind is closed bucket by bucket from the log and the listed buckets)."""
    cdef int64_t i
    cdef BucketState *b
    prefetch_logged(st, 0)
    for i in range(st.nlog):
        if i + PREFETCH_AHEAD < st.nlog:
            bc_prefetch(&st.bk[st.log[i + PREFETCH_AHEAD].g])
        b = &st.bk[st.log[i].g]
        b.count = 0
        b.nbytes = 0
        b.win.window_count = 0
        b.win.window_bytes = 0
        b.win.open_count = 0
    for i in range(st.nlisted):
        b = &st.bk[st.listed[i]]
        b.msgs = NULL
        b.hashes = NULL
        b.cap = 0
    st.nlisted = 0
    arena_empty(st)
    st.nlog = 0
    st.nopen = 0
    st.nrec = 0
    st.seq = 0
    st.placed = 0


# Streams of up to this many messages may be grouped on a compact state (compact_stream): its
# arrays then stay within a few tens of KiB.
cdef enum:
    COMPACT_MAX = CHUNK
    # ... and the layout holds at least this many buckets per message
    COMPACT_SPREAD = 4


cdef bint compact_stream(const GroupState *st, Py_ssize_t n) noexcept nogil:
    """Whether a stream of n messages is grouped on the compact state: it is short, and the
    layout has buckets enough that its messages would mostly land on lines of the layout's array
    that no recent stream touched (a small layout's array stays in cache and needs no table)."""
    return 0 < n <= COMPACT_MAX and n * COMPACT_SPREAD <= st.nbuckets


cdef int gs_compact(GroupState *st, Py_ssize_t n) noexcept nogil:
    """Group the next stream, of 1 to COMPACT_MAX messages, on the compact state; st was just
    reset (gs_reset). The arrays grow to the longest such stream and are kept; the table is
    emptied here (a power of two of at least 2n slots, so a probe ends soon). -1: no memory
    (st is left on the layout's array)."""
    cdef int64_t cap = n, slots = 16
    cdef int shift = 28
    cdef void *block
    cdef int32_t *global_of
    cdef int32_t *table
    if n < 1 or n > COMPACT_MAX:
        return -1
    while slots < 2 * n:
        slots *= 2
        shift -= 1
    if st.local == NULL:
        st.local = <int32_t *>malloc(COMPACT_MAX * sizeof(int32_t))
        if st.local == NULL:
            return -1
    if cap > st.narrow_cap:
        # one line more than the states, so they can start on a line boundary
        block = calloc(cap + 2, sizeof(BucketState))
        global_of = <int32_t *>malloc(cap * sizeof(int32_t))
        if block == NULL or global_of == NULL:
            free(block)
            free(global_of)
            return -1
        free(st.narrow_block)
        free(st.global_of)
        st.narrow_block = block
        st.narrow = <BucketState *>line_start(block)
        st.global_of = global_of
        st.narrow_cap = cap
    if slots > st.slot_cap:
        table = <int32_t *>malloc(slots * sizeof(int32_t))
        if table == NULL:
            return -1
        free(st.slots)
        st.slots = table
        st.slot_cap = slots
    memset(st.slots, 0xFF, slots * sizeof(int32_t))
    st.slot_mask = <uint32_t>(slots - 1)
    st.slot_shift = shift
    st.nlocal = 0
    st.local_room = n
    st.bk = st.narrow
    st.compact = True
    return 0


cdef void gs_wide(GroupState *st) noexcept nogil:
    """Group the next stream on the layout's array; st was just reset (gs_reset)."""
    st.bk = st.wide
    st.compact = False


cdef int compact_index(GroupState *st, Py_ssize_t n, const int32_t *global_bucket) noexcept nogil:
    """st.local[i] = the compact bucket of global bucket global_bucket[i] (n <= CHUNK); a bucket
    seen for the first time in the stream gets the next compact state, zeroed (no batch open, no
    lists) and tied to its segment. -2: more buckets than the stream was begun for."""
    cdef Py_ssize_t i
    cdef int32_t g, k
    cdef uint32_t slot
    cdef int32_t *slots = st.slots
    cdef int32_t *global_of = st.global_of
    cdef BucketState *b
    for i in range(n):
        g = global_bucket[i]
        slot = (<uint32_t>g * <uint32_t>0x9E3779B1u) >> st.slot_shift
        while True:
            k = slots[slot]
            if k < 0:
                if st.nlocal == st.local_room:
                    return -2
                k = <int32_t>st.nlocal
                st.nlocal += 1
                slots[slot] = k
                global_of[k] = g
                b = &st.narrow[k]
                b.count = 0
                b.nbytes = 0
                b.cap = 0
                b.msgs = NULL
                b.hashes = NULL
                b.win = &st.segs[bc_segment_of(&st.segmap, g)]
                break
            if global_of[k] == g:
                break
            slot = (slot + 1) & st.slot_mask
        st.local[i] = k
    return 0


cdef const int32_t *optional_i32(object arr, Py_ssize_t n, str name) except? NULL:
    if arr is None:
        return NULL
    cdef const int32_t[::1] view = arr
    if view.shape[0] != n:
        raise ValueError(f"{name} has {view.shape[0]} values for {n} messages")
    return &view[0] if n else NULL


cdef const int64_t *optional_i64(object arr, Py_ssize_t n, str name) except? NULL:
    if arr is None:
        return NULL
    cdef const int64_t[::1] view = arr
    if view.shape[0] != n:
        raise ValueError(f"{name} has {view.shape[0]} values for {n} messages")
    return &view[0] if n else NULL


cdef int64_t check_columns(GroupState *st, Py_ssize_t n, const int32_t *seg, const int32_t *bucket,
                           const int64_t *sizes, int32_t *global_bucket, int *status) noexcept nogil:
    """Index of the first message with a bad segment, bucket or size (*status says which), else
    -1. global_bucket[i]: the message's global bucket index (written up to the first bad one)."""
    cdef Py_ssize_t i
    cdef int32_t s = 0, b
    for i in range(n):
        if seg != NULL:
            s = seg[i]
            if s < 0 or s >= st.nseg:
                status[0] = BC_ERR_SEGMENT_INDEX
                return i
        b = bucket[i]
        if b < 0 or b >= st.segs[s].bucket_count:
            status[0] = BC_ERR_BUCKET_INDEX
            return i
        if sizes != NULL and sizes[i] < 0:
            status[0] = BC_ERR_NEGATIVE_SIZE
            return i
        global_bucket[i] = <int32_t>(st.segs[s].first_bucket + b)
    return -1


cdef int64_t check_global(GroupState *st, Py_ssize_t n, const int32_t *global_bucket, const int64_t *sizes,
                          int *status) noexcept nogil:
    """check_columns for messages given by global bucket index."""
    cdef Py_ssize_t i
    for i in range(n):
        if global_bucket[i] < 0 or global_bucket[i] >= st.nbuckets:
            status[0] = BC_ERR_GLOBAL_INDEX
            return i
        if sizes != NULL and sizes[i] < 0:
            status[0] = BC_ERR_NEGATIVE_SIZE
            return i
    return -1


cdef tuple record_columns(GroupState *st, int64_t nrec, const int64_t *segment_ids=NULL):
    """Copy the emitted records into numpy columns (seg, bucket, hash_min, hash_max, start, count,
    nbytes): seg holds segment indexes (int32), or with segment_ids each segment's id (int64)."""
    cdef cnp.ndarray a_seg = empty_column(nrec, cnp.NPY_INT32 if segment_ids == NULL else cnp.NPY_INT64)
    cdef int64_t *p_id = <int64_t *>cnp.PyArray_DATA(a_seg)
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
            if segment_ids == NULL:
                p_seg[r] = rec.seg
            else:
                p_id[r] = segment_ids[rec.seg]
            p_bkt[r] = rec.bucket
            p_min[r] = rec.hash_min
            p_max[r] = rec.hash_max
            p_start[r] = rec.start
            p_count[r] = rec.count
            p_nbytes[r] = rec.nbytes
    return a_seg, a_bkt, a_min, a_max, a_start, a_count, a_nbytes


def group_entries(object seg, const int32_t[::1] bucket, const uint16_t[::1] bucket_hash,
                  object sizes, const int64_t[::1] bucket_offsets, int policy,
                  int64_t max_messages, int64_t max_bytes, bint global_index=False,
                  WholeStream stream=None):
    """One-stream grouping of a whole message stream, flushed at the end.

    Each message is (segment index, bucket index in that segment) from ``seg`` (None: one
    segment) and ``bucket``, or with ``global_index`` its global bucket index
    bucket_offsets[segment] + bucket in ``bucket`` alone (seg None). Every index and size is
    checked, a chunk at a time, before that chunk is scanned.
    Returns (status, index, columns): a BC_ERR_* status and the first bad message's index, or
    BC_OK, -1 and (seg, bucket, hash_min, hash_max, start, count, nbytes, order): one row per
    entry in emission order, and ``order`` the message indices entry after entry (send order
    inside each). ``stream``: a WholeStream over these segments to reuse (None: a new one).
    """
    cdef Py_ssize_t n = bucket.shape[0], pos = 0, m
    if bucket_hash.shape[0] != n:
        raise ValueError(f"bucket_hash has {bucket_hash.shape[0]} values for {n} messages")
    if global_index and seg is not None:
        raise ValueError("seg must be None with global bucket indexes")
    cdef const int32_t *segp = optional_i32(seg, n, "seg")
    cdef const int64_t *size_ptr = optional_i64(sizes, n, "sizes")
    if stream is None:
        stream = WholeStream(bucket_offsets, policy, max_messages, max_bytes, n)
    else:
        stream.check_offsets(bucket_offsets)
        stream.begin(policy, max_messages, max_bytes, n)
    cdef GroupState *st = &stream.st
    cdef const int32_t *global_bucket
    cdef int64_t bad = -1
    cdef int rc = 0, status = BC_OK
    with nogil:
        while pos < n:
            m = n - pos if n - pos < CHUNK else CHUNK
            if global_index:
                global_bucket = &bucket[pos]
                bad = check_global(st, m, global_bucket, size_ptr + pos if size_ptr != NULL else NULL, &status)
            else:
                global_bucket = stream.global_bucket
                bad = check_columns(st, m, segp + pos if segp != NULL else NULL, &bucket[pos],
                                    size_ptr + pos if size_ptr != NULL else NULL, stream.global_bucket, &status)
            if bad >= 0:
                bad += pos
                break
            rc = gs_scan(st, m, global_bucket, &bucket_hash[pos], size_ptr + pos if size_ptr != NULL else NULL)
            if rc != 0:
                break
            pos += m
    if bad >= 0:
        return status, bad, None
    return BC_OK, -1, stream.finish(rc)


# The longest lists a bucket starts a stream with (2.5 KiB): longer batches grow.
cdef enum:
    PRESIZE_MAX = 256


cdef class WholeStream:
    """The batch state of whole streams over one list of segments, placing on emit: the ``order``
    column the entries' messages are copied to, and one chunk's routed (global bucket index,
    bucket hash) columns.

    The state is sized to the segments' buckets once; ``begin`` starts the next stream on it and
    resets only the buckets the last one used, so a caller that keeps one per layout (a pool,
    one stream at a time each) pays per stream for the messages, not for the layout. A short
    stream on a large layout (compact_stream) is grouped on a compact state instead, sized to
    the stream, so it touches none of the layout's array. The constructor begins the first
    stream.
    """

    def __cinit__(self, const int64_t[::1] bucket_offsets, int policy, int64_t max_messages,
                  int64_t max_bytes, Py_ssize_t n):
        init_state(&self.st, bucket_offsets, policy, max_messages, max_bytes)
        self.begin(policy, max_messages, max_bytes, n)

    def __dealloc__(self):
        gs_free(&self.st)
        free(self.segment_ids)

    @property
    def segment_count(self) -> int:
        """Segments of the state."""
        return self.st.nseg

    def name_segments(self, const int64_t[::1] segment_ids) -> None:
        """Give each segment its id: ``finish`` then returns the ids in its first column (int64)
        instead of the segment indexes (int32)."""
        cdef Py_ssize_t s
        if segment_ids.shape[0] != self.st.nseg:
            raise ValueError(f"{segment_ids.shape[0]} segment ids for {self.st.nseg} segments")
        if self.segment_ids == NULL:
            self.segment_ids = <int64_t *>malloc(self.st.nseg * sizeof(int64_t))
            if self.segment_ids == NULL:
                raise MemoryError()
        for s in range(self.st.nseg):
            self.segment_ids[s] = segment_ids[s]

    cdef int begin(self, int policy, int64_t max_messages, int64_t max_bytes, Py_ssize_t n) except -1:
        """Start a stream of n messages with these limits: what the last stream left open is
        closed and a new ``order`` column is made (the last one belongs to its caller now)."""
        check_limits(policy, max_messages, max_bytes)
        if n < 0:
            raise ValueError(f"a stream of {n} messages")
        gs_reset(&self.st)
        if not compact_stream(&self.st, n):
            gs_wide(&self.st)
        elif gs_compact(&self.st, n) < 0:
            gs_wide(&self.st)
            raise MemoryError()
        self.st.policy = policy
        self.st.max_messages = max_messages
        self.st.max_bytes = max_bytes
        # a batch holds at most max_messages (and n) messages; most hold about n / buckets
        self.st.first_cap = max(4, min(2 * n // self.st.nbuckets, max_messages, PRESIZE_MAX))
        self.n = n
        self.order_column = empty_column(n, cnp.NPY_INT64)
        self.st.order = <int64_t *>cnp.PyArray_DATA(self.order_column)
        if self.global_column is None or chunk_room(n) > self.room:
            self.room = chunk_room(n)
            self.global_column = empty_column(self.room, cnp.NPY_INT32)
            self.hash_column = empty_column(self.room, cnp.NPY_UINT16)
            self.global_bucket = <int32_t *>cnp.PyArray_DATA(self.global_column)
            self.bucket_hash = <uint16_t *>cnp.PyArray_DATA(self.hash_column)
        return 0

    def restart(self, int policy, int64_t max_messages, int64_t max_bytes, Py_ssize_t n) -> None:
        """``begin`` from Python (tests): start the next stream of n messages."""
        self.begin(policy, max_messages, max_bytes, n)

    cdef int check_offsets(self, const int64_t[::1] bucket_offsets) except -1:
        """The state must be over these segments (bucket_offsets as the constructor took them)."""
        cdef Py_ssize_t s
        if bucket_offsets.shape[0] != self.st.nseg + 1:
            raise ValueError("the stream state is over other segments")
        for s in range(self.st.nseg + 1):
            if bucket_offsets[s] != self.st.segs[s].first_bucket:
                raise ValueError("the stream state is over other segments")
        return 0

    cdef tuple finish(self, int rc):
        """End of the stream (rc: the scan's result): emit every open batch and return the
        entry columns (seg, bucket, hash_min, hash_max, start, count, nbytes, order), read-only;
        seg: segment ids once named (name_segments), else segment indexes."""
        cdef tuple columns
        cdef cnp.ndarray column
        cdef GroupState *st = &self.st
        if rc == 0:
            with nogil:
                rc = gs_finish(st)
        if rc == -1:
            raise MemoryError()
        if rc != 0 or st.placed != self.n or st.seq != self.n:
            raise RuntimeError(f"internal error: {st.placed} of {self.n} messages placed (scan {rc})")
        columns = record_columns(st, st.nrec, self.segment_ids) + (self.order_column,)
        for column in columns:
            cnp.PyArray_CLEARFLAGS(column, cnp.NPY_ARRAY_WRITEABLE)
        return columns
