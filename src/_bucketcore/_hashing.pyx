# cython: language_level=3
"""Murmur3 hashing kernels over key columns: Python sequences, numpy U/S/object/StringDType arrays,
Arrow buffers (string/binary with 32- or 64-bit offsets, string/binary views, dictionaries, nulls).

Every input is turned, a chunk at a time, into C key descriptors (pointer, length, width) by one
describer, describe_view; the chunk is then hashed with the GIL released. No Python object is
created per key. A dictionary-encoded column is the one exception to describing: its dictionary
is hashed once and each row's hash gathered from it (hash_view_run).
"""

cimport cython
from cpython.object cimport PyObject, PyTypeObject
from cpython.list cimport PyList_GET_SIZE
from cpython.tuple cimport PyTuple_New
from cpython.type cimport PyType_IsSubtype
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t
from libc.stdlib cimport free, malloc
from libc.string cimport memset

import numpy as np
cimport numpy as cnp

cnp.import_array()

cdef extern from "Python.h":
    PyObject **PySequence_Fast_ITEMS(object seq)

# Whether this is a free-threaded CPython build (no GIL to keep other threads out).
# BC_TEST_FREE_THREADED_PATHS (a C define, for testing) takes the free-threaded paths under the GIL
# too, so that their results can be checked on an interpreter with the GIL (docs/hardening.md).
cdef extern from *:
    """
    #if defined(Py_GIL_DISABLED) || defined(BC_TEST_FREE_THREADED_PATHS)
    #define BC_FREE_THREADED 1
    #else
    #define BC_FREE_THREADED 0
    #endif
    """
    const bint BC_FREE_THREADED

# Strong references to n items (items[0..n), or the object pointers at base + j * stride) stored
# into out[0..n): only Py_INCREF, nothing that could let a critical section go (free-threaded
# builds take a list's items this way inside its critical section). A NULL slot of an object array
# (numpy reads it as None) is taken as None.
cdef extern from *:
    """
    static void bc_take_items(PyObject *const *items, const char *base, Py_ssize_t stride, Py_ssize_t n,
                              PyObject **out)
    {
        for (Py_ssize_t j = 0; j < n; j++) {
            PyObject *o;
            if (items)
                o = items[j];
            else
                memcpy(&o, base + j * stride, sizeof o);
            if (o == NULL)
                o = Py_None;
            Py_INCREF(o);
            out[j] = o;
        }
    }
    """
    void bc_take_items(PyObject **items, const char *base, Py_ssize_t stride, Py_ssize_t n, PyObject **out)

cdef extern from "numpy/arrayobject.h":
    object PyArray_Scalar(void *data, cnp.dtype descr, PyObject *base)

# numpy scalars made as numpy's own scalar constructors make them (allocated, then the value set)
cdef extern from *:
    """
    #include <numpy/arrayscalars.h>
    static PyObject *bc_uint32_scalar(uint32_t v)
    {
        PyObject *o = PyArrayScalar_New(UInt32);
        if (o != NULL)
            PyArrayScalar_ASSIGN(o, UInt32, v);
        return o;
    }
    static PyObject *bc_uint16_scalar(uint16_t v)
    {
        PyObject *o = PyArrayScalar_New(UInt16);
        if (o != NULL)
            PyArrayScalar_ASSIGN(o, UInt16, v);
        return o;
    }
    """
    object bc_uint32_scalar(uint32_t v)
    object bc_uint16_scalar(uint16_t v)

cdef extern from "pykeys.h":
    int bc_describe_key(PyObject *o, bc_key *k) except -1
    int bc_hash_scalar(PyObject *o, int replace, uint32_t *out) except -1
    void bc_release_held(void **held, size_t n)
    int bc_describe_objects(PyObject **items, const char *base, Py_ssize_t stride, size_t n,
                            bc_key *keys, void **held, size_t *nheld, size_t *at,
                            int *plain, int may_ready) except -1
    # the same, declared for describe_view: with may_ready 0 and held NULL it only reads
    int bc_describe_objects_read "bc_describe_objects" (
        PyObject **items, const char *base, Py_ssize_t stride, size_t n, bc_key *keys, void **held,
        size_t *nheld, size_t *at, int *plain, int may_ready) noexcept nogil

# A pinned tuple's bytearray and memoryview items replaced by memoryview exports of them (as
# bc_hold_item holds them), so no thread can resize or release their bytes while the pinned view is
# read; -1 with a Python error set.
cdef extern from *:
    """
    static int bc_export_buffer_items(PyObject *tuple)
    {
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(tuple); j++) {
            PyObject *o = PyTuple_GET_ITEM(tuple, j), *held = o;
            void *slot;
            if (!PyByteArray_Check(o) && !PyMemoryView_Check(o))
                continue;
            if (bc_hold_item(&held, &slot) < 0)
                return -1;
            PyTuple_SET_ITEM(tuple, j, (PyObject *)slot);
            Py_DECREF(o);
        }
        return 0;
    }
    """
    int bc_export_buffer_items(object items) except -1

cdef extern from "route.h" nogil:
    void bc_split_hashes(const uint32_t *raw, size_t n, uint16_t *segment, uint16_t *bucket)

cdef extern from "arrow_c.h" nogil:
    int bc_describe_views(const uint8_t *views, const uint8_t *bits, int64_t first, size_t m,
                          const uint8_t *const *variadic, const int64_t *sizes, int64_t nvariadic,
                          bc_key *keys, size_t *at, int *all_bytes)
    int bc_gather_dict(const void *indices, int width, int is_signed, const uint8_t *bits,
                       int64_t first, size_t m, const uint32_t *dict_raw, const uint8_t *dict_has,
                       int64_t dict_len, int allow_none, uint32_t *raw, uint8_t *has_key, size_t *at,
                       int *keyless)
    int64_t bc_index_at(const void *indices, int width, int is_signed, int64_t i)
    int bc_offsets32_fixed(const int32_t *off, size_t m, int64_t nvalues, size_t *len)
    int bc_offsets64_fixed(const int64_t *off, size_t m, int64_t nvalues, size_t *len)
    int bc_views_fixed(const uint8_t *views, int64_t first, size_t m, const uint8_t *const *variadic,
                       const int64_t *sizes, int64_t nvariadic, const uint8_t **base, size_t *len)
    size_t bc_views_run_extent(const uint8_t *views, int64_t first, size_t m, const uint8_t *const *variadic,
                               const int64_t *sizes, int64_t nvariadic)
    bint bc_hash_views_run(const uint8_t *views, int64_t first, size_t m, const uint8_t *const *variadic,
                           const int64_t *sizes, int64_t nvariadic, uint32_t *out, int path,
                           const uint8_t **base, size_t *len)
    bint bc_bit(const uint8_t *bits, int64_t i)

