# cython: language_level=3
"""Broker dispatch kernels: route whole entries to bucket owners, test stamps against a boundary list.

Inputs arrive validated and converted by :mod:`bucketcore.dispatch` (contiguous ``uint16`` stamps,
``uint32`` key hashes, ``uint8`` views of bool masks). The loops run with the GIL released and
build no Python object per entry. Buckets come from a boundary list's 65536-entry lookup table
(``Buckets.lookup_table()``: one load per entry, where a search mispredicts on random stamps), or
from the shared ``bc_bucket_of`` search for a few entries (``fits`` without a table).

Free-threaded interpreters: every method that reads or changes an object's state runs in a
critical section on that object (``DispatchCore``'s on the core, so the Dispatcher's C methods
take the core's section around their work on it); nothing in such a section calls into Python
code or into numpy calls that may release the thread state (scratch is sorted with ``qsort``,
the log is moved with ``memmove``), so a section is never suspended half-way; and calls back
into Python (``_forget``, the general paths) happen outside every section. ``BucketMoves`` and a
built ``Deliveries`` never change, and each object refuses a second ``__init__``.
"""

cimport cython
from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t

cimport numpy as cnp

from cpython.list cimport PyList_GET_ITEM
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.ref cimport Py_DECREF, Py_INCREF
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_FromStringAndSize
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from cpython.number cimport PyNumber_Index as operator_index
from cpython.object cimport Py_EQ, Py_NE, PyObject, PyObject_RichCompare, PyTypeObject
from libc.stdlib cimport qsort
from libc.string cimport memcpy, memmove, memset

from _bucketcore._status cimport *
import numpy as np

cnp.import_array()

cdef extern from "lookup.h" nogil:
    uint32_t bc_bucket_of(const uint16_t *splits, uint32_t n, uint32_t h)


cdef extern from *:
    """
    /* Give buckets [start, stop) to consumer key `key` (-1: nobody): set their owner and their
       ready flag (owned, and held by nobody or by that key, as DispatchCore._update_ready), and
       append to todo (after its first m) those that became ready with a queue (any_queued: some
       bucket of the core has one); returns the new length of todo. Separate passes so that the
       compiler vectorises the per-bucket work: a membership change touches every bucket that
       moves. */
    static Py_ssize_t bc_give_run(int32_t *restrict owner, const int32_t *restrict holder,
                                  uint8_t *restrict ready, const int64_t *restrict q_head,
                                  int32_t *restrict todo, Py_ssize_t start, Py_ssize_t stop,
                                  int32_t key, Py_ssize_t m, int any_queued) {
        Py_ssize_t b;
        int queued = 0;
        for (b = start; b < stop; b++)
            owner[b] = key;
        if (key < 0) {
            for (b = start; b < stop; b++)
                ready[b] = 0;
            return m;
        }
        for (b = start; b < stop; b++)
            ready[b] = (uint8_t)((holder[b] < 0) | (holder[b] == key));
        if (!any_queued)  /* no bucket has a queue */
            return m;
        for (b = start; b < stop; b++)
            queued |= q_head[b] >= 0;
        if (queued)
            for (b = start; b < stop; b++)
                if (ready[b] && q_head[b] >= 0)
                    todo[m++] = (int32_t)b;
        return m;
    }
    """
    Py_ssize_t bc_give_run(int32_t *owner, const int32_t *holder, uint8_t *ready, const int64_t *q_head,
                           int32_t *todo, Py_ssize_t start, Py_ssize_t stop, int32_t key,
                           Py_ssize_t m, int any_queued) noexcept nogil

# Slot written for an entry that routes to nobody / that carries a malformed stamp (mark mode).
NO_CONSUMER = -1
MALFORMED = -2


cdef inline const uint16_t *u16_ptr(const uint16_t[::1] v) noexcept:
    return NULL if v is None or v.shape[0] == 0 else &v[0]


cdef inline const uint8_t *u8_ptr(const uint8_t[::1] v) noexcept:
    return NULL if v is None or v.shape[0] == 0 else &v[0]


cdef inline void check_len(object column, Py_ssize_t n, str name) except *:
    if column is not None and len(column) != n:
        raise ValueError(f"{name} has {len(column)} items; expected {n}")


def route(const uint16_t[::1] table not None, const int32_t[::1] owner,
          const uint16_t[::1] hash_min not None, const uint16_t[::1] hash_max,
          const uint8_t[::1] stamped, const uint32_t[::1] key_hash, const uint8_t[::1] flagged,
          int32_t[::1] slot_out, int32_t[::1] bucket_out, uint16_t[::1] hash_out, bint mark):
    """Route n entries by ``table`` (bucket of every hash); returns ``(status, index, straddling, malformed)``.

    An entry is stamped when ``stamped`` is None or ``stamped[i]``; it routes by the bucket of
    ``hash_min[i]`` (straddling counted when ``hash_max`` is given and its bucket differs),
    otherwise by the bucket of ``key_hash[i] & 0xFFFF``. ``flagged[i]`` marks a stamp the edge
    found outside 0..0xFFFF. ``slot_out`` gets ``owner[bucket]``, ``bucket_out`` the bucket,
    ``hash_out`` the routing hash with 0 nudged to 1. A malformed stamp stops the run (status and
    index returned) unless ``mark``: then slot -2, bucket -1, hash 0, and the run goes on.
    """
    cdef Py_ssize_t n = hash_min.shape[0]
    check_len(hash_max, n, "hash_max")
    check_len(stamped, n, "stamped")
    check_len(key_hash, n, "key_hash")
    check_len(flagged, n, "flagged")
    check_len(slot_out, n, "slot_out")
    check_len(bucket_out, n, "bucket_out")
    check_len(hash_out, n, "hash_out")
    if slot_out is not None and owner is None:
        raise ValueError("slot_out needs the owner table")
    if stamped is not None and key_hash is None:
        raise ValueError("stamped needs key_hash for the unstamped entries")
    if table.shape[0] != 65536:
        raise ValueError(f"a bucket table has 65536 items, not {table.shape[0]}")
    if owner is not None and owner.shape[0] != <Py_ssize_t>table[65535] + 1:
        raise ValueError(f"owner table has {owner.shape[0]} items; the bucket table has {table[65535] + 1} buckets")
    cdef const uint16_t *tab = &table[0]
    cdef const int32_t *own = NULL if owner is None else &owner[0]
    cdef const uint16_t *lo_p = u16_ptr(hash_min)
    cdef const uint16_t *hi_p = u16_ptr(hash_max)
    cdef const uint8_t *st_p = u8_ptr(stamped)
    cdef const uint32_t *key_p = NULL if key_hash is None or n == 0 else &key_hash[0]
    cdef const uint8_t *fl_p = u8_ptr(flagged)
    cdef int32_t *slot_p = NULL if slot_out is None or n == 0 else &slot_out[0]
    cdef int32_t *bk_p = NULL if bucket_out is None or n == 0 else &bucket_out[0]
    cdef uint16_t *h_p = NULL if hash_out is None or n == 0 else &hash_out[0]
    cdef Py_ssize_t i, err_index = -1
    cdef int64_t straddling = 0, malformed = 0
    cdef int status = BC_OK, bad
    cdef uint32_t h, b
    if n == 0:
        return BC_OK, -1, 0, 0
    with nogil:
        if hi_p == NULL and st_p == NULL and fl_p == NULL and bk_p == NULL and h_p == NULL \
                and slot_p != NULL:
            # The hot path of a conforming producer: every entry stamped, only owners wanted.
            for i in range(n):
                slot_p[i] = own[tab[lo_p[i]]]
        elif st_p != NULL and hi_p == NULL and fl_p == NULL and bk_p == NULL and h_p == NULL \
                and slot_p != NULL:
            # Stamped and unstamped entries mixed (no stamp check asked): select, then one load.
            for i in range(n):
                h = lo_p[i] if st_p[i] else (key_p[i] & 0xFFFF)
                slot_p[i] = own[tab[h]]
        elif hi_p != NULL and st_p == NULL and fl_p == NULL and bk_p == NULL and h_p == NULL \
                and slot_p != NULL and not mark:
            # Stamps checked (min <= max) and straddles counted: two table loads per entry.
            for i in range(n):
                h = lo_p[i]
                if hi_p[i] < h:
                    status = BC_ERR_STAMP_ORDER
                    err_index = i
                    break
                b = tab[h]
                straddling += tab[hi_p[i]] != b
                slot_p[i] = own[b]
        else:
            for i in range(n):
                bad = BC_OK
                if st_p == NULL or st_p[i]:
                    h = lo_p[i]
                    if fl_p != NULL and fl_p[i]:
                        bad = BC_ERR_STAMP_RANGE
                    elif hi_p != NULL and hi_p[i] < h:
                        bad = BC_ERR_STAMP_ORDER
                    b = tab[h]
                    if bad == BC_OK and hi_p != NULL and tab[hi_p[i]] != b:
                        straddling += 1
                else:
                    h = key_p[i] & 0xFFFF
                    b = tab[h]
                if bad != BC_OK:
                    if not mark:
                        status = bad
                        err_index = i
                        break
                    malformed += 1
                    if slot_p != NULL:
                        slot_p[i] = -2
                    if bk_p != NULL:
                        bk_p[i] = -1
                    if h_p != NULL:
                        h_p[i] = 0
                    continue
                if slot_p != NULL:
                    slot_p[i] = own[b]
                if bk_p != NULL:
                    bk_p[i] = <int32_t>b
                if h_p != NULL:
                    # 0 means "no hash" to a Pulsar broker: the exposed hash of 0 is 1.
                    h_p[i] = <uint16_t>(h if h != 0 else 1)
    return status, err_index, straddling, malformed


