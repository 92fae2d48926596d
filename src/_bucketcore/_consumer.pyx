# cython: language_level=3
"""The per-message calls of the Stream consumer's state (docs/design.md, "Consumer rules") in C.

``SegmentTrack`` is one open per-segment consumer: its subscribe, drain status, the shape of its
message ids and its delivered-but-unacked ids (an array kept ascending from ``head`` on, with a
live flag per slot: acked ids are tombstones, skipped lazily). Deliveries mostly arrive in
position order and acks mostly from the oldest, so both are O(1) amortised; the array is shifted
down instead of grown when its front is free, so a steady stream never grows it.

``ConsumerCore`` holds the open tracks by segment id and answers ``delivered`` / ``acked`` for the
common case (an int segment id, an int or a tuple-of-ints message id of the track's shape, an open
segment) without calling back into Python; any other case goes to the subclass's
``_delivered_checked`` / ``_acked_checked``, which validate and raise the errors.

Message ids are ints or tuples of ints (validated before they are stored), so the array's
references cannot form cycles and need no garbage-collector traversal.

Free-threaded interpreters: every method of a ``SegmentTrack`` runs in a critical section on the
track, and the tracks take only exact ints and tuples of exact ints, so comparing ids runs no
Python code and cannot suspend that section while an array slot is read. ``ConsumerCore`` takes
strong references to its dict and to a track before using them, and calls back into Python
(``_finish_drain``, the checked paths) outside any track's section.
"""

cimport cython
from cpython.list cimport PyList_New, PyList_SET_ITEM
from cpython.mem cimport PyMem_Free, PyMem_Realloc
from cpython.object cimport Py_EQ, Py_LT, PyObject, PyObject_RichCompareBool, PyTypeObject
from cpython.ref cimport Py_DECREF, Py_INCREF
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE, PyTuple_New, PyTuple_SET_ITEM
from libc.string cimport memmove


cdef extern from "Python.h":
    PyObject *PyType_GenericAlloc(PyTypeObject *type, Py_ssize_t nitems) except NULL
    int PyObject_GenericSetAttr(object obj, object name, object value) except -1


cdef type _individual_ack = None     # bucketcore.consumer.IndividualAck, set by bind()
cdef str _SEGMENT_ID = "segment_id"
cdef str _MESSAGE_IDS = "message_ids"


def bind(type individual_ack) -> None:
    """Give the kernel the command class ``acked`` returns (a slotted dataclass of
    ``segment_id`` and ``message_ids``); consumer.py calls it once at import."""
    global _individual_ack
    _individual_ack = individual_ack


cdef inline object new_individual_ack(object segment_id, object message_id):
    """``IndividualAck(segment_id, (message_id,))`` built without running ``__init__`` (the
    values are validated already; a frozen dataclass's ``__init__`` sets fields the slow way)."""
    cdef object ids = PyTuple_New(1)
    Py_INCREF(message_id)
    PyTuple_SET_ITEM(ids, 0, message_id)
    cdef object ack = <object>PyType_GenericAlloc(<PyTypeObject *>_individual_ack, 0)
    Py_DECREF(ack)       # the cast took a second reference to the new object
    PyObject_GenericSetAttr(ack, _SEGMENT_ID, segment_id)
    PyObject_GenericSetAttr(ack, _MESSAGE_IDS, ids)
    return ack


cdef inline Py_ssize_t id_shape(object message_id):
    """0 for an exact int, the length for a non-empty tuple of exact ints, -1 for anything else
    (left to the checked path, which accepts numpy ints and tuple subclasses or raises)."""
    cdef Py_ssize_t n, i
    if type(message_id) is int:
        return 0
    if type(message_id) is tuple:
        n = PyTuple_GET_SIZE(message_id)
        if n == 0:
            return -1
        for i in range(n):
            if type(<object>PyTuple_GET_ITEM(message_id, i)) is not int:
                return -1
        return n
    return -1


