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
from libc.string cimport memcpy, memset

cimport numpy as cnp

cnp.import_array()

cdef extern from "Python.h":
    PyObject **PySequence_Fast_ITEMS(object seq)

cdef extern from "pykeys.h":
    int bc_describe_key(PyObject *o, bc_key *k) except -1
    int bc_describe_objects(PyObject **items, const char *base, Py_ssize_t stride, size_t n,
                            bc_key *keys, void **held, size_t *nheld, size_t *at,
                            int *plain, int may_ready) except -1
    # the same, declared for describe_view: with may_ready 0 and held NULL it only reads
    int bc_describe_objects_read "bc_describe_objects" (
        PyObject **items, const char *base, Py_ssize_t stride, size_t n, bc_key *keys, void **held,
        size_t *nheld, size_t *at, int *plain, int may_ready) noexcept nogil

# Status of a kernel call, turned into an exception by bucketcore.hashing.
STATUS_OK = 0
STATUS_BAD_TYPE = 1
STATUS_NONE = 2
STATUS_SURROGATE = 3
STATUS_CHANGED = 4
STATUS_TOO_LONG = 5
STATUS_NEEDS_GIL = 7

STATUS_BAD_OFFSETS = 6

cdef enum:
    ST_BAD_OFFSETS = 6
    COL_LIST = 0
    COL_TUPLE = 1
    COL_OBJECTS = 2
    COL_BYTES = 3
    COL_UCS4 = 4
    COL_ARROW = 5


# The multi-lane path every kernel hashes by: BC_PATH_AUTO (the best this CPU has) unless forced.
cdef int hash_path = BC_PATH_AUTO

PATHS = {"auto": BC_PATH_AUTO, "scalar": BC_PATH_SCALAR, "interleaved": BC_PATH_INTERLEAVED,
         "simd": BC_PATH_SIMD}


def cpu_has_simd():
    """Whether this CPU runs the SIMD (AVX2) path."""
    return bool(bc_cpu_has_avx2())


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
        split_out(out, base, n)
        if out.has_key != NULL:
            memset(out.has_key + base, 1, n)
        return ST_OK
    if not allow_none:
        for i in range(n):
            if keys[i].kind == BC_KEY_NONE:
                first_none = i
                break
    rc = bc_encode_chunk(keys, <size_t>(first_none if first_none >= 0 else n), replace, scratch, &at)
    if rc == BC_ERR_NOMEM:
        return ST_NOMEM
    if rc == BC_ERR_SURROGATE:
        err_index[0] = base + <Py_ssize_t>at
        return ST_SURROGATE
    if first_none >= 0:
        err_index[0] = base + first_none
        return ST_NONE
    bc_hash_bytes(keys, n, out.raw + base, hash_path)
    split_out(out, base, n)
    if out.has_key != NULL:
        for i in range(n):
            out.has_key[base + i] = keys[i].kind != BC_KEY_NONE
    return ST_OK


cdef inline void split_out(HashOut *out, Py_ssize_t base, Py_ssize_t n) noexcept nogil:
    """The segment and bucket halves of out.raw[base:base+n], where asked for."""
    cdef Py_ssize_t i
    if out.segment_hash != NULL:
        for i in range(n):
            out.segment_hash[base + i] = <uint16_t>(out.raw[base + i] >> 16)
    if out.bucket_hash != NULL:
        for i in range(n):
            out.bucket_hash[base + i] = <uint16_t>(out.raw[base + i] & 0xFFFF)


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
                                   Py_ssize_t m, bc_key *keys) noexcept nogil:
    """Describe m valid Arrow values from int32 offsets, checked in one branch-free pass.
    Returns 0 (keys undefined) when some offset is out of order or out of range, for the checking
    loop to name; 2 when every value has the length off[1] - off[0] >= 16 (keys not written: the
    values lie back to back, for bc_hash_fixed); 1 when keys are written. An int32 length is
    never over BC_KEY_MAX_BYTES."""
    cdef Py_ssize_t j
    cdef int32_t bad = (off[0] < 0) | (off[m] > nvalues)
    cdef int32_t first = off[1] - off[0], other = 0
    for j in range(m):
        bad |= off[j + 1] < off[j]
        other |= (off[j + 1] - off[j]) ^ first
    if bad:
        return 0
    if other == 0 and first >= 16:
        return 2
    for j in range(m):
        keys[j].data = values + off[j]
        keys[j].len = <uint32_t>(off[j + 1] - off[j])
        keys[j].kind = BC_KEY_BYTES
    return 1