cdef extern from "npstring.h" nogil:
    ctypedef struct bc_npstr:
        size_t size
        const char *buf
    ctypedef struct bc_npstr_allocator:
        pass
    bc_npstr_allocator *bc_npstr_acquire(void *descr)
    int bc_npstr_load(bc_npstr_allocator *a, const void *packed, bc_npstr *out)
    void bc_npstr_release(bc_npstr_allocator *a)
    int bc_npstr_describe(bc_npstr_allocator *a, const char *base, Py_ssize_t stride, size_t m,
                          bc_key *keys, size_t *at, int *plain)
    int bc_npstr_run(bc_npstr_allocator *a, const char *base, Py_ssize_t stride, size_t m,
                     const uint8_t **run, size_t *len, size_t *step)
    bint bc_npstr_hash_run(bc_npstr_allocator *a, const char *base, Py_ssize_t stride, size_t m,
                           uint32_t *out, int path, const uint8_t **run, size_t *len, size_t *step)


# The multi-lane path every kernel hashes by: BC_PATH_AUTO (0, the best this CPU has) unless
# forced. Threads hashing without the GIL read it while set_path may write it: on a free-threaded
# build both are atomic (relaxed: every path gives the same bits, so a call may take either).
cdef extern from * nogil:
    """
    static int bc_hash_path_value = 0;
    #if defined(Py_GIL_DISABLED) && (defined(__GNUC__) || defined(__clang__))
    #define bc_hash_path() __atomic_load_n(&bc_hash_path_value, __ATOMIC_RELAXED)
    #define bc_set_hash_path(v) __atomic_store_n(&bc_hash_path_value, (v), __ATOMIC_RELAXED)
    #elif defined(Py_GIL_DISABLED)
    #define bc_hash_path() (*(volatile int *)&bc_hash_path_value)
    #define bc_set_hash_path(v) ((void)(*(volatile int *)&bc_hash_path_value = (v)))
    #else
    #define bc_hash_path() bc_hash_path_value
    #define bc_set_hash_path(v) ((void)(bc_hash_path_value = (v)))
    #endif
    """
    int hash_path "bc_hash_path()"
    void set_hash_path "bc_set_hash_path"(int path)

PATHS = {"auto": BC_PATH_AUTO, "scalar": BC_PATH_SCALAR, "interleaved": BC_PATH_INTERLEAVED,
         "simd": BC_PATH_SIMD}


def build_has_simd():
    """Whether this build holds the SIMD (AVX2) path: x86-64 compiled by GCC or Clang (an MSVC
    build, such as a Windows wheel, has the scalar and interleaved paths only)."""
    return bool(BC_HAVE_AVX2_PATH)


def cpu_has_simd():
    """Whether the SIMD (AVX2) path runs here: this build has it and this CPU has AVX2."""
    return bool(bc_cpu_has_avx2())


def resolved_path():
    """The path hashing takes now: the forced one, or the best for this CPU."""
    cdef int path = hash_path
    return {v: k for k, v in PATHS.items()}[path if path != BC_PATH_AUTO else bc_best_path()]


def set_path(str name):
    """Force a hashing path for every kernel: auto, scalar, interleaved or simd."""
    if name not in PATHS:
        raise ValueError(f"unknown hashing path {name!r}; expected one of {sorted(PATHS)}")
    if PATHS[name] == BC_PATH_SIMD and not BC_HAVE_AVX2_PATH:
        raise ValueError("this build of bucketcore has no simd hashing path (the AVX2 kernel is "
                         "compiled for x86-64 by GCC or Clang only)")
    if PATHS[name] == BC_PATH_SIMD and not bc_cpu_has_avx2():
        raise ValueError("the simd hashing path needs a CPU with AVX2")
    set_hash_path(PATHS[name])


cdef int hash_run(bc_key *keys, Py_ssize_t n, bint plain, const uint8_t *fixed_base,
                  size_t fixed_len, int replace, bint allow_none,
                  bc_scratch *scratch, HashOut *out, Py_ssize_t base,
                  Py_ssize_t *err_index) noexcept nogil:
    """Hash n described keys into out[base:base+n]; on failure set err_index and return a status.

    The chunk's str keys are first encoded to UTF-8 in the scratch arena, then every key is
    hashed by the multi-lane path. The first failing key (by index) is the one reported.
    plain: the describer saw only byte keys, so there is nothing to look for or encode;
    fixed_base (not NULL): they are the n keys of fixed_len bytes back to back from there, and
    keys holds nothing.
    """
    cdef Py_ssize_t i, first_none = -1
    cdef size_t at = 0
    cdef int rc
    if plain:
        if fixed_base != NULL:
            bc_hash_fixed(fixed_base, fixed_len, n, out.raw + base, hash_path)
        else:
            bc_hash_bytes(keys, n, out.raw + base, hash_path)
        finish_keyed(out, base, n)
        return BC_OK
    if not allow_none:
        for i in range(n):
            if keys[i].kind == BC_KEY_NONE:
                first_none = i
                break
    rc = bc_encode_chunk(keys, <size_t>(first_none if first_none >= 0 else n), replace, scratch, &at)
    if rc == BC_ERR_NOMEM:
        return BC_ERR_NOMEM
    if rc == BC_ERR_SURROGATE:
        err_index[0] = base + <Py_ssize_t>at
        return BC_ERR_SURROGATE
    if first_none >= 0:
        err_index[0] = base + first_none
        return BC_ERR_KEY_NONE
    bc_hash_bytes(keys, n, out.raw + base, hash_path)
    split_out(out, base, n)
    if out.has_key != NULL:
        for i in range(n):
            out.has_key[base + i] = keys[i].kind != BC_KEY_NONE
    return BC_OK


cdef inline void finish_keyed(HashOut *out, Py_ssize_t base, Py_ssize_t n) noexcept nogil:
    """The halves and has_key of out[base:base+n] once their raw hashes are in, every key keyed."""
    split_out(out, base, n)
    if out.has_key != NULL:
        memset(out.has_key + base, 1, n)


cdef inline void split_out(HashOut *out, Py_ssize_t base, Py_ssize_t n) noexcept nogil:
    """The segment and bucket halves of out.raw[base:base+n], where asked for."""
    bc_split_hashes(out.raw + base, <size_t>n, out.segment_hash + base if out.segment_hash != NULL else NULL,
                    out.bucket_hash + base if out.bucket_hash != NULL else NULL)


cdef void *column_ptr(object column, Py_ssize_t itemsize) except? NULL:
    """Pointer to a contiguous output column (numpy array) or NULL for None."""
    if column is None:
        return NULL
    cdef cnp.ndarray arr = column
    if not cnp.PyArray_IS_C_CONTIGUOUS(arr) or cnp.PyArray_ITEMSIZE(arr) != itemsize:
        raise ValueError("output column must be C-contiguous with the right item size")
    return cnp.PyArray_DATA(arr)


