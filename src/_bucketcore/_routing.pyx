# cython: language_level=3
"""The Router: a producer target's routing tables, held for route.h's rule.

The tables are prepared once per layout by bucketcore.producer; the Router checks that every
index they hold is in range (so no lookup can read outside the tables) and keeps them alive.
"""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t

cimport numpy as cnp

cnp.import_array()

cdef enum:
    N_TABLE = 65536


cdef const void *table_data(object table, bint narrow, int64_t *top) except NULL:
    """The data of a contiguous 64 Ki lookup table of uint8 (narrow) or uint16 entries, and its
    largest entry in *top."""
    cdef const uint8_t[::1] t8
    cdef const uint16_t[::1] t16
    cdef int64_t i
    top[0] = 0
    if narrow:
        t8 = table
        if t8.shape[0] != N_TABLE:
            raise ValueError(f"a lookup table has {t8.shape[0]} entries, not 65536")
        for i in range(N_TABLE):
            top[0] = t8[i] if t8[i] > top[0] else top[0]
        return &t8[0]
    t16 = table
    if t16.shape[0] != N_TABLE:
        raise ValueError(f"a lookup table has {t16.shape[0]} entries, not 65536")
    for i in range(N_TABLE):
        top[0] = t16[i] if t16[i] > top[0] else top[0]
    return &t16[0]


cdef class Router:
    """How hashed keys reach their global bucket index for one producer target.

    ``route_mode``: BC_ROUTE_ONE, BC_ROUTE_RANGE or BC_ROUTE_LEGACY. ``narrow``: the tables hold
    uint8 entries (every index fits), else uint16. ``segment_table``: the 64 Ki active-index
    table of BC_ROUTE_RANGE (else None). ``rotation``: the segments keyless messages take in
    turn (and the legacy order). ``bucket_tables``: every segment's 64 Ki bucket table.
    ``first_buckets``: each segment's first global bucket index, and the total (nseg + 1).
    """

    def __cinit__(self, int route_mode, bint narrow, object segment_table, const int32_t[::1] rotation,
                  list bucket_tables, const int32_t[::1] first_buckets):
        cdef Py_ssize_t s, nseg = len(bucket_tables)
        cdef int64_t top
        if route_mode not in (BC_ROUTE_ONE, BC_ROUTE_RANGE, BC_ROUTE_LEGACY):
            raise ValueError(f"unknown route mode {route_mode}")
        if nseg < 1 or first_buckets.shape[0] != nseg + 1:
            raise ValueError("routing needs at least one segment and its first bucket index")
        if route_mode != BC_ROUTE_ONE and rotation.shape[0] < 1:
            raise ValueError("routing needs at least one segment in the rotation")
        self.rule.segment_table = NULL
        if route_mode == BC_ROUTE_RANGE:
            self.rule.segment_table = table_data(segment_table, narrow, &top)
            if top >= nseg:
                raise ValueError(f"the segment table names segment {top} of {nseg}")
        for s in range(rotation.shape[0]):
            if not 0 <= rotation[s] < nseg:
                raise ValueError(f"rotation[{s}] = {rotation[s]} is not a segment index (of {nseg})")
        if first_buckets[0] != 0:
            raise ValueError("the first segment's first bucket index must be 0")
        cdef cnp.npy_intp dim = nseg
        self.table_pointers = cnp.PyArray_ZEROS(1, &dim, cnp.NPY_UINTP, 0)
        cdef const void **pointers = <const void **>cnp.PyArray_DATA(self.table_pointers)
        for s in range(nseg):
            pointers[s] = table_data(bucket_tables[s], narrow, &top)
            if top >= first_buckets[s + 1] - first_buckets[s]:
                raise ValueError(f"bucket table {s} names bucket {top} of a segment with "
                                 f"{first_buckets[s + 1] - first_buckets[s]}")
        self.nsegments = nseg
        self.rule.mode = route_mode
        self.rule.narrow = narrow
        self.rule.bucket_tables = pointers
        self.rule.first_bucket = &first_buckets[0]
        self.rule.rotation = &rotation[0] if rotation.shape[0] else NULL
        self.rule.nrotation = rotation.shape[0]
        self.keep = (segment_table, rotation, bucket_tables, first_buckets)

    @property
    def mode(self) -> int:
        """The route mode (BC_ROUTE_*)."""
        return self.rule.mode

    cdef check_offsets(self, const int64_t[::1] bucket_offsets):
        """The grouping's segments must be the router's."""
        cdef Py_ssize_t s
        if bucket_offsets.shape[0] != self.nsegments + 1:
            raise ValueError("the router's bucket tables do not match the segments")
        for s in range(bucket_offsets.shape[0]):
            if bucket_offsets[s] != self.rule.first_bucket[s]:
                raise ValueError("the router's bucket tables do not match the segments")

    cdef int64_t first_turn(self, int64_t round_robin) noexcept:
        """The keyless turn a stream starting at round_robin takes first."""
        return round_robin % self.rule.nrotation if self.rule.nrotation else 0