def fits(const uint16_t[::1] splits not None, const uint16_t[::1] table,
         const uint16_t[::1] hash_min not None, const uint16_t[::1] hash_max not None,
         const uint8_t[::1] flagged, uint8_t[::1] out not None):
    """``out[i] = bucket_of(hash_min[i]) == bucket_of(hash_max[i])``; returns ``(status, index)``.

    Uses ``table`` (``Buckets.lookup_table()``) when given, else searches ``splits`` per entry.
    """
    cdef Py_ssize_t n = hash_min.shape[0]
    check_len(hash_max, n, "hash_max")
    check_len(flagged, n, "flagged")
    check_len(out, n, "out")
    cdef const uint16_t *sp = u16_ptr(splits)
    cdef uint32_t ns = <uint32_t>splits.shape[0]
    cdef const uint16_t *lo_p = u16_ptr(hash_min)
    cdef const uint16_t *hi_p = u16_ptr(hash_max)
    cdef const uint8_t *fl_p = u8_ptr(flagged)
    cdef uint8_t *o = NULL if n == 0 else &out[0]
    cdef const uint16_t *tab = NULL
    if table is not None:
        if table.shape[0] != 65536:
            raise ValueError(f"a bucket table has 65536 items, not {table.shape[0]}")
        tab = &table[0]
    cdef Py_ssize_t i, err_index = -1
    cdef int status = BC_OK
    if n == 0:
        return BC_OK, -1
    with nogil:
        for i in range(n):
            if fl_p != NULL and fl_p[i]:
                status = BC_ERR_STAMP_RANGE
                err_index = i
                break
            if hi_p[i] < lo_p[i]:
                status = BC_ERR_STAMP_ORDER
                err_index = i
                break
            if tab != NULL:
                o[i] = tab[lo_p[i]] == tab[hi_p[i]]
            else:
                o[i] = bc_bucket_of(sp, ns, lo_p[i]) == bc_bucket_of(sp, ns, hi_p[i])
    return status, err_index


cdef void fill_spread(int32_t *owner, Py_ssize_t n, Py_ssize_t consumers) noexcept nogil:
    """Consumer j of k owns buckets ``[j*N//k, (j+1)*N//k)``; with no consumer every bucket -1."""
    cdef Py_ssize_t j, b, lo, hi
    if consumers == 0:
        for b in range(n):
            owner[b] = -1
        return
    for j in range(consumers):
        lo = (j * n) // consumers
        hi = ((j + 1) * n) // consumers
        for b in range(lo, hi):
            owner[b] = <int32_t>j


def spread(int32_t[::1] owner not None, Py_ssize_t consumers):
    """Fill ``owner`` (one slot per bucket) with the spread of docs/design.md ("Dispatch").

    Consumer j of k owns buckets ``[j*N//k, (j+1)*N//k)``; with no consumer every bucket gets -1.
    """
    if consumers < 0:
        raise ValueError(f"consumers must be >= 0, not {consumers}")
    if owner.shape[0]:
        with nogil:
            fill_spread(&owner[0], owner.shape[0], consumers)


cdef str _BUCKETS = "buckets"
cdef str _OLD_OWNER = "old_owner"
cdef str _NEW_OWNER = "new_owner"

# The class of the items a BucketMoves builds (bucketcore.selector.BucketMove, a frozen dataclass
# with the slots buckets, old_owner, new_owner), given once by set_move_type when that module loads.
cdef type move_type = None


def set_move_type(type cls not None) -> None:
    """Name the class BucketMoves builds its items of: a class whose instances have the slots
    ``buckets``, ``old_owner`` and ``new_owner`` and no ``__dict__`` (``BucketMove``)."""
    global move_type
    cdef object slots = cls.__dict__.get("__slots__")
    if move_type is not None:
        if cls is move_type:
            return
        raise RuntimeError(f"BucketMoves builds {move_type.__name__} items already; it cannot switch to {cls.__name__}")
    if (slots is None or set(slots) != {_BUCKETS, _OLD_OWNER, _NEW_OWNER} or cls.__base__ is not object
            or cls.__dictoffset__ != 0):
        raise TypeError(f"{cls.__name__} must derive from object and have exactly the slots buckets, "
                        "old_owner, new_owner")
    move_type = cls


cdef object new_move(Py_ssize_t start, Py_ssize_t end, object old, object new):
    """A BucketMove(range(start, end), old, new) built without running the dataclass ``__init__``."""
    cdef object move
    if move_type is None:
        raise RuntimeError("BucketMoves: no item class yet (bucketcore.selector sets it on import)")
    move = <object>PyType_GenericAlloc(<PyTypeObject *>move_type, 0)
    Py_DECREF(move)      # the cast took a second reference to the new object
    PyObject_GenericSetAttr(move, _BUCKETS, range(start, end))
    PyObject_GenericSetAttr(move, _OLD_OWNER, old)
    PyObject_GenericSetAttr(move, _NEW_OWNER, new)
    return move


cdef struct MoveRow:
    int32_t start, stop     # the buckets [start, stop)
    int32_t old, new        # their owners before / after: indexes into the owners tuple, -1 for none


cdef inline bint same_owner(object a, object b) except -1:
    return a is b or a == b


cdef int32_t owner_code(list owners, object owner) except -2:
    """-1 for no owner, else the index of ``owner`` appended to ``owners``."""
    if owner is None:
        return -1
    owners.append(owner)
    return <int32_t>(len(owners) - 1)


@cython.final
cdef class BucketMoves:
    """The buckets that changed owner in one membership change: an immutable sequence of
    :class:`BucketMove`, sorted by first bucket.

    It behaves as the tuple of those moves: ``len()``, indexing (negative too), slices (a
    ``BucketMoves``), iteration, ``in``, ``index``, ``count``, ``==`` / ``<`` against a tuple of
    BucketMove or another ``BucketMoves``, ``hash``, ``+`` / ``*`` (giving tuples), its ``repr`` and
    pickling. The rows are held in C; each ``BucketMove`` is built when read, so a membership
    change costs in proportion to the runs of moved buckets, not to Python objects. Bulk users read
    the columns :attr:`starts`, :attr:`stops`, :attr:`old_owners` and :attr:`new_owners` instead.

    Parameters
    ----------
    moves : iterable of BucketMove, optional
        The moves, each over a non-empty ``range`` of buckets with step 1 within 0..65536.

    Raises
    ------
    TypeError
        ``moves`` is not iterable, or an item is not a BucketMove or its ``buckets`` is not a range
        (naming the item's index).
    ValueError
        An item's range is empty, has a step other than 1 or lies outside 0..65536 (naming the index).
    """

    cdef MoveRow *rows
    cdef Py_ssize_t n
    cdef tuple owners       # the owner objects the rows index
    cdef bint built         # rows and owners are set: nothing changes them any more

    def __init__(self, moves=()):
        cdef list items, owners = []
        cdef Py_ssize_t i
        cdef object m, bk
        cdef MoveRow *rows
        if self.built:
            raise TypeError("a BucketMoves cannot change once built")
        try:
            items = list(moves)
        except TypeError:
            raise TypeError(f"moves must be an iterable of BucketMove, not {type(moves).__name__}") from None
        # the rows are built in a scratch object first (reading the moves runs Python code), then
        # swapped in inside the section, which nothing can suspend: two threads building one
        # BucketMoves cannot both fill it, and the scratch object frees whatever it holds last
        cdef BucketMoves scratch = BucketMoves.__new__(BucketMoves)
        scratch._alloc(len(items))
        for i, m in enumerate(items):
            if move_type is None or type(m) is not move_type:
                raise TypeError(f"move {i} is a {type(m).__name__}, not a BucketMove")
            bk = m.buckets
            if type(bk) is not range:
                raise TypeError(f"move {i}: buckets is a {type(bk).__name__}, not a range")
            if bk.step != 1 or not 0 <= bk.start < bk.stop <= 65536:
                raise ValueError(f"move {i}: buckets {bk!r} is not a non-empty range of step 1 within 0..65536")
            scratch.rows[i].start = bk.start
            scratch.rows[i].stop = bk.stop
            scratch.rows[i].old = owner_code(owners, m.old_owner)
            scratch.rows[i].new = owner_code(owners, m.new_owner)
        owners_tuple = tuple(owners)
        with cython.critical_section(self):
            if self.built:
                raise TypeError("a BucketMoves cannot change once built")
            rows = self.rows
            self.rows = scratch.rows
            scratch.rows = rows
            self.n = len(items)
            self.owners = owners_tuple
            self.built = True

    cdef int _alloc(self, Py_ssize_t cap) except -1:
        PyMem_Free(self.rows)
        self.rows = <MoveRow *>PyMem_Malloc(max(cap, 1) * sizeof(MoveRow))
        if self.rows == NULL:
            raise MemoryError("BucketMoves: no memory for the rows")
        return 0

    def __dealloc__(self):
        PyMem_Free(self.rows)

    cdef inline object _owner(self, int32_t code):
        return None if code < 0 else self.owners[code]

    cdef object _item(self, Py_ssize_t i):
        cdef MoveRow *r = &self.rows[i]
        return new_move(r.start, r.stop, self._owner(r.old), self._owner(r.new))

    cdef tuple _as_tuple(self):
        cdef Py_ssize_t i
        return tuple([self._item(i) for i in range(self.n)])

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        cdef Py_ssize_t i, start, stop, step, length
        cdef BucketMoves out
        if isinstance(index, slice):
            start, stop, step = index.indices(self.n)
            length = len(range(start, stop, step))
            out = new_moves(length, self.owners)
            for i in range(length):
                out.rows[i] = self.rows[start + i * step]
            out.n = length
            return out
        try:
            i = operator_index(index)
        except TypeError:
            raise TypeError(f"BucketMoves indices must be integers or slices, not {type(index).__name__}") from None
        except OverflowError:
            raise IndexError("BucketMoves index out of range") from None
        if i < 0:
            i += self.n
        if not 0 <= i < self.n:
            raise IndexError("BucketMoves index out of range")
        return self._item(i)

    def __iter__(self):
        cdef Py_ssize_t i
        for i in range(self.n):
            yield self._item(i)

    def __reversed__(self):
        cdef Py_ssize_t i
        for i in range(self.n - 1, -1, -1):
            yield self._item(i)

    def __contains__(self, value):
        cdef Py_ssize_t i
        for i in range(self.n):
            if same_owner(self._item(i), value):
                return True
        return False

    def index(self, value, start=0, stop=None):
        """The index of the first move equal to ``value`` in ``[start, stop)``, as ``tuple.index``.

        Parameters
        ----------
        value : BucketMove
        start, stop : int, optional

        Returns
        -------
        int

        Raises
        ------
        ValueError
            No move equals ``value``.
        """
        cdef Py_ssize_t i, lo, hi
        lo, hi, _ = slice(start, stop).indices(self.n)
        for i in range(lo, hi):
            if same_owner(self._item(i), value):
                return i
        raise ValueError("BucketMoves.index(x): x not in BucketMoves")

    def count(self, value):
        """How many moves equal ``value``, as ``tuple.count``.

        Parameters
        ----------
        value : BucketMove

        Returns
        -------
        int
        """
        cdef Py_ssize_t i, c = 0
        for i in range(self.n):
            c += same_owner(self._item(i), value)
        return c

    cdef bint _equal_rows(self, BucketMoves other) except -1:
        cdef Py_ssize_t i
        cdef MoveRow *a
        cdef MoveRow *b
        if self.n != other.n:
            return False
        for i in range(self.n):
            a = &self.rows[i]
            b = &other.rows[i]
            if a.start != b.start or a.stop != b.stop:
                return False
            if not same_owner(self._owner(a.old), other._owner(b.old)):
                return False
            if not same_owner(self._owner(a.new), other._owner(b.new)):
                return False
        return True

    def __richcmp__(self, other, int op):
        if isinstance(other, BucketMoves):
            if op == Py_EQ:
                return self._equal_rows(<BucketMoves>other)
            if op == Py_NE:
                return not self._equal_rows(<BucketMoves>other)
            return PyObject_RichCompare(self._as_tuple(), (<BucketMoves>other)._as_tuple(), op)
        if isinstance(other, tuple):
            if op == Py_EQ and len(<tuple>other) != self.n:
                return False
            if op == Py_NE and len(<tuple>other) != self.n:
                return True
            return PyObject_RichCompare(self._as_tuple(), other, op)
        return NotImplemented

    def __hash__(self):
        return hash(self._as_tuple())

    def __add__(self, other):
        if isinstance(other, (tuple, BucketMoves)):
            return self._as_tuple() + tuple(other)
        return NotImplemented

    def __radd__(self, other):
        if isinstance(other, tuple):
            return other + self._as_tuple()
        return NotImplemented

    def __mul__(self, count):
        try:
            return self._as_tuple() * operator_index(count)
        except TypeError:
            return NotImplemented

    def __rmul__(self, count):
        return self.__mul__(count)

    def __repr__(self):
        return repr(self._as_tuple())

    def __reduce__(self):
        return BucketMoves, (self._as_tuple(),)

    cdef object _column(self, Py_ssize_t field):
        cdef cnp.npy_intp dim = self.n
        cdef Py_ssize_t i
        arr = cnp.PyArray_SimpleNew(1, &dim, cnp.NPY_INT32)
        cdef int32_t *p = <int32_t *>cnp.PyArray_DATA(arr)
        for i in range(self.n):
            p[i] = self.rows[i].start if field == 0 else self.rows[i].stop
        return arr

    @property
    def starts(self):
        """Each move's first bucket (``np.int32``, a new array on every read)."""
        return self._column(0)

    @property
    def stops(self):
        """Each move's end: one past its last bucket (``np.int32``, a new array on every read)."""
        return self._column(1)

    @property
    def old_owners(self):
        """Each move's owner before the change: ``(name, consumer_id)`` or None (a tuple)."""
        cdef Py_ssize_t i
        return tuple([self._owner(self.rows[i].old) for i in range(self.n)])

    @property
    def new_owners(self):
        """Each move's owner after the change: ``(name, consumer_id)`` or None (a tuple)."""
        cdef Py_ssize_t i
        return tuple([self._owner(self.rows[i].new) for i in range(self.n)])


