# The batch state machine of the producer (docs/design.md, "Producer bucketing and stamping"):
# per (segment, bucket) open batches, emitted entry records, and the drain that places buffered
# messages into their entries.
from libc.stdint cimport int32_t, int64_t, uint16_t, uint32_t, uintptr_t

cimport numpy as cnp

from _bucketcore._hashing cimport CHUNK

cdef extern from "stamp.h" nogil:
    void bc_stamp(const uint16_t *h, size_t n, uint16_t *lo, uint16_t *hi)

cdef extern from "layout_lookup.h" nogil:
    ctypedef struct bc_segment_map:
        pass

# Batching policies (docs/design.md, "Producer bucketing and stamping"): the limits apply to the
# window of a segment or to a bucket.
cpdef enum Policy:
    POLICY_SHARED = 0
    POLICY_PER_BUCKET = 1

# One emitted entry, before its messages are placed.
ctypedef struct Rec:
    int32_t seg          # index into the segment list the caller routed to
    int32_t bucket       # bucket index inside that segment
    uint16_t hash_min
    uint16_t hash_max
    int64_t count
    int64_t nbytes
    int64_t first        # stream position of the entry's first message
    int64_t start        # slot of its first message in ``order`` (placing on emit), else -1


ctypedef struct SegState:
    int64_t first_bucket         # global index of the segment's bucket 0
    int64_t bucket_count         # its bucket count
    int64_t window_count       # shared window: messages
    int64_t window_bytes       # shared window: bytes
    int64_t open_count   # open buckets (shared window), listed from open_head through next_open by opening
    int64_t open_head    # the first of them (when open_count > 0)
    int64_t open_tail    # the last of them (when open_count > 0)


# Per (segment, bucket): the open batch, in 64 bytes, one cache line (the array is line-aligned):
# a message touches one line of the state sized to the layout, and the segment's list of open
# buckets runs through these lines too (next_open), not through an array of its own.
ctypedef struct BucketState:
    int64_t count        # messages in the open batch (0: none open)
    int64_t *msgs        # placing on emit: the open batch's stream positions (cap of them)
    int64_t cap
    int64_t nbytes
    SegState *win        # its segment's state (the shared window); its index is win - segs
    int32_t next_open    # the segment's next open bucket after this one (shared window)
    uint16_t hash_min    # draining later: the open batch's stamp, kept message by message
    uint16_t hash_max
    int64_t first        # stream position of the open batch's first message
    uint16_t *hashes     # placing on emit: the open batch's bucket hashes (stamped on emit)


# One opening of a batch, logged in send order: the batch is still open when its bucket's open
# batch starts at ``first`` (BucketState.count > 0 and .first == first).
ctypedef struct Opening:
    int64_t g
    int64_t first


# A block of the lists' arena (its bytes follow the header); older blocks hang off prev.
ctypedef struct ArenaBlock:
    ArenaBlock *prev
    int64_t used
    int64_t cap


