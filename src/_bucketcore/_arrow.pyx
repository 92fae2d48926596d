# cython: language_level=3
"""The Arrow C data and C stream interfaces (the PyCapsule protocol): key columns in, numpy
columns out, zero copy both ways.

In: an ``arrow_array_stream`` capsule or an ``arrow_schema`` + ``arrow_array`` capsule pair is
moved out of its capsule into an ImportedSchema / ImportedArray, which call the producer's release
callback exactly once, when the last KeyColumn reading them is gone (a stream itself is released
as soon as its batches are read, also when reading fails). Each (chunk, column) becomes a
KeyColumn whose ColumnView the hashing kernel reads without the GIL.

Out: numpy columns (each kept alive by the array that references it) as a struct array and its
schema, or as a stream of that one batch. Release callbacks take the GIL to drop the numpy owners,
so a consumer may release from any thread.
"""

cimport cython
from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF, Py_XDECREF
from cpython.pycapsule cimport PyCapsule_CheckExact, PyCapsule_GetName, PyCapsule_GetPointer, PyCapsule_New
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcpy, strlen

cimport numpy as cnp

from _bucketcore._keycolumns cimport *

from _bucketcore._hashing import hash_column

cnp.import_array()

# Where the keys of an Arrow array without a values buffer (all values empty) point.
cdef uint8_t NO_VALUES[1]

cdef extern from "errno.h":
    enum:
        ENOMEM
        EINVAL


# Key formats: string/binary (int32 and int64 offsets), their views, and the null type.
_VALUE_FORMATS = {b"u": "string", b"U": "large_string", b"z": "binary", b"Z": "large_binary",
                  b"vu": "string_view", b"vz": "binary_view"}
# Dictionary index formats: (width in bytes, signed)
_INDEX_FORMATS = {b"c": (1, True), b"C": (1, False), b"s": (2, True), b"S": (2, False),
                  b"i": (4, True), b"I": (4, False), b"l": (8, True), b"L": (8, False)}
_FORMAT_NAMES = {b"n": "null", b"b": "bool", b"c": "int8", b"C": "uint8", b"s": "int16", b"S": "uint16",
                 b"i": "int32", b"I": "uint32", b"l": "int64", b"L": "uint64", b"e": "float16",
                 b"f": "float32", b"g": "float64", b"+s": "struct", b"+l": "list", b"+L": "large_list"}


def capsule_name(object obj):
    """The name of a PyCapsule (None: not a capsule, or one without a name)."""
    if not PyCapsule_CheckExact(obj):
        return None
    cdef const char *name = PyCapsule_GetName(obj)
    return None if name == NULL else name.decode("utf-8", "replace")


cdef class ImportedSchema:
    """An ArrowSchema moved out of its producer's capsule, released once when this is freed."""
    cdef bc_arrow_schema schema

    def __dealloc__(self):
        if self.schema.release != NULL:
            self.schema.release(&self.schema)

    cdef bc_arrow_schema *at(self, int child) except NULL:
        if child < 0:
            return &self.schema
        if child >= self.schema.n_children or self.schema.children == NULL or self.schema.children[child] == NULL:
            raise ValueError(f"Arrow schema has no child {child}")
        return self.schema.children[child]

    def format(self, int child=-1):
        """The format string (bytes) of the schema or of its child ``child``, and whether it is
        dictionary-encoded (then the dictionary's value format too): (format, value format)."""
        cdef bc_arrow_schema *s = self.at(child)
        if s.format == NULL:
            raise ValueError("Arrow schema has no format string")
        if s.dictionary != NULL:
            if s.dictionary.format == NULL:
                raise ValueError("Arrow dictionary schema has no format string")
            return <bytes>s.format, <bytes>s.dictionary.format
        return <bytes>s.format, None

    def child_names(self):
        """The names of a struct schema's children (a table's column names), in order."""
        cdef int64_t i
        names = []
        if self.schema.n_children > 0 and self.schema.children == NULL:
            raise ValueError("Arrow struct schema has children but no child pointers")
        for i in range(self.schema.n_children):
            if self.schema.children[i] == NULL:
                raise ValueError(f"Arrow struct schema has no child schema {i}")
            name = self.schema.children[i].name
            names.append("" if name == NULL else (<bytes>name).decode("utf-8", "replace"))
        return names