cdef int describe_view(ColumnView *v, Py_ssize_t pos, Py_ssize_t m, bc_key *keys,
                       Py_ssize_t *err_index) noexcept nogil:
    """Describe keys [pos, pos+m) of a column from its view, without the GIL.

    Buffer columns (numpy S/U, Arrow) any time. Object columns only while the thread holding the
    GIL runs no Python code and has described the column once (its items are then fixed), e.g.
    a pipeline worker's part of a stream: a legacy str that is not ready (only before Python
    3.12) would need the GIL to be readied and returns ST_NEEDS_GIL, naming it."""
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
    v.plain = v.mode != COL_UCS4
    v.fixed_base = NULL
    if v.mode == COL_LIST or v.mode == COL_TUPLE or v.mode == COL_OBJECTS:
        rc = bc_describe_objects_read(v.items + pos if v.mode != COL_OBJECTS else NULL,
                                      v.base + pos * v.stride, v.stride, <size_t>m, keys, NULL,
                                      &count, &at, &plain, 0)
        if rc != 0:
            err_index[0] = pos + <Py_ssize_t>at
            v.plain = False
            return ST_TOO_LONG if rc == 2 else ST_NEEDS_GIL if rc == 3 else ST_BAD_TYPE
        v.plain = plain
        return ST_OK
    if v.mode == COL_ARROW:
        if off32 != NULL and m > 0 and all_valid(bits, first, m):
            described = describe_offsets32(off32 + first, values, nvalues, m, keys)
            if described == 2:
                v.fixed_base = values + off32[first]
                v.fixed_len = <size_t>(off32[first + 1] - off32[first])
            if described:
                return ST_OK
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
                return ST_BAD_OFFSETS
            if end - start > BC_KEY_MAX_BYTES:
                err_index[0] = pos + j
                return ST_TOO_LONG
            keys[j].kind = BC_KEY_BYTES
            keys[j].data = values + start
            keys[j].len = <uint32_t>(end - start)
        return ST_OK
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
    return ST_OK


