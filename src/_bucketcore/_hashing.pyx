# cython: language_level=3
"""Murmur3 hashing kernels over key columns described by _keycolumns (its KeyColumn and
describe_view): each chunk's key descriptors are hashed with the GIL released, and no Python
object is created per key. A dictionary-encoded column is the one exception to describing: its
dictionary is hashed once and each row's hash gathered from it (hash_view_run). The short paths of
bucketcore.murmur3_32 and hash_keys (a single key, a short column) are here too.
"""

cimport cython
from cpython.object cimport PyObject, PyTypeObject
from cpython.list cimport PyList_GET_SIZE
from cpython.type cimport PyType_IsSubtype
from libc.stdint cimport int64_t, uint8_t, uint16_t, uint32_t
from libc.stdlib cimport free, malloc
from libc.string cimport memset

import sys

import numpy as np
cimport numpy as cnp

cnp.import_array()

from _bucketcore._keycolumns cimport (
    all_valid, array_column, bc_npstr_acquire, bc_npstr_release, describe_npstrings, describe_views,
    objects_column,
)

cdef extern from "numpy/arrayobject.h":
    object PyArray_Scalar(void *data, cnp.dtype descr, PyObject *base)

cdef extern from "pykeys.h":
    int bc_describe_key(PyObject *o, bc_key *k) except -1
    int bc_hash_scalar(PyObject *o, int replace, uint32_t *out) except -1

cdef extern from "hashing.h" nogil:
    int hash_path "bc_hash_path()"
    void set_hash_path "bc_set_hash_path"(int path)

cdef extern from "hashing.h":
    object bc_uint32_scalar(uint32_t v)
    object bc_uint16_scalar(uint16_t v)

from _bucketcore._options cimport bc_errors_values, bc_option_code

cdef extern from "short_then.h":
    int bc_short_then_ready() except -1
    object bc_short_then_new(object short_path, object general, object bound)
    ctypedef object (*bc_keys_fn)(object bound, object keys)
    object bc_short_function_new(object short_path, bc_keys_fn short_keys, object general, object bound, object name,
                                 object module, object doc)

cdef extern from "route.h" nogil:
    void bc_split_hashes(const uint32_t *raw, size_t n, uint16_t *segment, uint16_t *bucket)

cdef extern from "arrow_c.h" nogil:
    int bc_gather_dict(const void *indices, int width, int is_signed, const uint8_t *bits,
                       int64_t first, size_t m, const uint32_t *dict_raw, const uint8_t *dict_has,
                       int64_t dict_len, int allow_none, uint32_t *raw, uint8_t *has_key, size_t *at,
                       int *keyless)
    size_t bc_views_run_extent(const uint8_t *views, int64_t first, size_t m, const uint8_t *const *variadic,
                               const int64_t *sizes, int64_t nvariadic)
    bint bc_hash_views_run(const uint8_t *views, int64_t first, size_t m, const uint8_t *const *variadic,
                           const int64_t *sizes, int64_t nvariadic, uint32_t *out, int path,
                           const uint8_t **base, size_t *len)

cdef extern from "npstring.h" nogil:
    bint bc_npstr_hash_run(bc_npstr_allocator *a, const char *base, Py_ssize_t stride, size_t m,
                           uint32_t *out, int path, const uint8_t **run, size_t *len, size_t *step)

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


# errors='s default value, interned as are Cython's literals and the str constants of every
# caller's code: the usual call's own object, matched by identity before the table's comparison
cdef object errors_default = sys.intern(bc_errors_values[0].decode())


cdef inline int errors_code(object errors):
    """errors=' code in bc_errors_values (options.h), or -1."""
    if errors is errors_default:
        return 0
    return bc_option_code(errors, bc_errors_values)


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


cdef object short_murmur3_32(object keys, int replace, object threads):
    cdef uint32_t h
    if bc_hash_scalar(<PyObject *>keys, replace, &h) == BC_OK:
        return h
    if threads is not None:
        return None
    return short_column_hashes(keys, replace, False, None)


@cython.binding(False)
def murmur3_32(keys, *, errors="strict", threads=None, column=None):
    """bucketcore.murmur3_32's short path: a str or bytes key (an int), or a short list or 1-D numpy
    array of keys (short_column_hashes) with threads=None, hashed by this one C call. None
    declines: a table, a long column, a bad argument, a key that cannot be hashed (the general
    path raises its error)."""
    cdef int replace
    if column is not None:
        return None
    replace = errors_code(errors)  # -1: the general path raises
    if replace < 0:
        return None
    return short_murmur3_32(keys, replace, threads)


cdef object murmur3_32_keys(object unused, object keys):
    """murmur3_32(keys): the keys alone, every option its default."""
    return short_murmur3_32(keys, errors_code(errors_default), None)


cdef object short_hash_keys(object cls, object keys, int replace, object threads):
    cdef uint32_t h
    if not isinstance(cls, type) or not PyType_IsSubtype(<type>cls, HashColumns):
        return None
    if bc_hash_scalar(<PyObject *>keys, replace, &h) == BC_OK:
        return new_hash_columns(cls, bc_uint32_scalar(h), bc_uint16_scalar(<uint16_t>(h >> 16)),
                                bc_uint16_scalar(<uint16_t>(h & 0xFFFF)), numpy_true)
    if threads is not None:
        return None
    return short_column_hashes(keys, replace, True, cls)


@cython.binding(False)
def hash_keys(cls, keys, *, errors="strict", threads=None, column=None):
    """bucketcore.hash_keys' short path (what murmur3_32 here takes), as a cls (a subclass of
    HashColumns: KeyHashes) of numpy scalars for a single key, of arrays for a column. None
    declines."""
    cdef int replace
    if column is not None:
        return None
    replace = errors_code(errors)  # -1: the general path raises
    if replace < 0:
        return None
    return short_hash_keys(cls, keys, replace, threads)


cdef object hash_keys_keys(object cls, object keys):
    """hash_keys(cls, keys): the keys alone, every option its default."""
    return short_hash_keys(cls, keys, errors_code(errors_default), None)


bc_short_then_ready()


def short_then(short_path, general, bound=None):
    """A callable that calls ``short_path(bound, *args, **kwargs)`` (without bound when it is None)
    and returns its result, unless that is None: then ``general(*args, **kwargs)``. A call of other
    than one positional argument goes to general at once (which names the error of a wrong one). The two are
    composed by their caller (bucketcore.hashing) and held unchanged; nothing here calls back into
    the package otherwise. functools.update_wrapper(result, general) gives it the general path's
    name, docstring and signature."""
    return bc_short_then_new(short_path, general, bound)


def short_then_function(short_path, general, bound, str name not None, str module not None, str doc not None):
    """What short_then(short_path, general, bound) calls, as a builtin function: named name, of
    module (its __module__, where pickle finds it by that name), with doc as its docstring (opened
    by a text signature, ``name(...)\\n--\\n\\n``, for inspect.signature). The interpreter calls it
    straight through its C function, as it calls the kernels' own functions; a call of the keys
    alone, when short_path is this module's murmur3_32 or hash_keys, goes straight to its C body."""
    cdef bc_keys_fn short_keys = NULL
    if short_path is murmur3_32:
        short_keys = murmur3_32_keys
    elif short_path is hash_keys:
        short_keys = hash_keys_keys
    return bc_short_function_new(short_path, short_keys, general, bound, name, module, doc)


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