cdef class ImportedArray:
    """An ArrowArray moved out of its producer's capsule or stream, released once when this is
    freed; it also keeps the hashes of its dictionaries (one per column, computed once; the
    cache only gains entries)."""
    cdef bc_arrow_array array
    cdef dict dictionaries

    def __cinit__(self):
        self.dictionaries = {}

    def __dealloc__(self):
        if self.array.release != NULL:
            self.array.release(&self.array)

    @property
    def released(self):
        """Whether the producer's array was released (or never imported)."""
        return self.array.release == NULL


def import_array(object schema_capsule, object array_capsule):
    """Move an ``arrow_schema`` and an ``arrow_array`` capsule's structs into (ImportedSchema,
    ImportedArray). Each capsule's struct is marked released (its consumer is now these), so the
    capsules' destructors release nothing; if the array capsule is refused, the schema stays with
    its capsule."""
    cdef bc_arrow_schema *s = <bc_arrow_schema *>PyCapsule_GetPointer(schema_capsule, "arrow_schema")
    cdef bc_arrow_array *a = <bc_arrow_array *>PyCapsule_GetPointer(array_capsule, "arrow_array")
    cdef ImportedSchema schema = ImportedSchema.__new__(ImportedSchema)
    cdef ImportedArray array = ImportedArray.__new__(ImportedArray)
    # both capsules' critical sections (free-threaded CPython; nothing under the GIL): two threads
    # importing one capsule cannot both see it live and both move (and later release) its struct
    with cython.critical_section(schema_capsule, array_capsule):
        if s.release == NULL:
            raise ValueError("the arrow_schema capsule was consumed already (its schema is released)")
        if a.release == NULL:
            raise ValueError("the arrow_array capsule was consumed already (its array is released)")
        memcpy(&schema.schema, s, sizeof(bc_arrow_schema))
        s.release = NULL
        memcpy(&array.array, a, sizeof(bc_arrow_array))
        a.release = NULL
    return schema, array


cdef str stream_error(bc_arrow_stream *stream, int code, str step):
    cdef const char *message = NULL
    if stream.get_last_error != NULL:
        message = stream.get_last_error(stream)
    detail = "" if message == NULL else ": " + (<bytes>message).decode("utf-8", "replace")
    return f"the Arrow stream producer failed in {step} (error code {code}){detail}"


def import_stream(object stream_capsule):
    """Read every batch of an ``arrow_array_stream`` capsule: (ImportedSchema, list of
    ImportedArray). The stream is moved out of its capsule and released exactly once before this
    returns or raises; batches read before a failure are released with their list."""
    cdef bc_arrow_stream *p = <bc_arrow_stream *>PyCapsule_GetPointer(stream_capsule, "arrow_array_stream")
    cdef bc_arrow_stream stream
    # the capsule's critical section (free-threaded CPython): one thread moves the stream out
    with cython.critical_section(stream_capsule):
        if p.release == NULL:
            raise ValueError("the arrow_array_stream capsule was consumed already (its stream is released)")
        memcpy(&stream, p, sizeof(bc_arrow_stream))
        p.release = NULL
    cdef ImportedSchema schema = ImportedSchema.__new__(ImportedSchema)
    cdef ImportedArray array
    cdef int rc
    arrays = []
    try:
        if stream.get_schema == NULL or stream.get_next == NULL:
            raise ValueError("Arrow stream has no get_schema or get_next callback")
        with nogil:
            rc = stream.get_schema(&stream, &schema.schema)
        if rc != 0:
            raise RuntimeError(stream_error(&stream, rc, "get_schema"))
        while True:
            array = ImportedArray.__new__(ImportedArray)
            with nogil:
                rc = stream.get_next(&stream, &array.array)
            if rc != 0:
                raise RuntimeError(stream_error(&stream, rc, "get_next"))
            if array.array.release == NULL:  # the end of the stream
                break
            arrays.append(array)
    finally:
        if stream.release != NULL:
            stream.release(&stream)
    return schema, arrays


cdef int64_t checked_length(bc_arrow_array *a, str what) except -1:
    if a.length < 0 or a.offset < 0 or a.n_buffers < 0 or a.n_children < 0:
        raise ValueError(f"Arrow {what} has a negative length, offset or count "
                         f"(length {a.length}, offset {a.offset})")
    if a.n_buffers > 0 and a.buffers == NULL:
        raise ValueError(f"Arrow {what} has {a.n_buffers} buffers but no buffer pointers")
    return a.length