cdef BucketMoves new_moves(Py_ssize_t cap, tuple owners):
    """An empty BucketMoves with room for ``cap`` rows indexing ``owners`` (the caller fills the
    rows and sets ``n``; nothing else may change it afterwards)."""
    cdef BucketMoves out = BucketMoves.__new__(BucketMoves)
    out._alloc(cap)
    out.owners = owners
    out.built = True
    return out


# The result of every membership change that moves nothing.
NO_MOVES = new_moves(0, ())


cdef inline Py_ssize_t slot_end(Py_ssize_t j, Py_ssize_t n, Py_ssize_t k) noexcept:
    return ((j + 1) * n) // k


cdef struct SpreadWalk:
    # two spreads of n buckets, over ko and kw slots (a slot's owner: old[j] / new[j]); the walk
    # is at bucket b, in old slot jo (which ends at end_o) and new slot jw (ending at end_w)
    Py_ssize_t n, ko, kw, b, jo, jw, end_o, end_w
    const int32_t *old
    const int32_t *new


cdef inline void walk_begin(SpreadWalk *s, Py_ssize_t n, const int32_t[::1] old, const int32_t[::1] new) noexcept:
    s.n = n
    s.ko = old.shape[0]
    s.kw = new.shape[0]
    s.old = &old[0] if s.ko else NULL
    s.new = &new[0] if s.kw else NULL
    s.b = 0
    s.jo = 0
    s.jw = 0
    s.end_o = slot_end(0, n, s.ko) if s.ko else n
    s.end_w = slot_end(0, n, s.kw) if s.kw else n


cdef inline bint walk_next(SpreadWalk *s, Py_ssize_t *start, Py_ssize_t *end, int32_t *o, int32_t *w) noexcept:
    """The next stretch [start, end) of buckets with one slot in each spread, and those slots'
    owners (-1: a spread of no consumers); False after the last. Steps over slot boundaries, so
    a whole walk costs in proportion to the slots, never to n."""
    if s.b >= s.n:
        return False
    o[0] = -1
    w[0] = -1
    if s.ko:
        while s.end_o <= s.b:  # each slot's end is computed once
            s.jo += 1
            s.end_o = slot_end(s.jo, s.n, s.ko)
        o[0] = s.old[s.jo]
    if s.kw:
        while s.end_w <= s.b:
            s.jw += 1
            s.end_w = slot_end(s.jw, s.n, s.kw)
        w[0] = s.new[s.jw]
    start[0] = s.b
    end[0] = min(s.end_o, s.end_w)
    s.b = end[0]
    return True


def slot_codes(Py_ssize_t k, Py_ssize_t gap):
    """The codes of a spread of ``k`` slots into a membership one larger: ``np.int32`` slot
    ``j`` -> ``j`` before ``gap``, ``j + 1`` from ``gap`` on (``gap >= k``: ``0..k-1``)."""
    cdef cnp.npy_intp dim = k
    cdef Py_ssize_t j
    if k < 0:
        raise ValueError(f"k must be >= 0, not {k}")
    out = cnp.PyArray_SimpleNew(1, &dim, cnp.NPY_INT32)
    cdef int32_t *p = <int32_t *>cnp.PyArray_DATA(out)
    for j in range(k):
        p[j] = <int32_t>(j if j < gap else j + 1)
    return out


def codes_with(const int32_t[::1] codes not None, Py_ssize_t index, int32_t value):
    """A new ``np.int32`` array: ``codes`` with ``value`` inserted at ``index`` (0..len)."""
    cdef Py_ssize_t n = codes.shape[0]
    cdef cnp.npy_intp dim = n + 1
    if not 0 <= index <= n:
        raise IndexError(f"index {index} outside 0..{n}")
    out = cnp.PyArray_SimpleNew(1, &dim, cnp.NPY_INT32)
    cdef int32_t *p = <int32_t *>cnp.PyArray_DATA(out)
    if index:
        memcpy(p, &codes[0], index * sizeof(int32_t))
    p[index] = value
    if n - index:
        memcpy(p + index + 1, &codes[index], (n - index) * sizeof(int32_t))
    return out


def codes_without(const int32_t[::1] codes not None, Py_ssize_t index):
    """A new ``np.int32`` array: ``codes`` without its item at ``index`` (0..len-1)."""
    cdef Py_ssize_t n = codes.shape[0]
    cdef cnp.npy_intp dim = n - 1
    if not 0 <= index < n:
        raise IndexError(f"index {index} outside 0..{n - 1}")
    out = cnp.PyArray_SimpleNew(1, &dim, cnp.NPY_INT32)
    cdef int32_t *p = <int32_t *>cnp.PyArray_DATA(out)
    if index:
        memcpy(p, &codes[0], index * sizeof(int32_t))
    if n - index - 1:
        memcpy(p + index, &codes[index + 1], (n - index - 1) * sizeof(int32_t))
    return out


def spread_moves(tuple everyone not None, Py_ssize_t n, const int32_t[::1] old_code not None,
                 const int32_t[::1] new_code not None):
    """The buckets whose owner changed between the spread of ``len(old_code)`` consumers and that
    of ``len(new_code)`` consumers over ``n`` buckets, as a :class:`BucketMoves`: one move per run
    of buckets with the same change, by first bucket.

    ``old_code`` / ``new_code`` map a spread's slot to an index into ``everyone`` (the consumers
    of both spreads). Walks the two spreads' slot boundaries, not the buckets, and builds no
    Python object per move: the cost grows with the consumers, never with ``n``.
    """
    cdef Py_ssize_t ko = old_code.shape[0], kw = new_code.shape[0], n_all = len(everyone)
    cdef Py_ssize_t b, end, start = -1, i, m = 0
    cdef int32_t o, w, run_o = -1, run_w = -1
    cdef SpreadWalk walk
    cdef BucketMoves out
    cdef MoveRow *rows
    if not 0 <= n <= 65536:
        raise ValueError(f"n must be 0..65536, not {n}")
    for i in range(ko):
        if not 0 <= old_code[i] < n_all:
            raise ValueError(f"old slot {i}: code {old_code[i]} outside the {n_all} consumers")
    for i in range(kw):
        if not 0 <= new_code[i] < n_all:
            raise ValueError(f"new slot {i}: code {new_code[i]} outside the {n_all} consumers")
    # every stretch of the walk ends at a slot boundary of one spread: at most ko + kw + 1 runs
    out = new_moves(ko + kw + 1, everyone)
    rows = out.rows
    walk_begin(&walk, n, old_code, new_code)
    while walk_next(&walk, &b, &end, &o, &w):
        if start >= 0 and (o != run_o or w != run_w):
            rows[m] = MoveRow(<int32_t>start, <int32_t>b, run_o, run_w)
            m += 1
            start = -1
        if start < 0 and o != w:
            start = b
            run_o = o
            run_w = w
    if start >= 0:
        rows[m] = MoveRow(<int32_t>start, <int32_t>n, run_o, run_w)
        m += 1
    out.n = m
    return out if m else NO_MOVES


# ---------------------------------------------------------------------------------------------
# The Dispatcher's state machine (bucketcore.dispatch.Dispatcher validates, routes and keeps the
# consumer names; this keeps every per-entry and per-bucket structure in C arrays).

# Columns of the per-consumer counters, in the order key_stats returns them.
cdef extern from "Python.h":
    PyObject *PyType_GenericAlloc(PyTypeObject *type, Py_ssize_t nitems) except NULL
    int PyObject_GenericSetAttr(object obj, object name, object value) except -1


