# The one description of a key input (_keycolumns.pyx): the C key descriptor, how a column's keys
# are laid out (ColumnView), the KeyColumn over a key column, and describe_view, which turns a
# chunk of its keys into descriptors.
from cpython.object cimport PyObject
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t

from _bucketcore._status cimport *

cimport numpy as cnp

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

cdef extern from "npstring.h" nogil:
    ctypedef struct bc_npstr:
        size_t size
        const char *buf
    ctypedef struct bc_npstr_allocator:
        pass
    bc_npstr_allocator *bc_npstr_acquire(void *descr)
    int bc_npstr_load(bc_npstr_allocator *a, const void *packed, bc_npstr *out)
    void bc_npstr_release(bc_npstr_allocator *a)

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
cdef int describe_views(ColumnView *v, Py_ssize_t pos, Py_ssize_t m, bc_key *keys,
                        Py_ssize_t *err_index) noexcept nogil
cdef int describe_npstrings(ColumnView *v, bc_npstr_allocator *alloc, Py_ssize_t pos, Py_ssize_t m,
                            bc_key *keys, Py_ssize_t *err_index, bint find_run) noexcept nogil


cdef inline bint all_valid(const uint8_t *bits, Py_ssize_t first, Py_ssize_t m) noexcept nogil:
    """Whether validity bits [first, first+m) are all set (no bitmap: every value is valid)."""
    if bits == NULL:
        return True
    cdef Py_ssize_t i = first, end = first + m
    while i < end and (i & 7):
        if not (bits[i >> 3] >> (i & 7)) & 1:
            return False
        i += 1
    while i + 8 <= end:
        if bits[i >> 3] != 0xFF:
            return False
        i += 8
    while i < end:
        if not (bits[i >> 3] >> (i & 7)) & 1:
            return False
        i += 1
    return True


cpdef KeyColumn objects_column(object seq)
cpdef tuple array_column(cnp.ndarray arr)