cdef HashOut make_out(object raw, object segment_hash, object bucket_hash, object has_key) except *:
    cdef HashOut out
    out.raw = <uint32_t *>column_ptr(raw, 4)
    out.segment_hash = <uint16_t *>column_ptr(segment_hash, 2)
    out.bucket_hash = <uint16_t *>column_ptr(bucket_hash, 2)
    out.has_key = <uint8_t *>column_ptr(has_key, 1)
    return out


def hash_one(object key, bint replace):
    """Raw hash of one str or bytes; returns (status, hash)."""
    cdef bc_key k
    cdef bc_scratch scratch
    cdef uint32_t h = 0
    cdef int rc
    rc = bc_describe_key(<PyObject *>key, &k)
    if rc != BC_OK or k.kind == BC_KEY_NONE:
        return (rc if rc != BC_OK else BC_ERR_KEY_TYPE), 0
    scratch.buf = NULL
    scratch.cap = 0
    with nogil:
        rc = bc_hash_key(&k, replace, &scratch, &h)
        bc_scratch_free(&scratch)
    if rc == BC_ERR_NOMEM:
        raise MemoryError()
    if rc == BC_ERR_SURROGATE:
        return BC_ERR_SURROGATE, 0
    return BC_OK, h


# Below this many keys a second thread costs more than it saves: threads=None hashes a column
# shorter than this on the calling thread (bucketcore.hashing reads it from here).
AUTO_THREADS_MIN_KEYS = 1 << 18
cdef Py_ssize_t auto_threads_min_keys = AUTO_THREADS_MIN_KEYS
cdef object numpy_true = PyArray_Scalar(<char *>b"\x01", cnp.PyArray_DescrFromType(cnp.NPY_BOOL), NULL)
cdef tuple no_args = ()


cdef class HashColumns:
    """The four columns of hashed keys: the fields of bucketcore.hashing.KeyHashes (its base),
    set once at construction and read-only after (KeyHashes is frozen)."""
    cdef readonly object raw
    cdef readonly object segment_hash
    cdef readonly object bucket_hash
    cdef readonly object has_key

    def __init__(self, raw, segment_hash, bucket_hash, has_key):
        self.raw = raw
        self.segment_hash = segment_hash
        self.bucket_hash = bucket_hash
        self.has_key = has_key

    def __len__(self):
        return len(self.raw)

    def __getitem__(self, index):
        return type(self)(self.raw[index], self.segment_hash[index], self.bucket_hash[index], self.has_key[index])

    def __repr__(self):
        n = self.raw.size
        return f"{type(self).__name__}(n={n}, keyless={int(n - np.count_nonzero(self.has_key))})"


cdef object new_hash_columns(object cls, object raw, object segment_hash, object bucket_hash, object has_key):
    """An instance of cls (HashColumns or a subclass of it) of these four columns, made as cls()
    makes one but without the argument parsing."""
    cdef HashColumns result = <HashColumns>(<PyTypeObject *>cls).tp_new(<type>cls, <PyObject *>no_args, NULL)
    result.raw = raw
    result.segment_hash = segment_hash
    result.bucket_hash = bucket_hash
    result.has_key = has_key
    return result


cdef object short_column_hashes(object keys, int replace, bint split, object cls):
    """The hashes of a short key column: a list, or a 1-D numpy array of dtype object, S, U
    (native order) or StringDType, of fewer than AUTO_THREADS_MIN_KEYS keys (the general path's
    own work for it, one kernel call on this thread): raw alone, or a cls of all four columns
    (split). None declines: any other input, or a key the kernel refuses (the general path raises
    its error)."""
    cdef Py_ssize_t n, err_index = -1
    cdef cnp.npy_intp dims[1]
    cdef int st
    cdef HashOut out
    if type(keys) is list:
        n = PyList_GET_SIZE(keys)
    elif (type(keys) is cnp.ndarray and cnp.PyArray_NDIM(<cnp.ndarray>keys) == 1
          and (<cnp.dtype>keys.dtype).kind in b"OSUT" and cnp.PyArray_ISNOTSWAPPED(<cnp.ndarray>keys)):
        n = cnp.PyArray_DIM(<cnp.ndarray>keys, 0)
    else:
        return None
    if n >= auto_threads_min_keys:
        return None
    if type(keys) is list:
        col = objects_column(keys)
    else:
        st, col = array_column(keys)
        if st != BC_OK:
            return None
    dims[0] = n
    raw = cnp.PyArray_EMPTY(1, dims, cnp.NPY_UINT32, 0)
    segment_hash = cnp.PyArray_EMPTY(1, dims, cnp.NPY_UINT16, 0) if split else None
    bucket_hash = cnp.PyArray_EMPTY(1, dims, cnp.NPY_UINT16, 0) if split else None
    has_key = cnp.PyArray_EMPTY(1, dims, cnp.NPY_BOOL, 0) if split else None
    out = make_out(raw, segment_hash, bucket_hash, has_key)
    # hash_keys takes missing keys as keyless, murmur3_32 refuses them (the general path says which)
    if n and hash_column_into(col, &out, replace, split, 0, n, &err_index) != BC_OK:
        return None
    return new_hash_columns(cls, raw, segment_hash, bucket_hash, has_key) if split else raw


cdef inline int replace_flag(object errors):
    """The kernels' replace flag of an ``errors=`` argument; -1 for anything but "strict" and
    "replace" (the general path raises the error)."""
    if errors is None:
        return -1
    if errors == "strict":
        return 0
    if errors == "replace":
        return 1
    return -1


@cython.binding(False)
def short_murmur3_32(object keys, object errors, object threads, object column):
    """bucketcore.murmur3_32 of what it hashes here, without column machinery: a str or bytes key
    (an int), or a short list or 1-D numpy array of keys (short_column_hashes) with threads=None.
    None declines: a table, a long column, a bad argument, a key that cannot be hashed (the
    general path raises its error)."""
    cdef uint32_t h
    cdef int replace
    if column is not None:
        return None
    replace = replace_flag(errors)
    if replace < 0:
        return None
    if bc_hash_scalar(<PyObject *>keys, replace, &h) == BC_OK:
        return h
    if threads is not None:
        return None
    return short_column_hashes(keys, replace, False, None)


@cython.binding(False)
def short_hash_keys(object cls, object keys, object errors, object threads, object column):
    """bucketcore.hash_keys of what it hashes here (as short_murmur3_32), as a cls (a subclass of
    HashColumns: KeyHashes) of numpy scalars for a single key, of arrays for a column. None
    declines."""
    cdef uint32_t h
    cdef int replace
    if column is not None or not isinstance(cls, type) or not PyType_IsSubtype(<type>cls, HashColumns):
        return None
    replace = replace_flag(errors)
    if replace < 0:
        return None
    if bc_hash_scalar(<PyObject *>keys, replace, &h) == BC_OK:
        return new_hash_columns(cls, bc_uint32_scalar(h), bc_uint16_scalar(<uint16_t>(h >> 16)),
                                bc_uint16_scalar(<uint16_t>(h & 0xFFFF)), numpy_true)
    if threads is not None:
        return None
    return short_column_hashes(keys, replace, True, cls)


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


