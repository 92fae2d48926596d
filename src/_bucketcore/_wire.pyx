# cython: language_level=3
"""Stamped entries on Pulsar's wire (wire.h): encode many entries into one buffer in one pass,
read an entry's fields back, and read only the stamp of a MessageMetadata.

The public API, its validation messages and its error classes are in ``bucketcore.wire``; this
module raises the classes ``bucketcore.wire`` installs with :func:`set_errors`.

Without the GIL (free-threaded CPython) the kernel stays memory-safe whatever other threads do to
its arguments meanwhile: ``encode_entries`` reads each entry's lists from a tuple it takes of them
(the tuple holds every item), reads property dicts from copies, holds a buffer export of every
bytearray or memoryview payload until the entry is written (the payload cannot be resized or
released meanwhile), and writes into a caller's bytearray only through an export of its own (so
another thread cannot resize it under the writer). With the GIL the tuples and copies are taken
only for an entry with explicit sequence ids, the one case in which the encoder runs Python code
(an int subclass's comparison) between reading the lists and writing the entry; otherwise no
other code runs meanwhile and the lists' own items are read. The CRC function and the error classes are set
once, at import, by ``bucketcore.wire``. The readers only read memoryviews, which hold their
buffers for the call.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.bytearray cimport PyByteArray_Resize
from cpython.buffer cimport PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_IsContiguous, PyBuffer_Release, PyObject_GetBuffer
from cpython.mem cimport PyMem_Free, PyMem_Realloc
from cpython.object cimport PyObject
from cpython.ref cimport Py_DECREF, Py_INCREF
from cpython.tuple cimport PyTuple_GET_ITEM
from libc.stdint cimport int64_t, uint8_t, uint16_t, uint32_t, uint64_t, uintptr_t

cimport numpy as cnp

cnp.import_array()

cdef extern from "Python.h":
    const char *PyUnicode_AsUTF8AndSize(object s, Py_ssize_t *size) except NULL
    Py_buffer *PyMemoryView_GET_BUFFER(object mview)
    PyObject **PySequence_Fast_ITEMS(object o)

cdef extern from "free_threaded.h":
    const bint BC_FREE_THREADED

cdef extern from "wire.h" nogil:
    int BC_WIRE_FIELD_HASH_MIN
    int BC_WIRE_FIELD_HASH_MAX
    int BC_WIRE_HEADER
    ctypedef struct bc_wire_msg:
        const char *payload
        size_t payload_len
        const char *key
        size_t key_len
        int key_kind
        size_t prop_start
        size_t prop_count
        uint64_t sequence_id
        size_t single
    ctypedef struct bc_wire_kv:
        const char *key
        size_t key_len
        const char *value
        size_t value_len
    ctypedef struct bc_wire_entry:
        size_t msg_start
        size_t msg_count
        uint64_t sequence_id
        uint32_t hash_min
        uint32_t hash_max
    ctypedef struct bc_wire_common:
        const char *producer_name
        size_t producer_name_len
        uint64_t publish_time
        int stamp
    ctypedef struct bc_pb_field:
        uint32_t field
        uint32_t wire_type
        uint64_t value
        size_t start
        size_t len
    size_t bc_entry_measure(const bc_wire_entry *e, const bc_wire_common *c, bc_wire_msg *msgs,
                            const bc_wire_kv *props, size_t *batch)
    char *bc_put_entry(char *p, const bc_wire_entry *e, const bc_wire_common *c, const bc_wire_msg *msgs,
                       const bc_wire_kv *props, size_t batch)
    int bc_pb_next(const uint8_t *buf, size_t end, size_t *pos, bc_pb_field *f)
    int bc_wire_locate(const uint8_t *buf, size_t len, size_t *crc_at, size_t *meta, size_t *meta_len,
                       size_t *payload, size_t *err_at)
    int bc_wire_stamp(const uint8_t *buf, size_t len, uint64_t *hash_min, uint64_t *hash_max, int *found,
                      size_t *err_at)
    int bc_wire_stamp_check(int found, uint64_t hash_min, uint64_t hash_max)
    int BC_WIRE_BAD_STAMP
    int BC_STAMP_MIN_ALONE
    int BC_STAMP_MAX_ALONE
    int BC_STAMP_MIN_RANGE
    int BC_STAMP_MAX_RANGE
    uint32_t bc_get_be32(const uint8_t *p)

ctypedef uint32_t (*crc_extend_fn)(uint32_t crc, const uint8_t *data, size_t n) noexcept nogil

FIELD_HASH_MIN = BC_WIRE_FIELD_HASH_MIN
FIELD_HASH_MAX = BC_WIRE_FIELD_HASH_MAX

# what each reader status means (wire.h's enum bc_wire_status)
STATUS_TEXT = {
    1: "a varint runs past the end",
    2: "a varint is longer than 10 bytes or above 2**64",
    3: "a length reaches past the end",
    4: "a fixed-width field reaches past the end",
    5: "an unsupported protobuf wire type",
    6: "a field number 0",
    7: "too few bytes for a 4-byte size",
    8: "a known field with a wire type or value it cannot have",
    9: "a stamp that is not a hash range",
}

cdef crc_extend_fn _crc = NULL
cdef object _crc_value = None       # google_crc32c.value, when no C function is installed
cdef object _KeyEncodingError = ValueError
cdef object _WireFormatError = ValueError

cdef uint64_t PAYLOAD_MAX = 0x7FFFFFFF  # payload_size is an int32


def set_crc(uintptr_t address, value):
    """Install the CRC32C: the address of a C ``crc32c_extend(crc, data, n)`` (0: none) and a
    Python ``value(bytes) -> int`` used when there is no C function."""
    global _crc, _crc_value
    _crc = <crc_extend_fn>address
    _crc_value = value


def crc_is_native():
    """Whether the CRC32C is computed by an installed C function."""
    return _crc != NULL


def set_errors(key_encoding_error, wire_format_error):
    """Install the error classes raised for a key that is not UTF-8 and for malformed wire bytes."""
    global _KeyEncodingError, _WireFormatError
    _KeyEncodingError = key_encoding_error
    _WireFormatError = wire_format_error


cdef uint32_t _crc_of(const char *data, size_t n) except? 0xFFFFFFFF:
    if _crc != NULL:
        return _crc(0, <const uint8_t *>data, n)
    return <uint32_t>_crc_value(PyBytes_FromStringAndSize(data, <Py_ssize_t>n))


cdef struct Held:
    Py_buffer *views    # buffer exports held until the entry is written
    size_t n, cap


cdef void _release_held(Held *held) noexcept:
    cdef size_t k
    for k in range(held.n):
        PyBuffer_Release(&held.views[k])
    held.n = 0


cdef inline int _buffer_of(object obj, const char **ptr, size_t *n, Held *held) except -1:
    """Pointer and size of a payload (bytes, bytearray, or C-contiguous memoryview); 1 if it is
    another type, which the caller reports. A bytearray or memoryview is read through a buffer
    export added to ``held``: until it is released the payload can be neither resized nor released."""
    cdef Py_buffer *view
    if type(obj) is bytes:
        ptr[0] = PyBytes_AS_STRING(obj)
        n[0] = <size_t>PyBytes_GET_SIZE(obj)
        return 0
    if type(obj) is not memoryview and type(obj) is not bytearray:
        return 1
    if type(obj) is memoryview and not PyBuffer_IsContiguous(PyMemoryView_GET_BUFFER(obj), b'C'):
        raise TypeError("a payload memoryview must be C-contiguous")
    _grow(<void **>&held.views, &held.cap, held.n + 1, sizeof(Py_buffer))
    view = &held.views[held.n]
    PyObject_GetBuffer(obj, view, PyBUF_SIMPLE)
    held.n += 1
    ptr[0] = <const char *>view.buf
    n[0] = <size_t>view.len
    return 0


cdef str _where(int kind, Py_ssize_t i, Py_ssize_t j, object name):
    if kind == 0:
        return "producer_name"
    if kind == 1:
        return f"keys[{i}][{j}]"
    if kind == 2:
        return f"properties[{i}][{j}] key {name!r}"
    return f"properties[{i}][{j}][{name!r}]"


cdef inline const char *_utf8(object s, size_t *n, int kind, Py_ssize_t i, Py_ssize_t j,
                              object name) except NULL:
    """UTF-8 of a str; what it is (kind, entry i, message j, property name) only names it in the
    error, built when there is one."""
    cdef Py_ssize_t size = 0
    cdef const char *p
    try:
        p = PyUnicode_AsUTF8AndSize(s, &size)
    except UnicodeEncodeError:
        raise _KeyEncodingError(
            f"{_where(kind, i, j, name)} is not valid UTF-8 (it holds a surrogate code point)"
        ) from None
    n[0] = <size_t>size
    return p


cdef inline uint64_t _seq(object v, Py_ssize_t i, Py_ssize_t j) except? 0xFFFFFFFFFFFFFFFF:
    """Message j's sequence id in entry i: an int in 0..2**64-1 (its name is formatted only for
    an error)."""
    if type(v) is bool or not isinstance(v, int):
        raise TypeError(f"sequence_ids[{i}][{j}] must be an int, not {type(v).__name__}")
    if v < 0 or v > 0xFFFFFFFFFFFFFFFF:
        raise ValueError(f"sequence_ids[{i}][{j}] = {v} is outside 0..2**64-1")
    return <uint64_t>v


cdef extern from "wire_objects.h":
    int bc_bytes_payload(PyObject *o, const char **p, size_t *n)
    const char *bc_str_utf8(PyObject *o, size_t *n)
    void bc_prefetch_object(const void *p) nogil
    int bc_bytes_resize(PyObject **b, Py_ssize_t n) except -1


cdef struct Out:
    PyObject *bytes_obj     # the bytes being written (owned), or NULL when writing into a bytearray
    PyObject *array_obj     # the caller's bytearray (borrowed), or NULL
    Py_buffer export        # while exported: the bytearray's buffer, which nobody else can resize
    bint exported
    char *data
    size_t cap


cdef int _array_size(Out *o, size_t size) except -1:
    """Resize the caller's bytearray to `size` bytes and write through a new export of it (the
    export of the previous size is released first: a bytearray cannot be resized while exported)."""
    if o.exported:
        PyBuffer_Release(&o.export)
        o.exported = False
    PyByteArray_Resize(<object>o.array_obj, <Py_ssize_t>size)
    PyObject_GetBuffer(<object>o.array_obj, &o.export, PyBUF_WRITABLE)
    o.exported = True
    if <size_t>o.export.len < size:
        raise RuntimeError("the bytearray passed as `into` was resized by another thread during the call")
    o.data = <char *>o.export.buf
    return 0


cdef int _reserve(Out *o, size_t need) except -1:
    """Room for `need` bytes: grows by half again (or to `need`) through realloc."""
    cdef size_t cap
    if need <= o.cap:
        return 0
    cap = o.cap + o.cap // 2
    if cap < need:
        cap = need
    if o.array_obj != NULL:
        _array_size(o, cap)
    else:
        bc_bytes_resize(&o.bytes_obj, <Py_ssize_t>cap)
        o.data = PyBytes_AS_STRING(<object>o.bytes_obj)
    o.cap = cap
    return 0


cdef int _grow(void **arr, size_t *cap, size_t need, size_t item) except -1:
    cdef void *p
    if need <= cap[0]:
        return 0
    p = PyMem_Realloc(arr[0], max(need, 2 * cap[0]) * item)
    if p == NULL:
        raise MemoryError()
    arr[0] = p
    cap[0] = max(need, 2 * cap[0])
    return 0


cdef int _payload_fallback(object item, bc_wire_msg *m, Py_ssize_t i, Py_ssize_t j, Held *held) except -1:
    if _buffer_of(item, &m.payload, &m.payload_len, held):
        raise TypeError(
            f"entries[{i}].payloads[{j}] must be bytes, bytearray or memoryview, not {type(item).__name__}"
        )
    return 0


cdef int _key_slow(object key, bc_wire_msg *m, Py_ssize_t i, Py_ssize_t j) except -1:
    if type(key) is str:
        m.key = _utf8(key, &m.key_len, 1, i, j, None)
        m.key_kind = 1
    elif type(key) is bytes:
        m.key = PyBytes_AS_STRING(key)
        m.key_len = <size_t>PyBytes_GET_SIZE(key)
        m.key_kind = 2
    elif key is not None:
        raise TypeError(f"keys[{i}][{j}] must be str, bytes or None, not {type(key).__name__}")
    return 0


cdef size_t _props(dict props, bc_wire_kv *kvs, Py_ssize_t i, Py_ssize_t j) except? 0:
    cdef size_t n = 0
    cdef bc_wire_kv *kv
    for k, v in props.items():
        kv = &kvs[n]
        if type(k) is not str or type(v) is not str:
            raise TypeError(
                f"properties[{i}][{j}] must map str to str, not {type(k).__name__} to {type(v).__name__}"
            )
        kv.key = _utf8(k, &kv.key_len, 2, i, j, k)
        kv.value = _utf8(v, &kv.value_len, 3, i, j, k)
        n += 1
    return n


cdef object _items(object col, str name, Py_ssize_t i, Py_ssize_t count, bint hold):
    """Entry i's per-message list, checked; with ``hold``, as a tuple of its items, which holds
    them for the call whatever happens to the list."""
    if type(col) is not list:
        raise TypeError(f"{name}[{i}] must be a list of per-message values or None, not {type(col).__name__}")
    cdef object items = tuple(<list>col) if hold else col
    if len(items) != count:
        raise ValueError(f"{name}[{i}] has {len(items)} items for the {count} messages of entries[{i}]")
    return items


def encode_entries(list entries, str producer_name, uint64_t publish_time, object keys, object properties,
                   object sequence_ids, int64_t sequence_base, bint stamp, bytearray into=None,
                   Py_ssize_t size_hint=0):
    """Encode entries into one buffer; see ``bucketcore.wire.encode_entries``.

    One pass: each entry's messages are gathered (payloads read from a tuple of its list's
    items), written and checksummed while they are in cache. ``size_hint`` is the expected total size (the buffer
    grows past it when needed). Returns (the buffer: a new bytes, or ``into`` resized to the
    encoded size; int64 offsets of n + 1 entry boundaries).
    """
    cdef Py_ssize_t n_entries = len(entries), i, j, count, pref
    cdef bc_wire_common common
    cdef bc_wire_entry ent
    cdef bc_wire_msg *msgs = NULL
    cdef bc_wire_kv *kvs = NULL
    cdef size_t msgs_cap = 0, kvs_cap = 0, n_props, pn = 0, size, pos = 0, batch = 0
    cdef bc_wire_msg *m
    cdef uint64_t top, s
    cdef const int64_t *idx = NULL
    cdef cnp.ndarray mi
    cdef object e, payloads, ekeys, eprops, eseq, props, hmin, hmax
    cdef PyObject *po
    cdef object pseq, kseq, sseq         # the entry's lists, or tuples of their items (hold)
    cdef list pcopies
    cdef PyObject **pitems
    cdef PyObject **kitems = NULL
    cdef bint hold
    cdef Out out
    cdef Held held
    cdef char *p
    cdef cnp.npy_intp dims[1]
    cdef cnp.ndarray offsets
    cdef int64_t *off
    cdef uint32_t crc

    common.producer_name = _utf8(producer_name, &pn, 0, 0, 0, None)
    common.producer_name_len = pn
    common.publish_time = publish_time
    common.stamp = stamp
    dims[0] = n_entries + 1
    offsets = cnp.PyArray_EMPTY(1, dims, cnp.NPY_INT64, 0)
    off = <int64_t *>cnp.PyArray_DATA(offsets)
    off[0] = 0

    out.bytes_obj = NULL
    out.array_obj = NULL
    out.exported = False
    out.cap = <size_t>max(size_hint, 64)
    held.views = NULL
    held.n = held.cap = 0
    try:
        if into is None:
            result = PyBytes_FromStringAndSize(NULL, <Py_ssize_t>out.cap)
            out.bytes_obj = <PyObject *>result
            Py_INCREF(result)  # `out` owns a reference: _PyBytes_Resize may replace the object
            result = None
            out.data = PyBytes_AS_STRING(<object>out.bytes_obj)
        else:
            out.array_obj = <PyObject *>into
            _array_size(&out, out.cap)
        for i in range(n_entries):
            e = entries[i]
            payloads = e.payloads
            if type(payloads) is not list:
                raise TypeError(
                    f"entries[{i}] has no payloads list (an EntryTable row has none: encode the entries an "
                    f"EntryBucketBatcher emits)" if payloads is None else
                    f"entries[{i}].payloads must be a list, not {type(payloads).__name__}"
                )
            # (the other lists are checked against the payloads' count below)
            eseq = None if sequence_ids is None else sequence_ids[i]
            hold = BC_FREE_THREADED or eseq is not None
            pseq = tuple(<list>payloads) if hold else payloads
            pitems = PySequence_Fast_ITEMS(pseq)
            count = len(pseq)
            if count == 0:
                raise ValueError(f"entries[{i}] has no messages")
            hmin = e.hash_min
            hmax = e.hash_max
            if not (isinstance(hmin, int) and isinstance(hmax, int) and 0 <= hmin <= hmax <= 0xFFFF):
                raise ValueError(
                    f"entries[{i}] has the stamp ({hmin!r}, {hmax!r}); a stamp is hash_min <= hash_max in 0..0xFFFF"
                )
            ekeys = None if keys is None else keys[i]
            eprops = None if properties is None else properties[i]
            kseq = None if ekeys is None else _items(ekeys, "keys", i, count, hold)
            if kseq is not None:
                kitems = PySequence_Fast_ITEMS(kseq)
            pcopies = None if eprops is None else _items(eprops, "properties", i, count, False)
            if pcopies is not None and hold:
                pcopies = list(pcopies)  # filled with copies of the dicts below
            sseq = None if eseq is None else _items(eseq, "sequence_ids", i, count, True)
            if sseq is None:
                mi = e.message_indices
                if (cnp.PyArray_TYPE(mi) != cnp.NPY_INT64 or cnp.PyArray_NDIM(mi) != 1
                        or not cnp.PyArray_IS_C_CONTIGUOUS(mi)):
                    raise TypeError(f"entries[{i}].message_indices must be a contiguous int64 array")
                if cnp.PyArray_DIM(mi, 0) != count:
                    raise ValueError(
                        f"entries[{i}] has {cnp.PyArray_DIM(mi, 0)} message indices for {count} payloads"
                    )
                idx = <const int64_t *>cnp.PyArray_DATA(mi)
            _grow(<void **>&msgs, &msgs_cap, <size_t>count, sizeof(bc_wire_msg))
            n_props = 0
            if pcopies is not None:
                for j in range(count):
                    props = pcopies[j]
                    if props is not None:
                        if type(props) is not dict:
                            raise TypeError(
                                f"properties[{i}] items must be dicts of str to str or None, not "
                                f"{type(props).__name__}"
                            )
                        if hold:
                            props = (<dict>props).copy()  # the call's own: its size and strings stay
                            pcopies[j] = props
                        n_props += len(<dict>props)
                # at least one slot: empty property dicts still index kvs (no arithmetic on NULL)
                _grow(<void **>&kvs, &kvs_cap, max(n_props, 1), sizeof(bc_wire_kv))
                n_props = 0
            top = 0
            pref = 8 if count > 8 else count
            for j in range(pref):
                bc_prefetch_object(pitems[j])
            for j in range(count):
                if j + pref < count:
                    bc_prefetch_object(pitems[j + pref])
                m = &msgs[j]
                po = pitems[j]
                if bc_bytes_payload(po, &m.payload, &m.payload_len):
                    _payload_fallback(<object>po, m, i, j, &held)
                if m.payload_len > PAYLOAD_MAX:
                    raise ValueError(f"entries[{i}].payloads[{j}] has {m.payload_len} bytes, above 2**31-1")
                m.key_kind = 0
                m.key = NULL
                m.key_len = 0
                if kseq is not None:
                    po = kitems[j]
                    m.key = bc_str_utf8(po, &m.key_len)
                    if m.key != NULL:
                        m.key_kind = 1
                    else:
                        _key_slow(<object>po, m, i, j)
                m.prop_start = n_props
                m.prop_count = 0
                if pcopies is not None:
                    props = pcopies[j]
                    if props is not None:
                        m.prop_count = _props(<dict>props, &kvs[n_props], i, j)
                        n_props += m.prop_count
                if sseq is None:
                    if idx[j] + sequence_base < 0:
                        raise ValueError(f"the sequence id of entries[{i}] message {j} would be negative")
                    s = <uint64_t>(idx[j] + sequence_base)
                else:
                    s = _seq(<object>PyTuple_GET_ITEM(sseq, j), i, j)
                m.sequence_id = s
                if s > top:
                    top = s
            ent.msg_start = 0
            ent.msg_count = <size_t>count
            ent.hash_min = <uint32_t>hmin
            ent.hash_max = <uint32_t>hmax
            # as the reference's bucket batcher: an entry's sequence id is its highest one
            ent.sequence_id = top
            size = bc_entry_measure(&ent, &common, msgs, kvs, &batch)
            if size - BC_WIRE_HEADER > 0xFFFFFFFF:
                raise ValueError(f"entries[{i}] encodes to {size} bytes, above what a 4-byte size holds")
            _reserve(&out, pos + size)
            p = out.data + pos
            bc_put_entry(p, &ent, &common, msgs, kvs, batch)
            if _crc != NULL:
                crc = _crc(0, <const uint8_t *>p + 6, size - 6)
            else:
                crc = _crc_of(p + 6, size - 6)
            p[2] = <char>(crc >> 24)
            p[3] = <char>(crc >> 16)
            p[4] = <char>(crc >> 8)
            p[5] = <char>crc
            pos += size
            off[i + 1] = <int64_t>pos
            _release_held(&held)
        if into is None:
            bc_bytes_resize(&out.bytes_obj, <Py_ssize_t>pos)
            result = <object>out.bytes_obj
            return result, offsets
        PyBuffer_Release(&out.export)
        out.exported = False
        PyByteArray_Resize(into, <Py_ssize_t>pos)
        return into, offsets
    finally:
        if out.bytes_obj != NULL:
            Py_DECREF(<object>out.bytes_obj)
        if out.exported:
            PyBuffer_Release(&out.export)
        _release_held(&held)
        PyMem_Free(held.views)
        PyMem_Free(msgs)
        PyMem_Free(kvs)


cdef inline object _fail(int status, size_t at, str where):
    return _WireFormatError(f"{where}: {STATUS_TEXT.get(status, 'malformed')} at byte {at}", at)


cdef str _stamp_problem(int problem, uint64_t lo, uint64_t hi):
    """What bc_wire_stamp_check found wrong with a stamp, naming the field."""
    cdef str lo_name = f"entry_hash_min (field {BC_WIRE_FIELD_HASH_MIN})"
    cdef str hi_name = f"entry_hash_max (field {BC_WIRE_FIELD_HASH_MAX})"
    if problem == BC_STAMP_MIN_ALONE:
        return f"{lo_name} = {lo} without {hi_name}: half a stamp"
    if problem == BC_STAMP_MAX_ALONE:
        return f"{hi_name} = {hi} without {lo_name}: half a stamp"
    if problem == BC_STAMP_MIN_RANGE:
        return f"{lo_name} = {lo} is above 0xFFFF: the stamp ({lo}, {hi}) is not a hash range"
    if problem == BC_STAMP_MAX_RANGE:
        return f"{hi_name} = {hi} is above 0xFFFF: the stamp ({lo}, {hi}) is not a hash range"
    return f"{lo_name} = {lo} is above {hi_name} = {hi}: the stamp ({lo}, {hi}) is not a hash range"


def read_stamp(const uint8_t[::1] metadata):
    """(hash_min, hash_max) of a MessageMetadata's bytes, or None when it has neither field; a stamp
    that breaks the stamp rule (wire.h bc_wire_stamp_check) raises, naming the field."""
    cdef uint64_t lo = 0, hi = 0
    cdef int found = 0, problem
    cdef size_t at = 0
    cdef int st
    with nogil:
        st = bc_wire_stamp(&metadata[0] if metadata.shape[0] else NULL, <size_t>metadata.shape[0], &lo, &hi,
                           &found, &at)
    if st:
        raise _fail(st, at, "MessageMetadata")
    problem = bc_wire_stamp_check(found, lo, hi)
    if problem:
        raise _WireFormatError(f"MessageMetadata: {_stamp_problem(problem, lo, hi)}", 0)
    if not found:
        return None
    return lo, hi


def read_stamps(const uint8_t[::1] buf, const int64_t[::1] offsets, uint16_t[::1] hash_min, uint16_t[::1] hash_max,
                uint8_t[::1] stamped):
    """The stamp of every entry buf[offsets[i]:offsets[i + 1]] into the columns (stamped 1; an
    entry without both fields: 0 and zero hashes). A stamp that breaks the stamp rule (wire.h
    bc_wire_stamp_check) is status 9 at the metadata's offset.

    Returns (-1, 0, 0, "") or the failing entry's (index, status, offset inside it, what is wrong);
    status -1: its offsets are not an ascending range inside the buffer.
    """
    cdef Py_ssize_t n = offsets.shape[0] - 1, i
    cdef size_t start, end, crc_at, meta, meta_len, payload, at = 0
    cdef uint64_t lo = 0, hi = 0
    cdef int found, st = 0, problem = 0
    cdef const uint8_t *base = &buf[0] if buf.shape[0] else NULL
    cdef Py_ssize_t bad = -1
    with nogil:
        for i in range(n):
            if offsets[i] < 0 or offsets[i + 1] < offsets[i] or offsets[i + 1] > buf.shape[0]:
                bad = i
                st = -1
                at = 0
                break
            start = <size_t>offsets[i]
            end = <size_t>offsets[i + 1]
            # (an empty buffer may have no address: no arithmetic on NULL)
            st = bc_wire_locate(base + start if base != NULL else base, end - start, &crc_at, &meta, &meta_len,
                                &payload, &at)
            if st == 0:
                lo = 0
                hi = 0
                st = bc_wire_stamp(base + start + meta, meta_len, &lo, &hi, &found, &at)
                at += meta
            if st == 0:
                problem = bc_wire_stamp_check(found, lo, hi)
                if problem:
                    st = BC_WIRE_BAD_STAMP
                    at = meta
            if st:
                bad = i
                break
            hash_min[i] = <uint16_t>lo
            hash_max[i] = <uint16_t>hi
            stamped[i] = found == 3
    if bad >= 0:
        if st == BC_WIRE_BAD_STAMP:
            return bad, st, at, _stamp_problem(problem, lo, hi)
        return bad, st, at, STATUS_TEXT.get(st, "malformed")
    return -1, 0, 0, ""


cdef object _text(const uint8_t *buf, bc_pb_field *f, str what, size_t base):
    try:
        return (<const char *>buf + f.start)[:f.len].decode("utf-8")
    except UnicodeDecodeError:
        raise _WireFormatError(f"{what} at byte {base + f.start} is not UTF-8", base + f.start) from None


cdef dict _key_value(const uint8_t *buf, bc_pb_field *outer, dict into, str what, size_t base):
    cdef size_t p = outer.start, end = outer.start + outer.len
    cdef bc_pb_field f
    cdef object k = None, v = None
    cdef int st
    while p < end:
        st = bc_pb_next(buf, end, &p, &f)
        if st:
            raise _fail(st, base + p, what)
        if f.field == 1 or f.field == 2:
            if f.wire_type != 2:
                raise _fail(8, base + f.start, what)
            if f.field == 1:
                k = _text(buf, &f, what + " key", base)
            else:
                v = _text(buf, &f, what + " value", base)
    if k is None or v is None:
        raise _WireFormatError(f"{what} at byte {base + outer.start} lacks its key or value", base + outer.start)
    into[k] = v
    return into


def decode_entry(const uint8_t[::1] data, bint verify):
    """Every field of one encoded entry; see ``bucketcore.wire.decode_entry``.

    Returns (fields dict of the MessageMetadata, list of per-message dicts, checksum_present).
    """
    cdef size_t n = <size_t>data.shape[0]
    cdef const uint8_t *buf = &data[0] if n else <const uint8_t *>b""
    cdef size_t crc_at, meta, meta_len, payload, at = 0, p, end, single_end, size
    cdef bc_pb_field f
    cdef int st
    cdef uint32_t want, got
    cdef dict md = {"properties": {}}
    cdef list messages = []
    cdef dict msg
    cdef int64_t count, k
    cdef int found, problem
    cdef uint64_t stamp_lo, stamp_hi
    st = bc_wire_locate(buf, n, &crc_at, &meta, &meta_len, &payload, &at)
    if st:
        raise _fail(st, at, "entry header")
    if verify and crc_at != <size_t>-1:
        want = bc_get_be32(buf + crc_at)
        got = _crc_of(<const char *>buf + crc_at + 4, n - crc_at - 4)
        if want != got:
            raise _WireFormatError(
                f"checksum mismatch: the entry says {want:#010x}, its bytes give {got:#010x}", crc_at
            )
    p = meta
    end = meta + meta_len
    while p < end:
        st = bc_pb_next(buf, end, &p, &f)
        if st:
            raise _fail(st, p, "MessageMetadata")
        if f.field in (2, 3, 8, 9, 11, 24, BC_WIRE_FIELD_HASH_MIN, BC_WIRE_FIELD_HASH_MAX):
            if f.wire_type != 0:
                raise _fail(8, p, f"MessageMetadata field {f.field}")
            md[f.field] = f.value
        elif f.field in (1, 6, 18):
            if f.wire_type != 2:
                raise _fail(8, p, f"MessageMetadata field {f.field}")
            md[f.field] = _text(buf, &f, "producer_name", 0) if f.field == 1 else (
                _text(buf, &f, "partition_key", 0) if f.field == 6 else bytes((<const char *>buf + f.start)[:f.len])
            )
        elif f.field == 4:
            if f.wire_type != 2:
                raise _fail(8, p, "MessageMetadata properties")
            _key_value(buf, &f, md["properties"], "MessageMetadata properties", 0)
    # the stamp rule of the fast paths (wire.h bc_wire_stamp_check), so every reader agrees
    found = (1 if BC_WIRE_FIELD_HASH_MIN in md else 0) | (2 if BC_WIRE_FIELD_HASH_MAX in md else 0)
    stamp_lo = md.get(BC_WIRE_FIELD_HASH_MIN, 0)
    stamp_hi = md.get(BC_WIRE_FIELD_HASH_MAX, 0)
    problem = bc_wire_stamp_check(found, stamp_lo, stamp_hi)
    if problem:
        raise _WireFormatError(f"MessageMetadata: {_stamp_problem(problem, stamp_lo, stamp_hi)}", meta)
    for k, name in ((1, "producer_name"), (2, "sequence_id"), (3, "publish_time")):
        if k not in md:
            raise _WireFormatError(f"the MessageMetadata lacks its required field {name} ({k})", meta)
    if md.get(11, 1) > 0x7FFFFFFF:
        raise _WireFormatError(f"num_messages_in_batch {md[11]} is above 2**31-1", meta)
    count = <int64_t>md.get(11, 1)
    if md.get(8, 0) != 0:
        raise _WireFormatError(f"compressed entries (compression {md[8]}) are not decoded", meta)
    p = payload
    for k in range(count):
        if n - p < 4:
            raise _fail(7, p, f"message {k}")
        size = bc_get_be32(buf + p)
        if size > n - p - 4:
            raise _fail(3, p, f"message {k} SingleMessageMetadata")
        p += 4
        single_end = p + size
        msg = {"properties": {}, "key": None, "sequence_id": None, "payload_size": None}
        while p < single_end:
            st = bc_pb_next(buf, single_end, &p, &f)
            if st:
                raise _fail(st, p, f"message {k} SingleMessageMetadata")
            if f.field == 1:
                if f.wire_type != 2:
                    raise _fail(8, p, f"message {k} properties")
                _key_value(buf, &f, msg["properties"], f"message {k} properties", 0)
            elif f.field == 2 or f.field == 7:
                if f.wire_type != 2:
                    raise _fail(8, p, f"message {k} key")
                if f.field == 7:
                    msg["key"] = bytes((<const char *>buf + f.start)[:f.len])
                elif msg["key"] is None or type(msg["key"]) is str:
                    # an ordering key takes precedence over a partition key
                    msg["key"] = _text(buf, &f, f"message {k} partition_key", 0)
            elif f.field == 3 or f.field == 8:
                if f.wire_type != 0:
                    raise _fail(8, p, f"message {k} field {f.field}")
                msg["sequence_id" if f.field == 8 else "payload_size"] = f.value
        if msg["payload_size"] is None:
            raise _WireFormatError(f"message {k} at byte {single_end - size} has no payload_size", single_end - size)
        size = <size_t>msg.pop("payload_size")
        if size > n - p:
            raise _fail(3, p, f"message {k} payload")
        msg["payload"] = bytes((<const char *>buf + p)[:size])
        p += size
        messages.append(msg)
    if p != n:
        raise _WireFormatError(f"{n - p} bytes follow the last of the entry's {count} messages", p)
    return md, messages, crc_at != <size_t>-1
