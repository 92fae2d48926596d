# cython: language_level=3
"""Murmur3 hashing kernels over key columns: Python sequences, numpy U/S/object arrays, Arrow buffers.

Every input is turned, a chunk at a time, into C key descriptors (pointer, length, width); the
chunk is then hashed with the GIL released. No Python object is created per key.
"""

from cpython.object cimport PyObject
from cpython.ref cimport Py_DECREF, Py_INCREF
from cpython.list cimport PyList_GET_SIZE
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t
from libc.stdlib cimport free, malloc

cimport numpy as cnp

cnp.import_array()

cdef extern from "Python.h":
    PyObject *PyList_GET_ITEM(object lst, Py_ssize_t i)
    PyObject *PyTuple_GET_ITEM(object tup, Py_ssize_t i)

cdef extern from "pykeys.h":
    int bc_describe_key(PyObject *o, bc_key *k) except -1

# Status of a kernel call, turned into an exception by bucketcore.hashing.
STATUS_OK = 0
STATUS_BAD_TYPE = 1
STATUS_NONE = 2
STATUS_SURROGATE = 3
STATUS_CHANGED = 4
STATUS_TOO_LONG = 5

cdef enum:
    CHUNK = 1024
    ST_OK = 0
    ST_BAD_TYPE = 1
    ST_NONE = 2
    ST_SURROGATE = 3
    ST_CHANGED = 4
    ST_TOO_LONG = 5


# The multi-lane path every kernel hashes by: BC_PATH_AUTO (the best this CPU has) unless forced.
cdef int hash_path = BC_PATH_AUTO

PATHS = {"auto": BC_PATH_AUTO, "scalar": BC_PATH_SCALAR, "interleaved": BC_PATH_INTERLEAVED,
         "simd": BC_PATH_SIMD}


def cpu_has_simd():
    """Whether this CPU runs the SIMD (AVX2) path."""
    return bool(bc_cpu_has_avx2())


def get_path():
    """The forced path's name, or "auto"."""
    return {v: k for k, v in PATHS.items()}[hash_path]


def resolved_path():
    """The path hashing takes now: the forced one, or the best for this CPU."""
    return {v: k for k, v in PATHS.items()}[hash_path if hash_path != BC_PATH_AUTO else bc_best_path()]


def set_path(str name):
    """Force a hashing path for every kernel: auto, scalar, interleaved or simd."""
    global hash_path
    if name not in PATHS:
        raise ValueError(f"unknown hashing path {name!r}; expected one of {sorted(PATHS)}")
    if PATHS[name] == BC_PATH_SIMD and not bc_cpu_has_avx2():
        raise ValueError("the simd hashing path needs a CPU with AVX2")
    hash_path = PATHS[name]


cdef int hash_run(bc_key *keys, Py_ssize_t n, int replace, bint allow_none,
                  bc_scratch *scratch, HashOut *out, Py_ssize_t base,
                  Py_ssize_t *err_index) noexcept nogil:
    """Hash n described keys into out[base:base+n]; on failure set err_index and return a status.

    The chunk's str keys are first encoded to UTF-8 in the scratch arena, then every key is
    hashed by the multi-lane path. The first failing key (by index) is the one reported.
    """
    cdef Py_ssize_t i, first_none = -1
    cdef size_t at = 0
    cdef int rc
    if not allow_none:
        for i in range(n):
            if keys[i].kind == BC_KEY_NONE:
                first_none = i
                break
    rc = bc_encode_chunk(keys, <size_t>(first_none if first_none >= 0 else n), replace, scratch, &at)
    if rc == BC_ERR_NOMEM:
        return -1
    if rc == BC_ERR_SURROGATE:
        err_index[0] = base + <Py_ssize_t>at
        return ST_SURROGATE
    if first_none >= 0:
        err_index[0] = base + first_none
        return ST_NONE
    bc_hash_bytes(keys, n, out.raw + base, hash_path)
    if out.segment_hash != NULL:
        for i in range(n):
            out.segment_hash[base + i] = <uint16_t>(out.raw[base + i] >> 16)
    if out.bucket_hash != NULL:
        for i in range(n):
            out.bucket_hash[base + i] = <uint16_t>(out.raw[base + i] & 0xFFFF)
    if out.has_key != NULL:
        for i in range(n):
            out.has_key[base + i] = keys[i].kind != BC_KEY_NONE
    return ST_OK


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
    if rc == 2:
        return STATUS_TOO_LONG, 0
    if rc != 0 or k.kind == BC_KEY_NONE:
        return STATUS_BAD_TYPE, 0
    scratch.buf = NULL
    scratch.cap = 0
    with nogil:
        rc = bc_hash_key(&k, replace, &scratch, &h)
        bc_scratch_free(&scratch)
    if rc == BC_ERR_NOMEM:
        raise MemoryError()
    if rc == BC_ERR_SURROGATE:
        return STATUS_SURROGATE, 0
    return STATUS_OK, h