cdef int hash_view_run(ColumnView *v, Py_ssize_t pos, Py_ssize_t m, bc_key *keys, bint replace,
                       bint allow_none, bc_scratch *scratch, HashOut *out, Py_ssize_t base,
                       Py_ssize_t *err_index) noexcept nogil:
    """Describe keys [pos, pos+m) of a column from its view (describe_view) and hash them into
    out[base:base+m]. On failure *err_index is the failing key's position in the column."""
    cdef Py_ssize_t out_index = -1
    cdef int st = describe_view(v, pos, m, keys, err_index)
    if st == ST_OK:
        st = hash_run(keys, m, v.plain, v.fixed_base, v.fixed_len, replace, allow_none, scratch, out,
                      base, &out_index)
        if st != ST_OK:
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
    stream position. Never readies a legacy str (ST_NEEDS_GIL)."""
    cdef Py_ssize_t m, cp, err_index = -1
    while col_start[ci[0] + 1] <= p:
        ci[0] += 1
    cp = p - col_start[ci[0]]
    m = e - p if e - p < CHUNK else CHUNK
    if m > col_start[ci[0] + 1] - p:
        m = col_start[ci[0] + 1] - p
    status[0] = hash_view_run(&views[ci[0]], cp, m, keys, replace, allow_none, scratch, out, base,
                              &err_index)
    if status[0] != ST_OK:
        bad[0] = p + err_index - cp
        return -1
    return m


cdef int take_blocks(int64_t *tickets, int64_t *failed, ColumnView *views, const int64_t *col_start,
                     Py_ssize_t first, Py_ssize_t stop, Py_ssize_t block, bc_key *keys, bint replace,
                     bint allow_none, bc_scratch *scratch, HashOut *out, Py_ssize_t *bad,
                     Py_ssize_t *bad_end) noexcept nogil:
    """One thread of several hashing stream positions [first, stop) into out[position - first]:
    take blocks of ``block`` keys by ticket until none is left or one failed, this thread's or
    another's. At a failure *failed is published, *bad names it (a legacy str: the start of its
    chunk, everything before is hashed) and *bad_end is the end of its block. A thread's blocks
    only move forward, and no block is taken once one failed: every block before a failed one
    was taken already and its thread finishes it."""
    cdef Py_ssize_t lo, hi, p, m, ci = 0
    cdef int st = ST_OK
    while not bc_observe(failed):
        lo = first + bc_take(tickets) * block
        if lo >= stop:
            break
        hi = lo + block if stop - lo > block else stop
        p = lo
        while p < hi:
            m = hash_views_at(views, col_start, &ci, p, hi, keys, replace, allow_none, scratch, out,
                              p - first, &st, bad)
            if m < 0:
                if st == ST_NEEDS_GIL:
                    bad[0] = p
                bad_end[0] = hi
                bc_publish(failed, 1)
                return st
            p += m
    return ST_OK


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
        keys are hashed (nothing can change the column meanwhile)."""
        cdef int rc, plain = 0
        cdef size_t count = 0, at = 0
        self.release()
        self.view.plain = False
        self.view.fixed_base = NULL
        if self.view.mode == COL_LIST and PyList_GET_SIZE(self.source) != self.list_size:
            err_index[0] = pos
            return ST_CHANGED
        cdef PyObject **items = NULL
        cdef const char *base = NULL
        if self.view.mode == COL_OBJECTS:
            base = self.view.base + pos * self.view.stride
        else:
            self.view.items = PySequence_Fast_ITEMS(self.source)
            items = self.view.items + pos
        try:
            rc = bc_describe_objects(items, base, self.view.stride, <size_t>m,
                                     keys, self.held if hold else NULL, &count, &at, &plain, 1)
        finally:
            self.nheld = <Py_ssize_t>count
        if rc != 0:
            err_index[0] = pos + <Py_ssize_t>at
            return ST_TOO_LONG if rc == 2 else ST_BAD_TYPE
        self.view.plain = plain
        return ST_OK

    cdef int pin(self, ColumnView *out) except -2:
        """Copy the view for a thread that describes with describe_view while the caller keeps
        the GIL and runs no Python code (so the items stay as they are now). ST_CHANGED when a
        list changed its length since the column was made."""
        if self.view.mode == COL_LIST and PyList_GET_SIZE(self.source) != self.list_size:
            return ST_CHANGED
        if self.view.mode == COL_LIST or self.view.mode == COL_TUPLE:
            self.view.items = PySequence_Fast_ITEMS(self.source)
        out[0] = self.view
        return ST_OK

    cdef void release(self):
        """Drop the items held since the last describe_objects (GIL required)."""
        cdef Py_ssize_t j
        for j in range(self.nheld):
            Py_DECREF(<object>self.held[j])
        self.nheld = 0


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
    col.held = <void **>malloc(CHUNK * sizeof(void *))
    if col.held == NULL:
        raise MemoryError()
    return col