@cython.no_gc  # holds a bytearray and arrays over it: nothing that can refer back to it
cdef class Deliveries:
    """What a consumer is to be sent, in order: ``entry_ids`` (``np.int64``), ``hashes`` (the
    entries' sticky hashes, ``np.uint16``, 0 nudged to 1) and ``redelivered`` (``np.bool_``: a
    redelivery after its previous holder crashed).

    The rows are held in one buffer; each column becomes an array over it on its first access
    (then the same array every time), so a caller that sends only ids builds one array. ``len()`` is the
    number of entries. Built by :meth:`Dispatcher.poll`; ``Deliveries(entry_ids, hashes,
    redelivered)`` builds one from three columns of the same length. A Deliveries never changes once
    built. Every poll that delivers nothing returns one shared empty Deliveries
    (``NO_DELIVERIES``); an empty Deliveries gives a new empty array on every read of a column, so
    nothing a caller does to one can reach another caller.

    Parameters
    ----------
    entry_ids, hashes, redelivered : array-like
        Entry ids (int64), sticky hashes (uint16) and redelivery flags (bool), one item per entry.
    """

    # a bytearray of n int64 ids, then n uint16 hashes, then n uint8 flags (None when n == 0):
    # the columns' base, so an array keeps the rows alive without a reference cycle
    cdef object raw
    cdef char *buf
    cdef Py_ssize_t n
    cdef object ids_arr, hashes_arr, red_arr
    cdef bint built         # the rows are set: nothing changes them any more

    def __init__(self, entry_ids, hashes, redelivered):
        if self.built:
            raise TypeError("a Deliveries cannot change once built")
        ids = np.ascontiguousarray(entry_ids, dtype=np.int64)
        hs = np.ascontiguousarray(hashes, dtype=np.uint16)
        red = np.ascontiguousarray(redelivered, dtype=np.bool_)
        if ids.ndim != 1 or hs.shape != ids.shape or red.shape != ids.shape:
            raise ValueError(f"entry_ids, hashes and redelivered must be 1-D columns of one length, not "
                             f"shapes {ids.shape}, {hs.shape}, {red.shape}")
        # the columns are converted (which may run Python code) before the section, so nothing in
        # it can suspend it: two threads building one Deliveries cannot both fill it
        cdef Py_ssize_t n = ids.shape[0]
        with cython.critical_section(self):
            if self.built:
                raise TypeError("a Deliveries cannot change once built")
            self._fill(n, <const int64_t *>cnp.PyArray_DATA(ids),
                       <const uint16_t *>cnp.PyArray_DATA(hs), <const uint8_t *>cnp.PyArray_DATA(red))

    cdef int _fill(self, Py_ssize_t n, const int64_t *ids, const uint16_t *hashes,
                   const uint8_t *red) except -1:
        self.raw = None
        self.buf = NULL
        if n:
            self.raw = PyByteArray_FromStringAndSize(NULL, n * (sizeof(int64_t) + sizeof(uint16_t) + 1))
            self.buf = PyByteArray_AS_STRING(self.raw)
            memcpy(self.buf, ids, n * sizeof(int64_t))
            memcpy(self.buf + n * sizeof(int64_t), hashes, n * sizeof(uint16_t))
            memcpy(self.buf + n * (sizeof(int64_t) + sizeof(uint16_t)), red, n)
        self.n = n
        self.ids_arr = self.hashes_arr = self.red_arr = None
        self.built = True
        return 0

    cdef object _column(self, Py_ssize_t offset, int typenum):
        """A column over the rows (the array keeps them alive), or a fresh empty one (never kept:
        an empty Deliveries may be the shared one)."""
        cdef cnp.npy_intp n = self.n
        if n == 0:
            return cnp.PyArray_SimpleNew(1, &n, typenum)
        arr = cnp.PyArray_SimpleNewFromData(1, &n, typenum, self.buf + offset)
        Py_INCREF(self.raw)  # the reference PyArray_SetBaseObject takes over
        cnp.PyArray_SetBaseObject(arr, self.raw)
        return arr

    @property
    @cython.critical_section
    def entry_ids(self):
        """Entry ids, in delivery order (``np.int64``)."""
        if self.n == 0:
            return self._column(0, cnp.NPY_INT64)
        if self.ids_arr is None:
            self.ids_arr = self._column(0, cnp.NPY_INT64)
        return self.ids_arr

    @property
    @cython.critical_section
    def hashes(self):
        """The entries' sticky hashes (``np.uint16``, 0 nudged to 1)."""
        if self.n == 0:
            return self._column(self.n * sizeof(int64_t), cnp.NPY_UINT16)
        if self.hashes_arr is None:
            self.hashes_arr = self._column(self.n * sizeof(int64_t), cnp.NPY_UINT16)
        return self.hashes_arr

    @property
    @cython.critical_section
    def redelivered(self):
        """Per entry, whether it is a redelivery after its previous holder crashed (``np.bool_``)."""
        if self.n == 0:
            return self._column(self.n * (sizeof(int64_t) + sizeof(uint16_t)), cnp.NPY_BOOL)
        if self.red_arr is None:
            self.red_arr = self._column(self.n * (sizeof(int64_t) + sizeof(uint16_t)), cnp.NPY_BOOL)
        return self.red_arr

    def __len__(self):
        return self.n

    def __repr__(self):
        return (f"Deliveries(entry_ids={self.entry_ids!r}, hashes={self.hashes!r}, "
                f"redelivered={self.redelivered!r})")

    def __reduce__(self):
        return Deliveries, (self.entry_ids, self.hashes, self.redelivered)


cdef Deliveries new_empty_deliveries():
    cdef Deliveries out = Deliveries.__new__(Deliveries)
    out._fill(0, NULL, NULL, NULL)
    return out


# What every poll of a consumer with nothing to send returns.
NO_DELIVERIES = new_empty_deliveries()
cdef Deliveries no_deliveries = NO_DELIVERIES


class NoDeliveries(dict):
    """The result of a poll of every consumer when none has anything to send: one shared empty
    dict that refuses every change (so no such poll allocates one). Copy it (``dict(result)``) to
    get a dict of your own."""

    __slots__ = ()

    def _refuse(self, *args: object, **kwargs: object) -> None:
        raise TypeError("this empty poll result is shared by every poll that delivered nothing; it cannot change")

    __setitem__ = __delitem__ = __ior__ = clear = pop = popitem = setdefault = update = _refuse


NOTHING_POLLED = NoDeliveries()
cdef object nothing_polled = NOTHING_POLLED


# One consumer key's outbox: delivered rows not yet polled, in delivery order.
cdef struct Outbox:
    int64_t *ids
    uint16_t *hashes
    uint8_t *redelivered
    Py_ssize_t len, cap
    int listed          # in the core's list of keys with rows


cdef enum:
    K_DELIVERED = 0
    K_DELIVERED_MESSAGES = 1
    K_REDELIVERED = 2
    K_ACKED = 3
    K_PENDING = 4
    K_PENDING_MESSAGES = 5
    NKSTATS = 6

cdef list new_log(Py_ssize_t cap):
    """Empty log columns of cap rows: ids, msgs, qnext, bucket, holder_log, hashes, state,
    redelivered (allocated, not filled: no numpy call here releases the thread state)."""
    cdef cnp.npy_intp dim = cap
    return [cnp.PyArray_SimpleNew(1, &dim, t) for t in (
        cnp.NPY_INT64, cnp.NPY_INT64, cnp.NPY_INT64, cnp.NPY_INT32, cnp.NPY_INT32, cnp.NPY_UINT16,
        cnp.NPY_INT8, cnp.NPY_UINT8)]


cdef int cmp_int64(const void *a, const void *b) noexcept nogil:
    cdef int64_t x = (<const int64_t *>a)[0], y = (<const int64_t *>b)[0]
    return (x > y) - (x < y)


# Entry states in the log.
cdef enum:
    QUEUED = 0
    PENDING = 1
    ACKED = 2
    ACKING = 3  # transient mark while an ack call is validated


