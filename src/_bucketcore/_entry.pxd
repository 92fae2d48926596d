# Entry's fields, shared with the batcher kernel (_batcher), which fills them directly when it
# emits an entry: its positions and payload references, moved out of a bucket's queue.
from cpython.object cimport PyObject
from libc.stdint cimport int64_t

# Positions and payload references an Entry holds in itself (an emitted entry of more messages
# keeps them in malloc blocks): the short entries of small limits or many buckets then cost no
# allocation of their own.
cdef enum:
    NEAR_POSITIONS = 4


cdef class Entry:
    cdef public int64_t segment_id
    cdef public int64_t bucket
    cdef public int64_t hash_min
    cdef public int64_t hash_max
    cdef public int64_t nbytes
    cdef object payload_list    # payloads, once made (or as given)
    cdef object indices         # message_indices, once made (or as given)
    cdef int64_t n              # message count while indices is None
    cdef int64_t near[NEAR_POSITIONS]  # the positions of an entry of up to NEAR_POSITIONS messages
    cdef int64_t *positions     # the positions of a longer one (malloc), until indices is made
    # An emitted entry's payloads as references it owns, until ``payloads`` is first read (most
    # entries go straight to a sender that may never ask for a list): held of them, in
    # near_payloads for up to NEAR_POSITIONS, else in far_payloads (malloc). They are bytes or
    # read-only views of bytes (the batcher's frozen payloads), which refer to nothing that could
    # lead back here, so the collector need not see them.
    cdef int64_t held
    cdef PyObject *near_payloads[NEAR_POSITIONS]
    cdef PyObject **far_payloads


# A new Entry with every field zero, for the batcher to fill (the emit path: one per entry). Made
# here, where the freelist's allocator is called directly; the batcher calls it through the
# module's function table, which costs less than a call through the type's tp_new slot.
cdef Entry blank_entry()