def hash_objects(object seq, object raw, object segment_hash, object bucket_hash, object has_key,
                 bint replace, bint allow_none, Py_ssize_t start=0, Py_ssize_t stop=-1):
    """Hash items [start, stop) of a list, tuple or 1-D object ndarray of str/bytes/None.

    Outputs are indexed like the items (several threads may each hash their own range).
    Each chunk's items are held (INCREF) while the GIL is released, so a concurrent mutation of
    the container cannot free a key under the kernel. Returns (status, index of the failing item).
    """
    cdef int mode
    cdef Py_ssize_t n, pos = 0, m, j, held = 0, stride = 0
    cdef Py_ssize_t err_index = -1
    cdef char *base = NULL
    cdef PyObject *o
    cdef int st = ST_OK, rc
    cdef HashOut out = make_out(raw, segment_hash, bucket_hash, has_key)
    if type(seq) is list:
        mode = 0
        n = PyList_GET_SIZE(seq)
    elif type(seq) is tuple:
        mode = 1
        n = len(seq)
    else:
        arr = <cnp.ndarray?>seq
        if arr.ndim != 1 or arr.dtype.kind != "O":
            raise ValueError("expected a 1-D object array")
        mode = 2
        n = arr.shape[0]
        base = <char *>cnp.PyArray_DATA(arr)
        stride = arr.strides[0]
    cdef Py_ssize_t size = n
    if stop < 0 or stop > n:
        stop = n
    pos = start
    n = stop
    if pos >= n:
        return STATUS_OK, -1
    cdef bc_key *keys = <bc_key *>malloc(CHUNK * sizeof(bc_key))
    cdef PyObject **items = <PyObject **>malloc(CHUNK * sizeof(PyObject *))
    cdef bc_scratch scratch
    scratch.buf = NULL
    scratch.cap = 0
    if keys == NULL or items == NULL:
        free(keys)
        free(items)
        raise MemoryError()
    try:
        while pos < n:
            if mode == 0 and PyList_GET_SIZE(seq) != size:
                err_index = pos
                st = ST_CHANGED
                break
            m = n - pos if n - pos < CHUNK else CHUNK
            for j in range(m):
                if mode == 0:
                    o = PyList_GET_ITEM(seq, pos + j)
                elif mode == 1:
                    o = PyTuple_GET_ITEM(seq, pos + j)
                else:
                    o = (<PyObject **>(base + (pos + j) * stride))[0]
                Py_INCREF(<object>o)
                items[j] = o
                held = j + 1
                rc = bc_describe_key(o, &keys[j])
                if rc != 0:
                    err_index = pos + j
                    st = ST_TOO_LONG if rc == 2 else ST_BAD_TYPE
                    break
            if st != ST_OK:
                break
            with nogil:
                st = hash_run(keys, m, replace, allow_none, &scratch, &out, pos, &err_index)
            for j in range(held):
                Py_DECREF(<object>items[j])
            held = 0
            if st != ST_OK:
                break
            pos += m
    finally:
        for j in range(held):
            Py_DECREF(<object>items[j])
        free(keys)
        free(items)
        bc_scratch_free(&scratch)
    if st == -1:
        raise MemoryError()
    return st, err_index


def hash_fixed(cnp.ndarray arr, object raw, object segment_hash, object bucket_hash,
               object has_key, bint replace):
    """Hash a 1-D numpy array of dtype S (bytes) or U (UCS4), any stride.

    Trailing NULs are not part of a value, exactly as numpy reads its items back.
    """
    if arr.ndim != 1 or arr.dtype.kind not in "SU":
        raise ValueError("expected a 1-D array of dtype S or U")
    cdef bint wide = arr.dtype.kind == "U"
    cdef Py_ssize_t n = arr.shape[0], stride = arr.strides[0]
    cdef Py_ssize_t itemsize = arr.dtype.itemsize
    cdef Py_ssize_t width = itemsize // 4 if wide else itemsize
    cdef const char *base = <const char *>cnp.PyArray_DATA(arr)
    if n and (width * (4 if wide else 1)) > BC_KEY_MAX_BYTES:
        return STATUS_TOO_LONG, 0
    cdef HashOut out = make_out(raw, segment_hash, bucket_hash, has_key)
    cdef Py_ssize_t pos = 0, m, j, err_index = -1
    cdef int64_t length
    cdef const char *item
    cdef int st = ST_OK
    cdef bc_scratch scratch
    scratch.buf = NULL
    scratch.cap = 0
    cdef bc_key *keys = <bc_key *>malloc(CHUNK * sizeof(bc_key))
    if keys == NULL:
        raise MemoryError()
    with nogil:
        while pos < n and st == ST_OK:
            m = n - pos if n - pos < CHUNK else CHUNK
            for j in range(m):
                item = base + (pos + j) * stride
                length = width
                if wide:
                    while length > 0 and (<const uint32_t *>item)[length - 1] == 0:
                        length -= 1
                    keys[j].kind = BC_KEY_UCS4
                else:
                    while length > 0 and item[length - 1] == 0:
                        length -= 1
                    keys[j].kind = BC_KEY_BYTES
                keys[j].data = item
                keys[j].len = <uint32_t>length
            st = hash_run(keys, m, replace, True, &scratch, &out, pos, &err_index)
            pos += m
        free(keys)
        bc_scratch_free(&scratch)
    if st == -1:
        raise MemoryError()
    return st, err_index