def fixed_column(cnp.ndarray arr):
    """A KeyColumn over a 1-D numpy array of dtype S (bytes) or U (UCS4), any stride.

    Returns (status, column): STATUS_TOO_LONG if an item could be longer than the longest key."""
    if arr.ndim != 1 or arr.dtype.kind not in "SU":
        raise ValueError("expected a 1-D array of dtype S or U")
    cdef KeyColumn col = KeyColumn.__new__(KeyColumn)
    col.source = arr
    col.view.mode = COL_UCS4 if arr.dtype.kind == "U" else COL_BYTES
    col.length = arr.shape[0]
    col.view.base = <const char *>cnp.PyArray_DATA(arr)
    col.view.stride = arr.strides[0]
    col.view.width = arr.dtype.itemsize // 4 if col.view.mode == COL_UCS4 else arr.dtype.itemsize
    if col.length and arr.dtype.itemsize > BC_KEY_MAX_BYTES:
        return STATUS_TOO_LONG, None
    return STATUS_OK, col


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
    cdef int st = ST_OK
    base -= start  # key pos + i goes to out[base + pos + i]
    if not col.needs_gil:
        with nogil:  # once for the whole range: threads hashing parts never queue for the GIL
            while pos < stop and st == ST_OK:
                m = stop - pos if stop - pos < CHUNK else CHUNK
                st = hash_view_run(&col.view, pos, m, keys, replace, allow_none, scratch, out,
                                   base + pos, err_index)
                pos += m
        return st
    try:
        while pos < stop and st == ST_OK:
            m = stop - pos if stop - pos < CHUNK else CHUNK
            st = col.describe_objects(pos, m, keys, err_index, not keep_gil)
            if st == ST_OK and keep_gil:
                st = hash_run(keys, m, col.view.plain, NULL, 0, replace, allow_none, scratch, out,
                              base + pos, &out_index)
            elif st == ST_OK:
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
    if stop < 0 or stop > col.length:
        stop = col.length
    cdef HashOut out = make_out(raw, segment_hash, bucket_hash, has_key)
    cdef Py_ssize_t err_index = -1
    cdef int st
    cdef bc_scratch scratch
    scratch.buf = NULL
    scratch.cap = 0
    cdef bc_key *keys = <bc_key *>malloc(CHUNK * sizeof(bc_key))
    if keys == NULL:
        raise MemoryError()
    try:
        st = hash_range(col, start, stop, &out, 0, keys, &scratch, replace, allow_none, False,
                        &err_index)
    finally:
        free(keys)
        bc_scratch_free(&scratch)
    if st == ST_NOMEM:
        raise MemoryError()
    return st, err_index


cdef PyThread_type_lock held_lock() except NULL:
    """A new lock, already acquired: a thread waiting on it sleeps until another releases it."""
    cdef PyThread_type_lock lock = PyThread_allocate_lock()
    if lock == NULL:
        raise MemoryError()
    PyThread_acquire_lock_timed(lock, 0, 0)
    return lock


cdef void free_lock(PyThread_type_lock lock) noexcept:
    if lock != NULL:
        PyThread_free_lock(lock)


cdef class BlockStage:
    """Threads over buffer columns (Arrow, numpy S/U), ``murmur3_32(..., threads=k)``: each thread
    calls ``take``, which hashes blocks of ``block`` keys in turn, a ticket each, with the GIL
    released from start to end. A thread the machine slows down takes fewer blocks, and no thread
    goes back to Python between blocks (where two would queue for the GIL). The columns cover
    the n keys in order; every thread describes from its own copy of their views. A thread stops
    taking blocks once any failed: every block before a failed one was taken already, and its
    thread finishes it, so the lowest failing index over the threads' results is the first."""

    cdef list cols
    cdef object keep
    cdef ColumnView *views
    cdef int64_t *col_start      # stream position of each column's first key (ncols + 1)
    cdef Py_ssize_t ncols, n, block
    cdef HashOut out
    cdef bint replace, allow_none
    cdef int64_t next_block      # tickets
    cdef int64_t failed

    def __cinit__(self, list cols, object raw, object segment_hash, object bucket_hash, object has_key,
                  bint replace, bint allow_none, Py_ssize_t block):
        cdef KeyColumn col
        cdef Py_ssize_t c
        if block < 1:
            raise ValueError("block must be >= 1")
        self.ncols = len(cols)
        self.views = <ColumnView *>malloc(max(self.ncols, 1) * sizeof(ColumnView))
        self.col_start = <int64_t *>malloc((self.ncols + 1) * sizeof(int64_t))
        if self.views == NULL or self.col_start == NULL:
            raise MemoryError()
        self.col_start[0] = 0
        for c in range(self.ncols):
            col = cols[c]
            if col.needs_gil:
                raise ValueError("the block stage is for buffer columns")
            self.views[c] = col.view
            self.col_start[c + 1] = self.col_start[c] + col.length
        self.cols = cols
        self.n = self.col_start[self.ncols]
        self.keep = (raw, segment_hash, bucket_hash, has_key)
        self.out = make_out(raw, segment_hash, bucket_hash, has_key)
        self.replace = replace
        self.allow_none = allow_none
        self.block = block

    def __dealloc__(self):
        free(self.views)
        free(self.col_start)

    def take(self):
        """Hash blocks until none is left or one failed. Returns (status, stream position of
        this thread's first failing key, or -1)."""
        cdef Py_ssize_t bad = -1, bad_end = -1
        cdef int st
        cdef bc_scratch scratch
        scratch.buf = NULL
        scratch.cap = 0
        cdef bc_key *keys = <bc_key *>malloc(CHUNK * sizeof(bc_key))
        cdef ColumnView *own = <ColumnView *>malloc(max(self.ncols, 1) * sizeof(ColumnView))
        if keys == NULL or own == NULL:
            free(keys)
            free(own)
            raise MemoryError()
        memcpy(own, self.views, self.ncols * sizeof(ColumnView))
        with nogil:
            st = take_blocks(&self.next_block, &self.failed, own, self.col_start, 0, self.n, self.block,
                             keys, self.replace, self.allow_none, &scratch, &self.out, &bad, &bad_end)
            bc_scratch_free(&scratch)
        free(keys)
        free(own)
        if st == ST_NOMEM:
            raise MemoryError()
        return st, bad