cdef class DispatchCore:
    """Per-bucket FIFOs, pending bookkeeping and outboxes of one shared segment.

    Invariants: a bucket's entries are delivered in log (offset) order; at most one consumer key
    holds a bucket's delivered-but-unacked entries (``holder``); a bucket is *ready* when it has an
    owner and no other holder; a ready bucket's queue is empty after every public call.
    """

    cdef readonly Py_ssize_t n_buckets
    cdef const uint16_t[::1] table
    cdef int32_t[::1] owner, holder
    cdef uint8_t[::1] ready
    cdef int64_t[::1] b_pending, b_queued, b_delivered, q_head, q_tail
    # the entry log over [base, end)
    cdef int64_t[::1] ids, msgs, qnext
    cdef int32_t[::1] bucket, holder_log
    cdef uint16_t[::1] hashes
    cdef int8_t[::1] state
    cdef uint8_t[::1] redelivered
    cdef readonly Py_ssize_t base, end
    cdef readonly int64_t last_id   # the last entry id offered, -1 before the first
    cdef int64_t queued_total       # the sum of b_queued: queued entries over every bucket
    # per consumer key
    cdef int64_t[:, ::1] kstats
    # per consumer key: its outbox; ``listed`` keys (those given rows since the last poll of all)
    cdef Outbox *boxes
    cdef Py_ssize_t n_boxes
    cdef int32_t *listed
    cdef Py_ssize_t n_listed
    # scratch of ``ack``: the log positions of the ids being acked
    cdef int64_t *ack_pos
    cdef Py_ssize_t ack_cap
    # scratch of a release: buckets whose queues may flow (one slot per bucket)
    cdef int32_t *todo

    def __init__(self, const uint16_t[::1] table not None, Py_ssize_t n_buckets):
        if table.shape[0] != 65536 or <Py_ssize_t>table[65535] + 1 != n_buckets:
            raise ValueError("the bucket table does not match the bucket count")
        # every array is built before the section is taken (numpy may release the thread state
        # while it fills one), then the fields are set in one stretch
        columns = [np.full(n_buckets, -1, dtype=np.int32), np.full(n_buckets, -1, dtype=np.int32),
                   np.zeros(n_buckets, dtype=np.uint8), np.zeros(n_buckets, dtype=np.int64),
                   np.zeros(n_buckets, dtype=np.int64), np.zeros(n_buckets, dtype=np.int64),
                   np.full(n_buckets, -1, dtype=np.int64), np.full(n_buckets, -1, dtype=np.int64)]
        log = new_log(1024)
        kstats = np.zeros((16, NKSTATS), dtype=np.int64)
        with cython.critical_section(self):
            if self.todo != NULL:
                raise TypeError("a DispatchCore is built once")
            self.todo = <int32_t *>PyMem_Malloc(max(n_buckets, 1) * sizeof(int32_t))
            if self.todo == NULL:
                raise MemoryError("dispatcher: no memory for the bucket scratch")
            self.n_buckets = n_buckets
            self.table = table
            self.owner, self.holder, self.ready, self.b_pending, self.b_queued, self.b_delivered, \
                self.q_head, self.q_tail = columns
            self._set_log(log)
            self.base = self.end = 0
            self.last_id = -1
            self.kstats = kstats
            self._grow_boxes(16)

    def __dealloc__(self):
        cdef Py_ssize_t k
        for k in range(self.n_boxes):
            PyMem_Free(self.boxes[k].ids)
            PyMem_Free(self.boxes[k].hashes)
            PyMem_Free(self.boxes[k].redelivered)
        PyMem_Free(self.boxes)
        PyMem_Free(self.listed)
        PyMem_Free(self.ack_pos)
        PyMem_Free(self.todo)

    cdef int _grow_boxes(self, Py_ssize_t cap) except -1:
        """Room for the outboxes of keys 0..cap-1 (new ones empty)."""
        cdef Outbox *boxes
        cdef int32_t *listed
        if cap <= self.n_boxes:
            return 0
        boxes = <Outbox *>PyMem_Realloc(self.boxes, cap * sizeof(Outbox))
        if boxes == NULL:
            raise MemoryError("dispatcher: no memory for the outboxes")
        self.boxes = boxes
        memset(&boxes[self.n_boxes], 0, (cap - self.n_boxes) * sizeof(Outbox))
        listed = <int32_t *>PyMem_Realloc(self.listed, cap * sizeof(int32_t))
        if listed == NULL:
            raise MemoryError("dispatcher: no memory for the outboxes")
        self.listed = listed
        self.n_boxes = cap
        return 0

    cdef int _push_row(self, int32_t k, int64_t entry_id, uint16_t hash, uint8_t redelivered) except -1:
        """Append a row to key k's outbox (growing it) and list k if it had none."""
        cdef Outbox *box = &self.boxes[k]
        cdef Py_ssize_t cap
        cdef void *p
        if box.len == box.cap:
            cap = 8 if box.cap == 0 else 2 * box.cap
            p = PyMem_Realloc(box.ids, cap * sizeof(int64_t))
            if p == NULL:
                raise MemoryError("dispatcher: no memory for an outbox")
            box.ids = <int64_t *>p
            p = PyMem_Realloc(box.hashes, cap * sizeof(uint16_t))
            if p == NULL:
                raise MemoryError("dispatcher: no memory for an outbox")
            box.hashes = <uint16_t *>p
            p = PyMem_Realloc(box.redelivered, cap)
            if p == NULL:
                raise MemoryError("dispatcher: no memory for an outbox")
            box.redelivered = <uint8_t *>p
            box.cap = cap
        box.ids[box.len] = entry_id
        box.hashes[box.len] = hash
        box.redelivered[box.len] = redelivered
        box.len += 1
        if not box.listed:
            box.listed = 1
            self.listed[self.n_listed] = k
            self.n_listed += 1
        return 0

    cdef int _check_key(self, Py_ssize_t k) except -1:
        if not 0 <= k < self.n_boxes or k >= self.kstats.shape[0]:
            raise ValueError(f"consumer key {k} has no outbox (add_key first)")
        return 0

    cdef object _take_box(self, int32_t k, bint as_deliveries):
        """Key k's outbox rows as (entry ids, hashes, redelivered) columns, or a Deliveries of
        them (the shared empty one when there are none); the outbox empties."""
        cdef Outbox *box = &self.boxes[k]
        cdef cnp.npy_intp n = box.len
        cdef Deliveries out
        if as_deliveries:
            if n == 0:
                return no_deliveries
            out = Deliveries.__new__(Deliveries)
            out._fill(n, box.ids, box.hashes, box.redelivered)
            box.len = 0
            return out
        ids = cnp.PyArray_SimpleNew(1, &n, cnp.NPY_INT64)
        hashes = cnp.PyArray_SimpleNew(1, &n, cnp.NPY_UINT16)
        red = cnp.PyArray_SimpleNew(1, &n, cnp.NPY_BOOL)
        if n:
            memcpy(cnp.PyArray_DATA(ids), box.ids, n * sizeof(int64_t))
            memcpy(cnp.PyArray_DATA(hashes), box.hashes, n * sizeof(uint16_t))
            memcpy(cnp.PyArray_DATA(red), box.redelivered, n)
        box.len = 0
        return ids, hashes, red

    @property
    @cython.critical_section
    def ob_len(self) -> int:
        """Outbox rows waiting, over every key."""
        cdef Py_ssize_t k, n = 0
        for k in range(self.n_boxes):
            n += self.boxes[k].len
        return n

    cdef int _set_log(self, list log) except -1:
        """Take new log columns (in new_log's order)."""
        self.ids, self.msgs, self.qnext, self.bucket, self.holder_log, self.hashes, self.state, \
            self.redelivered = log
        return 0

    @cython.boundscheck(False)
    @cython.wraparound(False)
    cdef inline void _update_ready(self, Py_ssize_t b) noexcept:
        cdef int32_t o = self.owner[b], h = self.holder[b]
        self.ready[b] = o >= 0 and (h < 0 or h == o)

    @cython.boundscheck(False)
    @cython.wraparound(False)
    cdef int _deliver(self, Py_ssize_t pos) except -1:
        """Hand a queued log position to its bucket's owner (the bucket must be ready)."""
        cdef Py_ssize_t b = self.bucket[pos]
        cdef int32_t k = self.owner[b]
        self.state[pos] = PENDING
        self.holder_log[pos] = k
        self.holder[b] = k
        self.b_pending[b] += 1
        self.b_delivered[b] += 1
        self.kstats[k, K_DELIVERED] += 1
        self.kstats[k, K_DELIVERED_MESSAGES] += self.msgs[pos]
        self.kstats[k, K_REDELIVERED] += self.redelivered[pos]
        self.kstats[k, K_PENDING] += 1
        self.kstats[k, K_PENDING_MESSAGES] += self.msgs[pos]
        self._push_row(k, self.ids[pos], self.hashes[pos], self.redelivered[pos])
        return 0

    @cython.boundscheck(False)
    @cython.wraparound(False)
    cdef int _release(self, Py_ssize_t b) except -1:
        """Deliver bucket b's queue, in order, while it is ready."""
        cdef int64_t pos
        while self.q_head[b] >= 0 and self.ready[b]:
            pos = self.q_head[b]
            self.q_head[b] = self.qnext[pos]
            self.b_queued[b] -= 1
            self.queued_total -= 1
            self._deliver(pos)
        if self.q_head[b] < 0:
            self.q_tail[b] = -1
        return 0

    cdef int _release_buckets(self, const int32_t *buckets, Py_ssize_t m) except -1:
        """Deliver the queues of these ready buckets, merged in log (offset) order."""
        cdef Py_ssize_t i, j = 0, count = 0
        cdef int32_t b
        cdef int64_t pos
        cdef int64_t *p
        for i in range(m):
            count += self.b_queued[buckets[i]]
        if count == 0:
            return 0
        p = <int64_t *>PyMem_Malloc(count * sizeof(int64_t))
        if p == NULL:
            raise MemoryError("dispatcher: no memory to merge the released queues")
        try:
            for i in range(m):
                b = buckets[i]
                pos = self.q_head[b]
                while pos >= 0:
                    p[j] = pos
                    j += 1
                    pos = self.qnext[pos]
                self.q_head[b] = self.q_tail[b] = -1
                self.b_queued[b] = 0
            self.queued_total -= count
            qsort(p, count, sizeof(int64_t), cmp_int64)
            for i in range(count):
                self._deliver(p[i])
        finally:
            PyMem_Free(p)
        return 0

    @cython.critical_section
    def release_all(self):
        """Deliver the queues of every ready bucket, merged in log (offset) order."""
        self._release_ready()

    cdef int _release_ready(self) except -1:
        cdef Py_ssize_t b, m = 0
        for b in range(self.n_buckets):
            if self.ready[b] and self.q_head[b] >= 0:
                self.todo[m] = <int32_t>b
                m += 1
        self._release_buckets(self.todo, m)
        return 0

    # -- membership ------------------------------------------------------------------------------

    @cython.critical_section
    def add_key(self, Py_ssize_t key):
        """Make room for the counters of consumer key ``key`` (keys are dense, increasing)."""
        cdef Py_ssize_t cap = self.kstats.shape[0], i
        cdef cnp.npy_intp dims[2]
        if key < 0:
            raise ValueError(f"consumer key {key} is negative")
        if key >= cap:
            while key >= cap:
                cap *= 2
            dims[0] = cap
            dims[1] = NKSTATS
            grown = cnp.PyArray_ZEROS(2, dims, cnp.NPY_INT64, 0)
            memcpy(cnp.PyArray_DATA(grown), &self.kstats[0, 0], self.kstats.shape[0] * NKSTATS * sizeof(int64_t))
            self.kstats = grown
        for i in range(NKSTATS):
            self.kstats[key, i] = 0
        if key >= self.n_boxes:
            self._grow_boxes(max(key + 1, 2 * self.n_boxes))
        self.boxes[key].len = 0

    cdef Py_ssize_t _set_owner_run(self, Py_ssize_t start, Py_ssize_t stop, int32_t key,
                                   Py_ssize_t m) noexcept:
        """Give buckets [start, stop) (in range) to consumer key ``key`` (-1: nobody); the buckets
        that became ready with a queue are added to the scratch list after its first m; returns
        its new length."""
        return bc_give_run(&self.owner[0], &self.holder[0], &self.ready[0], &self.q_head[0], self.todo,
                           start, stop, key, m, self.queued_total > 0)

    @cython.critical_section
    def requeue(self, int32_t key):
        """A consumer crashed: its unacked entries go back to the front of their queues, in order,
        flagged redelivered; its undelivered outbox rows are dropped. Returns how many."""
        cdef Py_ssize_t pos, b, count = 0
        self._check_key(key)
        for pos in range(self.end - 1, self.base - 1, -1):  # descending + prepend = ascending
            if self.state[pos] != PENDING or self.holder_log[pos] != key:
                continue
            b = self.bucket[pos]
            self.state[pos] = QUEUED
            self.holder_log[pos] = -1
            self.redelivered[pos] = 1
            self.qnext[pos] = self.q_head[b]
            self.q_head[b] = pos
            if self.q_tail[b] < 0:
                self.q_tail[b] = pos
            self.b_pending[b] -= 1
            self.b_queued[b] += 1
            self.queued_total += 1
            self.holder[b] = -1  # it held every unacked entry of b
            self._update_ready(b)
            count += 1
        self.kstats[key, K_PENDING] = 0
        self.kstats[key, K_PENDING_MESSAGES] = 0
        self.boxes[key].len = 0
        self._release_ready()
        return count

    # -- the log ---------------------------------------------------------------------------------

    cdef inline int _reserve(self, Py_ssize_t n) except -1:
        """Room for n more entries at the log's end."""
        if self.end + n <= self.ids.shape[0]:
            return 0
        return self._make_room(n)

    cdef int _make_room(self, Py_ssize_t n) except -1:
        """Room for n more entries at the log's end: the acked front is dropped and the live
        entries moved down (into new columns when they need more room). Called in the core's
        section: the columns are moved with memmove, never through numpy calls that may release
        the thread state."""
        cdef Py_ssize_t cap = self.ids.shape[0], live, b, i, base
        cdef int64_t[::1] ids, msgs, qnext
        cdef int32_t[::1] bucket, holder_log
        cdef uint16_t[::1] hashes
        cdef int8_t[::1] state
        cdef uint8_t[::1] red
        while self.base < self.end and self.state[self.base] == ACKED:
            self.base += 1
        base = self.base
        live = self.end - base
        while live + n > cap // 2:
            cap *= 2
        # the current columns stay alive (and are the source) until the move is done
        ids, msgs, qnext, bucket, holder_log = self.ids, self.msgs, self.qnext, self.bucket, self.holder_log
        hashes, state, red = self.hashes, self.state, self.redelivered
        if cap != ids.shape[0]:
            self._set_log(new_log(cap))
        if live:
            memmove(&self.ids[0], &ids[base], live * sizeof(int64_t))
            memmove(&self.msgs[0], &msgs[base], live * sizeof(int64_t))
            memmove(&self.qnext[0], &qnext[base], live * sizeof(int64_t))
            memmove(&self.bucket[0], &bucket[base], live * sizeof(int32_t))
            memmove(&self.holder_log[0], &holder_log[base], live * sizeof(int32_t))
            memmove(&self.hashes[0], &hashes[base], live * sizeof(uint16_t))
            memmove(&self.state[0], &state[base], live * sizeof(int8_t))
            memmove(&self.redelivered[0], &red[base], live * sizeof(uint8_t))
        for i in range(live):
            if self.qnext[i] >= 0:
                self.qnext[i] -= self.base
        for b in range(self.n_buckets):
            if self.q_head[b] >= 0:
                self.q_head[b] -= self.base
                self.q_tail[b] -= self.base
        self.base = 0
        self.end = live
        return 0

    @cython.critical_section
    def offer_routed(self, const int64_t[::1] ids not None, const int32_t[::1] bucket not None,
                     const uint16_t[::1] hashes not None, const int64_t[::1] msgs not None):
        """Append routed entries (ids ascending, after the log's last) and deliver or queue each;
        returns how many were delivered right away."""
        cdef Py_ssize_t n = ids.shape[0], i, b, now = 0
        if bucket.shape[0] != n or hashes.shape[0] != n or msgs.shape[0] != n:
            raise ValueError("offer columns differ in length")
        for i in range(n):
            b = bucket[i]
            if b < 0 or b >= self.n_buckets:
                raise ValueError(f"bucket {b} out of range")
            if ids[i] <= (self.last_id if i == 0 else ids[i - 1]):
                raise ValueError(f"entry id at index {i} is {ids[i]}, not after the last offered id")
        self._reserve(n)
        for i in range(n):
            now += self._append(ids[i], bucket[i], hashes[i], msgs[i])
        return now

    @cython.critical_section
    def offer_one(self, int64_t entry_id, Py_ssize_t bucket, uint16_t hash, int64_t msgs):
        """One routed entry (see :meth:`offer`); True when it was delivered right away."""
        if bucket < 0 or bucket >= self.n_buckets:
            raise ValueError(f"bucket {bucket} out of range")
        if entry_id <= self.last_id:
            raise ValueError(f"entry id {entry_id} is not after the last offered id {self.last_id}")
        self._reserve(1)
        return bool(self._append(entry_id, bucket, hash, msgs))

    @cython.boundscheck(False)
    @cython.wraparound(False)
    cdef int _append(self, int64_t entry_id, Py_ssize_t b, uint16_t hash, int64_t msgs) except -1:
        """Append one entry (capacity reserved); deliver it if its bucket is ready, else queue it."""
        cdef Py_ssize_t pos = self.end
        self.end += 1
        self.last_id = entry_id
        self.ids[pos] = entry_id
        self.msgs[pos] = msgs
        self.bucket[pos] = <int32_t>b
        self.hashes[pos] = hash
        self.state[pos] = QUEUED
        self.holder_log[pos] = -1
        self.redelivered[pos] = 0
        if self.ready[b] and self.q_head[b] < 0:
            self._deliver(pos)
            return 1
        self.qnext[pos] = -1
        if self.q_tail[b] >= 0:
            self.qnext[self.q_tail[b]] = pos
        else:
            self.q_head[b] = pos
        self.q_tail[b] = pos
        self.b_queued[b] += 1
        self.queued_total += 1
        return 0

    @cython.boundscheck(False)
    @cython.wraparound(False)
    cdef Py_ssize_t _find(self, int64_t entry_id) noexcept:
        """Log position of entry_id in [base, end), or -1 (ids ascend: binary search, after one
        probe where the id would be if the ids had no gaps, as offsets of a ledger have not)."""
        cdef Py_ssize_t lo = self.base, hi = self.end, mid
        cdef int64_t gap
        if lo == hi:
            return -1
        if entry_id >= self.ids[lo]:  # logged ids are >= 0: the difference cannot overflow
            gap = entry_id - self.ids[lo]
            if gap < hi - lo and self.ids[lo + gap] == entry_id:
                return lo + <Py_ssize_t>gap
        while lo < hi:
            mid = (lo + hi) >> 1
            if self.ids[mid] < entry_id:
                lo = mid + 1
            else:
                hi = mid
        if lo < self.end and self.ids[lo] == entry_id:
            return lo
        return -1

    cdef int64_t *_ack_room(self, Py_ssize_t n) except NULL:
        """The scratch for n log positions (grown, never shrunk)."""
        cdef int64_t *p
        if n > self.ack_cap or self.ack_pos == NULL:
            p = <int64_t *>PyMem_Realloc(self.ack_pos, max(n, 16) * sizeof(int64_t))
            if p == NULL:
                raise MemoryError("dispatcher: no memory for an ack")
            self.ack_pos = p
            self.ack_cap = max(n, 16)
        return self.ack_pos

    @cython.boundscheck(False)
    @cython.wraparound(False)
    cdef int _ack_ids(self, int32_t key, const int64_t *ids, Py_ssize_t n, Py_ssize_t *bad,
                      int32_t *detail) except -1:
        """Ack n ids all or nothing: BC_OK, or the status of the first failing one (its index in
        ``bad``, the holder key for BC_ERR_ACK_OTHER in ``detail``) with nothing changed."""
        cdef Py_ssize_t i, pos, j
        cdef int status = BC_OK
        cdef int8_t st
        cdef int64_t *p = self._ack_room(n)
        for i in range(n):
            pos = self._find(ids[i])
            if pos < 0:
                status = BC_ERR_ACK_UNKNOWN
            else:
                st = self.state[pos]
                if st == ACKING:
                    status = BC_ERR_ACK_DUPLICATE
                elif st == ACKED:
                    status = BC_ERR_ACK_ALREADY
                elif st == QUEUED:
                    status = BC_ERR_ACK_QUEUED
                elif self.holder_log[pos] != key:
                    status = BC_ERR_ACK_OTHER
                    detail[0] = self.holder_log[pos]
            if status != BC_OK:
                bad[0] = i
                for j in range(i):  # undo the marks
                    self.state[p[j]] = PENDING
                return status
            self.state[pos] = ACKING
            p[i] = pos
        for i in range(n):
            self._commit_ack(key, p[i])
        return BC_OK

    @cython.critical_section
    def ack_keyed(self, int32_t key, const int64_t[::1] ids not None):
        """Individual acks from consumer ``key``; all or nothing.

        Returns ``(status, index, detail)``: BC_OK, or the first failing id's index and why
        (detail: the holder key for BC_ERR_ACK_OTHER)."""
        cdef Py_ssize_t bad = -1
        cdef int32_t detail = -1
        cdef int status
        if ids.shape[0] == 0:
            return BC_OK, -1, -1
        status = self._ack_ids(key, &ids[0], ids.shape[0], &bad, &detail)
        return status, bad, detail

    cdef Py_ssize_t _ack_array(self, int32_t key, object ids) except -2:
        """Acks given as a one-dimensional C-contiguous native ``np.int64`` array of ids >= 0, all
        or nothing: the count acked, or -1 when ``ids`` is not such an array or an ack fails (then
        nothing changed and the caller's general path names what is wrong)."""
        cdef cnp.ndarray arr
        cdef Py_ssize_t n, i, bad = -1
        cdef int32_t detail = -1
        cdef const int64_t *p
        if type(ids) is not cnp.ndarray:
            return -1
        arr = <cnp.ndarray>ids
        if (cnp.PyArray_NDIM(arr) != 1 or cnp.PyArray_TYPE(arr) != cnp.NPY_INT64
                or not cnp.PyArray_ISCARRAY_RO(arr) or not cnp.PyArray_ISNOTSWAPPED(arr)):
            return -1
        n = cnp.PyArray_DIM(arr, 0)
        p = <const int64_t *>cnp.PyArray_DATA(arr)
        for i in range(n):
            if p[i] < 0:
                return -1
        if n == 0:
            return 0
        if self._ack_ids(key, p, n, &bad, &detail) != BC_OK:
            return -1
        return n

    @cython.critical_section
    def ack_array(self, int32_t key, object ids):
        """Acks given as an ``np.int64`` column (see ``_ack_array``): the count, or -1."""
        return self._ack_array(key, ids)

    @cython.boundscheck(False)
    @cython.wraparound(False)
    cdef int _ack_one(self, int32_t key, int64_t entry_id) except -1:
        """One individual ack: BC_OK, or why not (nothing changed then)."""
        cdef Py_ssize_t pos = self._find(entry_id)
        if pos < 0:
            return BC_ERR_ACK_UNKNOWN
        if self.state[pos] == ACKED:
            return BC_ERR_ACK_ALREADY
        if self.state[pos] == QUEUED:
            return BC_ERR_ACK_QUEUED
        if self.holder_log[pos] != key:
            return BC_ERR_ACK_OTHER
        self._commit_ack(key, pos)
        return BC_OK

    @cython.critical_section
    def ack_one(self, int32_t key, int64_t entry_id):
        """One individual ack; returns a status as :meth:`ack_keyed` does (the holder of an entry
        held by another consumer: :meth:`entry_holder`)."""
        return self._ack_one(key, entry_id)

    @cython.boundscheck(False)
    @cython.wraparound(False)
    cdef int _commit_ack(self, int32_t key, Py_ssize_t pos) except -1:
        cdef Py_ssize_t b = self.bucket[pos]
        self.state[pos] = ACKED
        self.holder_log[pos] = -1
        self.b_pending[b] -= 1
        self.kstats[key, K_ACKED] += 1
        self.kstats[key, K_PENDING] -= 1
        self.kstats[key, K_PENDING_MESSAGES] -= self.msgs[pos]
        if self.b_pending[b] == 0:
            # The holder drained this bucket: a new owner waiting for it may take its queue now.
            self.holder[b] = -1
            self._update_ready(b)
            if self.ready[b] and self.q_head[b] >= 0:
                self._release(b)
        return 0

    # -- outboxes and views ----------------------------------------------------------------------

    @cython.critical_section
    def take_outbox_of(self, int32_t key):
        """One consumer's outbox rows (entry ids, hashes, redelivered), removed; the rest stay."""
        self._check_key(key)
        return self._take_box(key, False)

    @cython.critical_section
    def take_deliveries_of(self, int32_t key):
        """One consumer's outbox as a Deliveries (maybe empty), removed."""
        self._check_key(key)
        return self._take_box(key, True)

    @cython.critical_section
    def take_deliveries(self):
        """Every non-empty outbox as ``[(key, Deliveries), ...]`` (in the order the keys were first
        given rows), all emptied. Costs in proportion to the keys with rows, not to all keys."""
        cdef Py_ssize_t i
        cdef int32_t k
        cdef list out = []
        for i in range(self.n_listed):
            k = self.listed[i]
            self.boxes[k].listed = 0
            if self.boxes[k].len:
                out.append((k, self._take_box(k, True)))
        self.n_listed = 0
        return out

    @cython.critical_section
    def key_stats(self, Py_ssize_t key):
        """The counters of consumer key ``key``: delivered entries and messages, redelivered,
        acked, pending entries and messages."""
        cdef Py_ssize_t i
        self._check_key(key)
        return tuple([self.kstats[key, i] for i in range(NKSTATS)])

    @cython.critical_section
    def bucket_columns(self):
        """Copies of (owner keys, holder keys, delivered, pending, queued) per bucket (copied
        with memcpy: one consistent snapshot)."""
        cdef cnp.npy_intp n = self.n_buckets
        out = (cnp.PyArray_SimpleNew(1, &n, cnp.NPY_INT32), cnp.PyArray_SimpleNew(1, &n, cnp.NPY_INT32),
               cnp.PyArray_SimpleNew(1, &n, cnp.NPY_INT64), cnp.PyArray_SimpleNew(1, &n, cnp.NPY_INT64),
               cnp.PyArray_SimpleNew(1, &n, cnp.NPY_INT64))
        if n:
            memcpy(cnp.PyArray_DATA(out[0]), &self.owner[0], n * sizeof(int32_t))
            memcpy(cnp.PyArray_DATA(out[1]), &self.holder[0], n * sizeof(int32_t))
            memcpy(cnp.PyArray_DATA(out[2]), &self.b_delivered[0], n * sizeof(int64_t))
            memcpy(cnp.PyArray_DATA(out[3]), &self.b_pending[0], n * sizeof(int64_t))
            memcpy(cnp.PyArray_DATA(out[4]), &self.b_queued[0], n * sizeof(int64_t))
        return out

    @cython.critical_section
    def totals(self):
        """(pending entries, queued entries)."""
        cdef Py_ssize_t b
        cdef int64_t pending = 0
        for b in range(self.n_buckets):
            pending += self.b_pending[b]
        return pending, self.queued_total

    @cython.critical_section
    def entry_holder(self, int64_t entry_id):
        """Holder key of a delivered, unacked entry (or -1)."""
        cdef Py_ssize_t pos = self._find(entry_id)
        return -1 if pos < 0 else self.holder_log[pos]