cdef const uint8_t *validity(bc_arrow_array *a):
    # a bitmap only matters where the producer counts nulls (or does not know: -1)
    if a.n_buffers < 1 or a.null_count == 0:
        return NULL
    return <const uint8_t *>a.buffers[0]


def chunk_length(ImportedSchema schema, ImportedArray owner, int child):
    """Rows of an imported array (child >= 0: of a struct array, whose rows its columns share)."""
    cdef bc_arrow_array *a = &owner.array
    checked_length(a, "array")
    if child < 0:
        return a.length
    if a.n_children != schema.schema.n_children or child >= a.n_children or a.children == NULL:
        raise ValueError(f"Arrow struct array has {a.n_children} children where its schema has "
                         f"{schema.schema.n_children}")
    if validity(a) != NULL:
        raise ValueError("Arrow struct array has null rows: a table's rows must all be present")
    cdef bc_arrow_array *c = a.children[child]
    if c == NULL:
        raise ValueError(f"Arrow struct array has no child array {child}")
    checked_length(c, f"column {child}")
    if c.length < a.offset + a.length:
        raise ValueError(f"Arrow column {child} has {c.length} values for a table of "
                         f"{a.offset + a.length} rows")
    return a.length


cdef int fill_values(ColumnView *v, bc_arrow_schema *s, bc_arrow_array *a, str what) except -1:
    """Point a view at an Arrow string/binary/view/null array's buffers, checked for shape: the
    buffer count of the format, no missing buffer where values are read, a consistent last offset."""
    if s.format == NULL:
        raise ValueError(f"Arrow {what} has no format string")
    cdef bytes fmt = <bytes>s.format
    cdef int64_t end = a.offset + a.length, last
    cdef int64_t i
    checked_length(a, what)
    v.bits = validity(a)
    if fmt == b"n":
        v.mode = COL_NULLS
        return 0
    if fmt in (b"u", b"z", b"U", b"Z"):
        if a.n_buffers != 3:
            raise ValueError(f"Arrow {what} of format {fmt.decode()} has {a.n_buffers} buffers, not 3")
        v.mode = COL_ARROW
        if a.length == 0:
            return 0
        if a.buffers[1] == NULL:
            raise ValueError(f"Arrow {what} has no offsets buffer")
        if fmt in (b"u", b"z"):
            v.off32 = <const int32_t *>a.buffers[1]
            last = v.off32[end]
        else:
            v.off64 = <const int64_t *>a.buffers[1]
            last = v.off64[end]
        if last < 0:
            raise ValueError(f"Arrow {what} has a negative last offset {last} (at index {a.length})")
        v.values = <const uint8_t *>a.buffers[2]
        if v.values == NULL:
            if last > 0:
                raise ValueError(f"Arrow {what} has offsets up to {last} but no values buffer")
            # every value is empty: keys point at a real (empty) place, no arithmetic on NULL
            v.values = NO_VALUES
        v.nvalues = last
        return 0
    if fmt in (b"vu", b"vz"):
        if a.n_buffers < 3:
            raise ValueError(f"Arrow {what} of format {fmt.decode()} has {a.n_buffers} buffers; "
                             "a view array has at least 3 (validity, views, variadic sizes)")
        v.mode = COL_VIEW
        v.nvariadic = a.n_buffers - 3
        v.variadic = <const uint8_t *const *>(a.buffers + 2)
        v.variadic_sizes = <const int64_t *>a.buffers[a.n_buffers - 1]
        if a.length > 0 and a.buffers[1] == NULL:
            raise ValueError(f"Arrow {what} has no views buffer")
        if v.nvariadic > 0 and v.variadic_sizes == NULL:
            raise ValueError(f"Arrow {what} has {v.nvariadic} data buffers but no buffer sizes")
        for i in range(v.nvariadic):
            if v.variadic_sizes[i] < 0:
                raise ValueError(f"Arrow {what} has a negative size for data buffer {i}")
        v.values = <const uint8_t *>a.buffers[1]
        return 0
    raise TypeError(f"Arrow {what} of type {_FORMAT_NAMES.get(fmt, fmt.decode('utf-8', 'replace'))} "
                    "is not a key column; expected string, large_string, binary, large_binary, "
                    "string_view, binary_view, null or a dictionary of these")


