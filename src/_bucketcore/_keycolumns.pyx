# cython: language_level=3
"""Describing a key input: the one reading of a key column's kind, layout and buffers.

A key column (a Python list, tuple or object array, a numpy U/S/StringDType array, an Arrow
string/binary array with 32- or 64-bit offsets, string/binary views, a dictionary, nulls) becomes a
KeyColumn: its ColumnView says how its keys are laid out, and describe_view turns them, a chunk
at a time, into C key descriptors (pointer, length, width) without the GIL; object columns are
described with the GIL held (KeyColumn.describe_objects). No Python object is created per key.
The hashing kernels (_hashing, _producer, _pipeline, _batcher) read every key through this.
"""

cimport cython
from cpython.object cimport PyObject
from cpython.list cimport PyList_GET_SIZE
from cpython.tuple cimport PyTuple_New
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t
from libc.stdlib cimport free, malloc

cimport numpy as cnp

cnp.import_array()

cdef extern from "Python.h":
    PyObject **PySequence_Fast_ITEMS(object seq)

cdef extern from "pykeys.h":
    const bint BC_FREE_THREADED
    void bc_take_items(PyObject **items, const char *base, Py_ssize_t stride, Py_ssize_t n, PyObject **out)
    int bc_export_buffer_items(object items) except -1
    void bc_release_held(void **held, size_t n)
    int bc_describe_objects(PyObject **items, const char *base, Py_ssize_t stride, size_t n,
                            bc_key *keys, void **held, size_t *nheld, size_t *at,
                            int *plain, int may_ready) except -1
    # the same, declared for describe_view: with may_ready 0 and held NULL it only reads
    int bc_describe_objects_read "bc_describe_objects" (
        PyObject **items, const char *base, Py_ssize_t stride, size_t n, bc_key *keys, void **held,
        size_t *nheld, size_t *at, int *plain, int may_ready) noexcept nogil

cdef extern from "arrow_c.h" nogil:
    int bc_describe_views(const uint8_t *views, const uint8_t *bits, int64_t first, size_t m,
                          const uint8_t *const *variadic, const int64_t *sizes, int64_t nvariadic,
                          bc_key *keys, size_t *at, int *all_bytes)
    int64_t bc_index_at(const void *indices, int width, int is_signed, int64_t i)
    int bc_offsets32_fixed(const int32_t *off, size_t m, int64_t nvalues, size_t *len)
    int bc_offsets64_fixed(const int64_t *off, size_t m, int64_t nvalues, size_t *len)
    int bc_views_fixed(const uint8_t *views, int64_t first, size_t m, const uint8_t *const *variadic,
                       const int64_t *sizes, int64_t nvariadic, const uint8_t **base, size_t *len)
    bint bc_bit(const uint8_t *bits, int64_t i)

cdef extern from "npstring.h" nogil:
    int bc_npstr_describe(bc_npstr_allocator *a, const char *base, Py_ssize_t stride, size_t m,
                          bc_key *keys, size_t *at, int *plain)
    int bc_npstr_run(bc_npstr_allocator *a, const char *base, Py_ssize_t stride, size_t m,
                     const uint8_t **run, size_t *len, size_t *step)


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


cpdef KeyColumn objects_column(object seq):
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


cpdef tuple array_column(cnp.ndarray arr):
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
