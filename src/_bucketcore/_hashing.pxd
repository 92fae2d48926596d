# Shared declarations of the hashing kernel: hashing described keys (a chunk, a column's range)
# into output columns. What describes the keys is _keycolumns' (cimported here for the kernels
# that hash through these).
from cpython.object cimport PyObject
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t

from _bucketcore._status cimport *
from _bucketcore._keycolumns cimport (
    BC_KEY_BYTES, BC_KEY_NONE, BC_KEY_UCS1, BC_KEY_UCS2, BC_KEY_UCS4, BC_KEY_MAX_BYTES, CHUNK, COL_ARROW,
    COL_BYTES, COL_DICT, COL_LIST, COL_NPSTRING, COL_NULLS, COL_OBJECTS, COL_TUPLE, COL_UCS4, COL_VIEW,
    ColumnView, KeyColumn, bc_arrow_array, bc_arrow_schema, bc_arrow_stream, bc_key, bc_npstr_allocator,
    describe_view,
)

cdef extern from "keys.h" nogil:
    ctypedef struct bc_scratch:
        uint8_t *buf
        size_t cap
    void bc_scratch_free(bc_scratch *s)
    int bc_hash_key(const bc_key *k, int replace, bc_scratch *s, uint32_t *out)
    int bc_encode_chunk(bc_key *keys, size_t n, int replace, bc_scratch *s, size_t *err_at)

cdef extern from "murmur3_lanes.h" nogil:
    enum:
        BC_PATH_AUTO
        BC_PATH_SCALAR
        BC_PATH_INTERLEAVED
        BC_PATH_SIMD
        BC_HAVE_AVX2_PATH
    int bc_best_path()
    int bc_cpu_has_avx2()
    void bc_hash_bytes(const bc_key *keys, size_t n, uint32_t *out, int path)
    void bc_hash_fixed(const uint8_t *base, size_t len, size_t n, uint32_t *out, int path)
    void bc_hash_strided(const uint8_t *base, size_t len, size_t stride, size_t n, uint32_t *out,
                         int path)

# Hand-over between the two threads of a pipeline: a count published with release ordering and
# observed with acquire ordering, and a lock the publisher releases to wake the waiting thread.
cdef extern from "handoff.h" nogil:
    void bc_publish(int64_t *p, int64_t v)
    int64_t bc_observe(int64_t *p)
    int64_t bc_take(int64_t *p)
    bint bc_spin_for_change(int64_t *p, int64_t seen, int spins)

cdef extern from "pythread.h" nogil:
    ctypedef void *PyThread_type_lock
    PyThread_type_lock PyThread_allocate_lock()
    void PyThread_free_lock(PyThread_type_lock lock)
    int PyThread_acquire_lock_timed(PyThread_type_lock lock, long long microseconds, int intr_flag)
    void PyThread_release_lock(PyThread_type_lock lock)

cdef extern from "murmur3.h" nogil:
    uint32_t bc_murmur3_32(const void *data, size_t len)

# Where a hash run writes: raw is required, the other columns may be NULL.
cdef struct HashOut:
    uint32_t *raw
    uint16_t *segment_hash
    uint16_t *bucket_hash
    uint8_t *has_key

cdef enum:
    SPINS = 4000        # rounds a pipeline thread spins for the other before it sleeps


cdef int hash_view_run(ColumnView *v, Py_ssize_t pos, Py_ssize_t m, bc_key *keys, bint replace,
                       bint allow_none, bc_scratch *scratch, HashOut *out, Py_ssize_t base,
                       Py_ssize_t *err_index) noexcept nogil
cdef Py_ssize_t hash_views_at(ColumnView *views, const int64_t *col_start, Py_ssize_t *ci,
                              Py_ssize_t p, Py_ssize_t e, bc_key *keys, bint replace, bint allow_none,
                              bc_scratch *scratch, HashOut *out, Py_ssize_t base, int *status,
                              Py_ssize_t *bad) noexcept nogil


cdef int hash_run(bc_key *keys, Py_ssize_t n, bint plain, const uint8_t *fixed_base,
                  size_t fixed_len, int replace, bint allow_none,
                  bc_scratch *scratch, HashOut *out, Py_ssize_t base,
                  Py_ssize_t *err_index) noexcept nogil


cdef HashOut make_out(object raw, object segment_hash, object bucket_hash, object has_key) except *
cdef int hash_range(KeyColumn col, Py_ssize_t start, Py_ssize_t stop, HashOut *out, Py_ssize_t base,
                    bc_key *keys, bc_scratch *scratch, bint replace, bint allow_none, bint keep_gil,
                    Py_ssize_t *err_index) except -2
