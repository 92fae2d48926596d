# The batch state machine of the producer (docs/design.md, "Producer bucketing and stamping"):
# per (segment, bucket) open batches, emitted entry records, and the drain that places buffered
# messages into their entries.
from libc.stdint cimport int32_t, int64_t, uint16_t

cimport numpy as cnp

from _bucketcore._hashing cimport CHUNK

cdef extern from "stamp.h" nogil:
    void bc_stamp(const uint16_t *h, size_t n, uint16_t *lo, uint16_t *hi)

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
    int64_t start        # slot of its first message in the drained order
    int64_t next         # next undrained record of the same bucket, -1 at the end


ctypedef struct SegState:
    int64_t first_bucket         # global index of the segment's bucket 0
    int64_t bucket_count         # its bucket count
    int64_t window_count       # shared window: messages
    int64_t window_bytes       # shared window: bytes
    int64_t open_count   # open buckets, in open_list[first_bucket:first_bucket + open_count] by opening


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
    int64_t nbuckets     # total over segments; global bucket g = segs[s].first_bucket + bucket
    int policy
    int64_t max_messages
    int64_t max_bytes
    SegState *segs       # nseg + 1 (the last only holds first_bucket = nbuckets)
    BucketState *bk
    DrainState *dr
    int32_t *open_list
    Rec *recs
    int64_t nrec
    int64_t cap
    int64_t seq          # messages scanned so far (stream position of the next one)
    int64_t nopen        # open batches
    # Placing on emit (one-stream streams; order NULL: off, the messages are drained afterwards):
    # every open batch lists its messages' stream positions (BucketState.msgs), copied to
    # order[placed:placed + count], the record's slots, when it is emitted.
    int64_t *order
    int64_t placed
    # The lists start in one block for all buckets (gs_presize), presized to lists of slab_cap:
    # one allocation per stream instead of one or more per bucket, the bulk of a short call's cost.
    int64_t *slab_msgs
    uint16_t *slab_hashes
    int64_t slab_cap


cdef inline Py_ssize_t chunk_room(Py_ssize_t n) noexcept nogil:
    """Items in a per-chunk buffer for a stream of n: a chunk, or the whole of a shorter stream
    (a short call then allocates short buffers)."""
    return 1 if n < 1 else (n if n < CHUNK else CHUNK)


cdef inline cnp.ndarray empty_column(Py_ssize_t n, int typenum):
    """A new 1-D array of n items, by numpy's C API (no Python-level np.empty per column)."""
    cdef cnp.npy_intp dim = n
    return cnp.PyArray_EMPTY(1, &dim, typenum, 0)


cdef int init_state(GroupState *st, const int64_t[::1] bucket_offsets, int policy, int64_t max_messages,
                    int64_t max_bytes) except -1
cdef void gs_free(GroupState *st) noexcept nogil
cdef int gs_presize(GroupState *st, int64_t cap) noexcept nogil
cdef int gs_scan(GroupState *st, Py_ssize_t n, const int32_t *global_bucket, const uint16_t *bucket_hash,
                 const int64_t *sizes) noexcept nogil
cdef int gs_finish(GroupState *st) noexcept nogil
cdef int64_t gs_assign_slots(GroupState *st) noexcept nogil
cdef int64_t gs_drain(GroupState *st, Py_ssize_t n, const int32_t *global_bucket, int64_t *take,
                      int64_t *keep) noexcept nogil
cdef int64_t check_columns(GroupState *st, Py_ssize_t n, const int32_t *seg, const int32_t *bucket,
                           const int64_t *sizes, int32_t *global_bucket, int *status) noexcept nogil
cdef tuple record_columns(GroupState *st, int64_t nrec)
cdef const int32_t *optional_i32(object arr, Py_ssize_t n, str name) except? NULL
cdef const int64_t *optional_i64(object arr, Py_ssize_t n, str name) except? NULL


cdef class WholeStream:
    cdef GroupState st
    cdef Py_ssize_t n
    cdef cnp.ndarray order_column, global_column, hash_column
    cdef int32_t *global_bucket
    cdef uint16_t *bucket_hash

    cdef tuple finish(self, int rc)
