# cython: language_level=3
"""The kernel of bucketcore.entries: ``Entry``, one stamped entry.

The batcher kernel (_batcher) allocates one per emitted entry and fills its fields directly
(_entry.pxd): the positions and payload references of up to NEAR_POSITIONS messages in the entry
itself, of more in two malloc blocks. The payload list and the numpy positions are made when first
read.
"""

cimport cython
from cpython.list cimport PyList_New
from cpython.object cimport PyObject
from cpython.ref cimport Py_DECREF
from libc.stdint cimport int64_t
from libc.stdlib cimport free
from libc.string cimport memcpy

cimport numpy as cnp
import numpy as np

from _bucketcore._columns cimport empty_column

cnp.import_array()

cdef extern from "Python.h":
    void PyList_SET_ITEM(object lst, Py_ssize_t i, PyObject *o)   # steals the reference


cdef inline PyObject **held_refs(Entry e) noexcept:
    """Where the entry's held payload references are."""
    return e.far_payloads if e.far_payloads != NULL else e.near_payloads


cdef inline void forget_held(Entry e) noexcept:
    """Hold nothing any more (the references were moved or released)."""
    e.held = 0
    free(e.far_payloads)
    e.far_payloads = NULL


cdef void drop_held(Entry e) noexcept:
    """Release the payload references held in C (the list replaces them, or the entry goes)."""
    cdef int64_t i
    cdef PyObject **refs = held_refs(e)
    for i in range(e.held):
        Py_DECREF(<object>refs[i])
    forget_held(e)


@cython.freelist(256)
cdef class Entry:
    """One stamped entry: a batch of messages of one (segment, bucket), in send order.

    Parameters
    ----------
    segment_id, bucket : int
        The segment the entry belongs to and its bucket index in that segment's boundary list.
    hash_min, hash_max : int
        The stamp: the smallest and largest bucket hash of its messages.
    message_indices : one-dimensional array or sequence of non-negative integers
        Positions in the input (:func:`bucket_entries`) or in the batcher's stream since it was
        created (:class:`EntryBucketBatcher`), kept as int64: other integer arrays and lists are
        converted; anything else raises TypeError, a negative position ValueError.
    nbytes : int
        Payload bytes of its messages (0 when :func:`bucket_entries` had no sizes).
    payloads : list or None
        The payloads, for entries from a batcher; ``None`` for an :class:`EntryTable` row.
    """

    def __init__(self, int64_t segment_id, int64_t bucket, int64_t hash_min, int64_t hash_max,
                 object message_indices, int64_t nbytes, object payloads=None):
        self.segment_id = segment_id
        self.bucket = bucket
        self.hash_min = hash_min
        self.hash_max = hash_max
        self.message_indices = message_indices
        self.nbytes = nbytes
        self.payloads = payloads

    @property
    def payloads(self):
        """The messages' payloads (a list, made on first read and kept), or ``None`` for an
        :class:`EntryTable` row."""
        cdef list made
        cdef int64_t i
        cdef PyObject **refs
        # made once, whichever thread reads first (free-threaded builds: the others wait)
        with cython.critical_section(self):
            if self.held:
                made = PyList_New(self.held)
                refs = held_refs(self)
                for i in range(self.held):  # the held references move into the list
                    PyList_SET_ITEM(made, i, refs[i])
                forget_held(self)
                self.payload_list = made
            return self.payload_list

    @payloads.setter
    def payloads(self, object value) -> None:
        with cython.critical_section(self):
            drop_held(self)
            self.payload_list = value

    @property
    def message_indices(self):
        """The entry's message positions (int64), in send order."""
        cdef cnp.ndarray arr
        # made once, whichever thread reads first (free-threaded builds: the others wait)
        with cython.critical_section(self):
            if self.indices is None:
                arr = empty_column(self.n, cnp.NPY_INT64)
                if self.positions != NULL:
                    memcpy(cnp.PyArray_DATA(arr), self.positions, self.n * sizeof(int64_t))
                    free(self.positions)
                    self.positions = NULL
                elif 0 < self.n <= NEAR_POSITIONS:
                    memcpy(cnp.PyArray_DATA(arr), self.near, self.n * sizeof(int64_t))
                self.indices = arr
            return self.indices

    @message_indices.setter
    def message_indices(self, object value) -> None:
        value = message_positions(value)
        with cython.critical_section(self):
            free(self.positions)
            self.positions = NULL
            self.indices = value

    @property
    def count(self) -> int:
        """Number of messages in the entry."""
        cdef object indices
        cdef Py_ssize_t n
        with cython.critical_section(self):  # message_indices may be set meanwhile
            indices = self.indices
            n = self.n
        return n if indices is None else int(indices.shape[0])

    def __len__(self) -> int:
        return self.count

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Entry):
            return NotImplemented
        cdef Entry o = <Entry>other
        return (
            self.segment_id == o.segment_id
            and self.bucket == o.bucket
            and self.hash_min == o.hash_min
            and self.hash_max == o.hash_max
            and self.nbytes == o.nbytes
            and bool(np.array_equal(self.message_indices, o.message_indices))
            and self.payloads == o.payloads
        )

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self) -> int:
        raise TypeError("unhashable type: 'Entry'")

    def __reduce__(self) -> tuple:
        return Entry, (self.segment_id, self.bucket, self.hash_min, self.hash_max, self.message_indices,
                       self.nbytes, self.payloads)

    def __repr__(self) -> str:
        return (
            f"Entry(segment_id={self.segment_id}, bucket={self.bucket}, "
            f"hash_min={self.hash_min:#06x}, hash_max={self.hash_max:#06x}, count={self.count}, "
            f"nbytes={self.nbytes})"
        )


