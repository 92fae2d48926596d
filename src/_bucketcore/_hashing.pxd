# Shared declarations of the hashing kernel: the C key descriptor and the per-column hash run.
from cpython.object cimport PyObject
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t

from _bucketcore._status cimport *

cdef extern from "keys.h" nogil:
    enum:
        BC_KEY_NONE
        BC_KEY_BYTES
        BC_KEY_UCS1
        BC_KEY_UCS2
        BC_KEY_UCS4
        BC_KEY_MAX_BYTES
    ctypedef struct bc_key:
        const void *data
        uint32_t len
        int32_t kind
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

# How a ColumnView's keys are laid out (describe_view reads each).
cdef enum:
    COL_LIST = 0        # list of key objects
    COL_TUPLE = 1       # tuple of key objects
    COL_OBJECTS = 2     # numpy object array
    COL_BYTES = 3       # numpy S
    COL_UCS4 = 4        # numpy U
    COL_ARROW = 5       # Arrow string/binary (int32 or int64 offsets)
    COL_VIEW = 6        # Arrow string_view/binary_view
    COL_DICT = 7        # Arrow dictionary: indices into a dictionary hashed once (gathered)
    COL_NULLS = 8       # Arrow null type: every value keyless
    COL_NPSTRING = 9    # numpy 2 StringDType

cdef extern from "arrow_c.h" nogil:
    ctypedef struct bc_arrow_schema "struct ArrowSchema":
        const char *format
        const char *name
        const char *metadata
        int64_t flags
        int64_t n_children
        bc_arrow_schema **children
        bc_arrow_schema *dictionary
        void (*release)(bc_arrow_schema *) noexcept nogil
        void *private_data
    ctypedef struct bc_arrow_array "struct ArrowArray":
        int64_t length
        int64_t null_count
        int64_t offset
        int64_t n_buffers
        int64_t n_children
        const void **buffers
        bc_arrow_array **children
        bc_arrow_array *dictionary
        void (*release)(bc_arrow_array *) noexcept nogil
        void *private_data
    ctypedef struct bc_arrow_stream "struct ArrowArrayStream":
        int (*get_schema)(bc_arrow_stream *, bc_arrow_schema *out) noexcept nogil
        int (*get_next)(bc_arrow_stream *, bc_arrow_array *out) noexcept nogil
        const char *(*get_last_error)(bc_arrow_stream *) noexcept nogil
        void (*release)(bc_arrow_stream *) noexcept nogil
        void *private_data
    enum:
        ARROW_FLAG_NULLABLE

cdef enum:
    CHUNK = 1024        # keys described and hashed per step (their descriptors stay in L1)
    SPINS = 4000        # rounds a pipeline thread spins for the other before it sleeps


# What describing a column reads, as plain C: a KeyColumn's own, and the copy a pipeline worker
# describes from without the GIL (while the calling thread keeps it and runs no Python code).
cdef struct ColumnView:
    int mode
    PyObject **items            # list / tuple items (as of the last describe_objects)
    const char *base            # object array / numpy S, U: first item
    Py_ssize_t stride
    Py_ssize_t width            # numpy S, U: characters per item
    const int32_t *off32        # Arrow: offsets (one of the two), values, validity bits
    const int64_t *off64
    const uint8_t *values
    int64_t nvalues
    const uint8_t *bits
    Py_ssize_t array_offset
    # the last described run: only byte keys (no None, no str to encode); or keys of one length
    # from fixed_base on, each fixed_stride bytes after the one before (0: fixed_len, back to back;
    # no descriptors written)
    bint plain
    const uint8_t *fixed_base
    size_t fixed_len
    size_t fixed_stride
    # Arrow string_view / binary_view: the views at values; the variadic data buffers and sizes
    const uint8_t *const *variadic
    const int64_t *variadic_sizes
    int64_t nvariadic
    # Arrow dictionary: indices at values (index_width bytes each); the dictionary's hashes
    # (dict_raw, dict_has: dict_len of them) and its values (dict_view: describe_view of a row
    # describes the value it names)
    int index_width
    bint index_signed
    const uint32_t *dict_raw
    const uint8_t *dict_has
    int64_t dict_len
    ColumnView *dict_view
    # numpy StringDType: its descriptor (items at base + i * stride)
    void *npy_descr


cdef class KeyColumn:
    """A key column read CHUNK keys at a time as C key descriptors (zero copy).

    Object columns (list, tuple, object array) are described with the GIL held and their items
    held (INCREF) until release(); buffer columns (numpy S/U, Arrow) are described without it.
    """
    cdef readonly Py_ssize_t length
    cdef readonly bint needs_gil
    cdef object source
    cdef Py_ssize_t list_size
    cdef ColumnView view
    cdef void **held
    cdef Py_ssize_t nheld
    cdef object pinned_items    # free-threaded builds: the tuple a pinned object column reads

    cdef int describe_objects(self, Py_ssize_t pos, Py_ssize_t m, bc_key *keys,
                              Py_ssize_t *err_index, bint hold=*) except -2
    cdef int describe_list_chunk(self, Py_ssize_t pos, Py_ssize_t m, bc_key *keys,
                                 Py_ssize_t *err_index) except -2
    cdef int pin_items(self, ColumnView *out) except -2
    cdef void release(self)
    cdef int pin(self, ColumnView *out) except -2

cdef int describe_view(ColumnView *v, Py_ssize_t pos, Py_ssize_t m, bc_key *keys,
                       Py_ssize_t *err_index) noexcept nogil
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