cdef inline int describe_offsets32(const int32_t *off, const uint8_t *values, int64_t nvalues,
                                   Py_ssize_t m, bc_key *keys, size_t *fixed_len) noexcept nogil:
    """Describe m valid Arrow values from int32 offsets, checked in one branch-free pass.
    Returns 0 (keys undefined) when some offset is out of order or out of range, for the checking
    loop to name; 2 when every value has one length *fixed_len >= 16 (keys not written: the
    values lie back to back, for bc_hash_fixed); 1 when keys are written. An int32 length is
    never over BC_KEY_MAX_BYTES."""
    if bc_offsets32_fixed(off, <size_t>m, nvalues, fixed_len):
        return 2
    cdef Py_ssize_t j
    cdef int32_t bad = (off[0] < 0) | (off[m] > nvalues)
    for j in range(m):
        bad |= off[j + 1] < off[j]
    if bad:
        return 0
    for j in range(m):
        keys[j].data = values + off[j]
        keys[j].len = <uint32_t>(off[j + 1] - off[j])
        keys[j].kind = BC_KEY_BYTES
    return 1


cdef inline int describe_offsets64(const int64_t *off, const uint8_t *values, int64_t nvalues,
                                   Py_ssize_t m, bc_key *keys, size_t *fixed_len) noexcept nogil:
    """describe_offsets32 for int64 offsets (large_string / large_binary), which also checks
    that no value is longer than BC_KEY_MAX_BYTES (0: the checking loop names the bad one)."""
    if bc_offsets64_fixed(off, <size_t>m, nvalues, fixed_len):
        return 2
    cdef Py_ssize_t j
    cdef int64_t bad = (off[0] < 0) | (off[m] > nvalues)
    cdef int64_t length
    for j in range(m):
        length = off[j + 1] - off[j]
        bad |= (length < 0) | (length > <int64_t>BC_KEY_MAX_BYTES)
    if bad:
        return 0
    for j in range(m):
        keys[j].data = values + off[j]
        keys[j].len = <uint32_t>(off[j + 1] - off[j])
        keys[j].kind = BC_KEY_BYTES
    return 1


cdef inline void find_fixed_run(ColumnView *v, const bc_key *keys, Py_ssize_t m) noexcept nogil:
    """If m described byte keys (no keyless one) all have one length >= 16 and lie back to back,
    point v.fixed_base / v.fixed_len at them (hash_run then hashes them without descriptors)."""
    if m == 0 or keys[0].len < 16:
        return
    cdef Py_ssize_t j
    cdef size_t length = keys[0].len
    cdef const uint8_t *start = <const uint8_t *>keys[0].data
    cdef size_t other = 0
    for j in range(1, m):
        other |= (keys[j].len ^ length) | <size_t>((<const uint8_t *>keys[j].data) - (start + j * length))
    if other == 0:
        v.fixed_base = start
        v.fixed_len = length


cdef int describe_view(ColumnView *v, Py_ssize_t pos, Py_ssize_t m, bc_key *keys,
                       Py_ssize_t *err_index) noexcept nogil:
    """Describe keys [pos, pos+m) of a column from its view, without the GIL.

    Buffer columns (numpy S/U, Arrow) any time. Object columns only while the thread holding the
    GIL runs no Python code and has described the column once (its items are then fixed), e.g.
    a pipeline worker's part of a stream: a legacy str that is not ready (only before Python
    3.12) would need the GIL to be readied and returns BC_ERR_NEEDS_GIL, naming it."""
    cdef int rc, plain = 0
    cdef size_t count = 0, at = 0
    cdef Py_ssize_t j, idx
    cdef int64_t start, end, length
    cdef const char *item
    # locals, not attributes: the stores into keys would otherwise force a reload of each
    cdef const uint8_t *bits = v.bits
    cdef const uint8_t *values = v.values
    cdef const int32_t *off32 = v.off32
    cdef const int64_t *off64 = v.off64
    cdef int64_t nvalues = v.nvalues
    cdef Py_ssize_t first = v.array_offset + pos
    cdef int described
    cdef bc_npstr_allocator *alloc
    v.plain = v.mode != COL_UCS4
    v.fixed_base = NULL
    v.fixed_stride = 0
    if v.mode == COL_LIST or v.mode == COL_TUPLE or v.mode == COL_OBJECTS:
        rc = bc_describe_objects_read(v.items + pos if v.mode != COL_OBJECTS else NULL,
                                      v.base + pos * v.stride if v.base != NULL else NULL, v.stride,
                                      <size_t>m, keys, NULL,
                                      &count, &at, &plain, 0)
        if rc != BC_OK:
            err_index[0] = pos + <Py_ssize_t>at
            v.plain = False
            return rc
        v.plain = plain
        return BC_OK
    if v.mode == COL_ARROW:
        if off32 != NULL and m > 0 and all_valid(bits, first, m):
            described = describe_offsets32(off32 + first, values, nvalues, m, keys, &v.fixed_len)
            if described == 2:
                v.fixed_base = values + off32[first]
            if described:
                return BC_OK
        if off64 != NULL and m > 0 and all_valid(bits, first, m):
            described = describe_offsets64(off64 + first, values, nvalues, m, keys, &v.fixed_len)
            if described == 2:
                v.fixed_base = values + off64[first]
            if described:
                return BC_OK
        v.plain = bits == NULL
        for j in range(m):
            idx = first + j
            if bits != NULL and not (bits[idx >> 3] >> (idx & 7)) & 1:
                v.plain = False
                keys[j].kind = BC_KEY_NONE
                keys[j].data = NULL
                keys[j].len = 0
                continue
            if off64 != NULL:
                start = off64[idx]
                end = off64[idx + 1]
            else:
                start = off32[idx]
                end = off32[idx + 1]
            if start < 0 or end < start or end > nvalues:
                err_index[0] = pos + j
                return BC_ERR_ARROW_OFFSETS
            if end - start > BC_KEY_MAX_BYTES:
                err_index[0] = pos + j
                return BC_ERR_KEY_TOO_LONG
            keys[j].kind = BC_KEY_BYTES
            keys[j].data = values + start
            keys[j].len = <uint32_t>(end - start)
        if v.plain:
            find_fixed_run(v, keys, m)
        return BC_OK
    if v.mode == COL_VIEW:
        if all_valid(bits, first, m) and bc_views_fixed(values, first, <size_t>m, v.variadic, v.variadic_sizes,
                                                        v.nvariadic, &v.fixed_base, &v.fixed_len):
            return BC_OK
        return describe_views(v, pos, m, keys, err_index)
    if v.mode == COL_NULLS:
        v.plain = False
        for j in range(m):
            keys[j].kind = BC_KEY_NONE
            keys[j].data = NULL
            keys[j].len = 0
        return BC_OK
    if v.mode == COL_NPSTRING:
        alloc = bc_npstr_acquire(v.npy_descr)
        rc = describe_npstrings(v, alloc, pos, m, keys, err_index, True)
        bc_npstr_release(alloc)
        return rc
    if v.mode == COL_DICT:
        return describe_dict(v, pos, m, keys, err_index)
    # numpy S/U: trailing NULs are not part of a value, exactly as numpy reads items back
    for j in range(m):
        item = v.base + (pos + j) * v.stride
        length = v.width
        if v.mode == COL_UCS4:
            while length > 0 and (<const uint32_t *>item)[length - 1] == 0:
                length -= 1
            keys[j].kind = BC_KEY_UCS4
        else:
            while length > 0 and item[length - 1] == 0:
                length -= 1
            keys[j].kind = BC_KEY_BYTES
        keys[j].data = item
        keys[j].len = <uint32_t>length
    return BC_OK