ctypedef struct GroupState:
    int64_t nseg
    int64_t nbuckets     # total over segments; global bucket g = segs[s].first_bucket + bucket
    bc_segment_map segmap   # finds a global bucket's segment (layout_lookup.h)
    int policy
    int64_t max_messages
    int64_t max_bytes
    SegState *segs       # nseg + 1 (the last only holds first_bucket = nbuckets)
    BucketState *bk      # nbuckets + 1, 64-byte aligned inside bk_block
    void *bk_block       # the allocation bk lives in
    Rec *recs
    int64_t nrec
    int64_t cap
    int64_t seq          # messages scanned so far (stream position of the next one)
    int64_t nopen        # open batches
    # Every opening in send order (stale ones included until compacted): a flush emits the open
    # batches by first message and a reset closes them, touching only the buckets that were used.
    Opening *log
    int64_t nlog
    int64_t log_cap
    # Placing on emit (one-stream streams; order NULL: off, the caller takes each record's
    # messages itself): every open batch lists its messages' stream positions
    # (BucketState.msgs), copied to order[placed:placed + count], the record's slots, when it is
    # emitted. A bucket's lists are carved from an arena when it first opens in a stream (of
    # first_cap, doubling); the next stream empties the arena (one block, as large as the last
    # stream needed) and forgets the lists of the buckets in ``listed``.
    int64_t *order
    int64_t placed
    ArenaBlock *arena
    int32_t *listed
    int64_t nlisted
    int64_t listed_cap
    int64_t first_cap
    # The compact state of a short stream (WholeStream.begin, compact_stream): bk is then
    # ``narrow``, one BucketState per bucket the stream touched, numbered by first touch;
    # global_of[k] is compact bucket k's global bucket index and ``slots``, an open-addressed
    # table of slot_mask + 1 compact indexes (-1: empty; at least twice the stream's messages),
    # finds it, so a short stream touches nothing sized to the layout. Otherwise (compact
    # false) bk is ``wide``, the layout's array indexed by global bucket.
    bint compact
    BucketState *wide
    BucketState *narrow
    void *narrow_block
    int64_t narrow_cap
    int32_t *global_of
    int32_t *slots
    int64_t slot_cap
    uint32_t slot_mask
    int slot_shift
    int64_t nlocal
    int64_t local_room   # compact buckets the stream may have (its messages)
    int32_t *local       # one chunk's compact bucket indexes


cdef inline void *line_start(void *block) noexcept nogil:
    """The first 64-byte line boundary at or after block (per-bucket state arrays are allocated one
    line long more than they hold and start there, so no bucket's state straddles two lines)."""
    return <void *>((<uintptr_t>block + 63) & ~(<uintptr_t>63))


cdef inline Py_ssize_t chunk_room(Py_ssize_t n) noexcept nogil:
    """Items in a per-chunk buffer for a stream of n: a chunk, or the whole of a shorter stream
    (a short call then allocates short buffers)."""
    return 1 if n < 1 else (n if n < CHUNK else CHUNK)


cdef int init_state(GroupState *st, const int64_t[::1] bucket_offsets, int policy, int64_t max_messages,
                    int64_t max_bytes) except -1
cdef void gs_free(GroupState *st) noexcept nogil
cdef void gs_reset(GroupState *st) noexcept nogil
cdef bint compact_stream(const GroupState *st, Py_ssize_t n) noexcept nogil
cdef int gs_compact(GroupState *st, Py_ssize_t n) noexcept nogil
cdef void gs_wide(GroupState *st) noexcept nogil
cdef int gs_scan(GroupState *st, Py_ssize_t n, const int32_t *global_bucket, const uint16_t *bucket_hash,
                 const int64_t *sizes) noexcept nogil
cdef int gs_finish(GroupState *st) noexcept nogil
cdef int64_t check_columns(GroupState *st, Py_ssize_t n, const int32_t *seg, const int32_t *bucket,
                           const int64_t *sizes, int32_t *global_bucket, int *status) noexcept nogil
cdef tuple record_columns(GroupState *st, int64_t nrec, const int64_t *segment_ids=*)
cdef const int32_t *optional_i32(object arr, Py_ssize_t n, str name) except? NULL
cdef const int64_t *optional_i64(object arr, Py_ssize_t n, str name) except? NULL


cdef class WholeStream:
    cdef GroupState st
    cdef Py_ssize_t n
    cdef Py_ssize_t room         # messages the chunk columns hold
    cdef int64_t *segment_ids    # each segment's id (name_segments), or NULL
    cdef object key_reader       # the producer's key reader kept with the state (_producer.KeyChunks)
    cdef object router_checked   # the router last found to match the segments (_producer.check_router)
    cdef cnp.ndarray order_column, global_column, hash_column
    cdef int32_t *global_bucket
    cdef uint16_t *bucket_hash

    cdef int begin(self, int policy, int64_t max_messages, int64_t max_bytes, Py_ssize_t n) except -1
    cdef int check_offsets(self, const int64_t[::1] bucket_offsets) except -1
    cdef tuple finish(self, int rc)