cdef class HashStage:
    """Two threads over an object column (``murmur3_32(list, threads=2)``): describing a Python
    object needs the GIL only to ready a legacy str, reading it needs no more than that no Python
    code runs. So the calling thread takes the GIL for good and pins the column's view
    (``first``), while a worker describes and hashes from the pinned view with the GIL released
    (``run``); both take blocks of ``block`` keys by ticket, so a thread the machine slows down
    takes fewer. The calling thread keeps the GIL until the worker is done, so nothing can change
    the column meanwhile and no item needs holding; only results cross between the cores. A
    thread stops taking blocks once one failed (every earlier block was taken already and is
    finished). A legacy str (not ready, only before Python 3.12) stops its block: readying it
    writes to it, which waits until the worker is done (the same object may be in two blocks);
    then the calling thread hashes what was left, readying as it goes. Both return (status,
    failing key's index in the column or -1); ``first`` returns the first by index."""

    cdef KeyColumn col
    cdef HashOut out
    cdef bint replace, allow_none
    cdef Py_ssize_t start, stop, block
    cdef ColumnView view        # the worker's
    cdef ColumnView own         # the calling thread's (describing writes the last run's form)
    cdef int64_t started        # the worker runs without the GIL
    cdef int64_t pinned         # the calling thread holds the GIL and pinned the view (or gave up)
    cdef int64_t finished       # the worker is done
    cdef int64_t next_block     # tickets
    cdef int64_t failed         # a block failed: no more are taken
    cdef int64_t span[2]        # the one column, as a stream for take_blocks
    cdef int wstatus
    cdef Py_ssize_t windex, wend
    cdef PyThread_type_lock wake_worker, wake_caller
    cdef object keep

    def __cinit__(self, KeyColumn col, object raw, object segment_hash, object bucket_hash,
                  object has_key, bint replace, bint allow_none, Py_ssize_t start, Py_ssize_t stop,
                  Py_ssize_t block=1 << 14):
        if not col.needs_gil:
            raise ValueError("the hashing stage is for object columns")
        if block < 1:
            raise ValueError("block must be >= 1")
        self.col = col
        self.keep = (raw, segment_hash, bucket_hash, has_key)
        self.out = make_out(raw, segment_hash, bucket_hash, has_key)
        self.replace = replace
        self.allow_none = allow_none
        self.start = start
        self.stop = stop
        self.span[0] = 0
        self.span[1] = col.length
        self.block = block
        self.wstatus = ST_OK
        self.windex = -1
        self.wake_worker = held_lock()
        self.wake_caller = held_lock()

    def __dealloc__(self):
        free_lock(self.wake_worker)
        free_lock(self.wake_caller)

    def first(self):
        """The calling thread's part (after submitting ``run``): pin, take blocks, wait for the
        worker, then ready and hash what a legacy str stopped and the blocks nobody took."""
        cdef Py_ssize_t err_index = -1, err_end = -1, taken_end, lo, hi, index = -1, e
        cdef int st = ST_OK, status = ST_OK
        cdef bc_key *keys = <bc_key *>malloc(CHUNK * sizeof(bc_key))
        cdef bc_scratch scratch
        scratch.buf = NULL
        scratch.cap = 0
        cdef bint pinned = False
        try:
            with nogil:  # the worker needs the GIL until it is inside run's nogil block
                while not bc_observe(&self.started):
                    PyThread_acquire_lock_timed(self.wake_caller, 1000, 0)
            # from here on the GIL stays with this thread until the worker is done
            try:
                st = self.col.pin(&self.view)
                if st != ST_OK:
                    err_index = self.start
                else:
                    pinned = True
                self.own = self.view
            finally:
                if not pinned or keys == NULL:
                    bc_publish(&self.failed, 1)  # the worker takes nothing
                bc_publish(&self.pinned, 1)
                PyThread_release_lock(self.wake_worker)
            if keys == NULL:
                raise MemoryError()
            if pinned:
                st = take_blocks(&self.next_block, &self.failed, &self.own, self.span, self.start,
                                 self.stop, self.block, keys, self.replace, self.allow_none, &scratch,
                                 &self.out, &err_index, &err_end)
        finally:
            while not bc_observe(&self.finished):
                PyThread_acquire_lock_timed(self.wake_caller, 1000, 0)
        if not pinned:
            free(keys)
            return st, err_index
        # alone now: this thread may ready legacy strs (hash_range describes with the GIL).
        # Failures by index; what is left to hash: each thread's block from a legacy str on, and
        # the blocks nobody took (all after every taken one)
        if st != ST_OK and st != ST_NEEDS_GIL:
            status, index = st, err_index
        if self.wstatus != ST_OK and self.wstatus != ST_NEEDS_GIL and (status == ST_OK or self.windex < index):
            status, index = self.wstatus, self.windex
        left = []
        if st == ST_NEEDS_GIL:
            left.append((err_index, err_end))
        if self.wstatus == ST_NEEDS_GIL:
            left.append((self.windex, self.wend))
        taken_end = self.start + bc_observe(&self.next_block) * self.block
        if taken_end < self.stop:
            left.append((taken_end, self.stop))
        try:
            for lo, hi in sorted(left):
                if status != ST_OK and index < lo:
                    break
                st = hash_range(self.col, lo, hi, &self.out, lo - self.start, keys, &scratch, self.replace,
                                self.allow_none, True, &e)
                if st != ST_OK:
                    status, index = st, e  # before every failure after lo, and nothing before lo failed
                    break
        finally:
            free(keys)
            bc_scratch_free(&scratch)
        if status == ST_NOMEM:
            raise MemoryError()
        return status, (index if status != ST_OK else -1)

    def run(self):
        """The worker's part: take blocks from the pinned view (none without memory for them)."""
        cdef Py_ssize_t err_index = -1, err_end = -1
        cdef int st = ST_OK
        cdef bc_key *keys = <bc_key *>malloc(CHUNK * sizeof(bc_key))
        cdef bc_scratch scratch
        scratch.buf = NULL
        scratch.cap = 0
        with nogil:
            bc_publish(&self.started, 1)
            PyThread_release_lock(self.wake_caller)
            while not bc_observe(&self.pinned):
                PyThread_acquire_lock_timed(self.wake_worker, 1000, 0)
            if keys != NULL:
                st = take_blocks(&self.next_block, &self.failed, &self.view, self.span, self.start,
                                 self.stop, self.block, keys, self.replace, self.allow_none, &scratch,
                                 &self.out, &err_index, &err_end)
            self.wstatus = st
            self.windex = err_index
            self.wend = err_end
            bc_scratch_free(&scratch)
            bc_publish(&self.finished, 1)
            PyThread_release_lock(self.wake_caller)
        free(keys)
        return st, (err_index if st != ST_OK else -1)


def split_raw(const uint32_t[::1] raw, uint16_t[::1] segment_hash, uint16_t[::1] bucket_hash):
    """segment_hash = raw >> 16 and bucket_hash = raw & 0xFFFF in one pass."""
    cdef Py_ssize_t i, n = raw.shape[0]
    with nogil:
        for i in range(n):
            segment_hash[i] = <uint16_t>(raw[i] >> 16)
            bucket_hash[i] = <uint16_t>(raw[i] & 0xFFFF)