cdef int check_exact_id(object message_id, str what) except -1:
    """Refuse anything but an exact int or a non-empty tuple of exact ints: comparing those runs
    no Python code (the checked paths of bucketcore.consumer normalise every accepted id so)."""
    if id_shape(message_id) < 0:
        raise TypeError(f"{what} must be an int or a non-empty tuple of ints (exactly), not "
                        f"{type(message_id).__name__} {message_id!r}")
    return 0


cdef class SegmentTrack:
    """One open per-segment consumer: the ``assigned`` segment, its ``subscribe``, its drain
    reason (None while it delivers) and its delivered-but-unacked ids.

    The ids live in one array, ascending from ``head`` to ``length``, each with a live flag (an
    acked id stays as a tombstone until the front passes it or the array is compacted); the
    array is the only index, so a delivery after the newest id and an ack of the oldest cost
    one comparison, anything else a binary search.

    Parameters
    ----------
    assigned : AssignedSegment
    subscribe : Subscribe
        The subscribe the assignment calls for.
    """

    cdef readonly object assigned
    cdef readonly object subscribe
    cdef public object drain_reason
    cdef Py_ssize_t shape          # -1 until the first delivery fixes it
    cdef PyObject **order          # owned references; [head, length) ascending
    cdef unsigned char *alive      # per slot: 1 while delivered and unacked
    cdef Py_ssize_t head, length, capacity, count

    def __cinit__(self, object assigned, object subscribe):
        self.assigned = assigned
        self.subscribe = subscribe
        self.drain_reason = None
        self.shape = -1
        self.order = NULL
        self.alive = NULL
        self.head = self.length = self.capacity = self.count = 0

    def __dealloc__(self):
        cdef Py_ssize_t i
        for i in range(self.head, self.length):
            Py_DECREF(<object>self.order[i])
        PyMem_Free(self.order)
        PyMem_Free(self.alive)

    @property
    @cython.critical_section
    def id_shape(self) -> int | None:
        """0 for int ids, k for tuples of k ints; None before the first delivery."""
        return None if self.shape < 0 else self.shape

    @id_shape.setter
    @cython.critical_section
    def id_shape(self, value: int) -> None:
        if type(value) is not int or value < 0:
            raise ValueError(f"id_shape must be an int >= 0, not {value!r}")
        self.shape = value

    @cython.critical_section
    def __len__(self) -> int:
        return self.count

    # -- the ascending array ---------------------------------------------------------------
    cdef int room(self) except -1:
        """Make room for one more id at the end: shift the array down when its front is at least
        half free, grow it otherwise."""
        cdef Py_ssize_t used = self.length - self.head
        cdef Py_ssize_t want
        cdef PyObject **grown
        cdef unsigned char *flags
        if self.length < self.capacity:
            return 0
        if self.head > 0 and self.head >= self.capacity // 2:
            memmove(self.order, self.order + self.head, used * sizeof(PyObject *))
            memmove(self.alive, self.alive + self.head, used)
            self.head = 0
            self.length = used
            return 0
        want = 16 if self.capacity < 8 else self.capacity * 2
        grown = <PyObject **>PyMem_Realloc(self.order, want * sizeof(PyObject *))
        if grown == NULL:
            raise MemoryError("consumer state: no memory for the unacked ids")
        self.order = grown
        flags = <unsigned char *>PyMem_Realloc(self.alive, want)
        if flags == NULL:
            raise MemoryError("consumer state: no memory for the unacked ids")
        self.alive = flags
        self.capacity = want
        return 0

    cdef Py_ssize_t find(self, object m) except -2:
        """The slot in [head, length) holding an id equal to ``m`` (live or not), else -1."""
        cdef Py_ssize_t lo = self.head, hi = self.length
        if lo == hi:
            return -1
        if PyObject_RichCompareBool(<object>self.order[lo], m, Py_EQ):
            return lo           # the oldest: the common ack
        lo = self.bisect(m, False)
        if lo < hi and PyObject_RichCompareBool(<object>self.order[lo], m, Py_EQ):
            return lo
        return -1

    cdef Py_ssize_t bisect(self, object m, bint right) except -2:
        """Index in [head, length) where ``m`` goes: before equal ids (left) or after them (right)."""
        cdef Py_ssize_t lo = self.head, hi = self.length, mid
        while lo < hi:
            mid = (lo + hi) // 2
            if right:
                if PyObject_RichCompareBool(m, <object>self.order[mid], Py_LT):
                    hi = mid
                else:
                    lo = mid + 1
            else:
                if PyObject_RichCompareBool(<object>self.order[mid], m, Py_LT):
                    lo = mid + 1
                else:
                    hi = mid
        return lo

    cdef int tidy(self) except -1:
        """Drop acked ids from the front; compact once tombstones outnumber the live ids."""
        cdef Py_ssize_t i, kept
        while self.head < self.length and not self.alive[self.head]:
            Py_DECREF(<object>self.order[self.head])
            self.head += 1
        if self.head == self.length:
            self.head = self.length = 0
        elif self.length - self.head > 2 * self.count + 64:
            kept = 0
            for i in range(self.head, self.length):
                if self.alive[i]:
                    self.order[kept] = self.order[i]
                    self.alive[kept] = 1
                    kept += 1
                else:
                    Py_DECREF(<object>self.order[i])
            self.head = 0
            self.length = kept
        return 0

    cdef int add_id(self, object m) except -1:
        """Track ``m``; 1 if it was not tracked yet, 0 for a redelivery of a tracked id."""
        cdef Py_ssize_t index, head
        if self.head == self.length or PyObject_RichCompareBool(<object>self.order[self.length - 1], m, Py_LT):
            self.room()
            index = self.length
        else:
            index = self.bisect(m, False)
            if index < self.length and PyObject_RichCompareBool(<object>self.order[index], m, Py_EQ):
                if self.alive[index]:
                    return 0
                self.alive[index] = 1       # its tombstone is still in place: live again
                self.count += 1
                return 1
            head = self.head
            self.room()
            index -= head - self.head      # room() may have shifted the array down
            memmove(self.order + index + 1, self.order + index, (self.length - index) * sizeof(PyObject *))
            memmove(self.alive + index + 1, self.alive + index, self.length - index)
        Py_INCREF(m)
        self.order[index] = <PyObject *>m
        self.alive[index] = 1
        self.length += 1
        self.count += 1
        return 1

    cdef int remove_id(self, object m) except -1:
        """Untrack ``m``; 1 if it was tracked, 0 otherwise."""
        cdef Py_ssize_t index = self.find(m)
        if index < 0 or not self.alive[index]:
            return 0
        self.alive[index] = 0
        self.count -= 1
        self.tidy()
        return 1

    # -- Python-facing ---------------------------------------------------------------------
    @cython.critical_section
    def add(self, message_id: object) -> bool:
        """Track a delivered id (already validated and of this track's shape).

        Parameters
        ----------
        message_id : int or tuple of int

        Returns
        -------
        bool
            False if it was tracked already (a redelivery), True otherwise.

        Raises
        ------
        TypeError
            ``message_id`` is not an exact int or a non-empty tuple of exact ints.
        """
        check_exact_id(message_id, "message_id")
        return self.add_id(message_id) == 1

    @cython.critical_section
    def remove(self, message_id: object) -> bool:
        """Untrack an acked id.

        Parameters
        ----------
        message_id : int or tuple of int

        Returns
        -------
        bool
            False if it was not tracked.

        Raises
        ------
        TypeError
            As :meth:`add`.
        """
        check_exact_id(message_id, "message_id")
        return self.remove_id(message_id) == 1

    @cython.critical_section
    def take_upto(self, position: object) -> list:
        """Untrack and return (ascending) the tracked ids at or before ``position``.

        Parameters
        ----------
        position : int or tuple of int

        Returns
        -------
        list

        Raises
        ------
        TypeError
            As :meth:`add`.
        """
        cdef Py_ssize_t end, i
        cdef list taken = []
        check_exact_id(position, "position")
        end = self.bisect(position, True)
        for i in range(self.head, end):
            if self.alive[i]:
                taken.append(<object>self.order[i])
                self.alive[i] = 0
                self.count -= 1
        self.tidy()
        return taken

    @cython.critical_section
    def ascending(self) -> list:
        """The tracked ids, ascending.

        Returns
        -------
        list
        """
        cdef Py_ssize_t i
        cdef list out = []
        for i in range(self.head, self.length):
            if self.alive[i]:
                out.append(<object>self.order[i])
        return out