def hash_arrow(object offsets, object data, object validity, Py_ssize_t array_offset,
               Py_ssize_t length, object raw, object segment_hash, object bucket_hash,
               object has_key, Py_ssize_t out_base, bint allow_none):
    """Hash one Arrow binary/string array from its buffers (zero copy).

    offsets: int32 or int64 numpy view of the offsets buffer; data: uint8 view of the values
    buffer; validity: uint8 view of the validity bitmap or None. Nulls are keyless.
    """
    cdef cnp.ndarray off = offsets
    cdef bint wide_offsets = off.dtype.itemsize == 8
    if off.shape[0] < array_offset + length + 1 and length > 0:
        raise ValueError("Arrow offsets buffer is shorter than the array")
    cdef const int32_t *off32 = <const int32_t *>cnp.PyArray_DATA(off)
    cdef const int64_t *off64 = <const int64_t *>cnp.PyArray_DATA(off)
    cdef const uint8_t *values = NULL
    cdef Py_ssize_t nvalues = 0
    cdef const uint8_t *bits = NULL
    if data is not None:
        values = <const uint8_t *>cnp.PyArray_DATA(<cnp.ndarray>data)
        nvalues = (<cnp.ndarray>data).shape[0]
    if validity is not None:
        bits = <const uint8_t *>cnp.PyArray_DATA(<cnp.ndarray>validity)
    cdef HashOut out = make_out(raw, segment_hash, bucket_hash, has_key)
    cdef Py_ssize_t pos = 0, m, j, idx, err_index = -1
    cdef int64_t start, end
    cdef int st = ST_OK
    cdef bint bad_offsets = False, too_long = False
    cdef bc_scratch scratch
    scratch.buf = NULL
    scratch.cap = 0
    cdef bc_key *keys = <bc_key *>malloc(CHUNK * sizeof(bc_key))
    if keys == NULL:
        raise MemoryError()
    with nogil:
        while pos < length and st == ST_OK:
            m = length - pos if length - pos < CHUNK else CHUNK
            for j in range(m):
                idx = array_offset + pos + j
                if bits != NULL and not (bits[idx >> 3] >> (idx & 7)) & 1:
                    keys[j].kind = BC_KEY_NONE
                    keys[j].data = NULL
                    keys[j].len = 0
                    continue
                if wide_offsets:
                    start = off64[idx]
                    end = off64[idx + 1]
                else:
                    start = off32[idx]
                    end = off32[idx + 1]
                if start < 0 or end < start or end > nvalues:
                    bad_offsets = True
                    err_index = pos + j
                    break
                if end - start > BC_KEY_MAX_BYTES:
                    too_long = True
                    err_index = out_base + pos + j
                    break
                keys[j].kind = BC_KEY_BYTES
                keys[j].data = values + start
                keys[j].len = <uint32_t>(end - start)
            if bad_offsets or too_long:
                break
            st = hash_run(keys, m, 0, allow_none, &scratch, &out, out_base + pos, &err_index)
            pos += m
        free(keys)
        bc_scratch_free(&scratch)
    if bad_offsets:
        raise ValueError(f"Arrow array has corrupt offsets at index {err_index}")
    if too_long:
        st = ST_TOO_LONG
    if st == -1:
        raise MemoryError()
    if st != ST_OK:
        err_index -= out_base
    return st, err_index


def split_raw(const uint32_t[::1] raw, uint16_t[::1] segment_hash, uint16_t[::1] bucket_hash):
    """segment_hash = raw >> 16 and bucket_hash = raw & 0xFFFF in one pass."""
    cdef Py_ssize_t i, n = raw.shape[0]
    with nogil:
        for i in range(n):
            segment_hash[i] = <uint16_t>(raw[i] >> 16)
            bucket_hash[i] = <uint16_t>(raw[i] & 0xFFFF)
