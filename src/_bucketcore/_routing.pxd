# The routing rule (route.h) and the Router that holds a producer target's routing tables.
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t

cimport numpy as cnp

cdef extern from "route.h" nogil:
    cpdef enum:
        BC_ROUTE_ONE
        BC_ROUTE_RANGE
        BC_ROUTE_LEGACY
    ctypedef struct bc_router:
        int mode
        int narrow
        const void *segment_table
        const int32_t *rotation
        int64_t nrotation
        const void *const *bucket_tables
        const int32_t *first_bucket
    uint32_t bc_segment_hash(uint32_t raw)
    uint16_t bc_bucket_hash(uint32_t raw)
    uint32_t bc_range_segment(const uint16_t *starts, uint32_t nstarts, uint32_t segment_hash)
    uint32_t bc_legacy_slot(uint32_t raw, uint32_t n)
    int64_t bc_next_turn(int64_t r, int64_t n)
    void bc_route(const bc_router *r, size_t m, const uint32_t *raw, const uint8_t *has_key,
                  int defer, int64_t *turn, int32_t *global_bucket, uint16_t *bucket_hash)
    int64_t bc_fill_keyless(const bc_router *r, int32_t *global_bucket, size_t n, int64_t t)
    int32_t bc_route_parts(const bc_router *r, uint32_t raw, uint32_t segment_hash, uint16_t bucket_hash,
                           int has_key, int64_t *turn)


cdef class Router:
    cdef bc_router rule
    cdef object keep             # the tables, alive while rule points into them
    cdef cnp.ndarray table_pointers
    cdef Py_ssize_t nsegments

    cdef check_offsets(self, const int64_t[::1] bucket_offsets)
    cdef int64_t first_turn(self, int64_t round_robin) noexcept
