# The C the dispatcher kernel (_dispatcher.pyx) is built on: routing and sticky hashes
# (entry_route.h), the spread walk (spread.h), outboxes and the log search (outbox.h), and the
# enums of its counters and entry states.
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t

cdef extern from "entry_route.h" nogil:
    uint16_t bc_sticky_hash(uint32_t h)
    int bc_stamp_status(int64_t lo, int64_t hi)

cdef extern from "spread.h" nogil:
    ctypedef struct bc_spread_walk:
        pass
    void bc_walk_begin(bc_spread_walk *s, int64_t n, const int32_t *old, int64_t ko,
                       const int32_t *new_, int64_t kw)
    bint bc_walk_next(bc_spread_walk *s, int64_t *start, int64_t *end, int32_t *o, int32_t *w)
    int64_t bc_give_run(int32_t *owner, const int32_t *holder, uint8_t *ready, const int64_t *q_head,
                        int32_t *todo, int64_t start, int64_t stop, int32_t key, int64_t m,
                        int any_queued)

cdef extern from "outbox.h" nogil:
    ctypedef struct bc_outbox:
        int64_t *ids
        uint16_t *hashes
        uint8_t *redelivered
        int64_t len, cap
        int listed
    int bc_outbox_push(bc_outbox *box, int64_t entry_id, uint16_t hash, uint8_t redelivered)
    void bc_outbox_free(bc_outbox *box)
    int64_t bc_find_id(const int64_t *ids, int64_t lo, int64_t hi, int64_t entry_id)
    int bc_cmp_int64(const void *a, const void *b)


# Columns of the per-consumer counters, in the order key_stats returns them.
cdef enum:
    K_DELIVERED = 0
    K_DELIVERED_MESSAGES = 1
    K_REDELIVERED = 2
    K_ACKED = 3
    K_PENDING = 4
    K_PENDING_MESSAGES = 5
    NKSTATS = 6

# Entry states in the log.
cdef enum:
    QUEUED = 0
    PENDING = 1
    ACKED = 2
    ACKING = 3  # transient mark while an ack call is validated