cdef class DictionaryHashes:
    """A dictionary's values as a KeyColumn, and their hashes (computed once)."""
    cdef readonly object raw
    cdef readonly object has_key
    cdef KeyColumn values


cdef tuple dictionary_identity(bc_arrow_schema *s, bc_arrow_array *d):
    """What makes two chunks' dictionaries the same one: the value format, offset, length and
    buffer addresses (producers such as polars give every chunk the same dictionary)."""
    cdef int64_t i
    return (<bytes>s.format, d.offset, d.length, d.null_count != 0,
            tuple(<size_t>d.buffers[i] for i in range(d.n_buffers)) if d.buffers != NULL else ())


cdef DictionaryHashes dictionary_hashes(ImportedArray owner, int child, bc_arrow_schema *s,
                                        bc_arrow_array *a, str what, dict shared):
    cached = owner.dictionaries.get(child)
    if cached is not None:
        return cached
    cdef bc_arrow_array *d = a.dictionary
    if d == NULL:
        raise ValueError(f"Arrow {what} is dictionary-encoded but has no dictionary array")
    if s.dictionary.dictionary != NULL:
        raise TypeError(f"Arrow {what} is a dictionary of dictionaries, not a key column")
    checked_length(d, f"dictionary of {what}")
    identity = None
    if shared is not None:
        identity = dictionary_identity(s.dictionary, d)
        cached = shared.get(identity)
        if cached is not None:  # the buffers are this chunk's too: its columns hold this chunk
            return owner.dictionaries.setdefault(child, cached)
    cdef DictionaryHashes h = DictionaryHashes.__new__(DictionaryHashes)
    h.values = KeyColumn.__new__(KeyColumn)
    h.values.source = None  # owner holds h (no cycle); every column reading h holds owner
    fill_values(&h.values.view, s.dictionary, d, f"dictionary of {what}")
    h.values.view.array_offset = d.offset
    h.values.length = d.length
    h.raw = cnp.PyArray_EMPTY(1, [d.length], cnp.NPY_UINT32, 0)
    h.has_key = cnp.PyArray_EMPTY(1, [d.length], cnp.NPY_UINT8, 0)
    status, index = hash_column(h.values, h.raw, None, None, h.has_key, False, True)
    if status == BC_ERR_ARROW_OFFSETS:
        raise ValueError(f"Arrow {what} has a dictionary with corrupt offsets at dictionary index {index}")
    if status == BC_ERR_ARROW_VIEW:
        raise ValueError(f"Arrow {what} has a dictionary whose view at dictionary index {index} has a "
                         "negative length or lies outside its data buffers")
    if status != BC_OK:
        raise ValueError(f"Arrow {what} has a dictionary value that cannot be hashed at dictionary "
                         f"index {index} (status {status})")
    # Both caches only ever gain entries (setdefault: a thread that hashed the same dictionary at
    # the same time keeps the first one stored), so a value read from them without the GIL is
    # never replaced and freed meanwhile.
    if shared is not None:
        h = shared.setdefault(identity, h)
    return owner.dictionaries.setdefault(child, h)