cdef int describe_views(ColumnView *v, Py_ssize_t pos, Py_ssize_t m, bc_key *keys,
                        Py_ssize_t *err_index) noexcept nogil:
    """Describe values [pos, pos+m) of a string/binary view column view by view
    (bc_describe_views: every view checked against the data buffers; nulls keyless), then look
    for a run among the descriptors (find_fixed_run)."""
    cdef size_t at = 0
    cdef int plain = 0
    cdef int rc = bc_describe_views(v.values, v.bits, v.array_offset + pos, <size_t>m, v.variadic,
                                    v.variadic_sizes, v.nvariadic, keys, &at, &plain)
    if rc != BC_OK:
        err_index[0] = pos + <Py_ssize_t>at
        v.plain = False
        return rc
    v.plain = plain
    if plain:
        find_fixed_run(v, keys, m)
    return BC_OK


cdef int describe_npstrings(ColumnView *v, bc_npstr_allocator *alloc, Py_ssize_t pos, Py_ssize_t m,
                            bc_key *keys, Py_ssize_t *err_index, bint find_run) noexcept nogil:
    """Describe items [pos, pos+m) of a numpy StringDType array (its allocator acquired by the
    caller), the bytes left where numpy keeps them: a strided run (find_run: arena strings of one
    length >= 16 a constant distance apart, bc_npstr_run) as v.fixed_base / fixed_len /
    fixed_stride with no descriptors written; otherwise item by item (bc_npstr_describe: short and
    arena strings unpacked a block at a time, any other item by numpy's NpyString_load). A missing
    item (the dtype's na_object) is keyless."""
    cdef size_t at = 0, run_len = 0, run_step = 0
    cdef int plain = 0
    cdef const uint8_t *run = NULL
    cdef const char *first = v.base + pos * v.stride
    if find_run and bc_npstr_run(alloc, first, v.stride, <size_t>m, &run, &run_len, &run_step):
        v.plain = True
        v.fixed_base = run
        v.fixed_len = run_len
        v.fixed_stride = run_step
        return BC_OK
    cdef int rc = bc_npstr_describe(alloc, first, v.stride, <size_t>m, keys, &at, &plain)
    if rc != BC_OK:
        err_index[0] = pos + <Py_ssize_t>at
        v.plain = False
        return rc
    v.plain = plain
    return BC_OK


cdef int describe_dict(ColumnView *v, Py_ssize_t pos, Py_ssize_t m, bc_key *keys,
                       Py_ssize_t *err_index) noexcept nogil:
    """Describe rows [pos, pos+m) of a dictionary-encoded column as the dictionary values they
    name (hash_view_run gathers the dictionary's hashes instead; this serves any other reader).
    A null row or a null dictionary value is keyless; an index outside the dictionary is
    BC_ERR_DICT_INDEX."""
    cdef Py_ssize_t j, row, inner = -1
    cdef int64_t d
    cdef int rc
    cdef bint plain = True
    cdef ColumnView dv  # a copy: several threads may describe through one dictionary
    for j in range(m):
        row = v.array_offset + pos + j
        if not bc_bit(v.bits, row):
            keys[j].kind = BC_KEY_NONE
            keys[j].data = NULL
            keys[j].len = 0
            plain = False
            continue
        d = bc_index_at(v.values, v.index_width, v.index_signed, row)
        if d < 0 or d >= v.dict_len:
            err_index[0] = pos + j
            v.plain = False
            return BC_ERR_DICT_INDEX
        dv = v.dict_view[0]
        rc = describe_view(&dv, <Py_ssize_t>d, 1, &keys[j], &inner)
        if rc != BC_OK:
            err_index[0] = pos + j
            v.plain = False
            return rc
        if dv.fixed_base != NULL:  # described as a run of one: the descriptor was not written
            keys[j].data = dv.fixed_base
            keys[j].len = <uint32_t>dv.fixed_len
            keys[j].kind = BC_KEY_BYTES
        plain = plain and keys[j].kind == BC_KEY_BYTES
    v.plain = plain
    v.fixed_base = NULL
    return BC_OK


cdef int gather_dict_run(ColumnView *v, Py_ssize_t pos, Py_ssize_t m, bint allow_none, HashOut *out,
                         Py_ssize_t base, Py_ssize_t *err_index) noexcept nogil:
    """Hashes of rows [pos, pos+m) of a dictionary-encoded column into out[base:base+m], gathered
    from the dictionary's hashes (each distinct value was hashed once)."""
    cdef size_t at = 0
    cdef int keyless = 0
    cdef int st = bc_gather_dict(v.values, v.index_width, v.index_signed, v.bits, v.array_offset + pos,
                                 <size_t>m, v.dict_raw, v.dict_has, v.dict_len, allow_none,
                                 out.raw + base, out.has_key + base if out.has_key != NULL else NULL,
                                 &at, &keyless)
    v.fixed_base = NULL
    if st != BC_OK:
        err_index[0] = pos + <Py_ssize_t>at
        v.plain = False
        return st
    v.plain = not keyless
    split_out(out, base, m)
    return BC_OK


