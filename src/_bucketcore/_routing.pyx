# cython: language_level=3
"""The Router: a producer target's routing tables, prepared once per layout for route.h's rule."""

cimport numpy as cnp
import numpy as np

cnp.import_array()


cdef class Router:
    """How hashed keys reach their global bucket index for one producer target.

    ``route_mode`` is one of BC_ROUTE_ONE / BC_ROUTE_RANGE / BC_ROUTE_LEGACY; ``segment_table``
    the 64 Ki active-index table of BC_ROUTE_RANGE (else None); ``rotation`` the segments keyless
    messages take in turn (and the legacy order); ``bucket_tables`` every segment's 64 Ki bucket
    table (``Buckets.lookup_table``). Tables are narrowed to 8-bit entries when every index fits
    (half the cache footprint), and segments with the same boundary list share one table.
    """

    def __cinit__(self, int route_mode, object segment_table, const int32_t[::1] rotation,
                  list bucket_tables):
        cdef Py_ssize_t s, nseg = len(bucket_tables)
        cdef cnp.ndarray table
        if route_mode not in (BC_ROUTE_ONE, BC_ROUTE_RANGE, BC_ROUTE_LEGACY):
            raise ValueError(f"unknown route mode {route_mode}")
        if route_mode != BC_ROUTE_ONE and rotation.shape[0] < 1:
            raise ValueError("routing needs at least one segment in the rotation")
        if nseg < 1:
            raise ValueError("routing needs at least one segment")
        tables = list(bucket_tables)
        for t in tables:
            if not isinstance(t, np.ndarray) or t.dtype != np.uint16 or t.shape != (0x10000,) \
                    or not t.flags.c_contiguous:
                raise ValueError("a bucket table must be 65536 contiguous uint16 entries")
        if route_mode == BC_ROUTE_RANGE:
            if not isinstance(segment_table, np.ndarray) or segment_table.dtype != np.uint16 \
                    or segment_table.shape != (0x10000,):
                raise ValueError("the segment table must be 65536 uint16 entries")
            if int(segment_table.max()) >= nseg:
                raise ValueError(f"the segment table names segment {int(segment_table.max())} of {nseg}")
        for s in range(rotation.shape[0]):
            if not 0 <= rotation[s] < nseg:
                raise ValueError(f"rotation[{s}] = {rotation[s]} is not a segment index (of {nseg})")
        counts = [int(t[0xFFFF]) + 1 for t in tables]  # a table's last entry is its last bucket
        if sum(counts) > 0x7FFFFFFF:
            raise ValueError("more than 2**31-1 buckets in total")
        self.first_buckets = np.zeros(nseg + 1, dtype=np.int32)
        np.cumsum(counts, out=self.first_buckets[1:])
        narrow = nseg <= 256 and max(counts) <= 0x100
        if narrow:
            tables = [t.astype(np.uint8) for t in tables]
            if route_mode == BC_ROUTE_RANGE:
                segment_table = segment_table.astype(np.uint8)
        same = {}
        tables = [same.setdefault(t.tobytes(), t) for t in tables]
        self.table_pointers = np.empty(nseg, dtype=np.uintp)
        cdef const void **pointers = <const void **>cnp.PyArray_DATA(self.table_pointers)
        for s in range(nseg):
            table = tables[s]
            pointers[s] = cnp.PyArray_DATA(table)
        self.rule.mode = route_mode
        self.rule.narrow = narrow
        self.rule.bucket_tables = pointers
        self.rule.first_bucket = <const int32_t *>cnp.PyArray_DATA(self.first_buckets)
        self.rule.segment_table = NULL
        if route_mode == BC_ROUTE_RANGE:
            table = np.ascontiguousarray(segment_table)
            segment_table = table
            self.rule.segment_table = cnp.PyArray_DATA(table)
        self.rule.rotation = &rotation[0] if rotation.shape[0] else NULL
        self.rule.nrotation = rotation.shape[0]
        self.keep = (segment_table, rotation, tables)

    @property
    def mode(self) -> int:
        """The route mode (BC_ROUTE_*)."""
        return self.rule.mode

    cdef check_offsets(self, const int64_t[::1] bucket_offsets):
        """The grouping's segments must be the router's."""
        cdef Py_ssize_t s
        if bucket_offsets.shape[0] != self.first_buckets.shape[0]:
            raise ValueError("the router's bucket tables do not match the segments")
        for s in range(bucket_offsets.shape[0]):
            if bucket_offsets[s] != self.rule.first_bucket[s]:
                raise ValueError("the router's bucket tables do not match the segments")

    cdef int64_t first_turn(self, int64_t round_robin) noexcept:
        """The keyless turn a stream starting at round_robin takes first."""
        return round_robin % self.rule.nrotation if self.rule.nrotation else 0