def arrow_c_column(ImportedSchema schema, ImportedArray owner, int child, Py_ssize_t lo, Py_ssize_t hi,
                   dict shared=None):
    """A KeyColumn over rows [lo, hi) of an imported array (child >= 0: of column ``child`` of a
    struct array). The array's structure is checked here (buffer counts, lengths, missing
    buffers); its offsets, views and dictionary indexes as they are read. A dictionary is hashed
    once per chunk, or once per column with ``shared`` (a dict kept by the caller for all the
    chunks of one column, which all stay alive while any of their KeyColumns does)."""
    cdef bc_arrow_schema *s = schema.at(child)
    cdef bc_arrow_array *a = &owner.array
    cdef int64_t n = chunk_length(schema, owner, child)
    cdef int64_t row0 = 0
    what = "array" if child < 0 else f"column {child}"
    if child >= 0:
        row0 = a.offset
        a = a.children[child]
    if lo < 0 or hi < lo or hi > n:
        raise ValueError(f"rows [{lo}, {hi}) are outside the Arrow {what} of {n} rows")
    if s.format == NULL:
        raise ValueError(f"Arrow {what} has no format string")
    cdef KeyColumn col = KeyColumn.__new__(KeyColumn)
    cdef DictionaryHashes h
    col.length = hi - lo
    col.view.array_offset = a.offset + row0 + lo
    if s.dictionary == NULL:
        col.source = owner
        fill_values(&col.view, s, a, what)
        return col
    index_format = _INDEX_FORMATS.get(<bytes>s.format)
    if index_format is None:
        raise TypeError(f"Arrow {what} has dictionary indexes of format {(<bytes>s.format).decode()}; "
                        "expected an integer type")
    checked_length(a, what)
    if a.n_buffers != 2:
        raise ValueError(f"Arrow {what} (dictionary indexes) has {a.n_buffers} buffers, not 2")
    if a.length > 0 and a.buffers[1] == NULL:
        raise ValueError(f"Arrow {what} has no dictionary index buffer")
    h = dictionary_hashes(owner, child, s, a, what, shared)
    col.source = (owner, h)
    col.view.mode = COL_DICT
    col.view.bits = validity(a)
    col.view.values = <const uint8_t *>a.buffers[1]
    col.view.index_width, col.view.index_signed = index_format
    col.view.dict_raw = <const uint32_t *>cnp.PyArray_DATA(h.raw)
    col.view.dict_has = <const uint8_t *>cnp.PyArray_DATA(h.has_key)
    col.view.dict_len = h.values.length
    col.view.dict_view = &h.values.view
    return col


# ----------------------------------------------------------------------------------------------
# export


cdef struct ChildData:      # an exported column: its numpy owner and its buffer pointers
    PyObject *owner
    const void *buffers[2]


cdef struct ParentData:     # an exported struct array: its children (moved or not)
    int64_t n
    bc_arrow_array *storage
    bc_arrow_array **pointers
    const void *buffers[1]


cdef struct SchemaData:     # an exported schema: its copied name and its children
    char *name
    int64_t n
    bc_arrow_schema *storage
    bc_arrow_schema **pointers


cdef void release_child(bc_arrow_array *a) noexcept nogil:
    cdef ChildData *p = <ChildData *>a.private_data
    if a.release == NULL:
        return
    with gil:
        Py_XDECREF(p.owner)
    free(p)
    a.release = NULL


cdef void release_parent(bc_arrow_array *a) noexcept nogil:
    cdef ParentData *p = <ParentData *>a.private_data
    cdef int64_t i
    if a.release == NULL:
        return
    for i in range(p.n):
        if p.storage[i].release != NULL:  # a child the consumer moved away is released by it
            p.storage[i].release(&p.storage[i])
    free(p.storage)
    free(p.pointers)
    free(p)
    a.release = NULL


cdef void release_schema(bc_arrow_schema *s) noexcept nogil:
    cdef SchemaData *p = <SchemaData *>s.private_data
    cdef int64_t i
    if s.release == NULL:
        return
    for i in range(p.n):
        if p.storage[i].release != NULL:
            p.storage[i].release(&p.storage[i])
    free(p.storage)
    free(p.pointers)
    free(p.name)
    free(p)
    s.release = NULL


cdef char *copy_text(const char *text) noexcept nogil:
    cdef size_t n = strlen(text)
    cdef char *out = <char *>malloc(n + 1)
    if out != NULL:
        memcpy(out, text, n + 1)
    return out


cdef int make_schema(bc_arrow_schema *out, const char *format, const char *name, int64_t n,
                     const char **formats, const char **names) noexcept nogil:
    """A schema (format, name) with n children (formats[i], names[i]), all non-nullable; every
    string copied, so it outlives its maker. Returns 0 or ENOMEM (out untouched)."""
    cdef SchemaData *p = <SchemaData *>calloc(1, sizeof(SchemaData))
    cdef int64_t i
    if p == NULL:
        return ENOMEM
    p.n = n
    p.name = copy_text(name)
    p.storage = <bc_arrow_schema *>calloc(n if n > 0 else 1, sizeof(bc_arrow_schema))
    p.pointers = <bc_arrow_schema **>calloc(n if n > 0 else 1, sizeof(bc_arrow_schema *))
    if p.name == NULL or p.storage == NULL or p.pointers == NULL:
        free(p.name)
        free(p.storage)
        free(p.pointers)
        free(p)
        return ENOMEM
    for i in range(n):
        if make_schema(&p.storage[i], formats[i], names[i], 0, NULL, NULL) != 0:
            p.n = i
            out.release = release_schema
            out.private_data = p
            release_schema(out)
            return ENOMEM
        p.pointers[i] = &p.storage[i]
    out.format = format
    out.name = p.name
    out.metadata = NULL
    out.flags = 0
    out.n_children = n
    out.children = p.pointers if n > 0 else NULL
    out.dictionary = NULL
    out.release = release_schema
    out.private_data = p
    return 0