cdef class ConsumerCore:
    """The per-message half of the Stream consumer's state: ``_open`` maps segment ids to their
    ``SegmentTrack``; ``delivered`` and ``acked`` run in C for the common case. A subclass
    provides ``_delivered_checked``, ``_acked_checked`` and ``_finish_drain``."""

    cdef public dict _open

    def __cinit__(self, *args: object, **kwargs: object):
        self._open = {}

    def delivered(self, object segment_id, object message_id) -> bool:
        """Record that the application was handed ``message_id`` of ``segment_id``.

        Parameters
        ----------
        segment_id : int
        message_id : int or tuple of int
            A position in segment order; every id of one subscription has the same shape.

        Returns
        -------
        bool
            False for a redelivery of a message still unacked (tracked once), True otherwise; a
            redelivery of an already acked message (the broker did not see the ack) is tracked anew.

        Raises
        ------
        TypeError, ValueError
            A segment id that is not an int >= 0, or a message id that is not an int or tuple of ints.
        ConsumerStateError
            The segment is not open or is draining (delivery must stop at a Drain), or the id's shape
            differs from the subscription's.
        """
        cdef Py_ssize_t shape = id_shape(message_id)
        cdef SegmentTrack sub = None
        cdef int added = -1
        if shape >= 0 and type(segment_id) is int:
            sub = self._track(segment_id)
            if sub is not None:
                with cython.critical_section(sub):
                    if sub.drain_reason is None and (sub.shape == shape or sub.shape < 0):
                        sub.shape = shape
                        added = sub.add_id(message_id)
                if added >= 0:
                    return added == 1
        return self._delivered_checked(segment_id, message_id)

    def acked(self, object segment_id, object message_id) -> list:
        """The application acked one delivered message.

        Parameters
        ----------
        segment_id : int
        message_id : int or tuple of int

        Returns
        -------
        list of IndividualAck, Close or Subscribe
            The IndividualAck to send, then any follow-up Close / Subscribe if this completed a drain.

        Raises
        ------
        TypeError, ValueError
            As :meth:`delivered`.
        ConsumerStateError
            The message is not delivered-and-unacked on an open segment.
        """
        cdef Py_ssize_t shape = id_shape(message_id)
        cdef SegmentTrack sub = None
        cdef object ack
        cdef list result
        cdef bint removed = False, drained = False
        if shape >= 0 and type(segment_id) is int:
            sub = self._track(segment_id)
            if sub is not None:
                with cython.critical_section(sub):
                    if sub.shape == shape and sub.remove_id(message_id):
                        removed = True
                        drained = sub.drain_reason is not None and sub.count == 0
                if removed:
                    ack = new_individual_ack(segment_id, message_id)
                    if drained:
                        return [ack, *self._finish_drain(segment_id)]
                    result = PyList_New(1)
                    Py_INCREF(ack)
                    PyList_SET_ITEM(result, 0, ack)
                    return result
        return self._acked_checked(segment_id, message_id)

    cdef SegmentTrack _track(self, object segment_id):
        """The open track of an int segment id (a strong reference), else None."""
        cdef dict opened
        with cython.critical_section(self):
            opened = self._open
        return opened.get(segment_id)