cdef int hash_view_run(ColumnView *v, Py_ssize_t pos, Py_ssize_t m, bc_key *keys, bint replace,
                       bint allow_none, bc_scratch *scratch, HashOut *out, Py_ssize_t base,
                       Py_ssize_t *err_index) noexcept nogil:
    """Describe keys [pos, pos+m) of a column from its view (describe_view) and hash them into
    out[base:base+m] (a dictionary-encoded column: gather its dictionary's hashes). A string view
    run or a StringDType strided run is hashed as a run while its views or items are checked
    (bc_hash_views_run, bc_npstr_hash_run); when they say it is none, the keys are described one by
    one and hashed again, so the outputs are those of the general path. A string view run that
    ends at its data buffer's end: the run, then the rest. On failure *err_index is the failing
    key's position in the column. A StringDType array's allocator is held from the description to
    the end of the hash, so numpy cannot move the strings between."""
    cdef int st
    cdef size_t k
    cdef Py_ssize_t first
    cdef bc_npstr_allocator *alloc
    if v.mode == COL_DICT:
        return gather_dict_run(v, pos, m, allow_none, out, base, err_index)
    v.fixed_base = NULL
    v.fixed_stride = 0
    if v.mode == COL_VIEW:
        first = v.array_offset + pos
        k = bc_views_run_extent(v.values, first, <size_t>m, v.variadic, v.variadic_sizes, v.nvariadic)
        if (k != 0 and all_valid(v.bits, first, <Py_ssize_t>k)
                and bc_hash_views_run(v.values, first, k, v.variadic, v.variadic_sizes, v.nvariadic,
                                      out.raw + base, hash_path, &v.fixed_base, &v.fixed_len)):
            v.plain = True
            finish_keyed(out, base, <Py_ssize_t>k)
            if k == <size_t>m:
                return BC_OK
            # the run ended at its data buffer's end: the rest, from the next buffer on, as a step
            return hash_view_run(v, pos + <Py_ssize_t>k, m - <Py_ssize_t>k, keys, replace, allow_none,
                                 scratch, out, base + <Py_ssize_t>k, err_index)
        st = describe_views(v, pos, m, keys, err_index)
    elif v.mode == COL_NPSTRING:
        alloc = bc_npstr_acquire(v.npy_descr)
        if bc_npstr_hash_run(alloc, v.base + pos * v.stride, v.stride, <size_t>m, out.raw + base, hash_path,
                             &v.fixed_base, &v.fixed_len, &v.fixed_stride):
            v.plain = True
            finish_keyed(out, base, m)
            st = BC_OK
        else:
            st = describe_npstrings(v, alloc, pos, m, keys, err_index, False)
            if st == BC_OK:
                st = hash_described(v, m, keys, replace, allow_none, scratch, out, base, pos, err_index)
        bc_npstr_release(alloc)
        return st
    else:
        st = describe_view(v, pos, m, keys, err_index)
    if st == BC_OK:
        st = hash_described(v, m, keys, replace, allow_none, scratch, out, base, pos, err_index)
    return st


cdef inline int hash_described(ColumnView *v, Py_ssize_t m, bc_key *keys, bint replace, bint allow_none,
                               bc_scratch *scratch, HashOut *out, Py_ssize_t base, Py_ssize_t pos,
                               Py_ssize_t *err_index) noexcept nogil:
    """Hash the m keys describe_view just described from column position pos into
    out[base:base+m]: a strided run (v.fixed_stride set) straight from its bytes, anything else by
    hash_run. On failure *err_index is the failing key's position in the column."""
    cdef Py_ssize_t out_index = -1
    cdef int st
    if v.fixed_base != NULL and v.fixed_stride != 0:
        bc_hash_strided(v.fixed_base, v.fixed_len, v.fixed_stride, <size_t>m, out.raw + base, hash_path)
        finish_keyed(out, base, m)
        return BC_OK
    st = hash_run(keys, m, v.plain, v.fixed_base, v.fixed_len, replace, allow_none, scratch, out,
                  base, &out_index)
    if st != BC_OK:
        err_index[0] = pos + out_index - base
    return st


cdef Py_ssize_t hash_views_at(ColumnView *views, const int64_t *col_start, Py_ssize_t *ci,
                              Py_ssize_t p, Py_ssize_t e, bc_key *keys, bint replace, bint allow_none,
                              bc_scratch *scratch, HashOut *out, Py_ssize_t base, int *status,
                              Py_ssize_t *bad) noexcept nogil:
    """The keys from stream position p on (at most CHUNK, none past e or the end of their
    column) of columns lying back to back in a stream (col_start: each one's first position;
    *ci: the caller's column cursor, which only moves forward), described from their views and
    hashed into out[base:]. Returns how many, or -1 with *status and *bad the failing key's
    stream position. Never readies a legacy str (BC_ERR_NEEDS_GIL)."""
    cdef Py_ssize_t m, cp, err_index = -1
    while col_start[ci[0] + 1] <= p:
        ci[0] += 1
    cp = p - col_start[ci[0]]
    m = e - p if e - p < CHUNK else CHUNK
    if m > col_start[ci[0] + 1] - p:
        m = col_start[ci[0] + 1] - p
    status[0] = hash_view_run(&views[ci[0]], cp, m, keys, replace, allow_none, scratch, out, base,
                              &err_index)
    if status[0] != BC_OK:
        bad[0] = p + err_index - cp
        return -1
    return m


cdef class KeyColumn:

    def __cinit__(self):
        self.held = NULL
        self.nheld = 0

    def __dealloc__(self):
        # only reached with items still held if a caller raised between describe and release
        self.release()
        free(self.held)

    cdef int describe_objects(self, Py_ssize_t pos, Py_ssize_t m, bc_key *keys,
                              Py_ssize_t *err_index, bint hold=True) except -2:
        """Describe items [pos, pos+m) of an object column (GIL required). hold: each item is
        held until the next describe or release; without, the caller keeps the GIL until the
        keys are hashed (nothing can change the column meanwhile; on a free-threaded CPython,
        where nothing stops another thread, every item is held regardless). A list is read
        inside its critical section (free-threaded CPython: the list's own lock; nothing under the
        GIL), so no thread can resize it or replace an item between the check of its size, the
        read of its items and their holds; on a free-threaded CPython the section only takes
        strong references to the chunk's items (describe_list_chunk), since holding a bytearray
        through an export could wait for that bytearray's own lock and so let the list's go."""
        self.release()
        self.view.plain = False
        self.view.fixed_base = NULL
        hold = hold or BC_FREE_THREADED
        if BC_FREE_THREADED and self.view.mode == COL_LIST:
            return self.describe_list_chunk(pos, m, keys, err_index)
        if self.view.mode == COL_LIST:
            with cython.critical_section(self.source):
                return describe_items(self, pos, m, keys, err_index, hold)
        return describe_items(self, pos, m, keys, err_index, hold)

    cdef int describe_list_chunk(self, Py_ssize_t pos, Py_ssize_t m, bc_key *keys,
                                 Py_ssize_t *err_index) except -2:
        """Free-threaded builds: describe_objects of a list. Inside the list's critical section
        the size is checked and strong references to items [pos, pos+m) are taken into the
        second half of held (only Py_INCREF: the section cannot be suspended); outside it they
        are described and held as any items are, and the references taken first are dropped."""
        cdef int rc = BC_OK, plain = 0
        cdef size_t count = 0, at = 0
        cdef PyObject **taken = <PyObject **>(self.held + CHUNK)
        with cython.critical_section(self.source):
            if PyList_GET_SIZE(self.source) != self.list_size:
                err_index[0] = pos
                return BC_ERR_LIST_CHANGED
            bc_take_items(PySequence_Fast_ITEMS(self.source) + pos, NULL, 0, m, taken)
        try:
            rc = bc_describe_objects(taken, NULL, 0, <size_t>m, keys, self.held, &count, &at, &plain, 1)
        finally:
            self.nheld = <Py_ssize_t>count
            bc_release_held(<void **>taken, <size_t>m)  # what the keys point into is held in held
        if rc != BC_OK:
            err_index[0] = pos + <Py_ssize_t>at
            return rc
        self.view.plain = plain
        return BC_OK

    cdef int pin(self, ColumnView *out) except -2:
        """Copy the view for a thread that describes with describe_view while the caller keeps
        the GIL and runs no Python code (so the items stay as they are now). BC_ERR_LIST_CHANGED when a
        list changed its length since the column was made. On a free-threaded CPython, where other
        threads run meanwhile, a list or object array is pinned as a tuple of strong references to
        its items (pin_items) and the view reads that tuple."""
        if BC_FREE_THREADED and (self.view.mode == COL_LIST or self.view.mode == COL_OBJECTS):
            return self.pin_items(out)
        if self.view.mode == COL_LIST and PyList_GET_SIZE(self.source) != self.list_size:
            return BC_ERR_LIST_CHANGED
        if self.view.mode == COL_LIST or self.view.mode == COL_TUPLE:
            self.view.items = PySequence_Fast_ITEMS(self.source)
        out[0] = self.view
        return BC_OK

    cdef int pin_items(self, ColumnView *out) except -2:
        """Free-threaded builds: pin a list or object array as a tuple of strong references to
        its items, taken once (a list's inside its critical section, its size checked there) and
        kept while the column is; every later pin reads the same tuple. Another thread may then
        change the list or array freely: the pinned view's items and their bytes stay alive and
        unchanged (a bytearray or memoryview item is read through a memoryview export of it, which
        no thread can resize or release)."""
        cdef tuple items
        if self.pinned_items is None:
            items = PyTuple_New(self.length)
            if self.view.mode == COL_LIST:
                with cython.critical_section(self.source):
                    if PyList_GET_SIZE(self.source) != self.list_size:
                        return BC_ERR_LIST_CHANGED
                    bc_take_items(PySequence_Fast_ITEMS(self.source), NULL, 0, self.length,
                                  PySequence_Fast_ITEMS(items))
            else:
                bc_take_items(NULL, self.view.base, self.view.stride, self.length, PySequence_Fast_ITEMS(items))
            bc_export_buffer_items(items)
            self.pinned_items = items
        out[0] = self.view
        out.mode = COL_TUPLE
        out.items = PySequence_Fast_ITEMS(self.pinned_items)
        out.base = NULL
        return BC_OK

    cdef void release(self):
        """Drop the items held since the last describe_objects (GIL required)."""
        cdef Py_ssize_t n = self.nheld
        self.nheld = 0
        bc_release_held(self.held, <size_t>n)