# ---------------------------------------------------------------------------------------------
# The per-entry methods of the public classes, as C methods of their bases: ``Dispatcher`` and
# ``EntryBucketSelector`` (bucketcore.dispatcher / bucketcore.selector) subclass these. Each fast
# path takes the common call shape (exact ``int`` / ``str`` arguments, an ``np.int64`` ack column),
# checks every argument, and otherwise changes nothing and hands the call to the subclass's
# general path (``_offer_general``, ``_ack_general``, ``_member``, ``_owner_of_general``), which
# accepts every other form and raises the errors that name the bad argument.


cdef class Member:
    """One consumer connected to a Dispatcher: its dense key in the core, ``consumer`` (its
    ``(name, consumer_id)``) and whether it is ``leaving`` (left cleanly, still holding entries).

    Parameters
    ----------
    key : int
        The consumer's key in the :class:`DispatchCore` (dense, never reused).
    consumer : tuple of (str, int)
        A checked ``(name, consumer_id)`` pair.
    """

    cdef readonly int32_t key
    cdef readonly tuple consumer
    cdef readonly str name
    cdef readonly object consumer_id
    cdef public bint leaving
    cdef Member next_of_name   # the next connected member with the same name

    @cython.critical_section
    def __init__(self, int32_t key, tuple consumer not None):
        if self.consumer is not None:
            raise TypeError("a Member is built once")
        if len(consumer) != 2 or type(consumer[0]) is not str or type(consumer[1]) is not int:
            raise TypeError(f"consumer must be a (str, int) pair, not {consumer!r}")
        self.key = key
        self.consumer = consumer
        self.name = consumer[0]
        self.consumer_id = consumer[1]
        self.leaving = False