cdef class Export:
    """Numpy columns to export as one Arrow struct array (a record batch): names, formats (static
    C strings), the arrays (one per column, each one buffer of ``length`` values)."""
    cdef int64_t length
    cdef int64_t n
    cdef list owners
    cdef const char **formats
    cdef const char **names
    cdef list name_bytes

    def __dealloc__(self):
        free(self.formats)
        free(self.names)

    cdef int make_array(self, bc_arrow_array *out) except -1:
        """The struct array over the columns; each child holds its numpy owner."""
        cdef ParentData *p = <ParentData *>calloc(1, sizeof(ParentData))
        cdef ChildData *c
        cdef int64_t i
        if p == NULL:
            raise MemoryError()
        p.storage = <bc_arrow_array *>calloc(self.n if self.n > 0 else 1, sizeof(bc_arrow_array))
        p.pointers = <bc_arrow_array **>calloc(self.n if self.n > 0 else 1, sizeof(bc_arrow_array *))
        p.buffers[0] = NULL
        out.release = release_parent
        out.private_data = p
        if p.storage == NULL or p.pointers == NULL:
            release_parent(out)
            raise MemoryError()
        for i in range(self.n):
            c = <ChildData *>malloc(sizeof(ChildData))
            if c == NULL:
                release_parent(out)
                raise MemoryError()
            owner = self.owners[i]
            Py_INCREF(owner)
            c.owner = <PyObject *>owner
            c.buffers[0] = NULL
            c.buffers[1] = cnp.PyArray_DATA(<cnp.ndarray>owner)
            p.storage[i].length = self.length
            p.storage[i].null_count = 0
            p.storage[i].offset = 0
            p.storage[i].n_buffers = 2
            p.storage[i].n_children = 0
            p.storage[i].buffers = c.buffers
            p.storage[i].children = NULL
            p.storage[i].dictionary = NULL
            p.storage[i].release = release_child
            p.storage[i].private_data = c
            p.pointers[i] = &p.storage[i]
            p.n = i + 1
        out.length = self.length
        out.null_count = 0
        out.offset = 0
        out.n_buffers = 1
        out.n_children = self.n
        out.buffers = p.buffers
        out.children = p.pointers if self.n > 0 else NULL
        out.dictionary = NULL
        return 0

    cdef int make_schema(self, bc_arrow_schema *out) noexcept nogil:
        return make_schema(out, "+s", "", self.n, self.formats, self.names)


cdef const char *static_format(str fmt) except NULL:
    if fmt == "I":
        return "I"
    if fmt == "S":
        return "S"
    if fmt == "i":
        return "i"
    if fmt == "l":
        return "l"
    if fmt == "b":
        return "b"
    if fmt == "C":
        return "C"
    raise ValueError(f"unsupported export format {fmt!r}")


def make_export(list columns, int64_t length):
    """An Export of columns [(name, format, 1-D C-contiguous numpy array)], all of ``length``
    values (format "b": a bit-packed boolean buffer of (length + 7) // 8 bytes)."""
    cdef Export e = Export.__new__(Export)
    cdef Py_ssize_t i
    e.length = length
    e.n = len(columns)
    e.owners = []
    e.name_bytes = []
    e.formats = <const char **>calloc(e.n if e.n > 0 else 1, sizeof(char *))
    e.names = <const char **>calloc(e.n if e.n > 0 else 1, sizeof(char *))
    if e.formats == NULL or e.names == NULL:
        raise MemoryError()
    for i, (name, fmt, array) in enumerate(columns):
        arr = <cnp.ndarray?>array
        if arr.ndim != 1 or not cnp.PyArray_IS_C_CONTIGUOUS(arr):
            raise ValueError(f"column {name!r} is not a 1-D C-contiguous array")
        encoded = name.encode("utf-8")
        e.name_bytes.append(encoded)
        e.names[i] = encoded
        e.formats[i] = static_format(fmt)
        e.owners.append(arr)
    return e