cdef Entry blank_entry():
    return Entry.__new__(Entry)


cdef object message_positions(object value):
    """An entry's message positions as a one-dimensional int64 array: such an array as given, other
    integer arrays and sequences of ints converted; anything else, or a negative position, is
    refused naming it."""
    cdef cnp.ndarray arr
    cdef Py_ssize_t i, n, stride
    cdef const char *data
    cdef int64_t position
    if not (cnp.PyArray_Check(value) and cnp.PyArray_NDIM(<cnp.ndarray>value) == 1
            and cnp.PyArray_TYPE(<cnp.ndarray>value) == cnp.NPY_INT64):
        converted = np.asarray(value)
        if converted.ndim != 1 or (converted.shape[0] and converted.dtype.kind not in "iu"):
            raise TypeError(
                "message_indices must be a one-dimensional sequence of integers, got "
                f"{type(value).__name__} of shape {converted.shape} and dtype {converted.dtype}"
            )
        if converted.shape[0] and converted.dtype.kind == "u" and int(converted.max()) > np.iinfo(np.int64).max:
            raise ValueError(f"message_indices: position {int(converted.argmax())} is past the int64 range")
        value = converted.astype(np.int64)
    arr = <cnp.ndarray>value
    n = cnp.PyArray_DIM(arr, 0)
    stride = cnp.PyArray_STRIDE(arr, 0)
    data = <const char *>cnp.PyArray_DATA(arr)
    for i in range(n):
        position = (<const int64_t *>(data + i * stride))[0]
        if position < 0:
            raise ValueError(f"message_indices: position {i} is negative ({position})")
    return arr


ctypedef void (*destructor)(PyObject *) noexcept

cdef extern from "Python.h":
    ctypedef struct PyTypeObject:
        destructor tp_dealloc


# Entry's tp_dealloc is entry_dealloc, which releases what the entry holds in C and then calls
# the one Cython generated (it clears the object fields and frees or pools the entry). A
# __dealloc__ would do the same inside a save and restore of the current exception, which Cython
# adds for code that may raise; this release cannot: it frees a block and drops references to
# bytes or read-only views of bytes (the batcher's frozen_payload), whose release runs no Python code and
# allocates nothing, so no collection can run before the generated dealloc untracks the entry.
cdef destructor generated_entry_dealloc = (<PyTypeObject *>Entry).tp_dealloc


cdef void entry_dealloc(PyObject *o) noexcept:
    drop_held(<Entry>o)
    free((<Entry>o).positions)
    generated_entry_dealloc(o)


(<PyTypeObject *>Entry).tp_dealloc = entry_dealloc