cdef class DispatcherBase:
    """The Dispatcher's per-entry calls in C: ``offer`` of one entry, ``ack``, ``poll``.

    Holds the :class:`DispatchCore` and the connected members by name (for a lookup that builds
    no ``(name, id)`` tuple) and by key. The subclass keeps membership and the general paths.
    """

    cdef readonly DispatchCore _core
    cdef dict by_name                  # name -> first Member of that name
    cdef readonly list _by_key         # key -> Member, None once forgotten
    cdef public int64_t offered_entries
    cdef public int64_t straddling_entries

    def __cinit__(self, *args, **kwargs):
        self.by_name = {}
        self._by_key = []

    @cython.critical_section
    def __init__(self, DispatchCore core not None):
        if self._core is not None:
            raise TypeError("a dispatcher's core is set once")
        self._core = core

    @cython.critical_section
    def _register(self, Member m not None) -> None:
        """Make a newly connected member findable by name and by key."""
        cdef Member head = self.by_name.get(m.name)
        while len(self._by_key) <= m.key:
            self._by_key.append(None)
        if self._by_key[m.key] is not None:
            raise ValueError(f"consumer key {m.key} is taken")
        self._by_key[m.key] = m
        m.next_of_name = head
        self.by_name[m.name] = m

    @cython.critical_section
    def _unregister(self, Member m not None) -> None:
        """Forget a member (it holds nothing any more)."""
        cdef Member cur = self.by_name.get(m.name), prev = None
        while cur is not None and cur is not m:
            prev = cur
            cur = cur.next_of_name
        if cur is None:
            raise KeyError(f"consumer {m.consumer!r} is not registered")
        if prev is not None:
            prev.next_of_name = m.next_of_name
        elif m.next_of_name is not None:
            self.by_name[m.name] = m.next_of_name
        else:
            del self.by_name[m.name]
        m.next_of_name = None
        self._by_key[m.key] = None

    def _apply_spread(self, const int32_t[::1] old_keys not None, const int32_t[::1] new_keys not None) -> None:
        """Move from the spread of the members ``old_keys`` (consumer keys in spread order) to that
        of ``new_keys`` (every one an active member): only the buckets whose owner changes are
        touched, and the queues that became ready flow, merged in offset order. Walks the two
        spreads' slot boundaries: the cost grows with the consumers and the buckets that move."""
        cdef DispatchCore core = self._core
        cdef Py_ssize_t kw = new_keys.shape[0], b, end, m = 0, i
        cdef int32_t o, w
        cdef SpreadWalk walk
        cdef list by_key
        cdef PyObject *item
        cdef Py_ssize_t nk
        cdef int32_t key
        with cython.critical_section(self):
            by_key = self._by_key
            nk = len(by_key)
            for i in range(kw):
                key = new_keys[i]
                item = PyList_GET_ITEM(by_key, key) if 0 <= key < nk else NULL
                if item == NULL or not isinstance(<object>item, Member) or (<Member>item).leaving:
                    raise ValueError(f"slot {i} of the new spread: consumer key {key} is not an active member")
        with cython.critical_section(core):
            walk_begin(&walk, core.n_buckets, old_keys, new_keys)
            while walk_next(&walk, &b, &end, &o, &w):
                if o != w:
                    m = core._set_owner_run(b, end, w, m)
            core._release_buckets(core.todo, m)

    cdef Member _find_member(self, object name, object consumer_id):
        """The connected member of an exact ``str`` name and ``int`` id, else None (not found, or
        another type: the general path decides)."""
        cdef Member m
        if type(name) is not str or type(consumer_id) is not int:
            return None
        with cython.critical_section(self):
            m = self.by_name.get(name)
            while m is not None:
                if m.consumer_id == consumer_id:
                    return m
                m = m.next_of_name
        return None

    @cython.boundscheck(False)
    @cython.wraparound(False)
    cdef int _offer_scalar(self, DispatchCore core, object entry_id, object hash_min,
                           object hash_max, object message_count) except -2:
        """One stamped entry given as exact ints: 1 delivered right away, 0 queued; -1 when the
        arguments are not of that shape or not valid (nothing changed). Runs in the sections of
        the dispatcher and its core (the checks read the core's last id)."""
        cdef int overflow = 0
        cdef long long entry, lo, hi, msgs = 1
        cdef uint16_t b
        cdef int now
        if type(entry_id) is not int or type(hash_min) is not int:
            return -1
        entry = PyLong_AsLongLongAndOverflow(entry_id, &overflow)
        if overflow or entry < 0 or entry <= core.last_id:
            return -1
        lo = PyLong_AsLongLongAndOverflow(hash_min, &overflow)
        if overflow or lo < 0 or lo > 0xFFFF:
            return -1
        hi = lo
        if hash_max is not None:
            if type(hash_max) is not int:
                return -1
            hi = PyLong_AsLongLongAndOverflow(hash_max, &overflow)
            if overflow or hi < lo or hi > 0xFFFF:
                return -1
        if message_count is not None:
            if type(message_count) is not int:
                return -1
            msgs = PyLong_AsLongLongAndOverflow(message_count, &overflow)
            if overflow or msgs < 1:
                return -1
        b = core.table[lo]
        core._reserve(1)
        # 0 means "no hash" to a Pulsar broker: the sticky hash of stamp 0 is 1
        now = core._append(entry, b, <uint16_t>lo if lo else 1, msgs)
        self.offered_entries += 1
        if core.table[hi] != b:
            self.straddling_entries += 1
        return now

    def offer(self, entry_ids, hash_min=None, *, hash_max=None, key_hash=None, stamped=None,
              message_count=None):
        """Take committed entries, in offset order.

        One entry may be given as scalars. A bad argument is an error and changes nothing.

        Parameters
        ----------
        entry_ids : int or array-like of int
            Ledger entry ids / offsets (0..2**63-1), strictly increasing within the call and above
            every id offered before.
        hash_min, hash_max, key_hash, stamped
            Stamp and key columns as in :func:`route_entries` (``hash_max`` optional: validates
            stamps and counts ``straddling_entries``).
        message_count : int or array-like of int, optional
            Messages per entry (>= 1, default 1), for the message counters.

        Returns
        -------
        int
            How many of the entries went straight to an outbox (the rest queue).

        Raises
        ------
        TypeError, ValueError, MalformedStampError
            As :func:`route_entries` for the stamp and key columns; also ids that are negative,
            above int64, not increasing or not after the last offered id, a ``message_count``
            below 1, and columns whose lengths differ from ``entry_ids`` (each naming the index).
        """
        cdef int now
        cdef DispatchCore core
        if key_hash is None and stamped is None:
            core = self._core
            with cython.critical_section(self, core):
                now = self._offer_scalar(core, entry_ids, hash_min, hash_max, message_count)
            if now >= 0:
                return now
        return self._offer_general(entry_ids, hash_min, hash_max, key_hash, stamped, message_count)

    cdef int _after_ack(self, Member m) except -1:
        """Forget a leaving member that holds nothing any more (Python code: called outside every
        section)."""
        cdef DispatchCore core = self._core
        cdef bint done
        if not m.leaving:
            return 0
        with cython.critical_section(core):
            done = core.kstats[m.key, K_PENDING] == 0
        if done:
            self._forget(m)
        return 0

    def ack(self, name, consumer_id, entry_ids):
        """Individual acks from a consumer. Acking the last entry a consumer held of a moved bucket unpauses it.

        Every id must be pending on that consumer (delivered to it, not yet acked); otherwise
        nothing is acked.

        Parameters
        ----------
        name : str
        consumer_id : int
        entry_ids : int or array-like of int

        Returns
        -------
        int
            How many entries were acked.

        Raises
        ------
        TypeError
            A bad name or id, or ``entry_ids`` that is neither an int nor a column of ints.
        ValueError
            The same id twice in the call.
        KeyError
            The consumer is not connected, or an id is not pending on it (unknown, already acked,
            queued, held by another consumer, or outside 0..2**63-1), naming the id.
        """
        cdef Member m = self._find_member(name, consumer_id)
        cdef DispatchCore core = self._core
        cdef int overflow = 0, status = BC_ERR_ACK_UNKNOWN
        cdef long long entry
        cdef Py_ssize_t n = -1
        if m is not None:
            if type(entry_ids) is int:
                entry = PyLong_AsLongLongAndOverflow(entry_ids, &overflow)
                if not overflow and entry >= 0:
                    with cython.critical_section(core):
                        status = core._ack_one(m.key, entry)
                    if status == BC_OK:
                        self._after_ack(m)
                        return 1
            else:
                with cython.critical_section(core):
                    n = core._ack_array(m.key, entry_ids)
                if n >= 0:
                    self._after_ack(m)
                    return n
        return self._ack_general(name, consumer_id, entry_ids)

    def poll(self, name=None, consumer_id=None):
        """Empty the outboxes.

        Costs in proportion to what is delivered (and to the consumers given entries since the
        last poll), never to the number of consumers or buckets; a poll that delivers nothing
        allocates nothing.

        Parameters
        ----------
        name : str, optional
        consumer_id : int, optional
            Both, for one consumer's outbox; neither, for every consumer's.

        Returns
        -------
        Deliveries or dict
            One consumer's :class:`Deliveries`, or ``{consumer: Deliveries}`` of every consumer
            with something to send, sorted by consumer. Nothing to send gives shared, unchangeable
            results: the empty ``NO_DELIVERIES`` and the empty dict ``NOTHING_POLLED`` (copy it,
            ``dict(result)``, to get one of your own).

        Raises
        ------
        TypeError, ValueError
            A bad name or id.
        KeyError
            The consumer is not connected.
        """
        cdef Member m
        cdef DispatchCore core = self._core
        if name is None and consumer_id is None:
            with cython.critical_section(core):
                return self._poll_all(core)
        m = self._find_member(name, consumer_id)
        if m is None:
            m = self._member(name, consumer_id)  # any other form of a connected one, or the error
        with cython.critical_section(core):
            return core._take_box(m.key, True)

    cdef object _poll_all(self, DispatchCore core):
        """``poll()`` in the core's section: it runs no Python code (sorting compares distinct
        ``(str, int)`` consumers only)."""
        cdef Py_ssize_t i
        cdef int32_t k
        cdef Member m
        cdef object first = None, first_rows = None
        cdef list rows = None
        cdef list by_key = self._by_key
        for i in range(core.n_listed):
            k = core.listed[i]
            core.boxes[k].listed = 0
            if not core.boxes[k].len:
                continue
            m = by_key[k]
            if m is None:
                raise RuntimeError(f"dispatcher: consumer key {k} has rows and no member")
            if first is None:  # the common poll: one consumer was given entries
                first = m.consumer
                first_rows = core._take_box(k, True)
                continue
            if rows is None:
                rows = [(first, first_rows)]
            rows.append((m.consumer, core._take_box(k, True)))
        core.n_listed = 0
        if rows is not None:
            rows.sort()  # by consumer: the consumers differ, so their Deliveries are never compared
            return dict(rows)
        return nothing_polled if first is None else {first: first_rows}