cdef int describe_items(KeyColumn col, Py_ssize_t pos, Py_ssize_t m, bc_key *keys, Py_ssize_t *err_index,
                        bint hold) except -2:
    """KeyColumn.describe_objects' reading of items [pos, pos+m) (for a list: inside its
    critical section), each held into col.held when hold is set."""
    cdef int rc, plain = 0
    cdef size_t count = 0, at = 0
    cdef PyObject **items = NULL
    cdef const char *base = NULL
    if col.view.mode == COL_LIST and PyList_GET_SIZE(col.source) != col.list_size:
        err_index[0] = pos
        return BC_ERR_LIST_CHANGED
    if col.view.mode == COL_OBJECTS:
        base = col.view.base + pos * col.view.stride
    else:
        col.view.items = PySequence_Fast_ITEMS(col.source)
        items = col.view.items + pos
    try:
        rc = bc_describe_objects(items, base, col.view.stride, <size_t>m,
                                 keys, col.held if hold else NULL, &count, &at, &plain, 1)
    finally:
        col.nheld = <Py_ssize_t>count
    if rc != BC_OK:
        err_index[0] = pos + <Py_ssize_t>at
        return rc
    col.view.plain = plain
    return BC_OK


def objects_column(object seq):
    """A KeyColumn over a list, tuple or 1-D object ndarray of str/bytes/None."""
    cdef KeyColumn col = KeyColumn.__new__(KeyColumn)
    col.source = seq
    col.needs_gil = True
    if type(seq) is list:
        col.view.mode = COL_LIST
        col.length = col.list_size = PyList_GET_SIZE(seq)
    elif type(seq) is tuple:
        col.view.mode = COL_TUPLE
        col.length = len(seq)
    else:
        arr = <cnp.ndarray?>seq
        if arr.ndim != 1 or arr.dtype.kind != "O":
            raise ValueError("expected a 1-D object array")
        col.view.mode = COL_OBJECTS
        col.length = arr.shape[0]
        col.view.base = <const char *>cnp.PyArray_DATA(arr)
        col.view.stride = arr.strides[0]
    # free-threaded builds: a list's chunk is taken into the second half first (describe_list_chunk)
    col.held = <void **>malloc((2 if BC_FREE_THREADED else 1) * CHUNK * sizeof(void *))
    if col.held == NULL:
        raise MemoryError()
    return col


def array_column(cnp.ndarray arr):
    """A KeyColumn over a 1-D numpy key array, any stride: dtype object (str/bytes/None items), S
    (bytes), U (UCS4, native byte order) or StringDType (each item's bytes read where numpy keeps
    them; the dtype's missing items keyless).

    Returns (status, column): BC_ERR_KEY_TOO_LONG (column None) when an S or U item could be longer
    than the longest key."""
    if arr.ndim != 1 or arr.dtype.kind not in "OSUT":
        raise ValueError("expected a 1-D array of dtype object, S, U or StringDType")
    if arr.dtype.kind == "O":
        return BC_OK, objects_column(arr)
    cdef KeyColumn col = KeyColumn.__new__(KeyColumn)
    col.source = arr
    col.length = arr.shape[0]
    col.view.base = <const char *>cnp.PyArray_DATA(arr)
    col.view.stride = arr.strides[0]
    if arr.dtype.kind == "T":
        col.view.mode = COL_NPSTRING
        col.view.npy_descr = <void *>cnp.PyArray_DESCR(arr)
        return BC_OK, col
    col.view.mode = COL_UCS4 if arr.dtype.kind == "U" else COL_BYTES
    col.view.width = arr.dtype.itemsize // 4 if col.view.mode == COL_UCS4 else arr.dtype.itemsize
    if col.length and arr.dtype.itemsize > BC_KEY_MAX_BYTES:
        return BC_ERR_KEY_TOO_LONG, None
    return BC_OK, col


