# cython: language_level=3
"""Selector kernels (serve bucketcore.selector): the spread of one shared segment's buckets over
its sharers, the lookup of a bucket hash's owner, and the buckets a membership change moves.

The spread rule and the walk over two spreads are spread.h's (shared with the dispatcher). The
moves come back as plain columns (first bucket, end, old and new owner codes) that
bucketcore.selector wraps; nothing here builds or holds a Python class of the package.

Free-threaded interpreters: a ``SelectorCore``'s table, owner slots and members are read and
replaced together in a critical section on it (a reader sees one membership's spread whole);
nothing in a section calls into Python code.
"""

cimport cython
from libc.stdint cimport int32_t, int64_t, uint16_t
from libc.string cimport memcpy

cimport numpy as cnp

from cpython.long cimport PyLong_AsLongLongAndOverflow

cnp.import_array()

cdef extern from "spread.h" nogil:
    ctypedef struct bc_spread_walk:
        pass
    void bc_fill_spread(int32_t *owner, int64_t n, int64_t k)
    void bc_walk_begin(bc_spread_walk *s, int64_t n, const int32_t *old, int64_t ko,
                       const int32_t *new_, int64_t kw)
    bint bc_walk_next(bc_spread_walk *s, int64_t *start, int64_t *end, int32_t *o, int32_t *w)


cdef object int32_column(Py_ssize_t n):
    cdef cnp.npy_intp dim = n
    return cnp.PyArray_SimpleNew(1, &dim, cnp.NPY_INT32)


@cython.final
cdef class SelectorCore:
    """One boundary list's bucket table, the owner slot of each bucket and the members, replaced
    together on every membership change.

    Parameters
    ----------
    table : numpy.ndarray
        The boundary list's 65536-item ``np.uint16`` bucket table (``Buckets.lookup_table()``).
    """

    cdef const uint16_t[::1] tab
    cdef const int32_t[::1] own
    cdef object table_arr, owner_arr
    cdef tuple members
    cdef readonly Py_ssize_t n_buckets
    cdef bint built

    def __init__(self, table not None):
        cdef const uint16_t[::1] tab = table
        if tab.shape[0] != 65536:
            raise ValueError(f"a bucket table has 65536 items, not {tab.shape[0]}")
        with cython.critical_section(self):
            if self.built:
                raise TypeError("a SelectorCore is built once")
            self.built = True
            self.tab = tab
            self.table_arr = table
            self.n_buckets = <Py_ssize_t>tab[65535] + 1
        self.set_spread(())

    @property
    def table(self):
        """The boundary list's 65536-item bucket table (``np.uint16``)."""
        return self.table_arr

    @property
    @cython.critical_section
    def owner(self):
        """Per bucket, the owner's index in the members or -1 (``np.int32``, read-only)."""
        return self.owner_arr

    @property
    @cython.critical_section
    def consumers(self):
        """The members, sorted by ``(name, consumer_id)``."""
        return self.members

    @property
    @cython.critical_section
    def spread(self):
        """``(owner slots, members)`` of one membership: read together, so that another
        thread's join or leave cannot pair one membership's slots with another's members."""
        return self.owner_arr, self.members

    def set_spread(self, tuple consumers not None) -> None:
        """Take a new membership (sorted) and its spread, built here, as one change."""
        owner = int32_column(self.n_buckets)
        bc_fill_spread(<int32_t *>cnp.PyArray_DATA(owner), self.n_buckets, len(consumers))
        cnp.PyArray_CLEARFLAGS(owner, cnp.NPY_ARRAY_WRITEABLE)
        with cython.critical_section(self):
            self.own = owner
            self.owner_arr = owner
            self.members = consumers

    @cython.binding(False)  # a plain builtin once bound: _dispatcher.fast_then calls its C function
    def owner_of(self, hash):
        """The owner of the bucket holding ``hash``, an exact ``int`` in 0..0xFFFF, or None: no
        owner, or any other ``hash`` (bucketcore.selector's general path checks it, then asks again)."""
        cdef int32_t slot
        cdef int overflow = 0
        cdef long long h
        if type(hash) is not int:
            return None
        h = PyLong_AsLongLongAndOverflow(hash, &overflow)
        if overflow or not 0 <= h <= 0xFFFF:
            return None
        with cython.critical_section(self):
            slot = self.own[self.tab[h]]
            return None if slot < 0 else self.members[slot]


def slot_codes(Py_ssize_t k, Py_ssize_t gap):
    """The codes of a spread of ``k`` slots into a membership one larger: ``np.int32`` slot
    ``j`` -> ``j`` before ``gap``, ``j + 1`` from ``gap`` on (``gap >= k``: ``0..k-1``)."""
    cdef Py_ssize_t j
    out = int32_column(max(k, 0))
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


def spread_moves(Py_ssize_t n_all, Py_ssize_t n, const int32_t[::1] old_code not None,
                 const int32_t[::1] new_code not None):
    """The buckets whose owner changed between the spread of ``len(old_code)`` consumers and that
    of ``len(new_code)`` consumers over ``n`` buckets: one run per stretch with the same change,
    by first bucket, as the ``np.int32`` columns ``(starts, stops, old codes, new codes)``.

    A code is an index into the ``n_all`` consumers of both spreads (-1: nobody). Walks the two
    spreads' slot boundaries, not the buckets: the cost grows with the consumers, never with ``n``.
    """
    cdef Py_ssize_t ko = old_code.shape[0], kw = new_code.shape[0], i, m = 0
    cdef int64_t b, end, start = -1
    cdef int32_t o, w, run_o = -1, run_w = -1
    cdef bc_spread_walk walk
    if not 0 <= n <= 65536:
        raise ValueError(f"n must be 0..65536, not {n}")
    for i in range(ko):
        if not 0 <= old_code[i] < n_all:
            raise ValueError(f"old slot {i}: code {old_code[i]} outside the {n_all} consumers")
    for i in range(kw):
        if not 0 <= new_code[i] < n_all:
            raise ValueError(f"new slot {i}: code {new_code[i]} outside the {n_all} consumers")
    # every stretch of the walk ends at a slot boundary of one spread: at most ko + kw + 1 runs
    cols = [int32_column(ko + kw + 1) for _ in range(4)]
    cdef int32_t *starts = <int32_t *>cnp.PyArray_DATA(cols[0])
    cdef int32_t *stops = <int32_t *>cnp.PyArray_DATA(cols[1])
    cdef int32_t *olds = <int32_t *>cnp.PyArray_DATA(cols[2])
    cdef int32_t *news = <int32_t *>cnp.PyArray_DATA(cols[3])
    bc_walk_begin(&walk, n, &old_code[0] if ko else NULL, ko, &new_code[0] if kw else NULL, kw)
    while bc_walk_next(&walk, &b, &end, &o, &w):
        if start >= 0 and (o != run_o or w != run_w):
            starts[m], stops[m], olds[m], news[m] = <int32_t>start, <int32_t>b, run_o, run_w
            m += 1
            start = -1
        if start < 0 and o != w:
            start = b
            run_o = o
            run_w = w
    if start >= 0:
        starts[m], stops[m], olds[m], news[m] = <int32_t>start, <int32_t>n, run_o, run_w
        m += 1
    return tuple([c[:m] for c in cols])