cdef class SelectorBase:
    """The selector's per-hash lookup in C: the boundary list's bucket table, the owner slot of
    each bucket and the members, replaced together on every membership change (a reader sees
    either the old spread or the new one)."""

    cdef const uint16_t[::1] tab
    cdef const int32_t[::1] own
    cdef object table_arr, owner_arr
    cdef tuple members

    def __cinit__(self, *args, **kwargs):
        self.members = ()

    @property
    @cython.critical_section
    def _table(self):
        """The boundary list's 65536-item bucket table (``np.uint16``)."""
        return self.table_arr

    @_table.setter
    @cython.critical_section
    def _table(self, table):
        cdef const uint16_t[::1] tab = table
        if tab.shape[0] != 65536:
            raise ValueError(f"a bucket table has 65536 items, not {tab.shape[0]}")
        self.tab = tab
        self.table_arr = table

    @property
    @cython.critical_section
    def _owner(self):
        """Per bucket, the owner's index in the members or -1 (``np.int32``, read-only)."""
        return self.owner_arr

    @property
    @cython.critical_section
    def _consumers(self):
        """The members, sorted by ``(name, consumer_id)``."""
        return self.members

    @property
    @cython.critical_section
    def _spread(self):
        """``(owner slots, members)`` of one membership: read together, so that another
        thread's join or leave cannot pair one membership's slots with another's members."""
        return self.owner_arr, self.members

    def _set_spread(self, tuple consumers not None) -> None:
        """Take a new membership (sorted) and its spread, built here, as one change."""
        cdef Py_ssize_t n
        cdef cnp.npy_intp dim
        with cython.critical_section(self):
            if self.tab is None:
                raise ValueError("the selector has no bucket table yet")
            n = <Py_ssize_t>self.tab[65535] + 1
        dim = n
        owner = cnp.PyArray_SimpleNew(1, &dim, cnp.NPY_INT32)
        fill_spread(<int32_t *>cnp.PyArray_DATA(owner), n, len(consumers))
        cnp.PyArray_CLEARFLAGS(owner, cnp.NPY_ARRAY_WRITEABLE)
        with cython.critical_section(self):
            # the table may have been replaced meanwhile: the spread must cover its buckets
            if <Py_ssize_t>self.tab[65535] + 1 != n:
                raise ValueError("the bucket table changed while the spread was built")
            self.own = owner
            self.owner_arr = owner
            self.members = consumers

    def owner_of(self, hash):
        """Owner of the bucket containing a bucket hash.

        Parameters
        ----------
        hash : int
            A bucket hash, 0..0xFFFF.

        Returns
        -------
        tuple of (str, int) or None
            ``(name, consumer_id)``, or None while the segment has no sharer.

        Raises
        ------
        TypeError
            ``hash`` is not an int.
        ValueError
            ``hash`` is outside 0..0xFFFF.
        """
        cdef int overflow = 0
        cdef long long h
        cdef int32_t slot
        if type(hash) is int:
            h = PyLong_AsLongLongAndOverflow(hash, &overflow)
            if not overflow and 0 <= h <= 0xFFFF:
                with cython.critical_section(self):
                    if self.own is not None:
                        slot = self.own[self.tab[h]]
                        return None if slot < 0 else self.members[slot]
        return self._owner_of_general(hash)