cdef void schema_capsule_free(object capsule) noexcept:
    cdef bc_arrow_schema *s = <bc_arrow_schema *>PyCapsule_GetPointer(capsule, "arrow_schema")
    if s.release != NULL:
        s.release(s)
    free(s)


cdef void array_capsule_free(object capsule) noexcept:
    cdef bc_arrow_array *a = <bc_arrow_array *>PyCapsule_GetPointer(capsule, "arrow_array")
    if a.release != NULL:
        a.release(a)
    free(a)


cdef void stream_capsule_free(object capsule) noexcept:
    cdef bc_arrow_stream *st = <bc_arrow_stream *>PyCapsule_GetPointer(capsule, "arrow_array_stream")
    if st.release != NULL:
        st.release(st)
    free(st)


def export_array(Export e):
    """(arrow_schema capsule, arrow_array capsule) of the export's struct array."""
    cdef bc_arrow_schema *s = <bc_arrow_schema *>calloc(1, sizeof(bc_arrow_schema))
    if s == NULL:
        raise MemoryError()
    if e.make_schema(s) != 0:
        free(s)
        raise MemoryError()
    schema_capsule = PyCapsule_New(s, "arrow_schema", schema_capsule_free)
    cdef bc_arrow_array *a = <bc_arrow_array *>calloc(1, sizeof(bc_arrow_array))
    if a == NULL:
        raise MemoryError()
    try:
        e.make_array(a)
    except BaseException:
        free(a)
        raise
    return schema_capsule, PyCapsule_New(a, "arrow_array", array_capsule_free)


cdef struct StreamData:     # an exported one-batch stream
    int64_t n
    const char **formats
    char **names
    bc_arrow_array batch    # moved out by the first get_next
    int taken


cdef int stream_get_schema(bc_arrow_stream *st, bc_arrow_schema *out) noexcept nogil:
    cdef StreamData *p = <StreamData *>st.private_data
    return make_schema(out, "+s", "", p.n, p.formats, <const char **>p.names)


cdef int stream_get_next(bc_arrow_stream *st, bc_arrow_array *out) noexcept nogil:
    cdef StreamData *p = <StreamData *>st.private_data
    if p.taken:
        out.release = NULL  # the end of the stream
        return 0
    memcpy(out, &p.batch, sizeof(bc_arrow_array))
    p.batch.release = NULL
    p.taken = 1
    return 0


cdef const char *stream_last_error(bc_arrow_stream *st) noexcept nogil:
    return NULL


cdef void release_stream(bc_arrow_stream *st) noexcept nogil:
    cdef StreamData *p = <StreamData *>st.private_data
    cdef int64_t i
    if st.release == NULL:
        return
    if p.batch.release != NULL:
        p.batch.release(&p.batch)
    for i in range(p.n):
        free(p.names[i])
    free(p.names)
    free(p.formats)
    free(p)
    st.release = NULL


def export_stream(Export e):
    """An arrow_array_stream capsule of one batch: the export's struct array."""
    cdef StreamData *p = <StreamData *>calloc(1, sizeof(StreamData))
    cdef int64_t i
    if p == NULL:
        raise MemoryError()
    cdef bc_arrow_stream *st = <bc_arrow_stream *>calloc(1, sizeof(bc_arrow_stream))
    if st == NULL:
        free(p)
        raise MemoryError()
    st.get_schema = stream_get_schema
    st.get_next = stream_get_next
    st.get_last_error = stream_last_error
    st.release = release_stream
    st.private_data = p
    capsule = PyCapsule_New(st, "arrow_array_stream", stream_capsule_free)  # frees on any failure below
    p.n = e.n
    p.formats = <const char **>calloc(e.n if e.n > 0 else 1, sizeof(char *))
    p.names = <char **>calloc(e.n if e.n > 0 else 1, sizeof(char *))
    if p.formats == NULL or p.names == NULL:
        p.n = 0
        raise MemoryError()
    for i in range(e.n):
        p.formats[i] = e.formats[i]
        p.names[i] = copy_text(e.names[i])
        if p.names[i] == NULL:
            raise MemoryError()
    e.make_array(&p.batch)
    return capsule