def arrow_column(cnp.ndarray offsets, object data, object validity, Py_ssize_t array_offset,
                 Py_ssize_t length):
    """A KeyColumn over one Arrow binary/string array's buffers (zero copy).

    offsets: int32 or int64 view of the offsets buffer; data: uint8 view of the values buffer or
    None; validity: uint8 view of the validity bitmap or None. Nulls are keyless."""
    if length > 0 and offsets.shape[0] < array_offset + length + 1:
        raise ValueError("Arrow offsets buffer is shorter than the array")
    cdef KeyColumn col = KeyColumn.__new__(KeyColumn)
    col.source = (offsets, data, validity)
    col.view.mode = COL_ARROW
    col.length = length
    col.view.array_offset = array_offset
    if offsets.dtype.itemsize == 8:
        col.view.off64 = <const int64_t *>cnp.PyArray_DATA(offsets)
    else:
        col.view.off32 = <const int32_t *>cnp.PyArray_DATA(offsets)
    if data is not None:
        col.view.values = <const uint8_t *>cnp.PyArray_DATA(<cnp.ndarray>data)
        col.view.nvalues = (<cnp.ndarray>data).shape[0]
    if validity is not None:
        col.view.bits = <const uint8_t *>cnp.PyArray_DATA(<cnp.ndarray>validity)
    return col


cdef int hash_range(KeyColumn col, Py_ssize_t start, Py_ssize_t stop, HashOut *out, Py_ssize_t base,
                    bc_key *keys, bc_scratch *scratch, bint replace, bint allow_none, bint keep_gil,
                    Py_ssize_t *err_index) except -2:
    """Hash keys [start, stop) of a column into out[base:base + stop - start], CHUNK keys at a
    time through ``keys`` (CHUNK descriptors). Returns a status; on failure *err_index is the
    failing key's position in the column. keep_gil: an object column's chunks are hashed without
    releasing the GIL, so nothing can change the column between a chunk's description and its
    hash and no item is held (for a caller whose other threads do not need the GIL)."""
    cdef Py_ssize_t pos = start, m, out_index = -1
    cdef int st = BC_OK
    base -= start  # key pos + i goes to out[base + pos + i]
    if not col.needs_gil:
        with nogil:  # once for the whole range: threads hashing parts never queue for the GIL
            while pos < stop and st == BC_OK:
                m = stop - pos if stop - pos < CHUNK else CHUNK
                st = hash_view_run(&col.view, pos, m, keys, replace, allow_none, scratch, out,
                                   base + pos, err_index)
                pos += m
        return st
    try:
        while pos < stop and st == BC_OK:
            m = stop - pos if stop - pos < CHUNK else CHUNK
            st = col.describe_objects(pos, m, keys, err_index, not keep_gil)
            if st == BC_OK and keep_gil:
                st = hash_run(keys, m, col.view.plain, NULL, 0, replace, allow_none, scratch, out,
                              base + pos, &out_index)
            elif st == BC_OK:
                with nogil:
                    st = hash_run(keys, m, col.view.plain, NULL, 0, replace, allow_none, scratch, out,
                                  base + pos, &out_index)
            col.release()
            pos += m
    finally:
        col.release()
    if out_index >= 0:
        err_index[0] = out_index - base  # hash_run names a position in the outputs
    return st


def hash_column(KeyColumn col, object raw, object segment_hash, object bucket_hash,
                object has_key, bint replace, bint allow_none, Py_ssize_t start=0,
                Py_ssize_t stop=-1):
    """Hash keys [start, stop) of a column into output columns of stop - start values.

    Returns (status, index of the failing key in the column). Several threads may hash
    disjoint ranges of one source, each through its own KeyColumn; an object column's chunks
    are held while the GIL is released to hash them.
    """
    if stop < 0:
        stop = col.length
    elif stop > col.length:
        # a list cut after its keys were counted: refused, never read past its end
        return BC_ERR_LIST_CHANGED, start
    cdef HashOut out = make_out(raw, segment_hash, bucket_hash, has_key)
    cdef Py_ssize_t err_index = -1
    cdef int st = hash_column_into(col, &out, replace, allow_none, start, stop, &err_index)
    return st, err_index


cdef int hash_column_into(KeyColumn col, HashOut *out, bint replace, bint allow_none, Py_ssize_t start,
                          Py_ssize_t stop, Py_ssize_t *err_index) except -2:
    """hash_column's work: keys [start, stop) into out; a status, *err_index the failing key."""
    cdef int st
    cdef bc_scratch scratch
    scratch.buf = NULL
    scratch.cap = 0
    cdef bc_key *keys = <bc_key *>malloc(CHUNK * sizeof(bc_key))
    if keys == NULL:
        raise MemoryError()
    try:
        st = hash_range(col, start, stop, out, 0, keys, &scratch, replace, allow_none, False, err_index)
    finally:
        free(keys)
        bc_scratch_free(&scratch)
    if st == BC_ERR_NOMEM:
        raise MemoryError()
    return st


def described_keys(KeyColumn col, Py_ssize_t pos, Py_ssize_t m):
    """What describe_view makes of keys [pos, pos+m) of a buffer column, as Python values: the
    bytes of each key (UCS4 keys: their str), None for a keyless one. Returns (status, failing
    index, values, run): run is (length, distance from one key's start to the next) when the keys
    were described as one run of one length without descriptors, else None. For tests of the
    describer itself (hashing never builds these objects)."""
    if col.needs_gil:
        raise ValueError("described_keys reads buffer columns only")
    if pos < 0 or m < 0 or pos + m > col.length:
        raise ValueError(f"keys [{pos}, {pos + m}) are outside the column of {col.length}")
    cdef bc_key *keys = <bc_key *>malloc((m if m > 0 else 1) * sizeof(bc_key))
    cdef Py_ssize_t err_index = -1, j
    cdef size_t step
    cdef int st
    cdef ColumnView view = col.view
    if keys == NULL:
        raise MemoryError()
    try:
        with nogil:
            st = describe_view(&view, pos, m, keys, &err_index)
        values = []
        step = view.fixed_stride if view.fixed_stride != 0 else view.fixed_len
        if st == BC_OK and view.fixed_base != NULL:
            for j in range(m):
                values.append((<const char *>view.fixed_base)[j * step:j * step + view.fixed_len])
        elif st == BC_OK:
            for j in range(m):
                if keys[j].kind == BC_KEY_NONE:
                    values.append(None)
                elif keys[j].kind == BC_KEY_UCS4:
                    values.append((<const char *>keys[j].data)[:keys[j].len * 4].decode("utf-32-le"))
                else:
                    values.append((<const char *>keys[j].data)[:keys[j].len])
        run = (view.fixed_len, step) if st == BC_OK and view.fixed_base != NULL else None
        return st, err_index, values, run
    finally:
        free(keys)


def split_raw(const uint32_t[::1] raw, uint16_t[::1] segment_hash, uint16_t[::1] bucket_hash):
    """segment_hash = raw >> 16 and bucket_hash = raw & 0xFFFF in one pass (three separate arrays of
    one length)."""
    cdef Py_ssize_t n = raw.shape[0]
    if segment_hash.shape[0] != n or bucket_hash.shape[0] != n:
        raise ValueError(f"split_raw needs outputs of {n} values, not {segment_hash.shape[0]} and "
                         f"{bucket_hash.shape[0]}")
    if n == 0:
        return
    with nogil:
        bc_split_hashes(&raw[0], <size_t>n, &segment_hash[0], &bucket_hash[0])
